"""Training pieces shared by the workflows (imported when first used).

Run configuration (`keras_gmlp.training.run_config`):
    `TrainingConfig` and the jobs' `ImageClassificationConfig`,
    `PretrainingConfig`, `TextClassificationConfig`; `global_batch_size`,
    `scaled_learning_rate`, `warmup_steps`.
Flags (`keras_gmlp.training.arguments`):
    `common_parser(description, config_class)`, `add_training_arguments`,
    `set_config_defaults`, `config_from_args(config_class, args)`,
    argparse types `positive_int`, `probability`...
Distribution (`keras_gmlp.training.distribution`):
    `get_distribution(name, devices=None)` -> `Distribution` with `.scope()`,
    `.num_replicas`, `.num_processes`, `.prepare_dataset(ds)`, `.is_chief`,
    `.describe()`; `STRATEGIES`; `split_cpu_for_tests(n)`.
Keras patches (`keras_gmlp.training.keras_patches`):
    the Keras 3.15 multi-worker and multi-process fixes, installed only on
    the Keras versions that need them.
Callbacks (`keras_gmlp.training.callbacks`):
    `training_callbacks(output_dir, monitor, mode)` -> `(callbacks,
    history)`: BackupAndRestore (crash-safe resume), `PersistentHistory`
    (history.json covering every epoch of a resumed run), best.keras,
    last.keras, TensorBoard; `EpochEndHook(function)`.
Results (`keras_gmlp.training.results`):
    `write_results(output_dir, config, history, metrics, wall_time,
    distribution, counts)` -> results.json; `WallClock(output_dir)`.
Set-up (`keras_gmlp.training.setup`):
    `run_distribution(strategy, split_cpu)`, `configure_run(seed,
    mixed_precision)`, `fit(...)` the shared resumable fit loop.
The optimizers and schedules are in `keras_gmlp.optimizers`, the
process settings (memory, threads, XLA flags) in `keras_gmlp.kernels`.
"""

import importlib

# Where each name lives; a name is imported from its module when first
# used, so that the flags (`arguments`, `run_config`) need no backend.
EXPORTS = {
    "common_parser": "arguments",
    "config_from_args": "arguments",
    "PersistentHistory": "callbacks",
    "training_callbacks": "callbacks",
    "STRATEGIES": "run_config",
    "Distribution": "distribution",
    "get_distribution": "distribution",
    "split_cpu_for_tests": "distribution",
    "WallClock": "results",
    "write_results": "results",
    "ImageClassificationConfig": "run_config",
    "PretrainingConfig": "run_config",
    "TextClassificationConfig": "run_config",
    "TrainingConfig": "run_config",
    "global_batch_size": "run_config",
    "scaled_learning_rate": "run_config",
    "warmup_steps": "run_config",
    "configure_run": "setup",
    "fit": "setup",
    "run_distribution": "setup",
}

__all__ = [
    "Distribution",
    "ImageClassificationConfig",
    "PersistentHistory",
    "PretrainingConfig",
    "STRATEGIES",
    "TextClassificationConfig",
    "TrainingConfig",
    "WallClock",
    "common_parser",
    "config_from_args",
    "configure_run",
    "fit",
    "get_distribution",
    "global_batch_size",
    "run_distribution",
    "scaled_learning_rate",
    "split_cpu_for_tests",
    "training_callbacks",
    "warmup_steps",
    "write_results",
]


def __getattr__(name):
    if name in EXPORTS:
        module = importlib.import_module(f"{__name__}.{EXPORTS[name]}")
        return getattr(module, name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
