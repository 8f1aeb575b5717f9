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

from keras_gmlp.training.allocator import reuse_freed_memory
from keras_gmlp.training.arguments import common_parser
from keras_gmlp.training.arguments import config_from_args
from keras_gmlp.training.callbacks import PersistentHistory
from keras_gmlp.training.callbacks import training_callbacks
from keras_gmlp.training.distribution import STRATEGIES
from keras_gmlp.training.distribution import Distribution
from keras_gmlp.training.distribution import get_distribution
from keras_gmlp.training.distribution import split_cpu_for_tests
from keras_gmlp.training.fused_adamw import FusedAdamW
from keras_gmlp.training.jax_draws import compile_jax_draws_once
from keras_gmlp.training.optimizers import adamw
from keras_gmlp.training.optimizers import build_optimizer_before_tracing
from keras_gmlp.training.process_settings import configure_training_process
from keras_gmlp.training.results import WallClock
from keras_gmlp.training.results import write_results
from keras_gmlp.training.run_config import ImageClassificationConfig
from keras_gmlp.training.run_config import PretrainingConfig
from keras_gmlp.training.run_config import TextClassificationConfig
from keras_gmlp.training.run_config import TrainingConfig
from keras_gmlp.training.run_config import global_batch_size
from keras_gmlp.training.run_config import scaled_learning_rate
from keras_gmlp.training.run_config import warmup_steps
from keras_gmlp.training.schedules import WarmupCosineDecay
from keras_gmlp.training.schedules import WarmupLinearDecay
from keras_gmlp.training.schedules import warmup_cosine
from keras_gmlp.training.schedules import warmup_linear
from keras_gmlp.training.setup import configure_run
from keras_gmlp.training.setup import fit
from keras_gmlp.training.setup import run_distribution
from keras_gmlp.training.threads import share_cores_between_chains
from keras_gmlp.training.xla_flags import prefer_wide_vectors
from keras_gmlp.training.xla_flags import set_job_xla_flags
from keras_gmlp.training.xla_flags import skip_ynn_fusions

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
