"""Backend- and CPU-specific speed and memory work, apart from the model.

The layers and models compute in plain `keras.ops` (the reference path).
Where a backend has a faster way to compute an operation on a CPU, its
kernel lives here and the layer reaches it through one dispatch point
(`dispatch`), switched by `configure("auto" | "on" | "off")` or the
`KERAS_GMLP_KERNELS` environment variable (`registry` module). Nothing
here changes what a model computes, beyond float rounding.

Nothing here, nor `import keras_gmlp`, changes the process by itself. Two
environment variables the backends read when they are imported
(`TF_ENABLE_ONEDNN_OPTS=1`, `OMP_WAIT_POLICY=PASSIVE`) are set by
`keras_gmlp.set_backend_environment()`, which the `keras-gmlp` command, the
recipes and the test suite call before the backend is imported (importing
this package imports Keras and its backend). The process settings are
applied explicitly, before the backend's first computation, by the
`keras-gmlp` command's training commands and the recipes
(`configure_training_process`); call both first in your own training
program for the same speed:

- `reuse_freed_memory()` (`allocator`): under JAX on glibc, each step
  reuses the memory the last one freed instead of faulting it in afresh;
- `set_job_xla_flags()`, `prefer_wide_vectors()`, `skip_ynn_fusions()`
  (`xla_flags`): TensorFlow's XLA:CPU flags;
- `share_cores_between_chains()` (`threads`): under TensorFlow, each op on
  its share of the cores, for the blocks' two chains over the batch;
- `compile_jax_draws_once()` (`jax_draws`): under JAX, Keras' initializers
  draw through one compilation per distribution, not one per shape.

`FusedAdamW` (`fused_adamw`) is Keras' `AdamW` with one fused TensorFlow
update a variable, the text tasks' default optimizer.
"""

from keras_gmlp.kernels.allocator import reuse_freed_memory
from keras_gmlp.kernels.fused_adamw import FusedAdamW
from keras_gmlp.kernels.jax_draws import compile_jax_draws_once
from keras_gmlp.kernels.process import configure_training_process
from keras_gmlp.kernels.registry import configure
from keras_gmlp.kernels.registry import dispatch
from keras_gmlp.kernels.registry import mode
from keras_gmlp.kernels.registry import owned_caches
from keras_gmlp.kernels.registry import owns_caches
from keras_gmlp.kernels.registry import reference_only
from keras_gmlp.kernels.threads import share_cores_between_chains
from keras_gmlp.kernels.xla_flags import prefer_wide_vectors
from keras_gmlp.kernels.xla_flags import set_job_xla_flags
from keras_gmlp.kernels.xla_flags import skip_ynn_fusions

__all__ = [
    "FusedAdamW",
    "compile_jax_draws_once",
    "configure",
    "configure_training_process",
    "dispatch",
    "mode",
    "owned_caches",
    "owns_caches",
    "prefer_wide_vectors",
    "reference_only",
    "reuse_freed_memory",
    "set_job_xla_flags",
    "share_cores_between_chains",
    "skip_ynn_fusions",
]
