"""`matmul` against numpy on every backend and dtype policy, and its
bfloat16 dots into float32 under JAX."""

import keras
import numpy as np
import pytest

from keras_gmlp.kernels.matmul import matmul
from keras_gmlp.layers import GMLPBlock
from tests.gradients import BACKEND
from tests.gradients import gradients
from tests.rounding import as_float64
from tests.rounding import rounded

POLICIES = ["float32", "mixed_bfloat16", "mixed_float16"]
BITS = {"float32": 24, "bfloat16": 8, "float16": 11}


class Product(keras.layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.kernel = self.add_weight(
            shape=(input_shape[-1], self.units), name="kernel"
        )

    def call(self, inputs):
        return matmul(inputs, self.kernel)


def assert_rounded_once(actual, expected, magnitude, dtype):
    """`actual` is `expected`, summed in float32 (or better) and rounded
    once to `dtype`; `magnitude` the sum of the terms' absolute values."""
    tolerance = np.abs(expected) * 2.0 ** -BITS[dtype] + magnitude * 2.0**-20
    np.testing.assert_array_less(np.abs(actual - expected), tolerance + 1e-30)


@pytest.mark.parametrize("shape", [(5, 24), (3, 7, 24), (2, 3, 4, 24)])
@pytest.mark.parametrize("policy", POLICIES)
def test_outputs_and_gradients_match_numpy(policy, shape, amd, rng):
    x = rng.normal(size=shape).astype("float32")
    layer = Product(6, dtype=policy)
    layer.build(shape)
    layer.kernel.assign(rng.normal(size=(shape[-1], 6)).astype("float32"))
    dtype = layer.compute_dtype
    x_rounded = rounded(x, dtype)
    kernel = rounded(layer.kernel, dtype)

    outputs = layer(x)
    assert keras.backend.standardize_dtype(outputs.dtype) == dtype
    assert_rounded_once(
        as_float64(outputs),
        x_rounded @ kernel,
        np.abs(x_rounded) @ np.abs(kernel),
        dtype,
    )

    cotangent = rng.normal(size=(*shape[:-1], 6)).astype("float32")
    model = keras.Sequential([keras.Input(shape[1:]), layer])
    x_gradient, kernel_gradient = gradients(model, x, cotangent, [layer.kernel])
    upstream = rounded(cotangent, dtype)
    assert_rounded_once(
        x_gradient,
        upstream @ kernel.T,
        np.abs(upstream) @ np.abs(kernel).T,
        dtype,
    )
    rows = x_rounded.reshape(-1, shape[-1])
    upstream_rows = upstream.reshape(-1, 6)
    assert_rounded_once(
        kernel_gradient,
        rows.T @ upstream_rows,
        np.abs(rows).T @ np.abs(upstream_rows),
        dtype,
    )


@pytest.mark.skipif(BACKEND != "jax", reason="XLA:CPU's compiled gradient")
@pytest.mark.parametrize("transposed", [False, True])
def test_jax_kernel_gradient_reads_the_upstream_gradient_in_place(
    transposed,
):
    # XLA:CPU copies the upstream gradient of a 3-D float32 product,
    # transposed to `(units, rows)`, before the kernel gradient's dot (a
    # Dense, or `TiedEmbedding`'s logits with the embedding transposed),
    # unless the product is taken over the rows (`jax_rows_matmul`).
    import jax
    import jax.numpy as jnp

    x = jnp.ones((4, 49, 32))
    weight = jnp.ones((96, 32) if transposed else (32, 96))
    cotangent = jnp.ones((4, 49, 96))

    def loss(x, weight):
        kernel = weight.T if transposed else weight
        return (jnp.tanh(matmul(x, kernel)) * cotangent).sum()

    gradient = jax.jit(jax.grad(loss, argnums=(0, 1)))
    compiled = gradient.lower(x, weight).compile().as_text()
    assert "f32[96,196]" not in compiled


def dot_types(function, *arguments):
    """`(operand dtypes, result dtype)` of every dot in the jaxpr of
    `function`'s gradient, as strings."""
    import jax

    jaxpr = jax.make_jaxpr(jax.grad(function, argnums=0))(*arguments)
    found = []

    def visit(jaxpr):
        for equation in jaxpr.eqns:
            if equation.primitive.name == "dot_general":
                found.append(
                    (
                        tuple(str(v.aval.dtype) for v in equation.invars),
                        str(equation.outvars[0].aval.dtype),
                    )
                )
            for value in equation.params.values():
                inner = getattr(value, "jaxpr", value)
                if hasattr(inner, "eqns"):
                    visit(inner)

    visit(jaxpr.jaxpr)
    return found


@pytest.mark.skipif(BACKEND != "jax", reason="JAX's dots")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_jax_bfloat16_dots_accumulate_in_float32(dtype):
    # XLA:CPU runs a dot with a bfloat16 result at a sixth of the rate of
    # one with bfloat16 operands and a float32 result.
    import jax.numpy as jnp

    x = jnp.ones((2, 5, 3), dtype)
    y = jnp.ones((3, 4), dtype)

    def loss(arguments):
        return matmul(*arguments).astype("float32").sum()

    dots = dot_types(loss, (x, y))
    # The product and both gradients.
    assert len(dots) == 3
    expected_result = "float32" if dtype == "bfloat16" else dtype
    assert set(dots) == {((dtype, dtype), expected_result)}


@pytest.mark.skipif(BACKEND != "jax", reason="JAX's dots")
@pytest.mark.parametrize("attention_dim", [None, 4])
def test_every_dot_of_a_mixed_bfloat16_block_accumulates_in_float32(
    attention_dim, rng
):
    import jax

    block = GMLPBlock(
        ffn_dim=12,
        sequence_length=6,
        attention_dim=attention_dim,
        dtype="mixed_bfloat16",
    )
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block.build(x.shape)
    trainable = [v.value for v in block.trainable_variables]
    non_trainable = [v.value for v in block.non_trainable_variables]

    def loss(trainable):
        outputs, _ = block.stateless_call(
            trainable, non_trainable, x, training=True
        )
        return outputs.astype("float32").sum()

    dots = dot_types(loss, trainable)
    assert dots
    assert all(d[0] == ("bfloat16", "bfloat16") for d in dots)
    into_float32 = [d for d in dots if d[1] == "float32"]
    # The two projections' and the token product's dots, forward and
    # backward; the tiny attention's einsums are Keras' own.
    assert len(into_float32) >= 9
    if attention_dim is None:
        assert into_float32 == dots
    # And XLA:CPU runs them (some forms of such a dot fail at run time).
    jax.block_until_ready(jax.grad(loss)(trainable))
    jax.block_until_ready(jax.jit(jax.grad(loss))(trainable))


@pytest.mark.skipif(BACKEND != "jax", reason="XLA:CPU's bfloat16 dots")
@pytest.mark.parametrize("transposed", [False, True])
def test_jax_bfloat16_gradients_run_compiled(transposed, rng):
    # Sizes YNNPACK takes, in the forms of the package's products: a
    # kernel, or an embedding read transposed (`TiedEmbedding`'s logits).
    import jax
    import jax.numpy as jnp

    x = rng.normal(size=(2, 16, 32)).astype("float32")
    weight = rng.normal(size=(100, 32) if transposed else (32, 100))
    cotangent = rng.normal(size=(2, 16, 100)).astype("float32")

    def loss(x, weight):
        kernel = weight.T if transposed else weight
        outputs = matmul(x, kernel).astype("float32")
        return (outputs * cotangent).sum()

    x16 = jnp.asarray(x, "bfloat16")
    weight16 = jnp.asarray(weight, "bfloat16")
    x_gradient, weight_gradient = jax.jit(jax.grad(loss, argnums=(0, 1)))(
        x16, weight16
    )
    x_rounded = rounded(x, "bfloat16")
    kernel = rounded(weight, "bfloat16")
    kernel = kernel.T if transposed else kernel
    upstream = rounded(cotangent, "bfloat16")
    assert_rounded_once(
        as_float64(x_gradient),
        upstream @ kernel.T,
        np.abs(upstream) @ np.abs(kernel).T,
        "bfloat16",
    )
    rows, upstream_rows = x_rounded.reshape(-1, 32), upstream.reshape(-1, 100)
    expected = rows.T @ upstream_rows
    magnitude = np.abs(rows).T @ np.abs(upstream_rows)
    if transposed:
        expected, magnitude = expected.T, magnitude.T
    assert_rounded_once(
        as_float64(weight_gradient), expected, magnitude, "bfloat16"
    )
