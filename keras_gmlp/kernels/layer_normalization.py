"""Layer normalisation with a hand-written gradient under JAX and
TensorFlow."""

import functools

import keras
from keras import ops

from keras_gmlp.kernels.xla_functions import widened


def jax_mean(x):
    """The mean of a JAX array over its last axis, kept: the norm's means
    under JAX."""
    import jax.numpy as jnp

    return jnp.mean(x, axis=-1, keepdims=True)


@functools.cache
def _jax_normalize(mean_rows=jax_mean):
    """`(x - mean) / sqrt(var + epsilon)` over the last axis, as a JAX
    function whose gradient is the closed form (a `jax.custom_vjp`), the
    means by `mean_rows`.

    XLA:CPU compiles the gradient JAX derives from the mean and variance
    into a gMLP-Ti training step about twice as slow as one with this
    closed form (`benchmarks/vision.py`). Forward-mode differentiation
    (`jax.jvp`, `jax.hessian`) is not defined for it.
    """
    import jax

    def forward(x, epsilon):
        centered = x - mean_rows(x)
        variance = mean_rows(centered * centered)
        inverse_std = jax.lax.rsqrt(variance + epsilon)
        normalized = centered * inverse_std
        return normalized, (normalized, inverse_std)

    def backward(epsilon, residuals, cotangent):
        normalized, inverse_std = residuals
        mean_cotangent = mean_rows(cotangent)
        projection = mean_rows(cotangent * normalized)
        return (
            inverse_std
            * (cotangent - mean_cotangent - normalized * projection),
        )

    @functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
    def normalize(x, epsilon):
        return forward(x, epsilon)[0]

    normalize.defvjp(forward, backward)
    return normalize


@functools.cache
def _jax_scale():
    """`x * gamma`, `gamma` over the last axis, as a JAX function whose
    backward pass reads `gamma` apart from the forward pass's
    (`keras_gmlp.kernels.jax_backward.after_upstream`, a `jax.custom_vjp`).

    Under JAX's own gradient XLA:CPU broadcasts `gamma` to the
    activations' shape once, writes that array out, and keeps it from the
    forward pass's product to the gradient's. Read apart, each broadcast
    stays inside the fusion that reads it. The same products and sums.
    """
    import jax

    from keras_gmlp.kernels.jax_backward import after_upstream

    @jax.custom_vjp
    def scale(x, gamma):
        return x * gamma

    def forward(x, gamma):
        return x * gamma, (x, gamma)

    def backward(residuals, upstream):
        x, gamma = residuals
        leading = tuple(range(upstream.ndim - 1))
        gamma_gradient = (upstream * x).sum(axis=leading)
        return upstream * after_upstream(gamma, upstream), gamma_gradient

    scale.defvjp(forward, backward)
    return scale


def jax_layer_norm(x, gamma, beta, epsilon, dtype):
    """`LayerNormalization`'s call under JAX: `x` normalised over its last
    axis in float32 at least (`_jax_normalize`), scaled by `gamma`
    (`_jax_scale`) and centered by `beta` (each `None` for none), cast to
    `dtype`."""
    wide = keras.backend.result_type(x.dtype, "float32")
    outputs = _jax_normalize()(ops.cast(x, wide), epsilon)
    if gamma is not None:
        outputs = _jax_scale()(outputs, ops.cast(gamma, wide))
    if beta is not None:
        outputs = outputs + ops.cast(beta, wide)
    return ops.cast(outputs, dtype)


