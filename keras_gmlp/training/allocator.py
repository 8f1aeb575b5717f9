"""Memory reuse between training steps under the JAX backend."""

import ctypes
import os
import platform
import warnings

import keras

# Set to "0", it turns `reuse_freed_memory` off.
ENV_VARIABLE = "KERAS_GMLP_REUSE_FREED_MEMORY"
# mallopt(3) parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4


def reuse_freed_memory():
    """Makes each JAX step reuse the memory the previous one freed.

    XLA:CPU allocates a step's temporaries as one buffer (gMLP-Ti/16
    training, float32: 325 MB at batch 8, 1.66 GB at batch 32) and frees
    it when the step ends. JAX runs a computation on its own threads,
    whose glibc arenas cannot keep a block that large, so glibc maps a
    fresh one every step and the kernel faults it in again, 4 KiB at a
    time: 80,000 minor faults a step at batch 8, 417,000 at batch 32.
    This function makes JAX run each single-device computation on the
    thread that calls it (`jax_cpu_enable_async_dispatch=False`) and
    makes glibc's main heap serve every block, large ones too, and never
    return freed memory to the system (`mallopt(M_MMAP_MAX, 0)`,
    `mallopt(M_TRIM_THRESHOLD, -1)`): the next step finds its buffer
    already in memory. A gMLP-Ti training step then faults about 400
    times, and runs faster (`benchmarks/malloc_settings.py`); tf.data's
    threads keep their own arenas.

    The process keeps the memory it has freed until it exits, and Python
    waits for each computation instead of queuing the next one. The peak
    can grow: a gMLP-S/16 training process at batch 32 peaked at 8,667
    MiB against 5,472 without, in its second step (gMLP-Ti: unchanged;
    `benchmarks/memory.py`). The `keras-gmlp` command and the recipes
    call it before training; `KERAS_GMLP_REUSE_FREED_MEMORY=0` in the
    environment turns it off. Call it before JAX's first computation:
    JAX reads the dispatch setting when it starts its CPU client. Under
    TensorFlow (whose allocator keeps its memory) and torch (27,000
    faults a gMLP-Ti step at batch 32, 2 % of its time), and off glibc,
    it does nothing.

    Returns:
        bool. Whether the settings were applied.

    Example:

    ```python
    import keras_gmlp
    from keras_gmlp.training import reuse_freed_memory

    reuse_freed_memory()  # first: under JAX, before any model is built
    classifier = keras_gmlp.GMLPImageClassifier.from_preset("gmlp_ti16_224")
    classifier.fit(images, labels)
    ```
    """
    if keras.config.backend() != "jax" or os.environ.get(ENV_VARIABLE) == "0":
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    import jax
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        warnings.warn(
            "reuse_freed_memory() was called after JAX started its "
            "backends, so JAX keeps running computations on its own "
            "threads and nothing was changed; call it before the first "
            "JAX computation (before building a model).",
            stacklevel=2,
        )
        return False
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    libc = ctypes.CDLL(None)
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    # -1 is SIZE_MAX to glibc: the main heap is never trimmed.
    return bool(
        libc.mallopt(M_MMAP_MAX, 0) and libc.mallopt(M_TRIM_THRESHOLD, -1)
    )
