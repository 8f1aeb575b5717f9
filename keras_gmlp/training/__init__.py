"""Training pieces shared by the recipes (they import TensorFlow lazily).

Distribution (`keras_gmlp.training.distribution`):
    `get_distribution(name, devices=None)` -> `Distribution` with `.scope()`,
    `.num_replicas`, `.num_processes`, `.prepare_dataset(ds)`, `.is_chief`,
    `.describe()`; `STRATEGIES`; `split_cpu_for_tests(n)`;
    `install_multi_worker_workarounds()` (Keras 3.15 multi-worker fixes),
    `install_jax_multi_process_workarounds()` (chief-only saving under
    multi-process JAX).
Schedules (`keras_gmlp.training.schedules`):
    `warmup_cosine(peak, total_steps, warmup_steps)`,
    `warmup_linear(peak, total_steps, warmup_steps)`, `WarmupLinearDecay`.
Optimizer (`keras_gmlp.training.optimizers`):
    `adamw(learning_rate, weight_decay=0.05, global_clipnorm=1.0,
    model=None)`: global-norm clipping, no decay of biases and norms.
Callbacks (`keras_gmlp.training.callbacks`):
    `training_callbacks(output_dir, monitor, mode)` -> `(callbacks,
    history)`: BackupAndRestore (crash-safe resume), `PersistentHistory`
    (history.json covering every epoch of a resumed run), best.keras,
    last.keras, TensorBoard; `EpochEndHook(function)`.
Results (`keras_gmlp.training.results`):
    `write_results(output_dir, arguments, history, metrics, wall_time,
    distribution, counts)` -> results.json; `WallClock(output_dir)`.
Flags (`keras_gmlp.training.arguments`):
    `common_parser(description, **defaults)`, `global_batch_size(args, n)`,
    `scaled_learning_rate(args, batch)`, `warmup_steps(args, total)`,
    `jit_compile(args)`, argparse types `positive_int`, `probability`...
Text training (`keras_gmlp.training.text_metrics`, `text_models`):
    masked-token losses, accuracy and perplexity; the training models of
    the masked-LM recipe (gMLP and the matched keras-hub BERT).
Set-up (`keras_gmlp.training.setup`):
    `run_distribution(args)` (`--strategy`, `--split-cpu`),
    `configure_run(args)` (seed and mixed precision), `fit(...)` the
    shared fit loop.
"""

from keras_gmlp.training.arguments import common_parser
from keras_gmlp.training.arguments import global_batch_size
from keras_gmlp.training.arguments import jit_compile
from keras_gmlp.training.arguments import scaled_learning_rate
from keras_gmlp.training.arguments import warmup_steps
from keras_gmlp.training.callbacks import PersistentHistory
from keras_gmlp.training.callbacks import training_callbacks
from keras_gmlp.training.distribution import STRATEGIES
from keras_gmlp.training.distribution import Distribution
from keras_gmlp.training.distribution import get_distribution
from keras_gmlp.training.distribution import split_cpu_for_tests
from keras_gmlp.training.optimizers import adamw
from keras_gmlp.training.results import WallClock
from keras_gmlp.training.results import write_results
from keras_gmlp.training.schedules import WarmupLinearDecay
from keras_gmlp.training.schedules import warmup_cosine
from keras_gmlp.training.schedules import warmup_linear
from keras_gmlp.training.setup import configure_run
from keras_gmlp.training.setup import fit
from keras_gmlp.training.setup import run_distribution

__all__ = [
    "Distribution",
    "PersistentHistory",
    "STRATEGIES",
    "WallClock",
    "WarmupLinearDecay",
    "adamw",
    "common_parser",
    "configure_run",
    "fit",
    "get_distribution",
    "global_batch_size",
    "jit_compile",
    "run_distribution",
    "scaled_learning_rate",
    "split_cpu_for_tests",
    "training_callbacks",
    "warmup_cosine",
    "warmup_linear",
    "warmup_steps",
    "write_results",
]
