import keras
import numpy as np
import pytest

from keras_gmlp.layers import TinyAttention
from tests import reference


def numpy_weights(layer):
    return [
        keras.ops.convert_to_numpy(w)
        for w in (
            layer.qkv.kernel,
            layer.qkv.bias,
            layer.output_projection.kernel,
            layer.output_projection.bias,
        )
    ]


def randomize(layer, rng):
    for weight in layer.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32") * 0.5)


def test_matches_numpy_formula(rng):
    x = rng.normal(size=(2, 6, 10)).astype("float32")
    layer = TinyAttention(4, output_dim=7)
    layer.build(x.shape)
    randomize(layer, rng)
    expected = reference.tiny_attention(x, *numpy_weights(layer))
    output = keras.ops.convert_to_numpy(layer(x))
    assert output.shape == (2, 6, 7)
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


def test_causal_matches_lower_triangular_formula(rng):
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    layer = TinyAttention(4, causal=True)
    layer.build(x.shape)
    randomize(layer, rng)
    mask = np.tril(np.ones((5, 5), bool))[None]
    expected = reference.tiny_attention(x, *numpy_weights(layer), mask=mask)
    output = keras.ops.convert_to_numpy(layer(x))
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [True, False])
def test_causality_by_perturbation(causal, rng):
    x = rng.normal(size=(1, 7, 8)).astype("float32")
    layer = TinyAttention(4, causal=causal)
    perturbed = x.copy()
    perturbed[:, 3] = rng.normal(size=(1, 8))
    moved = np.abs(
        keras.ops.convert_to_numpy(layer(perturbed))
        - keras.ops.convert_to_numpy(layer(x))
    ).max(axis=(0, 2))
    assert moved[3] > 1e-6
    assert (moved[:3] > 1e-6).any() == (not causal)


def test_padding_mask_hides_padded_keys(rng):
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    padding_mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    layer = TinyAttention(4)
    layer.build(x.shape)
    randomize(layer, rng)
    expected = reference.tiny_attention(
        x, *numpy_weights(layer), mask=padding_mask[:, None, :]
    )
    output = keras.ops.convert_to_numpy(layer(x, padding_mask=padding_mask))
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)
    # Changing a padded token moves no real token's output.
    changed = x.copy()
    changed[0, 5] = 100.0
    moved = keras.ops.convert_to_numpy(
        layer(changed, padding_mask=padding_mask)
    )
    np.testing.assert_allclose(moved[0, :4], output[0, :4], atol=1e-5)


def test_mixed_precision_softmax_in_float32(rng):
    layer = TinyAttention(4, dtype="mixed_bfloat16")
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    output = layer(x)
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert all(w.dtype == "float32" for w in layer.weights)
    # Large logits would overflow a bfloat16 exponent sum; float32 stays
    # finite.
    big = x * 1e3
    assert np.isfinite(
        keras.ops.convert_to_numpy(keras.ops.cast(layer(big), "float32"))
    ).all()


def test_invalid_attention_dim():
    with pytest.raises(ValueError, match="attention_dim=0"):
        TinyAttention(0)


def test_config_round_trip():
    layer = TinyAttention(16, output_dim=24, causal=True)
    config = layer.get_config()
    assert TinyAttention.from_config(config).get_config() == config
