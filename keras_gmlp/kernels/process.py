"""The process-wide settings that the `keras-gmlp` command and the recipes
apply before training, in one place."""

from keras_gmlp.kernels.allocator import reuse_freed_memory
from keras_gmlp.kernels.jax_draws import compile_jax_draws_once
from keras_gmlp.kernels.threads import share_cores_between_chains
from keras_gmlp.kernels.xla_flags import set_job_xla_flags


def configure_training_process():
    """Applies the process settings the training jobs run with.

    In order:

    - `reuse_freed_memory()`: under JAX, each step reuses the memory the
      last one freed instead of faulting it in afresh;
    - `set_job_xla_flags()`: under TensorFlow, the XLA functions with
      512-bit vectors on a CPU with AVX-512, and without YNNPACK fusions
      (building them crashed);
    - `share_cores_between_chains()`: under TensorFlow, each op on its
      share of the cores, for the blocks' two chains over the batch;
    - `compile_jax_draws_once()`: under JAX, Keras' initializers draw
      their values through one compilation per distribution instead of
      one per shape (the same values).

    Each does nothing under the backends it is not for, and each has its
    own environment variable to turn it off (their docstrings). The
    `keras-gmlp` command's training commands and the three recipes call
    this first; call it first in your own training program too, before
    the backend's first computation (JAX fixes its dispatch and TensorFlow
    its thread pools and `XLA_FLAGS` when they start).

    Returns:
        dict. What each setting returned, by its name: `True` (or the
        threads set) where it changed the process, `False` or `None`
        where it did not.

    Example:

    ```python
    from keras_gmlp.kernels import configure_training_process

    configure_training_process()  # first: before the first computation
    ```
    """
    return {
        "reuse_freed_memory": reuse_freed_memory(),
        "set_job_xla_flags": set_job_xla_flags(),
        "share_cores_between_chains": share_cores_between_chains(),
        "compile_jax_draws_once": compile_jax_draws_once(),
    }
