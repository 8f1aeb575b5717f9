"""Whether the layers may call XLA-compiled functions under TensorFlow."""

import contextlib
import threading

import keras

_state = threading.local()


def xla_functions_enabled():
    """True under the TensorFlow backend outside `portable_ops()`.

    Under TensorFlow (whose steps run as graphs of separate kernels unless
    compiled with `jit_compile=True`) the gMLP block's GELU and
    LayerNormalizations are XLA-compiled functions with closed-form
    gradients (`keras_gmlp.layers.gelu`, `LayerNormalization`); the other
    backends compile their own way.
    """
    return keras.config.backend() == "tensorflow" and not tracing_portable_ops()


def widened(x):
    """A TensorFlow tensor in float32 if it is float16 or bfloat16: the XLA
    functions compute in float32 at least, as Keras' LayerNorm does."""
    import tensorflow as tf

    if x.dtype in (tf.float16, tf.bfloat16):
        return tf.cast(x, tf.float32)
    return x


def tracing_portable_ops():
    """Whether the calls are traced under `portable_ops()`."""
    return getattr(_state, "portable", False)


@contextlib.contextmanager
def portable_ops():
    """Traces the layers with the backend's own ops, no XLA function.

    For exports: TF Serving runs no XLA:CPU function unless started with
    `--xla_cpu_compilation_enabled`, and the ONNX and LiteRT converters
    take none. `keras_gmlp.export` and the models' `export()` trace under
    it.

    Example:

    >>> from keras_gmlp.layers.xla_functions import portable_ops
    >>> from keras_gmlp.layers.xla_functions import xla_functions_enabled
    >>> with portable_ops():
    ...     xla_functions_enabled()
    False
    """
    previous = getattr(_state, "portable", False)
    _state.portable = True
    try:
        yield
    finally:
        _state.portable = previous
