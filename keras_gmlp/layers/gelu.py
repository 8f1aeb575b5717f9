"""The exact GELU of the gMLP block, compiled by XLA under TensorFlow."""

import functools
import math

import keras

from keras_gmlp.layers.xla_functions import widened
from keras_gmlp.layers.xla_functions import xla_functions_enabled

_KERAS_GELU = keras.activations.gelu


def gelu(x):
    """The exact GELU `x * Phi(x)`, `Phi` the standard normal CDF.

    `keras.activations.gelu(x, approximate=False)`, except under the
    TensorFlow backend, where TensorFlow's own kernel (`erfc` and the
    ops around it, one pass over memory each) took a third of a gMLP-Ti
    inference step in float32 and more than half in bfloat16. There it is
    the same `0.5 x erfc(-x / sqrt(2))`, in float32 at least, with the
    closed-form gradient `Phi(x) + x phi(x)`, each an XLA-compiled
    function: 2.0-2.3 times faster forward and 2.1-2.4 times forward and
    backward in float32, 4.0-4.9 and 3.5-3.9 times in bfloat16; a gMLP-Ti
    step, with the GELU alone changed, 1.05 times faster in float32, 1.3
    (training) and 1.5 times (inference) in bfloat16
    (`benchmarks/xla_functions.py`). The outputs differ by
    float32 rounding.

    Inside `keras_gmlp.layers.xla_functions.portable_ops()` (exports) it is
    TensorFlow's own op; when `keras.activations.gelu` has been replaced
    (`keras_gmlp.export.gelu_form`), the replacement runs instead.

    Example:

    >>> from keras_gmlp.layers.gelu import gelu
    >>> x = np.array([-1.0, 0.0, 2.0], "float32")
    >>> [round(float(v), 4) for v in keras.ops.convert_to_numpy(gelu(x))]
    [-0.1587, 0.0, 1.9545]
    """
    if not xla_functions_enabled() or (
        keras.activations.gelu is not _KERAS_GELU
    ):
        return keras.activations.gelu(x, approximate=False)
    return _tensorflow_gelu()(x)


@functools.cache
def _tensorflow_gelu():
    import tensorflow as tf

    sqrt_half = 1.0 / math.sqrt(2.0)
    inverse_sqrt_two_pi = 1.0 / math.sqrt(2.0 * math.pi)

    @tf.function(jit_compile=True, autograph=False)
    def forward(x):
        y = widened(x)
        return tf.cast(0.5 * y * tf.math.erfc(-sqrt_half * y), x.dtype)

    @tf.function(jit_compile=True, autograph=False)
    def backward(x, upstream):
        y = widened(x)
        cdf = 0.5 * tf.math.erfc(-sqrt_half * y)
        density = inverse_sqrt_two_pi * tf.exp(-0.5 * y * y)
        derivative = cdf + y * density
        return tf.cast(tf.cast(upstream, y.dtype) * derivative, x.dtype)

    @tf.autograph.experimental.do_not_convert
    @tf.custom_gradient
    def exact_gelu(x):
        def gradient(upstream):
            return backward(x, upstream)

        return forward(x), gradient

    def call(x):
        return exact_gelu(tf.convert_to_tensor(x))

    return call
