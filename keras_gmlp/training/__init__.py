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
Schedules (`keras_gmlp.training.schedules`):
    `warmup_cosine(peak, total_steps, warmup_steps)`,
    `warmup_linear(peak, total_steps, warmup_steps)`, `WarmupCosineDecay`,
    `WarmupLinearDecay`.
Optimizer (`keras_gmlp.training.optimizers`, `fused_adamw`):
    `adamw(learning_rate, weight_decay=0.05, global_clipnorm=1.0,
    model=None)`: global-norm clipping, no decay of biases and norms;
    `FusedAdamW`, Keras' AdamW with one TensorFlow kernel a variable;
    `build_optimizer_before_tracing(model)`.
Callbacks (`keras_gmlp.training.callbacks`):
    `training_callbacks(output_dir, monitor, mode)` -> `(callbacks,
    history)`: BackupAndRestore (crash-safe resume), `PersistentHistory`
    (history.json covering every epoch of a resumed run), best.keras,
    last.keras, TensorBoard; `EpochEndHook(function)`.
Results (`keras_gmlp.training.results`):
    `write_results(output_dir, config, history, metrics, wall_time,
    distribution, counts)` -> results.json; `WallClock(output_dir)`.
Text training (`keras_gmlp.training.text_metrics`, `text_models`):
    masked-token losses, accuracy and perplexity, `binary_f1`; the layer
    of earlier versions' masked-LM checkpoints.
Set-up (`keras_gmlp.training.setup`):
    `run_distribution(strategy, split_cpu)`, `configure_run(seed,
    mixed_precision)`, `fit(...)` the shared resumable fit loop.
Memory (`keras_gmlp.training.allocator`):
    `reuse_freed_memory()`: under JAX, each step reuses the memory the
    last one freed instead of faulting it in afresh.
XLA settings (`keras_gmlp.training.xla_flags`):
    `prefer_wide_vectors()`: under TensorFlow on a CPU with AVX-512, the
    XLA functions written with 512-bit vectors; `skip_ynn_fusions()`:
    under TensorFlow, no YNNPACK fusions (a crash in building them);
    `set_job_xla_flags()`: both, as the jobs set them.
Threads (`keras_gmlp.training.threads`):
    `share_cores_between_chains()`: under TensorFlow, each op on its
    share of the cores, for the image backbone's two chains.
JAX's draws (`keras_gmlp.training.jax_draws`):
    `compile_jax_draws_once()`: under JAX, Keras' initializers draw their
    values through one compilation per distribution, not one per shape.
The jobs' process (`keras_gmlp.training.process_settings`):
    `configure_training_process()`: `reuse_freed_memory()`,
    `set_job_xla_flags()`, `share_cores_between_chains()` and
    `compile_jax_draws_once()`, as the `keras-gmlp` command and the
    recipes apply them before training.
"""

import importlib

# Where each name lives; a name is imported from its module when first
# used, so that the flags (`arguments`, `run_config`) need no backend.
EXPORTS = {
    "reuse_freed_memory": "allocator",
    "common_parser": "arguments",
    "config_from_args": "arguments",
    "PersistentHistory": "callbacks",
    "training_callbacks": "callbacks",
    "STRATEGIES": "run_config",
    "Distribution": "distribution",
    "get_distribution": "distribution",
    "split_cpu_for_tests": "distribution",
    "FusedAdamW": "fused_adamw",
    "compile_jax_draws_once": "jax_draws",
    "adamw": "optimizers",
    "build_optimizer_before_tracing": "optimizers",
    "configure_training_process": "process_settings",
    "WallClock": "results",
    "write_results": "results",
    "ImageClassificationConfig": "run_config",
    "PretrainingConfig": "run_config",
    "TextClassificationConfig": "run_config",
    "TrainingConfig": "run_config",
    "global_batch_size": "run_config",
    "scaled_learning_rate": "run_config",
    "warmup_steps": "run_config",
    "WarmupCosineDecay": "schedules",
    "WarmupLinearDecay": "schedules",
    "warmup_cosine": "schedules",
    "warmup_linear": "schedules",
    "configure_run": "setup",
    "fit": "setup",
    "run_distribution": "setup",
    "share_cores_between_chains": "threads",
    "prefer_wide_vectors": "xla_flags",
    "set_job_xla_flags": "xla_flags",
    "skip_ynn_fusions": "xla_flags",
}

__all__ = [
    "Distribution",
    "FusedAdamW",
    "ImageClassificationConfig",
    "PersistentHistory",
    "PretrainingConfig",
    "STRATEGIES",
    "TextClassificationConfig",
    "TrainingConfig",
    "WallClock",
    "WarmupCosineDecay",
    "WarmupLinearDecay",
    "adamw",
    "build_optimizer_before_tracing",
    "common_parser",
    "compile_jax_draws_once",
    "config_from_args",
    "configure_run",
    "configure_training_process",
    "fit",
    "get_distribution",
    "global_batch_size",
    "prefer_wide_vectors",
    "reuse_freed_memory",
    "run_distribution",
    "scaled_learning_rate",
    "set_job_xla_flags",
    "share_cores_between_chains",
    "skip_ynn_fusions",
    "split_cpu_for_tests",
    "training_callbacks",
    "warmup_cosine",
    "warmup_linear",
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