def column_sum(x, split=8):
    """The sum of a TensorFlow tensor over every axis but the last, in two
    stages for XLA:CPU.

    TensorFlow's XLA:CPU runs a sum over many rows (a reduce-window, then a
    reduce) slowly; adding the `split` interleaved row blocks first and
    reducing the `1 / split` as many rows that are left takes about half
    the time. A row count that `split` does not divide is summed in one
    reduction.
    """
    import tensorflow as tf

    rows = tf.reshape(x, (-1, x.shape[-1]))
    count = rows.shape[0]
    if count is None or count % split:
        return tf.reduce_sum(rows, axis=0)
    blocks = tf.reshape(rows, (count // split, split, x.shape[-1]))
    added = tf.add_n([blocks[:, i] for i in range(split)])
    return tf.reduce_sum(added, axis=0)


def row_mean(x):
    """The mean of a TensorFlow tensor over its last axis (kept), as the
    product of its rows with a column of `1 / channels`, for XLA:CPU.

    XLA:CPU splits a reduction over more than 32 values into a
    reduce-window kernel and a reduce (for accuracy), each a pass of its
    own; its dot of the rows with a column is one pass, on YNNPACK. The
    products accumulate in float32, as the reduction does.
    """
    import tensorflow as tf

    channels = x.shape[-1]
    if channels is None:
        return tf.reduce_mean(x, axis=-1, keepdims=True)
    rows = tf.reshape(x, (-1, channels))
    column = tf.fill((channels, 1), tf.constant(1 / channels, x.dtype))
    means = tf.matmul(rows, column)
    return tf.reshape(means, tf.concat([tf.shape(x)[:-1], [1]], 0))


def tensorflow_normalized(x, epsilon, mean_rows=row_mean):
    """`((x - mean) * inverse_std, inverse_std)` of a TensorFlow tensor over
    its last axis, `inverse_std = 1 / sqrt(variance + epsilon)`: the
    LayerNormalization's XLA functions' normalisation, the means by
    `mean_rows`."""
    import tensorflow as tf

    centered = x - mean_rows(x)
    variance = mean_rows(centered * centered)
    inverse_std = tf.math.rsqrt(variance + epsilon)
    return centered * inverse_std, inverse_std


def tensorflow_affine_normalized(x, gamma, beta, epsilon, mean_rows=row_mean):
    """`normalize(x) * gamma + beta` over the last axis of a TensorFlow
    tensor, computed in float32 at least and cast to `x`'s dtype: the
    LayerNormalization's forward pass, for XLA functions."""
    import tensorflow as tf

    y = widened(x)
    normal, _ = tensorflow_normalized(y, tf.cast(epsilon, y.dtype), mean_rows)
    outputs = normal * tf.cast(gamma, y.dtype) + tf.cast(beta, y.dtype)
    return tf.cast(outputs, x.dtype)


def _tensorflow_layer_norm(sum_rows=column_sum, mean_rows=row_mean):
    """`_tensorflow_layer_norm_functions(sum_rows, mean_rows)`: one set of
    functions (and of XLA compilations) however they are asked for."""
    return _tensorflow_layer_norm_functions(sum_rows, mean_rows)


@functools.cache
def _tensorflow_layer_norm_functions(sum_rows, mean_rows):
    """`normalize(x) * gamma + beta` over the last axis as TensorFlow
    functions compiled by XLA: the forward pass and the closed-form
    gradients of `x`, `gamma` and `beta`, in float32 at least. `sum_rows`
    sums the gradients of `gamma` and `beta` over the rows, `mean_rows`
    averages over the last axis.

    TensorFlow's own graph of Keras' LayerNormalization runs its moments,
    normalisation and affine map as separate kernels, one pass over memory
    each.
    """
    import tensorflow as tf

    @tf.function(jit_compile=True, autograph=False)
    def forward(x, gamma, beta, epsilon):
        return tensorflow_affine_normalized(x, gamma, beta, epsilon, mean_rows)

    @tf.function(jit_compile=True, autograph=False)
    def backward(x, gamma, epsilon, upstream):
        y = widened(x)
        normal, inverse_std = tensorflow_normalized(
            y, tf.cast(epsilon, y.dtype), mean_rows
        )
        upstream = tf.cast(upstream, y.dtype)
        gamma_gradient = sum_rows(upstream * normal)
        beta_gradient = sum_rows(upstream)
        scaled = upstream * tf.cast(gamma, y.dtype)
        mean_scaled = mean_rows(scaled)
        projection = mean_rows(scaled * normal)
        x_gradient = inverse_std * (scaled - mean_scaled - normal * projection)
        return (
            tf.cast(x_gradient, x.dtype),
            tf.cast(gamma_gradient, gamma.dtype),
            tf.cast(beta_gradient, gamma.dtype),
        )

    def layer_norm(x, gamma, beta, epsilon):
        @tf.autograph.experimental.do_not_convert
        @tf.custom_gradient
        def affine_normalize(x, gamma, beta):
            def gradient(upstream):
                return backward(x, gamma, epsilon, upstream)

            return forward(x, gamma, beta, epsilon), gradient

        # Read the variables here: a custom gradient must not read any.
        return affine_normalize(
            tf.convert_to_tensor(x),
            tf.convert_to_tensor(gamma),
            tf.convert_to_tensor(beta),
        )

    # The XLA functions themselves, for gradients written by hand
    # (`keras_gmlp.kernels.tensorflow_spatial_gate`).
    layer_norm.forward, layer_norm.backward = forward, backward
    return layer_norm


def layer_norm(layer, inputs):
    """`keras.layers.LayerNormalization.call(layer, inputs)`, faster.

    Over the last axis (not RMS scaling): under JAX the input gradient is
    the closed form `(g - mean(g) - y * mean(g * y)) / std` (`g` the
    gradient of the normalised `y`), which XLA:CPU runs about twice as
    fast as the one JAX derives (reverse mode only); under TensorFlow,
    with a scale and a center, an XLA function with the same closed-form
    gradients; under torch, with a scale and a center, one
    `torch.nn.functional.layer_norm` of the inputs as they come (float32
    inside, rounded once). Other cases run Keras' own call. It computes
    in float32 at least, as Keras does.

    Args:
        layer: a built `keras.layers.LayerNormalization`.
        inputs: tensor.
    """
    rank = len(inputs.shape)
    axes = layer.axis if isinstance(layer.axis, list) else [layer.axis]
    last_axis = [axis % rank for axis in axes] == [rank - 1]
    affine = layer.scale and layer.center
    backend = keras.config.backend()
    if layer.rms_scaling or not last_axis:
        return keras.layers.LayerNormalization.call(layer, inputs)
    if backend == "tensorflow" and affine:
        outputs = _tensorflow_layer_norm()(
            inputs,
            ops.convert_to_tensor(layer.gamma),
            ops.convert_to_tensor(layer.beta),
            layer.epsilon,
        )
        return ops.cast(outputs, layer.compute_dtype)
    if backend == "torch" and affine:
        return _torch_layer_norm(layer, inputs)
    if backend != "jax":
        return keras.layers.LayerNormalization.call(layer, inputs)
    return jax_layer_norm(
        inputs,
        layer.gamma if layer.scale else None,
        layer.beta if layer.center else None,
        layer.epsilon,
        layer.compute_dtype,
    )


def _torch_layer_norm(layer, inputs):
    import torch

    inputs = ops.convert_to_tensor(inputs)
    if inputs.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        return keras.layers.LayerNormalization.call(layer, inputs)
    # torch normalises bfloat16 or float16 inputs with float32 weights in
    # float32 and rounds once, without Keras' two casts.
    outputs = torch.nn.functional.layer_norm(
        inputs,
        (inputs.shape[-1],),
        layer.gamma.value,
        layer.beta.value,
        layer.epsilon,
    )
    return ops.cast(outputs, layer.compute_dtype)
