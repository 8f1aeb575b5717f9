"""`dense_call`, a `keras.layers.Dense`'s call with its bias fused (one
kernel under torch), against numpy and Keras' own call: outputs under
every dtype policy, gradients, LoRA, no bias, an activation, quantized."""

import keras
import numpy as np
import pytest

from keras_gmlp.kernels.dense import dense_call
from keras_gmlp.kernels.direct_call import direct_call
from tests.gradients import gradients


class DenseKernel(keras.layers.Layer):
    """`dense_call` of a Dense, as the gMLP block's kernel calls it."""

    def __init__(self, dense, **kwargs):
        super().__init__(**kwargs)
        self.dense = dense
        self.built = dense.built

    def call(self, inputs):
        return direct_call(self.dense, inputs, method=dense_call)


def built_dense(input_shape, units, rng, **kwargs):
    layer = keras.layers.Dense(units, **kwargs)
    layer.build(input_shape)
    for weight in layer.weights:
        weight.assign(rng.normal(size=weight.shape))
    return layer


def numpy_weights(layer):
    kernel = keras.ops.convert_to_numpy(layer.kernel).astype("float64")
    if layer.bias is None:
        return kernel, np.zeros(kernel.shape[-1])
    return kernel, keras.ops.convert_to_numpy(layer.bias).astype("float64")


def as_numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


@pytest.mark.parametrize("activation", [None, "relu"])
@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 5), (2, 3, 4, 5)])
def test_outputs_match_numpy_and_keras(shape, use_bias, activation, rng):
    x = rng.normal(size=shape).astype("float32")
    layer = built_dense(shape, 6, rng, use_bias=use_bias, activation=activation)
    kernel, bias = numpy_weights(layer)
    expected = x.astype("float64") @ kernel + bias
    if activation == "relu":
        expected = np.maximum(expected, 0.0)
    outputs = as_numpy(dense_call(layer, keras.ops.convert_to_tensor(x)))
    assert outputs.shape == shape[:-1] + (6,)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        outputs, as_numpy(layer(x)), rtol=1e-6, atol=1e-6
    )


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_outputs_under_mixed_policies(policy, rng):
    keras.config.set_dtype_policy(policy)
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    layer = built_dense(x.shape, 4, rng)
    compute_dtype = layer.compute_dtype
    outputs = direct_call(layer, x, method=dense_call)
    assert keras.backend.standardize_dtype(outputs.dtype) == compute_dtype
    assert keras.backend.standardize_dtype(layer.kernel.dtype) == "float32"

    def rounded(values):
        return keras.ops.convert_to_numpy(
            keras.ops.cast(keras.ops.cast(values, compute_dtype), "float32")
        ).astype("float64")

    kernel, bias = numpy_weights(layer)
    expected = rounded(x) @ rounded(kernel) + rounded(bias)
    # 8 (bfloat16) or 11 (float16) significant bits, 8 terms summed.
    bits = 8 if compute_dtype == "bfloat16" else 11
    tolerance = np.abs(expected).max() * 2.0 ** (2 - bits)
    np.testing.assert_allclose(
        as_numpy(outputs), expected, rtol=0, atol=tolerance
    )
    # Keras' own call rounds as often.
    np.testing.assert_allclose(
        as_numpy(outputs), as_numpy(layer(x)), rtol=0, atol=tolerance
    )


def test_gradients_match_numpy_and_keras(rng):
    x = rng.normal(size=(2, 3, 5)).astype("float32")
    cotangent = rng.normal(size=(2, 3, 4)).astype("float32")
    layer = built_dense(x.shape, 4, rng)
    kernel, _ = numpy_weights(layer)
    weights = [layer.kernel, layer.bias]
    got = gradients(DenseKernel(layer), x, cotangent, weights)
    by_keras = gradients(layer, x, cotangent, weights)
    g = cotangent.astype("float64")
    expected = [
        g @ kernel.T,
        np.einsum("btc,btu->cu", x.astype("float64"), g),
        g.sum(axis=(0, 1)),
    ]
    for actual, keras_value, wanted in zip(
        got, by_keras, expected, strict=True
    ):
        np.testing.assert_allclose(actual, wanted, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(actual, keras_value, rtol=1e-5, atol=1e-6)


def test_lora_adds_its_low_rank_product(rng):
    x = rng.normal(size=(3, 5)).astype("float32")
    layer = built_dense(x.shape, 4, rng)
    kernel, bias = numpy_weights(layer)
    layer.enable_lora(2)
    layer.lora_kernel_b.assign(rng.normal(size=(2, 4)))
    a = keras.ops.convert_to_numpy(layer.lora_kernel_a).astype("float64")
    b = keras.ops.convert_to_numpy(layer.lora_kernel_b).astype("float64")
    scale = layer.lora_alpha / layer.lora_rank
    expected = x.astype("float64") @ (kernel + scale * a @ b) + bias
    outputs = as_numpy(direct_call(layer, x, method=dense_call))
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outputs, as_numpy(layer(x)))


def test_a_quantized_dense_computes_its_quantized_call(rng):
    x = rng.normal(size=(3, 16)).astype("float32")
    layer = built_dense(x.shape, 8, rng)
    kernel, bias = numpy_weights(layer)
    inputs = keras.Input((16,))
    model = keras.Model(inputs, layer(inputs))
    model.quantize("int8")
    assert layer.quantization_mode == "int8"
    outputs = as_numpy(direct_call(layer, x, method=dense_call))
    np.testing.assert_array_equal(outputs, as_numpy(layer(x)))
    # int8 weights per output channel, int8 inputs per row: about 1 %.
    expected = x.astype("float64") @ kernel + bias
    scale = np.abs(expected).max()
    np.testing.assert_allclose(outputs, expected, rtol=0, atol=0.03 * scale)
