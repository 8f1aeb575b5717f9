import keras
import numpy as np
import pytest
from sklearn.metrics import f1_score

from keras_gmlp import kernels
from keras_gmlp.models.gmlp_text.text_metrics import LanguageModelLoss
from keras_gmlp.models.gmlp_text.text_metrics import Perplexity
from keras_gmlp.models.gmlp_text.text_metrics import TokenAccuracy
from keras_gmlp.models.gmlp_text.text_metrics import binary_f1
from keras_gmlp.models.gmlp_text.text_metrics import language_model_loss
from keras_gmlp.models.gmlp_text.text_metrics import language_model_metrics
from keras_gmlp.models.gmlp_text.text_metrics import token_accuracy
from keras_gmlp.models.gmlp_text.text_metrics import token_cross_entropy


@pytest.fixture(params=["off", "on"], ids=["reference", "kernels"])
def kernels_mode(request):
    """The reference path, then every kernel (back to `"auto"` after)."""
    kernels.configure(request.param)
    yield request.param
    kernels.configure("auto")


def numpy_token_cross_entropy(labels, logits):
    logits = logits.astype("float64")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probabilities = shifted - np.log(
        np.exp(shifted).sum(axis=-1, keepdims=True)
    )
    return -np.take_along_axis(log_probabilities, labels[..., None], -1)[..., 0]


def test_binary_f1_matches_scikit_learn(rng):
    labels = rng.integers(0, 2, 200)
    predictions = rng.integers(0, 2, 200)
    assert binary_f1(labels, predictions) == pytest.approx(
        f1_score(labels, predictions)
    )
    assert binary_f1(np.array([1, 0]), np.array([0, 0])) == 0.0


@pytest.mark.parametrize("shape", [(6,), (3, 5), (2, 3, 4)])
def test_token_cross_entropy_matches_numpy(shape, kernels_mode, rng):
    logits = rng.normal(scale=3.0, size=(*shape, 11)).astype("float32")
    labels = rng.integers(0, 11, shape)
    losses = keras.ops.convert_to_numpy(token_cross_entropy(labels, logits))
    assert losses.shape == shape
    np.testing.assert_allclose(
        losses, numpy_token_cross_entropy(labels, logits), rtol=1e-5
    )
    probabilities = keras.ops.convert_to_numpy(
        keras.ops.softmax(logits, axis=-1)
    )
    from_probabilities = token_cross_entropy(
        labels, probabilities, from_logits=False
    )
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(from_probabilities),
        numpy_token_cross_entropy(labels, logits),
        rtol=1e-4,
    )


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_language_model_loss_is_the_mean_over_weighted_positions(
    dtype, kernels_mode, rng
):
    logits = rng.normal(scale=3.0, size=(4, 5, 13)).astype("float32")
    labels = rng.integers(0, 13, (4, 5))
    weights = (rng.random((4, 5)) < 0.4).astype("float32")
    weights[0, 0] = 1.0  # at least one position counts
    losses = numpy_token_cross_entropy(labels, logits)
    expected = (losses * weights).sum() / weights.sum()
    loss = language_model_loss()
    assert isinstance(loss, LanguageModelLoss)
    value = loss(labels, keras.ops.cast(logits, dtype), sample_weight=weights)
    tolerance = 1e-5 if dtype == "float32" else 2e-2
    assert float(value) == pytest.approx(expected, rel=tolerance)
    # Filler positions count for nothing, whatever their logits.
    logits[weights == 0] = 100.0
    value = loss(labels, keras.ops.cast(logits, dtype), sample_weight=weights)
    assert float(value) == pytest.approx(expected, rel=tolerance)


