"""A matmul whose bfloat16 products run on the CPU's bfloat16 units under
JAX."""

import functools

import keras
from keras import ops


def matmul(x, y):
    """`x @ y` for `x` `(..., k)` and a 2-D `y` `(k, m)`.

    Under JAX, when `x` and `y` are both bfloat16 (as under a
    `mixed_bfloat16` dtype policy), the product and both of its gradients
    are dots of bfloat16 operands into a float32 result, rounded once to
    bfloat16 (a `jax.custom_vjp`). XLA:CPU hands such a dot to YNNPACK,
    which runs it on the CPU's bfloat16 units (AMX, AVX512-BF16); a dot
    with a bfloat16 result it converts to float32 around it, slower than
    a float32 dot: a `mixed_bfloat16` gMLP-Ti training step at batch 32
    runs 1.4x faster so on a CPU with AMX (`benchmarks/vision.py`).
    `preferred_element_type` on the forward dot alone does
    not reach the backward pass: JAX's gradient of it is a dot of a
    float32 cotangent with a bfloat16 operand. The sums are float32's
    either way, in another order: the outputs agree to bfloat16's
    rounding. That case supports reverse-mode gradients only (no
    `jax.jvp`). Other JAX products of an `x` of more than two axes are
    products of its rows (`jax_rows_matmul`). Under torch, operands of
    one dtype are `keras_gmlp.kernels.torch_linear.linear` of `y`'s
    transpose (float32 on oneDNN on an AMD CPU). Every other case is
    `keras.ops.matmul`.

    Args:
        x: tensor `(..., k)`.
        y: tensor `(k, m)`.

    Returns:
        Tensor `(..., m)` in the dtype `keras.ops.matmul` gives.

    Example:

    >>> from keras_gmlp.kernels.matmul import matmul
    >>> x = np.ones((2, 3, 4), "float32")
    >>> y = np.full((4, 5), 0.5, "float32")
    >>> keras.ops.convert_to_numpy(matmul(x, y))[0, 0].tolist()
    [2.0, 2.0, 2.0, 2.0, 2.0]
    """
    # A variable reads in the compute dtype inside a layer's call.
    x, y = ops.convert_to_tensor(x), ops.convert_to_tensor(y)
    if (
        keras.config.backend() == "jax"
        and len(y.shape) == 2
        and keras.backend.standardize_dtype(x.dtype) == "bfloat16"
        and keras.backend.standardize_dtype(y.dtype) == "bfloat16"
    ):
        return _jax_bfloat16_matmul()(x, y)
    if (
        keras.config.backend() == "jax"
        and len(x.shape) > 2
        and len(y.shape) == 2
    ):
        return jax_rows_matmul(x, y)
    if (
        keras.config.backend() == "torch"
        and len(y.shape) == 2
        and x.dtype == y.dtype
    ):
        from keras_gmlp.kernels.torch_linear import linear

        return linear(x, y.T)
    return ops.matmul(x, y)


def jax_rows_matmul(x, y):
    """`x @ y` for a JAX array `x` `(..., k)`, as the product of its rows
    `(-1, k)`, reshaped back.

    XLA:CPU (jaxlib 0.10) differentiates the product of a 3-D `x` into a
    kernel gradient that contracts two axes of the upstream gradient, and
    copies that gradient, transposed, before handing the dot to YNNPACK;
    the product of the rows gets a kernel gradient that reads the upstream
    gradient in place. The same sums. Not for bfloat16 operands, whose
    product (`matmul`) is faster as it is.
    """
    rows = ops.matmul(x.reshape(-1, x.shape[-1]), y)
    return rows.reshape(*x.shape[:-1], y.shape[-1])


def jax_dot(a, b, contracting):
    """`jax.lax.dot_general` of JAX arrays `a` and `b` over the axis pairs
    `contracting` (`(a_axes, b_axes)`, no batch axes); into float32 and
    rounded once to bfloat16 when both are bfloat16.

    XLA:CPU (jaxlib 0.10) converts such a dot to float32 where YNNPACK
    declines it (a vector, small sizes), but not where it declines it
    only after XLA's own rewrites: a dot contracting the first axis of a
    square `a` with the middle axis of a 3-D `b` fails at run time
    ("Unsupported element type for DotThunk::Execute: BF16 x BF16 = F32"),
    even written as a dot of `a`'s transpose. The package's dots avoid
    that form, and `tests/layers/test_matmul.py` runs each of them.
    """
    import jax
    import jax.numpy as jnp

    dimension_numbers = (contracting, ((), ()))
    if a.dtype == jnp.bfloat16 and b.dtype == jnp.bfloat16:
        product = jax.lax.dot_general(
            a, b, dimension_numbers, preferred_element_type=jnp.float32
        )
        return product.astype(a.dtype)
    return jax.lax.dot_general(a, b, dimension_numbers)


@functools.cache
def _jax_bfloat16_matmul():
    """`x @ y` for bfloat16 `x` `(..., k)` and `y` `(k, m)`, as a JAX
    function whose three dots accumulate into float32 (`jax_dot`)."""
    import jax

    @jax.custom_vjp
    def product(x, y):
        return jax_dot(x, y, ((x.ndim - 1,), (0,)))

    def forward(x, y):
        return product(x, y), (x, y)

    def backward(residuals, upstream):
        x, y = residuals
        upstream = upstream.astype(x.dtype)
        x_gradient = jax_dot(upstream, y, ((upstream.ndim - 1,), (1,)))
        leading = tuple(range(x.ndim - 1))
        y_gradient = jax_dot(x, upstream, (leading, leading))
        return x_gradient, y_gradient

    product.defvjp(forward, backward)
    return product
