import keras
import numpy as np
import pytest

from keras_gmlp.layers import TinyAttention
from tests import reference
from tests.gradients import assert_gradients_close
from tests.gradients import gradients as layer_gradients
from tests.layer_test import LayerTestCase
from tests.layer_test import randomize_weights


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


def test_matches_numpy_formula(rng):
    x = rng.normal(size=(2, 6, 10)).astype("float32")
    layer = TinyAttention(4, output_dim=7)
    layer.build(x.shape)
    randomize_weights(layer, rng, scale=0.5)
    expected = reference.tiny_attention(x, *numpy_weights(layer))
    output = keras.ops.convert_to_numpy(layer(x))
    assert output.shape == (2, 6, 7)
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


def test_causal_matches_lower_triangular_formula(rng):
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    layer = TinyAttention(4, causal=True)
    layer.build(x.shape)
    randomize_weights(layer, rng, scale=0.5)
    mask = np.tril(np.ones((5, 5), bool))[None]
    expected = reference.tiny_attention(x, *numpy_weights(layer), mask=mask)
    output = keras.ops.convert_to_numpy(layer(x))
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


# One row per padding pattern a user meets; 1 marks a real token.
PADDINGS = {
    "no padding": [1, 1, 1, 1, 1, 1],
    "left padding": [0, 0, 1, 1, 1, 1],
    "right padding": [1, 1, 1, 1, 0, 0],
    "padding only": [0, 0, 0, 0, 0, 0],
}


def moved_by_each_token(layer, x, padding_mask, rng):
    """`moved[j, b, i]`: how far output `i` of row `b` moves with token `j`."""
    before = keras.ops.convert_to_numpy(layer(x, padding_mask=padding_mask))
    moved = []
    for j in range(x.shape[1]):
        perturbed = x.copy()
        perturbed[:, j] = rng.normal(size=perturbed[:, j].shape)
        after = layer(perturbed, padding_mask=padding_mask)
        moved.append(np.abs(keras.ops.convert_to_numpy(after) - before).max(-1))
    return np.stack(moved)


@pytest.mark.parametrize("causal", [True, False])
def test_causality_by_perturbation_for_every_padding(causal, rng):
    x = rng.normal(size=(len(PADDINGS), 6, 8)).astype("float32")
    padding_mask = np.array(list(PADDINGS.values()), bool)
    layer = TinyAttention(4, causal=causal)
    layer.build(x.shape)
    randomize_weights(layer, rng, scale=0.5)
    moved = moved_by_each_token(layer, x, padding_mask, rng)
    for row, name in enumerate(PADDINGS):
        # Largest move of an output before the changed token.
        leak = max(moved[j, row, :j].max() for j in range(1, 6))
        if causal:
            assert leak < 1e-6, f"{name}: an earlier output moved by {leak}"
        elif name != "padding only":
            assert leak > 1e-3, f"{name}: the attention does not look ahead"


def test_query_without_visible_key_attends_to_nothing(rng):
    x = rng.normal(size=(2, 4, 8)).astype("float32")
    padding_mask = np.array([[0, 0, 0, 0], [0, 1, 1, 1]], bool)
    layer = TinyAttention(4, causal=True)
    layer.build(x.shape)
    randomize_weights(layer, rng, scale=0.5)
    output = keras.ops.convert_to_numpy(layer(x, padding_mask=padding_mask))
    bias = keras.ops.convert_to_numpy(layer.output_projection.bias)
    # Every query of the first row and query 0 of the second see no real
    # key: their attended value is zero, their output the projection bias.
    np.testing.assert_allclose(output[0], np.broadcast_to(bias, (4, 8)))
    np.testing.assert_allclose(output[1, 0], bias)
    assert np.abs(output[1, 1:] - bias).min() > 1e-4


def test_padding_mask_hides_padded_keys(rng):
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    padding_mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    layer = TinyAttention(4)
    layer.build(x.shape)
    randomize_weights(layer, rng, scale=0.5)
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


def finite_difference_gradients(function, arrays, cotangent, step=1e-4):
    """d sum(function(*arrays) * cotangent) / d each array, by central
    differences in float64."""
    arrays = [np.array(a, "float64") for a in arrays]
    grads = []
    for array in arrays:
        grad = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            value = array[index]
            array[index] = value + step
            plus = (function(*arrays) * cotangent).sum()
            array[index] = value - step
            minus = (function(*arrays) * cotangent).sum()
            array[index] = value
            grad[index] = (plus - minus) / (2 * step)
        grads.append(grad)
    return grads


