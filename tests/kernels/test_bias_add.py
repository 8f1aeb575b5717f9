"""`bias_add` against numpy on every backend and dtype policy, and its
float32 bias gradient under JAX."""

import keras
import numpy as np
import pytest

from keras_gmlp.kernels.bias_add import bias_add
from tests.gradients import BACKEND
from tests.gradients import gradients
from tests.rounding import as_float64
from tests.rounding import rounded


class BiasAdd(keras.layers.Layer):
    def __init__(self, axis, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def build(self, input_shape):
        self.bias = self.add_weight(
            shape=(input_shape[self.axis],), initializer="zeros", name="bias"
        )

    def call(self, inputs):
        return bias_add(inputs, self.bias, axis=self.axis)


POLICIES = ["float32", "mixed_bfloat16", "mixed_float16"]


# (4, 6, 6): as many tokens as channels, where `keras.ops.add` under
# TensorFlow adds a `(6, 1)` bias along the channels.
@pytest.mark.parametrize("shape", [(4, 50, 6), (4, 6, 6)])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("axis", [-1, -2])
def test_outputs_and_gradients_match_numpy(policy, axis, shape, rng):
    x = rng.normal(size=shape).astype("float32")
    layer = BiasAdd(axis, dtype=policy)
    layer.build(shape)
    bias = rng.normal(size=(shape[axis],)).astype("float32")
    layer.bias.assign(bias)
    compute_dtype = layer.compute_dtype
    broadcast = (-1,) + (1,) * (-axis - 1)

    outputs = layer(x)
    assert keras.backend.standardize_dtype(outputs.dtype) == compute_dtype
    expected = rounded(x, compute_dtype) + rounded(bias, compute_dtype).reshape(
        broadcast
    )
    # The sum of two rounded values, rounded once.
    bits = {"float32": 24, "bfloat16": 8, "float16": 11}[compute_dtype]
    np.testing.assert_allclose(
        as_float64(outputs), expected, rtol=2.0 ** (1 - bits), atol=0
    )

    cotangent = rng.normal(size=shape).astype("float32")
    # In a model, as in training: a layer's own `stateless_call` (which
    # `gradients` takes under JAX) casts neither inputs nor variables.
    model = keras.Sequential([keras.Input(shape[1:]), layer])
    x_gradient, bias_gradient = gradients(model, x, cotangent, [layer.bias])
    # The upstream gradient is `cotangent` in the compute dtype.
    upstream = rounded(cotangent, compute_dtype)
    np.testing.assert_array_equal(x_gradient, upstream)
    summed_axes = tuple(i for i in range(len(shape)) if i != len(shape) + axis)
    expected_bias_gradient = upstream.sum(axis=summed_axes)
    # Summed exactly enough, then rounded once to the compute dtype (and
    # float32 sums of 200 terms for the float32 policy).
    tolerance = np.abs(upstream).sum(axis=summed_axes) * 2.0 ** (1 - bits)
    tolerance += np.abs(upstream).sum(axis=summed_axes) * 2.0**-20
    np.testing.assert_array_less(
        np.abs(bias_gradient - expected_bias_gradient), tolerance
    )


@pytest.mark.skipif(BACKEND != "jax", reason="JAX's gradient")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("axis", [-1, -2])
def test_jax_bias_gradient_sums_in_float32(dtype, axis):
    # JAX's own gradient of `x + bias` sums the upstream gradient in
    # `dtype`, which XLA:CPU runs 17 times slower than in float32.
    import jax
    import jax.numpy as jnp

    x = jnp.ones((2, 5, 3), dtype)
    bias = jnp.ones((x.shape[axis],), dtype)

    def loss(x, bias):
        return bias_add(x, bias, axis=axis).astype("float32").sum()

    jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1)))(x, bias)
    sums = [
        equation.invars[0].aval.dtype
        for equation in jaxpr.jaxpr.eqns
        if equation.primitive.name == "reduce_sum"
    ]
    assert jnp.dtype("float32") in sums
    assert set(sums) == {jnp.dtype("float32")}


def test_a_non_negative_axis_is_refused():
    with pytest.raises(ValueError, match="axis=1"):
        bias_add(np.zeros((2, 3), "float32"), np.zeros(3, "float32"), axis=1)
