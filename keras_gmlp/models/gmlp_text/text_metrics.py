"""Losses and metrics of language-model training, on every backend.

Targets come with sample weights: 1 at a position to predict (a masked
token, or a real next token), 0 at filler. The loss is the mean
cross-entropy over the weighted positions, and perplexity is the
exponential of that mean, accumulated over a whole evaluation.
"""

import keras
import numpy as np
from keras import ops

from keras_gmlp import kernels


def token_cross_entropy(y_true, y_pred, from_logits=True):
    """Cross-entropy of each target token, from class scores on the last axis.

    Equal to `keras.losses.sparse_categorical_crossentropy`, computed on
    the scores flattened to `(tokens, classes)` (under torch, Keras' own
    would move the class axis of a 3-D `y_pred` to axis 1, a copy of the
    logits). Its TensorFlow kernel (`keras_gmlp.kernels.text_metrics`)
    computes the cross-entropy of float32 logits and its gradient as XLA
    functions.

    Args:
        y_true: integer tensor of shape `(...)`: the target token ids.
        y_pred: float tensor of shape `(..., classes)`.
        from_logits: bool. Whether `y_pred` are logits (not
            probabilities). Defaults to `True`.

    Returns:
        A float tensor of shape `(...)`, `y_true`'s shape.

    Example:

    >>> from keras_gmlp.models.gmlp_text.text_metrics import token_cross_entropy
    >>> losses = token_cross_entropy([[1, 0]], [[[0.0, 0.0], [0.0, 0.0]]])
    >>> [round(float(x), 4) for x in losses[0]]  # log 2
    [0.6931, 0.6931]
    """
    y_pred = ops.convert_to_tensor(y_pred)
    y_true = ops.cast(y_true, "int32")
    classes = ops.shape(y_pred)[-1]
    labels = ops.reshape(y_true, (-1,))
    scores = ops.reshape(y_pred, (-1, classes))
    flat = kernels.dispatch(
        "token_cross_entropy",
        rows_cross_entropy,
        labels,
        scores,
        from_logits=from_logits,
    )
    return ops.reshape(flat, ops.shape(y_true))


def rows_cross_entropy(labels, scores, from_logits=True):
    """Keras' sparse categorical cross-entropy of each row of `scores`.

    Args:
        labels: int32 tensor `(rows,)`: the target ids.
        scores: float tensor `(rows, classes)`.
        from_logits: bool. Whether `scores` are logits. Defaults to
            `True`.

    Returns:
        A float tensor `(rows,)`.
    """
    return keras.losses.sparse_categorical_crossentropy(
        labels, scores, from_logits=from_logits
    )


def token_accuracy(y_true, y_pred):
    """Whether each target token is the class of the highest score.

    Equal to `keras.metrics.sparse_categorical_accuracy`: 1 where the first
    class of the highest score on the last axis is `y_true`, else 0 (a
    label outside the classes is never right).

    Args:
        y_true: integer tensor `(...)` or `(..., 1)`: the target ids.
        y_pred: float tensor `(..., classes)`.

    Returns:
        A float32 tensor `(...)` of 0 and 1.

    Example:

    >>> from keras_gmlp.models.gmlp_text.text_metrics import token_accuracy
    >>> scores = [[[0.1, 0.7, 0.2], [0.5, 0.5, 0.0]]]
    >>> keras.ops.convert_to_numpy(token_accuracy([[1, 1]], scores)).tolist()
    [[1.0, 0.0]]
    """
    y_pred = ops.convert_to_tensor(y_pred)
    y_true = ops.cast(y_true, "int32")
    if len(y_true.shape) == len(y_pred.shape):
        y_true = ops.squeeze(y_true, axis=-1)
    return first_maximum_accuracy(y_true, y_pred)


def first_maximum_accuracy(y_true, y_pred):
    """1 where `y_true` is the `argmax` of `y_pred`'s last axis, else 0.

    Computed without `argmax`: a label is right where its score is the
    row's maximum and no earlier class reaches that maximum (`argmax`
    takes the first). XLA on a CPU reduces `argmax`'s pairs of value and
    index slowly: 9.4 ms against 1.6 ms under JAX for a masked-LM batch's
    `(640, 8192)` scores, 5.5 against 3.6 ms under TensorFlow, 4.9
    against 7.6 ms under eager torch (`benchmarks/token_accuracy.py`).

    Args:
        y_true: int32 tensor `(...)`: the target ids.
        y_pred: float tensor `(..., classes)`.

    Returns:
        A float32 tensor `(...)` of 0 and 1; 0 at a label outside the
        classes.
    """
    classes = ops.shape(y_pred)[-1]
    label = ops.expand_dims(y_true, -1)
    top = ops.max(y_pred, axis=-1, keepdims=True)
    at_label = ops.take_along_axis(
        y_pred, ops.clip(label, 0, classes - 1), axis=-1
    )
    earlier_top = ops.any(
        ops.logical_and(
            ops.equal(y_pred, top), ops.arange(classes, dtype="int32") < label
        ),
        axis=-1,
    )
    right = ops.logical_and(
        ops.equal(at_label[..., 0], top[..., 0]),
        ops.logical_not(earlier_top),
    )
    valid = ops.logical_and(y_true >= 0, y_true < classes)
    return ops.cast(ops.logical_and(right, valid), "float32")


