"""The text classifier pools a token that has seen the whole text."""

import keras
import numpy as np
import pytest

from keras_gmlp import models

TINY = dict(
    vocabulary_size=50,
    sequence_length=8,
    num_layers=2,
    hidden_dim=8,
    ffn_dim=16,
)
# Two texts that share their first token ([CLS] = 2) and differ after it;
# the second row is right-padded.
TEXTS = np.array([[2, 9, 4, 4, 7, 1], [2, 30, 11, 0, 0, 0]], "int32")


def array(x):
    return keras.ops.convert_to_numpy(x)


def encode(classifier, ids):
    """The hidden states of the classifier's backbone."""
    backbone = models.text_encoder(classifier)
    return array(backbone({"token_ids": ids, "padding_mask": ids != 0}))


def randomized(model, seed=0):
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(
            rng.normal(0.0, 0.5, tuple(variable.shape)).astype("float32")
        )
    return model


def causal_classifiers():
    return {
        "causal": lambda: models.text_classifier(
            **TINY, causal=True, num_classes=3
        ),
        "causal_lm_encoder": lambda: models.text_classifier(
            encoder=models.causal_lm(**TINY), num_classes=3
        ),
        "amlp_causal": lambda: models.text_classifier(
            **TINY, causal=True, attention_dim=4, num_classes=3
        ),
    }


@pytest.mark.parametrize("kind", sorted(causal_classifiers()))
def test_causal_classifier_reads_the_text(kind):
    classifier = randomized(causal_classifiers()[kind]())
    logits = array(classifier(TEXTS))
    assert np.abs(logits[0] - logits[1]).max() > 1e-3


@pytest.mark.parametrize("kind", sorted(causal_classifiers()))
def test_causal_classifier_pools_the_last_real_token(kind):
    classifier = randomized(causal_classifiers()[kind]())
    hidden = encode(classifier, TEXTS)
    last = hidden[[0, 1], [5, 2]]
    head = classifier.get_layer("head")
    expected = last @ array(head.kernel) + array(head.bias)
    np.testing.assert_allclose(
        array(classifier(TEXTS)), expected, rtol=1e-4, atol=1e-4
    )


def test_bidirectional_classifier_pools_the_first_token():
    classifier = randomized(models.text_classifier(**TINY, num_classes=3))
    hidden = encode(classifier, TEXTS)
    head = classifier.get_layer("head")
    expected = hidden[:, 0] @ array(head.kernel) + array(head.bias)
    np.testing.assert_allclose(
        array(classifier(TEXTS)), expected, rtol=1e-4, atol=1e-4
    )


def test_causal_classifier_round_trips(tmp_path):
    classifier = randomized(
        models.text_classifier(**TINY, causal=True, num_classes=3)
    )
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_allclose(
        array(reloaded(TEXTS)), array(classifier(TEXTS)), rtol=1e-5, atol=1e-5
    )
