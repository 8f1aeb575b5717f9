"""Memory reuse between training steps under the JAX backend."""

import ctypes
import os
import platform
import warnings

import keras
import numpy as np

# Set to "0", it turns `reuse_freed_memory` off.
ENV_VARIABLE = "KERAS_GMLP_REUSE_FREED_MEMORY"
# mallopt(3) parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
# The alignment, in bytes, of a host array that XLA:CPU uses in place.
ALIGNMENT = 64


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
    times, and runs faster; tf.data's threads keep their own arenas.

    The process keeps the memory it has freed until it exits, and Python
    waits for each computation instead of queuing the next one. A step runs
    on the calling thread only when its inputs are ready: the gMLP tasks
    hand their steps batches already on the device (`with_ready_inputs`); a
    step that runs elsewhere maps its buffer afresh, besides the one kept (a
    gMLP-S/16 `fit` at batch 32 then peaks at 8,314 MiB instead of 5,780,
    `benchmarks/memory.py --kernels-without step_function
    --fit-on-tf-data`). The `keras-gmlp` command and the recipes call it
    before training; `KERAS_GMLP_REUSE_FREED_MEMORY=0` in the environment
    turns it off. Call it before JAX's first computation: JAX reads the
    dispatch setting when it starts its CPU client. Under TensorFlow (whose
    allocator keeps its memory) and torch (27,000 faults a gMLP-Ti step at
    batch 32, 2 % of its time), and off glibc, it does nothing.

    Returns:
        bool. Whether the settings were applied.

    Example:

    ```python
    import keras_gmlp
    from keras_gmlp.kernels import reuse_freed_memory

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
    return keep_freed_memory_in_main_heap()


def keep_freed_memory_in_main_heap():
    """Makes glibc's main heap serve every block, large ones too, and
    never return freed memory to the system: `reuse_freed_memory`'s
    `mallopt` calls alone, on any backend (glibc only).

    Returns:
        bool. Whether glibc took both settings.
    """
    libc = ctypes.CDLL(None)
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    # -1 is SIZE_MAX to glibc: the main heap is never trimmed.
    return bool(
        libc.mallopt(M_MMAP_MAX, 0) and libc.mallopt(M_TRIM_THRESHOLD, -1)
    )


def with_ready_inputs(step_function):
    """Makes a Keras JAX step function take its batch already on the device.

    With JAX's asynchronous dispatch off (`reuse_freed_memory`), JAX runs a
    computation on the calling thread only when its inputs are ready. Keras
    hands a step numpy arrays, and JAX copies one of over 100 KiB that does
    not start on a 64-byte boundary on one of its own threads (Keras' copies
    of tf.data's tensors do not); the step then runs on that thread, whose
    glibc arena cannot keep the step's buffer, and maps and faults it afresh
    (20 to 50 % of the gMLP steps of a `fit` on tf.data would; a gMLP-S/16
    `fit` at batch 32 peaks 1.44x higher so, `benchmarks/memory.py
    --kernels-without step_function`). The returned function copies each of
    the batch's numpy arrays that is not aligned into one that is
    (`aligned`), which JAX then uses in place, puts the arrays on the
    device, waits for them, and calls `step_function`. With asynchronous
    dispatch on, it returns `step_function` itself: waiting would only stop
    Python from queuing the next step.

    Args:
        step_function: the Keras JAX trainer's `train_function`,
            `test_function` or `predict_function`: `(state, batches)`,
            `batches` an iterator of batches (Keras 3.15) or one batch.

    Returns:
        A function of the same arguments.
    """
    import jax

    if jax.config.read("jax_cpu_enable_async_dispatch") or getattr(
        step_function, "waits_for_inputs", False
    ):
        return step_function

    def on_device(value):
        if isinstance(value, np.ndarray):
            return jax.device_put(aligned(value))
        return value

    def ready(batch):
        batch = jax.tree_util.tree_map(on_device, batch)
        return jax.block_until_ready(batch)

    def step_with_ready_inputs(state, batches):
        if hasattr(batches, "__next__"):
            return step_function(state, map(ready, batches))
        return step_function(state, ready(batches))

    step_with_ready_inputs.waits_for_inputs = True
    return step_with_ready_inputs


def aligned(array):
    """The numpy `array`, or a C-ordered copy starting on `ALIGNMENT` bytes.

    XLA:CPU uses a host array that starts on 64 bytes in place: JAX's
    `device_put` of it copies nothing, on no thread.
    """
    if array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0:
        return array
    storage = np.empty(array.nbytes + ALIGNMENT, np.uint8)
    start = -storage.ctypes.data % ALIGNMENT
    copy = storage[start : start + array.nbytes].view(array.dtype)
    copy = copy.reshape(array.shape)
    copy[...] = array
    return copy
