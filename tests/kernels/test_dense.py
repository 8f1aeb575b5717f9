"""keras_gmlp's Dense (a fused bias under torch) against numpy: outputs
under every dtype policy, gradients, LoRA, no bias, saving."""

import keras
import numpy as np
import pytest

from keras_gmlp.layers import Dense
from tests.gradients import gradients


def built_dense(input_shape, units, rng, **kwargs):
    layer = Dense(units, **kwargs)
    layer.build(input_shape)
    for weight in layer.weights:
        weight.assign(rng.normal(size=weight.shape))
    return layer


def numpy_weights(layer):
    kernel = keras.ops.convert_to_numpy(layer.kernel).astype("float64")
    if layer.bias is None:
        return kernel, np.zeros(kernel.shape[-1])
    return kernel, keras.ops.convert_to_numpy(layer.bias).astype("float64")


@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 5), (2, 3, 4, 5)])
def test_outputs_match_numpy(shape, use_bias, rng):
    x = rng.normal(size=shape).astype("float32")
    layer = built_dense(shape, 6, rng, use_bias=use_bias, activation="relu")
    kernel, bias = numpy_weights(layer)
    expected = np.maximum(x.astype("float64") @ kernel + bias, 0.0)
    outputs = keras.ops.convert_to_numpy(layer(x))
    assert outputs.shape == shape[:-1] + (6,)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_outputs_under_mixed_policies(policy, rng):
    keras.config.set_dtype_policy(policy)
    x = rng.normal(size=(2, 3, 8)).astype("float32")
    layer = built_dense(x.shape, 4, rng)
    compute_dtype = layer.compute_dtype
    outputs = layer(x)
    assert keras.backend.standardize_dtype(outputs.dtype) == compute_dtype
    assert keras.backend.standardize_dtype(layer.kernel.dtype) == "float32"

    def rounded(values):
        return keras.ops.convert_to_numpy(
            keras.ops.cast(keras.ops.cast(values, compute_dtype), "float32")
        ).astype("float64")

    kernel, bias = numpy_weights(layer)
    expected = rounded(x) @ rounded(kernel) + rounded(bias)
    outputs = keras.ops.convert_to_numpy(keras.ops.cast(outputs, "float32"))
    # 8 (bfloat16) or 11 (float16) significant bits, 8 terms summed.
    bits = 8 if compute_dtype == "bfloat16" else 11
    tolerance = np.abs(expected).max() * 2.0 ** (2 - bits)
    np.testing.assert_allclose(outputs, expected, rtol=0, atol=tolerance)


def test_gradients_match_numpy(rng):
    x = rng.normal(size=(2, 3, 5)).astype("float32")
    cotangent = rng.normal(size=(2, 3, 4)).astype("float32")
    layer = built_dense(x.shape, 4, rng)
    kernel, _ = numpy_weights(layer)
    grads = gradients(layer, x, cotangent, [layer.kernel, layer.bias])
    g = cotangent.astype("float64")
    expected = [
        g @ kernel.T,
        np.einsum("btc,btu->cu", x.astype("float64"), g),
        g.sum(axis=(0, 1)),
    ]
    for actual, wanted in zip(grads, expected, strict=True):
        np.testing.assert_allclose(actual, wanted, rtol=1e-5, atol=1e-5)


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
    outputs = keras.ops.convert_to_numpy(layer(x))
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)


def test_model_quantize_quantizes_it_and_keeps_its_outputs(rng):
    x = rng.normal(size=(3, 16)).astype("float32")
    layer = built_dense(x.shape, 8, rng)
    kernel, bias = numpy_weights(layer)
    inputs = keras.Input((16,))
    model = keras.Model(inputs, layer(inputs))
    model.quantize("int8")
    assert layer.quantization_mode == "int8"
    expected = x.astype("float64") @ kernel + bias
    outputs = keras.ops.convert_to_numpy(model(x))
    # int8 weights per output channel, int8 inputs per row: about 1 %.
    scale = np.abs(expected).max()
    np.testing.assert_allclose(outputs, expected, rtol=0, atol=0.03 * scale)


def test_is_a_keras_dense_and_round_trips(rng, tmp_path):
    inputs = keras.Input((3, 5))
    model = keras.Model(inputs, Dense(4, name="dense")(inputs))
    x = rng.normal(size=(2, 3, 5)).astype("float32")
    path = tmp_path / "dense.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    layer = restored.get_layer("dense")
    assert type(layer) is Dense
    assert isinstance(layer, keras.layers.Dense)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(restored(x)),
        keras.ops.convert_to_numpy(model(x)),
        rtol=0,
        atol=0,
    )
