import keras
import numpy as np
import pytest
from sklearn.metrics import f1_score

from keras_gmlp.models.gmlp_text.text_metrics import LanguageModelLoss
from keras_gmlp.models.gmlp_text.text_metrics import Perplexity
from keras_gmlp.models.gmlp_text.text_metrics import TokenAccuracy
from keras_gmlp.models.gmlp_text.text_metrics import binary_f1
from keras_gmlp.models.gmlp_text.text_metrics import jax_cross_entropy
from keras_gmlp.models.gmlp_text.text_metrics import language_model_loss
from keras_gmlp.models.gmlp_text.text_metrics import language_model_metrics
from keras_gmlp.models.gmlp_text.text_metrics import tensorflow_cross_entropy
from keras_gmlp.models.gmlp_text.text_metrics import token_accuracy
from keras_gmlp.models.gmlp_text.text_metrics import token_cross_entropy


def numpy_token_cross_entropy(labels, logits):
    logits = logits.astype("float64")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probabilities = shifted - np.log(
        np.exp(shifted).sum(axis=-1, keepdims=True)
    )
    return -np.take_along_axis(log_probabilities, labels[..., None], -1)[..., 0]


def numpy_cross_entropy_gradient(labels, logits, upstream):
    """The gradient of `sum(upstream * cross_entropy)` in the logits."""
    shifted = logits.astype("float64") - logits.max(axis=-1, keepdims=True)
    softmax = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    one_hot = np.eye(logits.shape[-1])[labels]
    return (softmax - one_hot) * upstream[:, None]


@pytest.mark.skipif(
    keras.config.backend() != "jax", reason="JAX's cross-entropy by hand"
)
def test_jax_cross_entropy_and_its_gradient_match_numpy(rng):
    import jax

    logits = rng.normal(scale=3.0, size=(12, 9)).astype("float32")
    # Labels outside the classes lose nothing, as Keras' one-hot gives.
    labels = np.array([0, 8, 3, -1, 9, 4, 4, 1, 2, 7, 5, 6])
    valid = (labels >= 0) & (labels < 9)
    upstream = rng.normal(size=12).astype("float32")
    cross_entropy = jax_cross_entropy()

    def loss(logits):
        return (cross_entropy(logits, labels) * upstream).sum()

    losses = np.asarray(cross_entropy(logits, labels))
    clipped = np.clip(labels, 0, 8)
    expected = np.where(valid, numpy_token_cross_entropy(clipped, logits), 0)
    np.testing.assert_allclose(losses, expected, rtol=1e-5, atol=1e-6)
    expected = numpy_cross_entropy_gradient(
        clipped, logits, np.where(valid, upstream, 0)
    )
    for gradient in (jax.grad(loss), jax.jit(jax.grad(loss))):
        np.testing.assert_allclose(
            np.asarray(gradient(logits)), expected, rtol=1e-5, atol=1e-6
        )


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow",
    reason="TensorFlow's cross-entropy by hand",
)
@pytest.mark.parametrize("graph", [False, True])
def test_tensorflow_cross_entropy_and_its_gradient_match_numpy(graph, rng):
    import tensorflow as tf

    logits = rng.normal(scale=3.0, size=(12, 9)).astype("float32")
    labels = np.array([0, 8, 3, 3, 8, 4, 4, 1, 2, 7, 5, 6], "int32")
    upstream = rng.normal(size=12).astype("float32")
    cross_entropy = tensorflow_cross_entropy()

    def losses_and_gradient(logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            losses = cross_entropy(logits, labels)
            loss = tf.reduce_sum(losses * upstream)
        return losses, tape.gradient(loss, logits)

    if graph:
        losses_and_gradient = tf.function(losses_and_gradient)
    losses, gradient = losses_and_gradient(tf.constant(logits))
    np.testing.assert_allclose(
        losses.numpy(),
        numpy_token_cross_entropy(labels, logits),
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        gradient.numpy(),
        numpy_cross_entropy_gradient(labels, logits, upstream),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow",
    reason="TensorFlow's cross-entropy by hand",
)
def test_tensorflow_cross_entropy_names_labels_outside_the_classes():
    import tensorflow as tf

    logits = np.zeros((4, 9), "float32")
    # As TensorFlow's own kernel on a CPU: an error, not a silent 0.
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"received\W+9"):
        tensorflow_cross_entropy()(logits, np.array([0, 9, 1, 2], "int32"))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"received\W+-1"):
        tf.function(tensorflow_cross_entropy())(
            logits, np.array([0, 1, -1, 2], "int32")
        )


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow",
    reason="TensorFlow's cross-entropy by hand",
)
def test_tensorflow_token_cross_entropy_runs_no_softmax_kernel():
    import tensorflow as tf

    @tf.function
    def loss_and_gradient(logits, labels):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = tf.reduce_sum(token_cross_entropy(labels, logits))
        return loss, tape.gradient(loss, logits)

    graph = loss_and_gradient.get_concrete_function(
        tf.TensorSpec((2, 5, 11), tf.float32), tf.TensorSpec((2, 5), tf.int32)
    ).graph
    types = {op.type for op in graph.get_operations()}
    assert "SparseSoftmaxCrossEntropyWithLogits" not in types
    # The XLA-compiled loss and gradient are called.
    assert {"StatefulPartitionedCall", "PartitionedCall"} & types


def test_binary_f1_matches_scikit_learn(rng):
    labels = rng.integers(0, 2, 200)
    predictions = rng.integers(0, 2, 200)
    assert binary_f1(labels, predictions) == pytest.approx(
        f1_score(labels, predictions)
    )
    assert binary_f1(np.array([1, 0]), np.array([0, 0])) == 0.0


@pytest.mark.parametrize("shape", [(6,), (3, 5), (2, 3, 4)])
def test_token_cross_entropy_matches_numpy(shape, rng):
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
def test_language_model_loss_is_the_mean_over_weighted_positions(dtype, rng):
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


def test_perplexity_is_the_exponential_of_the_whole_mean(rng):
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
def test_token_accuracy_is_at_the_first_maximum(shape, dtype, rng):
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


def test_token_accuracy_metric_weights_positions_as_keras_does(rng):
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
