"""The exact GELU of the gMLP block, compiled by XLA under TensorFlow and
with a closed-form gradient under JAX."""

import functools
import math

import keras

from keras_gmlp.layers.xla_functions import widened
from keras_gmlp.layers.xla_functions import xla_functions_enabled

_KERAS_GELU = keras.activations.gelu


def gelu(x):
    """The exact GELU `x * Phi(x)`, `Phi` the standard normal CDF.

    `keras.activations.gelu(x, approximate=False)` under torch. Under
    TensorFlow, whose own kernel (`erfc` and the ops around it, one pass
    over memory each) took a third of a gMLP-Ti inference step in float32
    and more than half in bfloat16, it is the same function, in float32 at
    least, with the closed-form gradient `Phi(x) + x phi(x)`, each an
    XLA-compiled function: 2.0-2.3 times faster forward and 2.1-2.4 times
    forward and backward in float32, 4.0-4.9 and 3.5-3.9 times in
    bfloat16; a gMLP-Ti step, with the GELU alone changed, 1.05 times
    faster in float32, 1.3 (training) and 1.5 times (inference) in
    bfloat16 (`benchmarks/xla_functions.py`, with `0.5 erfc(-x /
    sqrt(2))` for `Phi`). XLA expands `erfc` into two branches and a
    select, so under JAX and TensorFlow `Phi` comes from Abramowitz and
    Stegun's erfc (formula 7.1.26: one exponential, shared with the
    gradient's density, absolute error below 1.5e-7;
    `normal_cdf_and_density`), in float32 at least. Under JAX (a
    `jax.custom_vjp` with the same gradient) 1.35-1.7 times faster than
    `erfc` forward, gMLP-Ti inference 1.1 times
    (`benchmarks/jax_functions.py`); under TensorFlow 1.3-1.4 times forward
    and backward, gMLP-Ti training 1.12 (float32) and 1.07 times
    (bfloat16) (`benchmarks/gelu_formula.py`). float64 inputs take Keras'
    GELU (JAX's x64 mode) or `erfc` (TensorFlow). The outputs differ by
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
    if keras.activations.gelu is not _KERAS_GELU:
        return keras.activations.gelu(x, approximate=False)
    if xla_functions_enabled():
        return _tensorflow_gelu()(x)
    if keras.config.backend() == "jax":
        return _jax_gelu()(x)
    return keras.activations.gelu(x, approximate=False)


# Abramowitz & Stegun 7.1.26: erfc(z) = t P(t) exp(-z^2), t = 1 / (1 + p z),
# for z >= 0, with an absolute error below 1.5e-7.
_ERFC_P = 0.3275911
_ERFC_COEFFICIENTS = (
    0.254829592,
    -0.284496736,
    1.421413741,
    -1.453152027,
    1.061405429,
)


def normal_cdf_and_density(y, exp, absolute, where):
    """`Phi(y)` and `phi(y)` from Abramowitz and Stegun's erfc, sharing
    one exponential; `exp`, `absolute` and `where` are the backend's."""
    sqrt_half = 1.0 / math.sqrt(2.0)
    gaussian = exp(-0.5 * y * y)
    t = 1.0 / (1.0 + _ERFC_P * sqrt_half * absolute(y))
    polynomial = 0.0
    for coefficient in reversed(_ERFC_COEFFICIENTS):
        polynomial = (polynomial + coefficient) * t
    tail = 0.5 * polynomial * gaussian  # Phi(-|y|)
    cdf = where(y >= 0, 1.0 - tail, tail)
    return cdf, (1.0 / math.sqrt(2.0 * math.pi)) * gaussian


@functools.cache
def _jax_gelu():
    import jax
    import jax.numpy as jnp

    def widen(x):
        if x.dtype in (jnp.float16, jnp.bfloat16):
            return x.astype(jnp.float32)
        return x

    def cdf_and_density(y):
        return normal_cdf_and_density(y, jnp.exp, jnp.abs, jnp.where)

    @jax.custom_vjp
    def exact_gelu(x):
        y = widen(x)
        return (y * cdf_and_density(y)[0]).astype(x.dtype)

    def forward(x):
        return exact_gelu(x), x

    def backward(x, upstream):
        y = widen(x)
        cdf, density = cdf_and_density(y)
        derivative = cdf + y * density
        return ((widen(upstream) * derivative).astype(x.dtype),)

    exact_gelu.defvjp(forward, backward)

    def call(x):
        x = jnp.asarray(x)
        if x.dtype == jnp.float64:  # x64 enabled: more than 1.5e-7 asked
            return _KERAS_GELU(x, approximate=False)
        return exact_gelu(x)

    return call


def tensorflow_erfc_cdf_and_density(y):
    """`Phi(y)` through TensorFlow's `erfc`, `phi(y)` through its own
    exponential: exact to the dtype's rounding."""
    import tensorflow as tf

    cdf = 0.5 * tf.math.erfc(-(1.0 / math.sqrt(2.0)) * y)
    return cdf, (1.0 / math.sqrt(2.0 * math.pi)) * tf.exp(-0.5 * y * y)


def _tensorflow_cdf_and_density(y):
    import tensorflow as tf

    if y.dtype == tf.float64:  # more than 1.5e-7 asked
        return tensorflow_erfc_cdf_and_density(y)
    return normal_cdf_and_density(y, tf.exp, tf.abs, tf.where)


@functools.cache
def _tensorflow_gelu(cdf_and_density=_tensorflow_cdf_and_density):
    """The TensorFlow GELU; `cdf_and_density(y)` gives `(Phi(y), phi(y))`
    (`benchmarks/gelu_formula.py` passes `tensorflow_erfc_cdf_and_density`,
    the previous form)."""
    import tensorflow as tf

    @tf.function(jit_compile=True, autograph=False)
    def forward(x):
        y = widened(x)
        return tf.cast(y * cdf_and_density(y)[0], x.dtype)

    @tf.function(jit_compile=True, autograph=False)
    def backward(x, upstream):
        y = widened(x)
        cdf, density = cdf_and_density(y)
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
