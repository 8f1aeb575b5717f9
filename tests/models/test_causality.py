"""Causality of the text models for every padding pattern.

A causal model's logits at positions `0..p-1` must not depend on the token
at position `p`, whatever padding the row holds: left (padding before the
text), right (padding after it), none, or a row of padding only.
"""

import keras
import numpy as np
import pytest

from keras_gmlp import models

TINY = dict(
    vocabulary_size=23,
    sequence_length=12,
    num_layers=2,
    hidden_dim=8,
    ffn_dim=16,
    attention_dim=4,
)

# Rows of 12 ids; 0 is [PAD]. The token at CHANGED is real in every row
# except the all-padding row, where it turns a padding id into a token.
CHANGED = 9
ROWS = {
    "left": [0, 0, 5, 7, 3, 9, 11, 2, 4, 6, 8, 10],
    "right": [5, 7, 3, 9, 11, 2, 4, 6, 8, 10, 0, 0],
    "none": [5, 7, 3, 9, 11, 2, 4, 6, 8, 10, 12, 1],
    "all_padding": [0] * 12,
}


def randomized(model, seed=0):
    """Random weights everywhere: a fresh model's spatial weights are
    near zero and would hide a leak through them."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(
            rng.normal(0.0, 0.5, tuple(variable.shape)).astype("float32")
        )
    return model


def logits_moved(model, row):
    ids = np.array([row], "int32")
    changed = ids.copy()
    changed[0, CHANGED] = 17
    before = keras.ops.convert_to_numpy(model(ids))
    after = keras.ops.convert_to_numpy(model(changed))
    return np.abs(after - before).max(axis=(0, 2))


@pytest.fixture(scope="module", params=["dense", "toeplitz"])
def causal_model(request):
    return randomized(models.causal_lm(**TINY, spatial=request.param))


@pytest.mark.parametrize("padding", sorted(ROWS))
def test_causal_lm_does_not_see_the_future(causal_model, padding):
    moved = logits_moved(causal_model, ROWS[padding])
    np.testing.assert_array_equal(moved[:CHANGED], 0.0)
    # The change does reach its own position: the comparison can fail.
    assert moved[CHANGED] > 1e-3


@pytest.mark.parametrize("padding", sorted(ROWS))
def test_masked_lm_does_see_the_future(padding):
    # Control: the same change in a bidirectional model moves the earlier
    # real positions, so the test above would see a leak.
    model = randomized(models.masked_lm(**TINY, spatial="dense"))
    moved = logits_moved(model, ROWS[padding])
    assert moved[:CHANGED].max() > 1e-3


@pytest.mark.parametrize("padding", sorted(ROWS))
def test_causal_text_classifier_does_not_see_the_future(padding):
    # The encoder of a causal text classifier is causal too.
    classifier = randomized(models.text_classifier(**TINY, causal=True))
    backbone = models.text_encoder(classifier)

    def encoder(ids):
        return backbone({"token_ids": ids, "padding_mask": ids != 0})

    moved = logits_moved(encoder, ROWS[padding])
    np.testing.assert_array_equal(moved[:CHANGED], 0.0)
    assert moved[CHANGED] > 1e-3
