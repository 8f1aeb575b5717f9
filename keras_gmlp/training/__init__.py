"""Training pieces shared by the workflows (they import TensorFlow lazily).

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

from keras_gmlp.training.arguments import common_parser
from keras_gmlp.training.arguments import config_from_args
from keras_gmlp.training.callbacks import PersistentHistory
from keras_gmlp.training.callbacks import training_callbacks
from keras_gmlp.training.distribution import STRATEGIES
from keras_gmlp.training.distribution import Distribution
from keras_gmlp.training.distribution import get_distribution
from keras_gmlp.training.distribution import split_cpu_for_tests
from keras_gmlp.training.results import WallClock
from keras_gmlp.training.results import write_results
from keras_gmlp.training.run_config import ImageClassificationConfig
from keras_gmlp.training.run_config import PretrainingConfig
from keras_gmlp.training.run_config import TextClassificationConfig
from keras_gmlp.training.run_config import TrainingConfig
from keras_gmlp.training.run_config import global_batch_size
from keras_gmlp.training.run_config import scaled_learning_rate
from keras_gmlp.training.run_config import warmup_steps
from keras_gmlp.training.setup import configure_run
from keras_gmlp.training.setup import fit
from keras_gmlp.training.setup import run_distribution

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
