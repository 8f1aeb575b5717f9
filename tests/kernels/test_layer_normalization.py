"""`layer_norm`, a `keras.layers.LayerNormalization`'s call with a
closed-form gradient (under JAX and TensorFlow), against numpy and Keras'
own call: outputs, and gradients by central finite differences."""

import keras
import numpy as np
import pytest

from keras_gmlp.kernels.direct_call import direct_call
from keras_gmlp.kernels.layer_normalization import layer_norm
from tests.gradients import gradients

BACKEND = keras.config.backend()


def reference(x, gamma, beta, epsilon, axis=-1):
    """Layer normalisation in float64 numpy."""
    x = x.astype("float64")
    mean = x.mean(axis=axis, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    normalized = (x - mean) / np.sqrt(variance + epsilon)
    return normalized * gamma.reshape(shape) + beta.reshape(shape)


class NormKernel(keras.layers.Layer):
    """`layer_norm` of a LayerNormalization, as the gMLP block's kernel
    calls it."""

    def __init__(self, norm, **kwargs):
        super().__init__(**kwargs)
        self.norm = norm
        self.built = norm.built

    def call(self, inputs):
        return direct_call(self.norm, inputs, method=layer_norm)


def built_layer(shape, rng, **kwargs):
    layer = keras.layers.LayerNormalization(**kwargs)
    layer.build(shape)
    for weight in layer.weights:
        weight.assign(1.0 + 0.5 * rng.normal(size=weight.shape))
    return layer


def as_numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def weight_values(layer, size):
    gamma = keras.ops.convert_to_numpy(layer.gamma) if layer.scale else None
    beta = keras.ops.convert_to_numpy(layer.beta) if layer.center else None
    return (
        np.ones(size) if gamma is None else gamma.astype("float64"),
        np.zeros(size) if beta is None else beta.astype("float64"),
    )


def finite_differences(function, value, step=1e-6):
    """d function(value) / d value, central differences, float64."""
    grad = np.zeros_like(value)
    for index in np.ndindex(value.shape):
        up, down = value.copy(), value.copy()
        up[index] += step
        down[index] -= step
        grad[index] = (function(up) - function(down)) / (2 * step)
    return grad


@pytest.mark.parametrize(
    "center,scale", [(True, True), (False, True), (True, False)]
)
@pytest.mark.parametrize("shape", [(2, 5, 7), (3, 4)])
def test_outputs_match_numpy(shape, center, scale, rng):
    x = (3.0 + 2.0 * rng.normal(size=shape)).astype("float32")
    layer = built_layer(shape, rng, epsilon=1e-5, center=center, scale=scale)
    gamma, beta = weight_values(layer, shape[-1])
    outputs = as_numpy(NormKernel(layer)(x))
    expected = reference(x, gamma, beta, 1e-5)
    np.testing.assert_allclose(outputs, expected, rtol=0, atol=2e-5)
    np.testing.assert_allclose(outputs, as_numpy(layer(x)), rtol=0, atol=2e-5)


@pytest.mark.parametrize(
    "policy, bits", [("mixed_bfloat16", 8), ("mixed_float16", 11)]
)
def test_outputs_under_mixed_precision(policy, bits, rng):
    keras.config.set_dtype_policy(policy)
    half = policy.split("_")[1]
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    layer = built_layer(x.shape, rng, epsilon=1e-6)
    outputs = NormKernel(layer)(keras.ops.cast(x, half))
    assert keras.backend.standardize_dtype(outputs.dtype) == half
    assert keras.backend.standardize_dtype(layer.gamma.dtype) == "float32"
    gamma, beta = weight_values(layer, 8)
    expected = reference(
        keras.ops.convert_to_numpy(
            keras.ops.cast(keras.ops.cast(x, half), "float32")
        ),
        gamma,
        beta,
        1e-6,
    )
    outputs = as_numpy(outputs)
    # One rounding to the half type: 2^-bits of the largest output.
    tolerance = np.abs(expected).max() * 2**-bits
    np.testing.assert_allclose(outputs, expected, rtol=0, atol=tolerance)
    # Keras' own call, rounded once too.
    by_keras = as_numpy(layer(keras.ops.cast(x, half)))
    np.testing.assert_allclose(outputs, by_keras, rtol=0, atol=2 * tolerance)


def test_input_gradient_under_mixed_bfloat16(rng):
    keras.config.set_dtype_policy("mixed_bfloat16")
    x = rng.normal(size=(4, 16)).astype("float32")
    layer = built_layer(x.shape, rng, epsilon=1e-6)
    cotangent = rng.normal(size=x.shape).astype("float32")
    gamma, _ = weight_values(layer, 16)
    rounded = keras.ops.convert_to_numpy(
        keras.ops.cast(keras.ops.cast(x, "bfloat16"), "float32")
    ).astype("float64")
    # d/dx of sum(cotangent * LayerNorm(x)), in closed form in float64.
    mean = rounded.mean(-1, keepdims=True)
    inverse_std = 1 / np.sqrt(((rounded - mean) ** 2).mean(-1, keepdims=True))
    normal = (rounded - mean) * inverse_std
    scaled = cotangent * gamma
    expected = inverse_std * (
        scaled
        - scaled.mean(-1, keepdims=True)
        - normal * (scaled * normal).mean(-1, keepdims=True)
    )
    (by_input, *_) = gradients(
        NormKernel(layer), keras.ops.cast(x, "bfloat16"), cotangent, []
    )
    np.testing.assert_allclose(
        by_input, expected, rtol=0, atol=np.abs(expected).max() * 2**-6
    )


@pytest.mark.xfail(
    BACKEND == "torch",
    reason="Keras 3.15's torch layer_normalization hands axis=1 of a 3-D "
    "input to F.layer_norm, which normalises the trailing axis",
    strict=True,
)
def test_another_axis_normalises_that_axis(rng):
    x = rng.normal(size=(2, 6, 3)).astype("float32")
    layer = built_layer(x.shape, rng, axis=1, epsilon=1e-3)
    gamma, beta = weight_values(layer, 6)
    outputs = as_numpy(NormKernel(layer)(x))
    expected = reference(x, gamma, beta, 1e-3, axis=1)
    np.testing.assert_allclose(outputs, expected, rtol=0, atol=2e-5)


# 6 rows, and 16: TensorFlow sums those in two stages (`column_sum`).
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 8, 5)])
@pytest.mark.parametrize("center,scale", [(True, True), (False, False)])
def test_gradients_match_finite_differences(center, scale, shape, rng):
    x = (1.0 + rng.normal(size=shape)).astype("float32")
    cotangent = rng.normal(size=shape).astype("float32")
    layer = built_layer(shape, rng, epsilon=1e-3, center=center, scale=scale)
    gamma, beta = weight_values(layer, shape[-1])
    x64, cotangent64 = x.astype("float64"), cotangent.astype("float64")

    def loss(x=x64, gamma=gamma, beta=beta):
        return (reference(x, gamma, beta, 1e-3) * cotangent64).sum()

    grads = gradients(NormKernel(layer), x, cotangent, layer.trainable_weights)
    by_keras = gradients(layer, x, cotangent, layer.trainable_weights)
    expected = [finite_differences(lambda v: loss(x=v), x64)]
    if scale:
        expected.append(finite_differences(lambda v: loss(gamma=v), gamma))
    if center:
        expected.append(finite_differences(lambda v: loss(beta=v), beta))
    # Keras orders a LayerNormalization's weights gamma, beta.
    assert len(grads) == len(expected)
    for actual, keras_value, wanted in zip(
        grads, by_keras, expected, strict=True
    ):
        np.testing.assert_allclose(actual, wanted, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(actual, keras_value, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's XLA sums")
@pytest.mark.parametrize(
    "shape", [(8, 3), (2, 12, 5), (3, 4, 2, 7), (7, 3), (5, 6, 4)]
)
def test_column_sum_is_the_sum_over_every_axis_but_the_last(shape, rng):
    import tensorflow as tf

    from keras_gmlp.kernels.layer_normalization import column_sum

    x = rng.normal(size=shape).astype("float32")
    compiled = tf.function(column_sum, jit_compile=True)
    for function in (column_sum, compiled):
        summed = function(tf.constant(x)).numpy()
        expected = x.astype("float64").reshape(-1, shape[-1]).sum(axis=0)
        assert summed.shape == (shape[-1],)
        np.testing.assert_allclose(summed, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's XLA means")
@pytest.mark.parametrize("shape", [(4, 3), (2, 6, 40), (3, 2, 5, 33)])
def test_row_mean_is_the_mean_over_the_last_axis(shape, rng):
    import tensorflow as tf

    from keras_gmlp.kernels.layer_normalization import row_mean

    x = (3.0 + rng.normal(size=shape)).astype("float32")
    compiled = tf.function(row_mean, jit_compile=True)
    expected = x.astype("float64").mean(axis=-1, keepdims=True)
    for function in (row_mean, compiled):
        mean = function(tf.constant(x)).numpy()
        assert mean.shape == shape[:-1] + (1,)
        np.testing.assert_allclose(mean, expected, rtol=1e-6, atol=0)
    # A tensor of unknown width is averaged too.
    unknown = tf.function(
        row_mean, input_signature=[tf.TensorSpec([None] * len(shape))]
    )
    np.testing.assert_allclose(
        unknown(tf.constant(x)).numpy(), expected, rtol=1e-6, atol=0
    )


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's XLA means")
def test_tensorflow_norm_functions_reduce_over_rows_only():
    # XLA:CPU splits a reduction over many values into a reduce-window and
    # a reduce; the norm's means over the channels are dots instead
    # (`row_mean`), and only the weights' gradients reduce, over the rows.
    import re

    import tensorflow as tf

    from keras_gmlp.kernels.layer_normalization import _tensorflow_layer_norm

    layer_norm = _tensorflow_layer_norm()
    x = tf.ones((2, 6, 40))
    gamma = tf.ones((40,))
    forward = layer_norm.forward.experimental_get_compiler_ir(
        x, gamma, gamma, 1e-6
    )(stage="hlo")
    backward = layer_norm.backward.experimental_get_compiler_ir(
        x, gamma, 1e-6, x
    )(stage="hlo")
    for hlo, dots in ((forward, 2), (backward, 4)):
        reduced = re.findall(r" reduce\(.*?dimensions=\{([\d,]*)\}", hlo)
        assert set(reduced) <= {"0"}, reduced
        assert len(re.findall(r" dot\(", hlo)) == dots