@keras.saving.register_keras_serializable(package="keras_gmlp")
class TokenAccuracy(keras.metrics.MeanMetricWrapper):
    """The mean of `token_accuracy`: `SparseCategoricalAccuracy`'s value.

    Args:
        name: str. Defaults to `"accuracy"`.
        dtype: the metric's dtype. Defaults to `None`.

    Example:

    >>> from keras_gmlp.models.gmlp_text.text_metrics import TokenAccuracy
    >>> metric = TokenAccuracy()
    >>> metric.update_state([[1, 1]], [[[0.1, 0.7, 0.2], [0.9, 0.1, 0.0]]])
    >>> float(metric.result())
    0.5
    """

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(fn=token_accuracy, name=name, dtype=dtype)
        # Keras' own accuracies are maximised, for callbacks that monitor.
        self._direction = "up"

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="keras_gmlp")
class LanguageModelLoss(keras.losses.Loss):
    """Mean token cross-entropy over the positions with weight > 0.

    `token_cross_entropy` of logits, reduced as
    `"mean_with_sample_weight"`: the sum of the weighted losses over the
    sum of the weights, so filler positions (weight 0) count for nothing
    (the recipes' loss). With `reduction="sum_over_batch_size"` the sum
    is divided by the number of positions instead: keras-hub's figure,
    the default loss of the causal and masked LMs' `compile()`.

    Args:
        name: str. Defaults to `"language_model_loss"`.
        reduction: str. Keras' loss reduction. Defaults to
            `"mean_with_sample_weight"`.
        dtype: the loss's computation dtype. Defaults to `None`.

    Example:

    >>> from keras_gmlp.models.gmlp_text.text_metrics import LanguageModelLoss
    >>> labels = np.array([[1, 0]])
    >>> logits = np.array([[[0.0, 0.0], [0.0, 5.0]]])
    >>> weights = np.array([[1.0, 0.0]])  # the second position is filler
    >>> round(float(LanguageModelLoss()(labels, logits, weights)), 4)
    0.6931
    >>> loss = LanguageModelLoss(reduction="sum_over_batch_size")
    >>> round(float(loss(labels, logits, weights)), 4)  # (log 2) / 2
    0.3466
    """

    def __init__(
        self,
        name="language_model_loss",
        reduction="mean_with_sample_weight",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        return token_cross_entropy(y_true, y_pred, from_logits=True)


@keras.saving.register_keras_serializable(package="keras_gmlp")
class Perplexity(keras.metrics.Metric):
    """Exponential of the mean weighted token cross-entropy.

    Accumulates the weighted sum of cross-entropies and the sum of
    weights over the batches, so the result is the perplexity of the
    whole evaluation, not a mean of per-batch perplexities.

    Args:
        from_logits: bool. Whether predictions are logits. Defaults to
            `True`.
        name: str. Defaults to `"perplexity"`.

    Example:

    >>> from keras_gmlp.models.gmlp_text.text_metrics import Perplexity
    >>> metric = Perplexity()
    >>> metric.update_state([[1]], [[[0.0, 0.0]]], sample_weight=[[1.0]])
    >>> float(metric.result())  # uniform over 2 tokens
    2.0
    """

    def __init__(self, from_logits=True, name="perplexity", **kwargs):
        super().__init__(name=name, **kwargs)
        self.from_logits = from_logits
        self.total = self.add_variable((), "zeros", name="total")
        self.weight = self.add_variable((), "zeros", name="weight")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = ops.cast(y_pred, "float32")
        y_true = ops.cast(y_true, "int32")
        cross_entropy = token_cross_entropy(
            y_true, y_pred, from_logits=self.from_logits
        )
        if sample_weight is None:
            sample_weight = ops.ones_like(cross_entropy)
        sample_weight = ops.reshape(
            ops.cast(sample_weight, "float32"), ops.shape(cross_entropy)
        )
        self.total.assign_add(ops.sum(cross_entropy * sample_weight))
        self.weight.assign_add(ops.sum(sample_weight))

    def result(self):
        return ops.exp(ops.divide_no_nan(self.total, self.weight))

    def get_config(self):
        config = super().get_config()
        config["from_logits"] = self.from_logits
        return config


def language_model_loss():
    """Mean token cross-entropy over the positions with weight > 0
    (`LanguageModelLoss`)."""
    return LanguageModelLoss()


def language_model_metrics(prefix="masked"):
    """The weighted metrics of a language model: accuracy and perplexity.

    Args:
        prefix: str. `"masked"` for masked-LM, `"next_token"` for causal.

    Returns:
        A list for `model.compile(weighted_metrics=...)`: token accuracy
        (`TokenAccuracy`, named `f"{prefix}_accuracy"`) and `Perplexity`.
    """
    return [
        TokenAccuracy(name=f"{prefix}_accuracy"),
        Perplexity(name="perplexity"),
    ]


def binary_f1(labels, predictions):
    """F1 score of class 1 from integer labels and predictions.

    Args:
        labels: int array-like `(examples,)` of 0 and 1.
        predictions: int array-like `(examples,)` of 0 and 1.

    Returns:
        float; 0 when no example of class 1 is predicted correctly.

    Example:

    >>> from keras_gmlp.models.gmlp_text.text_metrics import binary_f1
    >>> binary_f1([1, 1, 0, 0], [1, 0, 1, 0])
    0.5
    """
    labels = np.asarray(labels)
    predictions = np.asarray(predictions)
    true_positive = np.sum((predictions == 1) & (labels == 1))
    if true_positive == 0:
        return 0.0
    precision = true_positive / np.sum(predictions == 1)
    recall = true_positive / np.sum(labels == 1)
    return float(2 * precision * recall / (precision + recall))