def test_sum_over_batch_size_averages_over_every_position(rng):
    logits = rng.normal(scale=3.0, size=(3, 4, 7)).astype("float32")
    labels = rng.integers(0, 7, (3, 4))
    weights = rng.integers(0, 2, (3, 4)).astype("float32")
    losses = numpy_token_cross_entropy(labels, logits)
    loss = LanguageModelLoss(reduction="sum_over_batch_size")
    value = loss(labels, logits, sample_weight=weights)
    assert float(value) == pytest.approx(
        (losses * weights).sum() / weights.size, rel=1e-5
    )


def test_language_model_loss_round_trips_through_its_config():
    loss = LanguageModelLoss(name="mlm_loss")
    config = keras.saving.serialize_keras_object(loss)
    restored = keras.saving.deserialize_keras_object(config)
    assert isinstance(restored, LanguageModelLoss)
    assert restored.name == "mlm_loss"
    assert restored.reduction == "mean_with_sample_weight"


def test_perplexity_is_the_exponential_of_the_whole_mean(kernels_mode, rng):
    metric = Perplexity()
    total, weight = 0.0, 0.0
    for _ in range(3):  # per-batch means would give a different figure
        logits = rng.normal(scale=2.0, size=(2, 4, 9)).astype("float32")
        labels = rng.integers(0, 9, (2, 4))
        weights = rng.integers(0, 2, (2, 4)).astype("float32")
        metric.update_state(labels, logits, sample_weight=weights)
        losses = numpy_token_cross_entropy(labels, logits)
        total += (losses * weights).sum()
        weight += weights.sum()
    assert float(metric.result()) == pytest.approx(
        np.exp(total / weight), rel=1e-5
    )


def numpy_token_accuracy(labels, scores):
    # `np.argmax` takes the first of tied maxima, as Keras' accuracy does.
    return (np.argmax(scores, axis=-1) == labels).astype("float32")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(6,), (3, 5), (2, 3, 4)])
def test_token_accuracy_is_at_the_first_maximum(
    shape, dtype, kernels_mode, rng
):
    # Scores from a few values, so that rows tie at their maximum often;
    # labels on the maxima, before them, after them, and out of range.
    scores = rng.integers(0, 3, size=(*shape, 7)).astype("float32")
    labels = rng.integers(-1, 8, shape)
    first_maximum = np.argmax(scores, axis=-1)
    labels.flat[::3] = first_maximum.flat[::3]
    expected = numpy_token_accuracy(labels, scores)
    assert 0 < expected.sum() < expected.size
    typed = keras.ops.cast(scores, dtype)
    accuracy = keras.ops.convert_to_numpy(token_accuracy(labels, typed))
    np.testing.assert_array_equal(accuracy, expected)
    # Labels with a trailing axis of 1, as Keras' metrics take them too.
    accuracy = token_accuracy(labels[..., None], typed)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(accuracy), expected
    )


def test_token_accuracy_metric_weights_positions_as_keras_does(
    kernels_mode, rng
):
    scores = rng.normal(size=(4, 9, 13)).astype("float32")
    labels = rng.integers(0, 13, (4, 9))
    labels[:, ::2] = np.argmax(scores, axis=-1)[:, ::2]
    weights = rng.integers(0, 2, (4, 9)).astype("float32")
    metric = TokenAccuracy(name="masked_accuracy")
    metric.update_state(labels, scores, sample_weight=weights)
    expected = numpy_token_accuracy(labels, scores)
    assert float(metric.result()) == pytest.approx(
        (expected * weights).sum() / weights.sum()
    )
    keras_metric = keras.metrics.SparseCategoricalAccuracy()
    keras_metric.update_state(labels, scores, sample_weight=weights)
    assert float(metric.result()) == pytest.approx(float(keras_metric.result()))
    restored = TokenAccuracy.from_config(metric.get_config())
    assert restored.name == "masked_accuracy"
    assert metric._direction == "up"


def test_language_model_metrics_take_the_token_accuracy():
    accuracy, perplexity = language_model_metrics("next_token")
    assert isinstance(accuracy, TokenAccuracy)
    assert accuracy.name == "next_token_accuracy"
    assert isinstance(perplexity, Perplexity)
