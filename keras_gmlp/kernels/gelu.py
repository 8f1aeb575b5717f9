"""The exact GELU of the gMLP block, compiled by XLA under TensorFlow and
with a closed-form gradient under JAX."""

import functools
import math

import keras
from keras import ops

from keras_gmlp.kernels.bias_add import bias_add
from keras_gmlp.kernels.dense import dense_call
from keras_gmlp.kernels.dense import is_affine
from keras_gmlp.kernels.direct_call import direct_call
from keras_gmlp.kernels.layer_normalization import column_sum
from keras_gmlp.kernels.matmul import matmul
from keras_gmlp.kernels.xla_functions import widened
from keras_gmlp.kernels.xla_functions import xla_functions_enabled

_KERAS_GELU = keras.activations.gelu


def gelu(x):
    """The exact GELU `x * Phi(x)`, `Phi` the standard normal CDF.

    Under torch, `keras.activations.gelu(x, approximate=False)`. Under
    JAX (a `jax.custom_vjp`) and TensorFlow (XLA-compiled functions), the
    GELU is computed in float32 at least, with the closed-form gradient
    `Phi(x) + x phi(x)`, and `Phi` comes from Abramowitz and Stegun's
    erfc (formula 7.1.26: one exponential, shared with the gradient's
    density, absolute error below 1.5e-7; `normal_cdf_and_density`)
    rather than `erfc`, which XLA expands into two branches and a select.
    float64 inputs take Keras' GELU (JAX's x64 mode) or `erfc`
    (TensorFlow). The outputs differ by float32 rounding.

    Inside `keras_gmlp.kernels.reference_only()` (exports) it is
    TensorFlow's own op; when `keras.activations.gelu` has been replaced
    (`keras_gmlp.export.gelu_form`), the replacement runs instead.

    Example:

    >>> from keras_gmlp.kernels.gelu import gelu
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


def biased_gelu(x, bias):
    """`gelu(x + bias)`, `bias` along the last axis, with `bias_add`'s add.

    Under TensorFlow (the XLA functions allowed) the bias is added
    inside the GELU's XLA functions (the forward one, and again the
    gradient one, which keeps `x`), and the bias gradient, the GELU's
    input gradient summed over every axis but the last, comes out of the
    gradient function, summed in float32 (`column_sum`): one pass fewer
    over the expanded activations per half of each block's first
    projection. Elsewhere `gelu(bias_add(x, bias))`.

    Args:
        x: tensor `(..., channels)`.
        bias: tensor `(channels,)` in `x`'s dtype.

    Example:

    >>> from keras_gmlp.kernels.gelu import biased_gelu, gelu
    >>> x = np.array([[-1.0, 0.5]], "float32")
    >>> bias = np.array([0.5, -0.5], "float32")
    >>> y = keras.ops.convert_to_numpy(biased_gelu(x, bias))
    >>> bool(np.allclose(y, keras.ops.convert_to_numpy(gelu(x + bias))))
    True
    """
    if keras.activations.gelu is _KERAS_GELU and xla_functions_enabled():
        return _tensorflow_gelu().biased(x, bias)
    return gelu(bias_add(x, bias))


def dense_gelu(dense, inputs, training=None):
    """`gelu(dense(inputs))`: the gMLP block's first projection and GELU.

    Under TensorFlow with its oneDNN kernels on, in a graph that XLA does
    not compile and outside training, the product, the bias and the exact
    GELU are written as the `MatMul`, `BiasAdd` and `tf.nn.gelu` of the
    rows, which TensorFlow's graph optimiser fuses into one oneDNN kernel
    (`_MklNativeFusedMatMul`, GELU applied to the float32 accumulator and
    the result rounded once): no pass over the expanded activations for
    the bias, none for the GELU. The outputs differ by rounding (in
    bfloat16 the fused kernel rounds once). In training the GELU's input
    is kept for the gradient, which the fusion cannot give, so `gelu`
    (the XLA function) of the Dense runs; eager calls, XLA-compiled
    steps and exports (`reference_only`) take `gelu(dense(inputs))` too.
    On a CPU with AMX the gMLP block's bfloat16 inference takes neither:
    its products are plain and its biases and GELUs go into the spatial
    gating unit's XLA functions, because the fused bfloat16 kernel does
    not run on AMX
    (`keras_gmlp.kernels.tensorflow_spatial_gate.inference_spatial_gate`).
    Without AMX it takes the fused kernel.

    Args:
        dense: a built `keras.layers.Dense` without activation.
        inputs: tensor `(..., dense input channels)`.
        training: bool or `None`. Whether the call is a training step's.

    Example:

    >>> from keras_gmlp.kernels.gelu import dense_gelu, gelu
    >>> dense = keras.layers.Dense(3)
    >>> dense.build((None, 4))
    >>> x = np.ones((2, 4), "float32")
    >>> outputs = keras.ops.convert_to_numpy(dense_gelu(dense, x))
    >>> expected = keras.ops.convert_to_numpy(gelu(dense(x)))
    >>> bool(np.allclose(outputs, expected, atol=1e-6))
    True
    """
    if training or not _onednn_fuses_dense_gelu(dense, inputs):
        return gelu(direct_call(dense, inputs, method=dense_call))
    inputs, kernel, bias = _dense_operands(dense, inputs)
    return _onednn_dense_gelu(inputs, kernel, bias)


def split_dense_gelu(dense, inputs, training=None):
    """The two halves of `gelu(dense(inputs))`, each its own product.

    The gMLP block's first projection feeds the spatial gating unit, which
    splits it into the gated half `u` and the gate's half `v`. Each half
    here is the product of the inputs with its half of the kernel's
    columns, its bias and its GELU, so no pass over the expanded
    activations slices them apart (or, in the gradient, concatenates
    them), and the two halves are independent work, which XLA:CPU (JAX)
    and TensorFlow's executor run side by side. Under torch, which runs
    one op at a time, and in JAX training, where XLA's scheduler keeps
    more buffers alive to run the halves side by side (the gMLP block's
    recomputing gate takes `split_dense` there), and for a Dense with
    LoRA, quantized, without bias or with an activation, and for symbolic
    inputs, it is `dense_gelu` split into two. The same sums as one
    product's columns: outputs equal up to rounding.

    Args:
        dense: a built `keras.layers.Dense` without activation, with an
            even number of units.
        inputs: tensor `(..., dense input channels)`.
        training: bool or `None`. Whether the call is a training step's.

    Returns:
        `(u, v)`: tensors `(..., units / 2)`, the first and second half.

    Example:

    >>> from keras_gmlp.kernels.gelu import gelu, split_dense_gelu
    >>> dense = keras.layers.Dense(6)
    >>> dense.build((None, 4))
    >>> x = np.ones((2, 4), "float32")
    >>> u, v = split_dense_gelu(dense, x)
    >>> whole = keras.ops.convert_to_numpy(gelu(dense(x)))
    >>> halves = keras.ops.convert_to_numpy(keras.ops.concatenate([u, v], -1))
    >>> bool(np.allclose(halves, whole, atol=1e-6))
    True
    """
    backend = keras.config.backend()
    if (
        backend == "torch"
        or (backend == "jax" and training)
        or not _projects_halves(dense, inputs)
    ):
        hidden = dense_gelu(dense, inputs, training=training)
        return tuple(ops.split(hidden, 2, axis=-1))
    fused = not training and _onednn_fuses_dense_gelu(dense, inputs)
    inputs, kernel, bias = _dense_operands(dense, inputs)
    halves = _kernel_halves(kernel, bias)
    if fused:
        return tuple(_onednn_dense_gelu(inputs, k, b) for k, b in halves)
    return tuple(biased_gelu(matmul(inputs, k), b) for k, b in halves)


def split_dense(dense, inputs):
    """The two halves of `dense(inputs)`, each its own product.

    `split_dense_gelu` before its GELU, on every backend. The gMLP block
    takes it in JAX training, where the spatial gating unit's recomputing
    gate applies the GELU and recomputes it for the backward pass
    (`SpatialGatingUnit.call_on_projection`). A Dense that
    `split_dense_gelu` cannot split (LoRA, quantized, no bias, an
    activation, symbolic inputs) runs its own call, then the split.

    Args:
        dense: a built `keras.layers.Dense` with an even number of units.
        inputs: tensor `(..., dense input channels)`.

    Returns:
        `(u, v)`: tensors `(..., units / 2)`, the first and second half.

    Example:

    >>> from keras_gmlp.kernels.gelu import split_dense
    >>> dense = keras.layers.Dense(6)
    >>> dense.build((None, 4))
    >>> x = np.ones((2, 4), "float32")
    >>> u, v = split_dense(dense, x)
    >>> whole = keras.ops.convert_to_numpy(dense(x))
    >>> halves = keras.ops.convert_to_numpy(keras.ops.concatenate([u, v], -1))
    >>> bool(np.allclose(halves, whole, atol=1e-6))
    True
    """
    products, biases = split_products(dense, inputs)
    if biases is None:
        return products
    return tuple(map(bias_add, products, biases))


def split_products(dense, inputs):
    """`split_dense` before its biases: the two halves' products and biases.

    The gMLP block's recomputing TensorFlow gate adds the biases itself,
    so that its gradient functions sum their gradients
    (`keras_gmlp.kernels.tensorflow_spatial_gate`).

    Args:
        dense: a built `keras.layers.Dense` with an even number of units.
        inputs: tensor `(..., dense input channels)`.

    Returns:
        `((u's product, v's), (u's bias, v's))`, the products
        `(..., units / 2)` and the biases `(units / 2,)` in the Dense's
        compute dtype; for a Dense that `split_dense_gelu` cannot split,
        `(split_dense(dense, inputs), None)`.

    Example:

    >>> from keras_gmlp.kernels.gelu import split_dense, split_products
    >>> dense = keras.layers.Dense(6, bias_initializer="ones")
    >>> dense.build((None, 4))
    >>> x = np.ones((2, 4), "float32")
    >>> (u, v), (u_bias, v_bias) = split_products(dense, x)
    >>> biased = keras.ops.convert_to_numpy(u + u_bias)
    >>> whole = keras.ops.convert_to_numpy(split_dense(dense, x)[0])
    >>> bool(np.allclose(biased, whole))
    True
    """
    if not _projects_halves(dense, inputs):
        products = direct_call(dense, inputs, method=dense_call)
        return tuple(ops.split(products, 2, axis=-1)), None
    inputs, kernel, bias = _dense_operands(dense, inputs)
    halves = _kernel_halves(kernel, bias)
    return (
        tuple(matmul(inputs, k) for k, _ in halves),
        tuple(b for _, b in halves),
    )


def _kernel_halves(kernel, bias):
    """`[(first half's kernel, bias), (second half's)]` of a Dense's
    columns."""
    # `split`, not two slices: its gradient is one concatenation, not two
    # zero-filled kernel-sized tensors summed.
    kernels = ops.split(kernel, 2, axis=-1)
    return list(zip(kernels, ops.split(bias, 2, axis=-1), strict=True))


def _projects_halves(dense, inputs):
    """Whether `split_dense_gelu` and `split_dense` can take the kernel's
    halves themselves."""
    return (
        dense.built
        and is_affine(dense)
        and dense.units % 2 == 0
        and not isinstance(inputs, keras.KerasTensor)
    )


def _dense_operands(dense, inputs):
    """`(inputs, kernel, bias)` in the Dense's compute dtype, as its call
    sees them."""
    inputs = dense.dtype_policy.convert_input(
        inputs, dense.autocast, dense.input_dtype
    )
    kernel = ops.cast(dense.kernel, dense.compute_dtype)
    bias = ops.cast(dense.bias, dense.compute_dtype)
    return inputs, kernel, bias


def _onednn_dense_gelu(inputs, kernel, bias):
    """The rows' `MatMul`, `BiasAdd` and exact `tf.nn.gelu`, which
    Grappler fuses into one oneDNN kernel (see `dense_gelu`)."""
    import tensorflow as tf

    rows = tf.reshape(inputs, (-1, inputs.shape[-1]))
    outputs = tf.nn.gelu(
        tf.nn.bias_add(tf.matmul(rows, kernel), bias), approximate=False
    )
    shape = tf.concat([tf.shape(inputs)[:-1], tf.shape(kernel)[-1:]], 0)
    outputs = tf.reshape(outputs, shape)
    outputs.set_shape(inputs.shape[:-1] + (kernel.shape[-1],))
    return outputs


def _onednn_fuses_dense_gelu(dense, inputs):
    """Whether `dense_gelu` can leave the product, bias and GELU to
    TensorFlow's oneDNN fusion: a TensorFlow graph (not eager, not XLA) with
    oneDNN on, the XLA functions allowed, Keras' GELU, and a plain float32
    or bfloat16 Dense with a bias."""
    if not xla_functions_enabled() or keras.activations.gelu is not (
        _KERAS_GELU
    ):
        return False
    if (
        not dense.built
        or dense.bias is None
        or dense.activation not in (None, keras.activations.linear)
        or getattr(dense, "quantization_mode", None) is not None
        or getattr(dense, "lora_enabled", False)
        or dense.compute_dtype not in ("float32", "bfloat16")
        or isinstance(inputs, keras.KerasTensor)
    ):
        return False
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    graph = tf.compat.v1.get_default_graph()
    return (
        _onednn_enabled()
        and not tf.executing_eagerly()
        and not control_flow_util.GraphOrParentsInXlaContext(graph)
    )


@functools.cache
def _onednn_enabled():
    """Whether TensorFlow runs its oneDNN kernels (`TF_ENABLE_ONEDNN_OPTS`,
    read when TensorFlow is imported; `keras_gmlp` turns it on)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


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
    (`tensorflow_erfc_cdf_and_density` for TensorFlow's own `erfc`)."""
    import tensorflow as tf

    @tf.function(jit_compile=True, autograph=False)
    def forward(x):
        y = widened(x)
        return tf.cast(y * cdf_and_density(y)[0], x.dtype)

    def input_gradient(x, upstream):
        y = widened(x)
        cdf, density = cdf_and_density(y)
        derivative = cdf + y * density
        return tf.cast(tf.cast(upstream, y.dtype) * derivative, x.dtype)

    backward = tf.function(input_gradient, jit_compile=True, autograph=False)

    @tf.function(jit_compile=True, autograph=False)
    def backward_with_bias(x, upstream):
        # The bias gradient sums the rounded input gradient, as
        # TensorFlow's `Sum` of it would, accumulated in float32.
        by_x = input_gradient(x, upstream)
        return by_x, tf.cast(column_sum(widened(by_x)), x.dtype)

    @tf.autograph.experimental.do_not_convert
    @tf.custom_gradient
    def exact_gelu(x):
        def gradient(upstream):
            return backward(x, upstream)

        return forward(x), gradient

    # The add `bias_add` makes, rounded to `x`'s dtype, inside the XLA
    # functions: the forward pass keeps `x` and the backward pass adds
    # the bias again, so no TensorFlow `AddV2` writes the sum out.
    @tf.function(jit_compile=True, autograph=False)
    def biased_forward(x, bias):
        y = widened(x + bias)
        return tf.cast(y * cdf_and_density(y)[0], x.dtype)

    @tf.function(jit_compile=True, autograph=False)
    def biased_backward(x, bias, upstream):
        by_x = input_gradient(x + bias, upstream)
        return by_x, tf.cast(column_sum(widened(by_x)), x.dtype)

    @tf.autograph.experimental.do_not_convert
    @tf.custom_gradient
    def biased_gelu(x, bias):
        def gradient(upstream):
            return biased_backward(x, bias, upstream)

        return biased_forward(x, bias), gradient

    def call(x):
        return exact_gelu(tf.convert_to_tensor(x))

    call.biased = lambda x, bias: biased_gelu(
        tf.convert_to_tensor(x), tf.convert_to_tensor(bias)
    )

    # The XLA functions themselves, for gradients written by hand
    # (`keras_gmlp.kernels.tensorflow_spatial_gate`).
    call.forward, call.backward = forward, backward
    call.backward_with_bias = backward_with_bias
    return call
