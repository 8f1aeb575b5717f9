"""Adding a bias, with a float32-accumulated bias gradient under JAX."""

import functools

import keras
from keras import ops

LOW_PRECISION = ("bfloat16", "float16")


def bias_add(x, bias, axis=-1):
    """`x + bias`, the bias `(x.shape[axis],)` broadcast along `axis`.

    Under JAX, when `x` and `bias` are both bfloat16 (or both float16, as
    under a `mixed_*` dtype policy) the bias gradient, the upstream
    gradient summed over every other axis, is accumulated in float32 and
    rounded once (a `jax.custom_vjp`). JAX's own gradient of the broadcast
    is a bfloat16 `reduce_sum`, which XLA:CPU runs 17 times slower than
    the same sum accumulated in float32: a `mixed_bfloat16` gMLP-Ti
    training step is 1.2x faster with this one (`benchmarks/vision.py`).
    That case supports
    reverse-mode gradients only (no `jax.jvp`). Every other case is the
    plain add.

    Args:
        x: tensor.
        bias: tensor `(x.shape[axis],)`.
        axis: int, negative: the axis of `x` the bias runs along.

    Returns:
        Tensor of the shape and dtype of `x`.

    Example:

    >>> from keras_gmlp.kernels.bias_add import bias_add
    >>> x = np.zeros((2, 3, 4), "float32")
    >>> bias = np.arange(3, dtype="float32")
    >>> y = bias_add(x, bias, axis=-2)
    >>> keras.ops.convert_to_numpy(y)[0, :, 0].tolist()
    [0.0, 1.0, 2.0]
    """
    if axis >= 0:
        raise ValueError(f"`axis` must be negative; received axis={axis}.")
    # A variable reads in the compute dtype inside a layer's call.
    x, bias = ops.convert_to_tensor(x), ops.convert_to_tensor(bias)
    if (
        keras.config.backend() == "jax"
        and keras.backend.standardize_dtype(x.dtype) in LOW_PRECISION
        and keras.backend.standardize_dtype(bias.dtype)
        == keras.backend.standardize_dtype(x.dtype)
    ):
        return _jax_bias_add(axis)(x, bias)
    # Not `ops.add`: under TensorFlow it adds a `(n, 1)` bias along the
    # last axis when that axis is `n` long too (Keras 3.15).
    return x + ops.reshape(bias, (-1,) + (1,) * (-axis - 1))


@functools.cache
def _jax_bias_add(axis):
    """`x + bias` along the negative `axis`, as a JAX function whose bias
    gradient sums in float32."""
    import jax
    import jax.numpy as jnp

    def broadcastable(bias):
        return jnp.reshape(bias, (-1,) + (1,) * (-axis - 1))

    @jax.custom_vjp
    def add(x, bias):
        return x + broadcastable(bias)

    def forward(x, bias):
        return add(x, bias), None

    def backward(_, upstream):
        rank = upstream.ndim
        axes = tuple(i for i in range(rank) if i != rank + axis)
        bias_gradient = jnp.sum(upstream, axis=axes, dtype=jnp.float32)
        return upstream, bias_gradient.astype(upstream.dtype)

    add.defvjp(forward, backward)
    return add
