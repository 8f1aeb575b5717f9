"""Whether the kernels may call XLA-compiled functions under TensorFlow."""

import keras

from keras_gmlp.kernels.registry import mode


def xla_functions_enabled():
    """True under the TensorFlow backend with the kernels on.

    Under TensorFlow (whose steps run as graphs of separate kernels unless
    compiled with `jit_compile=True`) the gMLP block's kernel computes its
    GELU and norms as XLA-compiled functions with closed-form gradients;
    the exports, which trace under `keras_gmlp.kernels.reference_only()`,
    take none (TF Serving runs no XLA:CPU function unless told to, and
    the ONNX and LiteRT converters take none).
    """
    return keras.config.backend() == "tensorflow" and mode() != "off"


def widened(x):
    """A TensorFlow tensor in float32 if it is float16 or bfloat16: the XLA
    functions compute in float32 at least, as Keras' LayerNorm does."""
    import tensorflow as tf

    if x.dtype in (tf.float16, tf.bfloat16):
        return tf.cast(x, tf.float32)
    return x