@pytest.mark.parametrize("causal", [True, False])
def test_gradients_match_finite_differences_for_every_padding(causal, rng):
    """Every row of `PADDINGS`, with queries that see no key among them
    (padding only; under the causal mask the left padding's): their
    gradients are zero, not NaN (under torch the fused kernel must never
    see a fully masked row)."""
    x = rng.normal(size=(len(PADDINGS), 6, 8)).astype("float32")
    padding_mask = np.array(list(PADDINGS.values()), bool)
    layer = TinyAttention(4, output_dim=5, causal=causal)
    layer.build(x.shape)
    randomize_weights(layer, rng, scale=0.5)
    cotangent = rng.normal(size=(len(PADDINGS), 6, 5)).astype("float32")
    weights = [
        layer.qkv.kernel,
        layer.qkv.bias,
        layer.output_projection.kernel,
        layer.output_projection.bias,
    ]
    got = layer_gradients(
        layer, x, cotangent, weights, padding_mask=padding_mask
    )
    mask = padding_mask[:, None, :]
    if causal:
        mask = mask & np.tril(np.ones((6, 6), bool))

    def formula(x, *weights):
        return reference.tiny_attention(x, *weights, mask=mask)

    want = finite_difference_gradients(
        formula, [x, *numpy_weights(layer)], cotangent
    )
    assert all(np.isfinite(g).all() for g in got)
    assert_gradients_close(got, want, 1e-4)


def test_mixed_precision_softmax_in_float32():
    """Scores ~45 whose steps (0.35) are near bfloat16's spacing there (0.25).

    Weights are set so that queries, keys and values are exact in bfloat16:
    every query attends with scores `(128 + j) / sqrt(8)` to the keys
    `j = 0..7`, whose values are one-hot, and the output projection is the
    identity, so the output is the softmax itself. A float32 softmax is off
    by bfloat16's final rounding only (< 0.4 %); any step that rounds the
    scaled scores to bfloat16 moves the weights by up to 13 %.
    """
    tokens, dim = 8, 8
    layer = TinyAttention(dim, output_dim=dim, dtype="mixed_bfloat16")
    layer.build((1, tokens, 2 + tokens))
    qkv = np.zeros((2 + tokens, 3 * dim), "float32")
    qkv[0, 0] = 16.0  # query (16, 0, ...)
    qkv[0, dim] = 8.0  # key j: (8 + j / 16, 0, ...)
    qkv[1, dim] = 1.0 / 16.0
    qkv[2:, 2 * dim :] = np.eye(tokens)  # value j: one-hot j
    layer.qkv.kernel.assign(qkv)
    layer.qkv.bias.assign(np.zeros(3 * dim, "float32"))
    layer.output_projection.kernel.assign(np.eye(dim, dtype="float32"))
    layer.output_projection.bias.assign(np.zeros(dim, "float32"))
    positions = np.arange(tokens, dtype="float32")
    x = np.concatenate(
        [np.ones((tokens, 1)), positions[:, None], np.eye(tokens)], axis=-1
    )[None].astype("float32")

    output = layer(x)

    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert all(w.dtype == "float32" for w in layer.weights)
    expected = reference.softmax((128.0 + positions) / np.sqrt(8.0))
    output = keras.ops.convert_to_numpy(keras.ops.cast(output, "float32"))
    np.testing.assert_allclose(
        output[0], np.broadcast_to(expected, (tokens, tokens)), rtol=1e-2
    )


def test_invalid_attention_dim():
    with pytest.raises(ValueError, match="attention_dim=0"):
        TinyAttention(0)


class TinyAttentionLayerTest(LayerTestCase):
    def test_layer_behaviors(self):
        rng = np.random.default_rng(0)
        self.run_layer_test(
            cls=TinyAttention,
            init_kwargs={
                "attention_dim": 4,
                "output_dim": 5,
                "causal": True,
                "kernel_initializer": "he_normal",
            },
            input_data=rng.normal(size=(2, 6, 8)).astype("float32"),
            expected_output_shape=(2, 6, 5),
            padding_mask=np.array(
                [PADDINGS["left padding"], PADDINGS["right padding"]], bool
            ),
            expected_num_trainable_weights=4,
        )
