"""Losses and metrics of language-model training, on every backend.

Targets come with sample weights: 1 at a position to predict (a masked
token, or a real next token), 0 at filler. The loss is the mean
cross-entropy over the weighted positions, and perplexity is the
exponential of that mean, accumulated over a whole evaluation.
"""

import functools

import keras
import numpy as np
from keras import ops

from keras_gmlp.kernels.xla_functions import xla_functions_enabled


def token_cross_entropy(y_true, y_pred, from_logits=True):
    """Cross-entropy of each target token, from class scores on the last axis.

    Equal to `keras.losses.sparse_categorical_crossentropy`, computed on
    the scores flattened to `(tokens, classes)`: under torch, Keras' own
    moves the class axis of a 3-D `y_pred` to axis 1 for
    `F.cross_entropy`, which copies the `(batch, positions, vocabulary)`
    logits to a strided layout and back: a torch masked-LM training step
    is 1.14x faster without that copy (`benchmarks/masked_lm_speed.py`).
    Float32 logits take `jax_cross_entropy` under JAX and
    `tensorflow_cross_entropy` under TensorFlow (outside `reference_only()`).

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
    by_hand = (
        from_logits
        and keras.backend.standardize_dtype(y_pred.dtype) == "float32"
    )
    if by_hand and keras.config.backend() == "jax":
        flat = jax_cross_entropy()(scores, labels)
    elif by_hand and xla_functions_enabled():
        flat = tensorflow_cross_entropy()(scores, labels)
    else:
        flat = keras.losses.sparse_categorical_crossentropy(
            labels, scores, from_logits=from_logits
        )
    return ops.reshape(flat, ops.shape(y_true))


@functools.cache
def jax_cross_entropy():
    """`cross_entropy(logits, labels)`: the cross-entropy of float32
    `(rows, classes)` logits at int32 `labels` `(rows,)`, 0 for a label
    outside the classes (as Keras' one-hot gives), as a JAX function.

    Keras' JAX cross-entropy multiplies the log-softmax by a one-hot of
    the labels: XLA:CPU materialises the one-hot (times the upstream
    gradient) as a `(rows, classes)` array in the backward pass. Here the
    loss is `log(sum(exp(logits))) - logits[label]` and its gradient, by
    hand (a `jax.custom_vjp`), `softmax - one_hot` scaled by the upstream
    gradient in one elementwise pass. The same values to float32
    rounding. Reverse-mode gradients only.
    """
    import jax
    import jax.numpy as jnp

    def values(logits, labels):
        classes = logits.shape[-1]
        valid = (labels >= 0) & (labels < classes)
        top = jnp.max(logits, axis=-1, keepdims=True)
        log_sum = jnp.log(jnp.sum(jnp.exp(logits - top), axis=-1))
        index = jnp.clip(labels, 0, classes - 1)[:, None]
        at_label = jnp.take_along_axis(logits, index, axis=-1)[:, 0]
        losses = jnp.where(valid, log_sum + top[:, 0] - at_label, 0.0)
        return losses, (top[:, 0] + log_sum, valid)

    @jax.custom_vjp
    def cross_entropy(logits, labels):
        return values(logits, labels)[0]

    def forward(logits, labels):
        losses, (log_normaliser, valid) = values(logits, labels)
        return losses, (logits, labels, log_normaliser, valid)

    def backward(residuals, upstream):
        logits, labels, log_normaliser, valid = residuals
        classes = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)
        one_hot = (classes == labels[:, None]).astype(logits.dtype)
        probabilities = jnp.exp(logits - log_normaliser[:, None])
        scale = jnp.where(valid, upstream, 0.0)[:, None]
        return (probabilities - one_hot) * scale, None

    cross_entropy.defvjp(forward, backward)
    return cross_entropy


@functools.cache
def tensorflow_cross_entropy():
    """`cross_entropy(logits, labels)`: the cross-entropy of float32
    `(rows, classes)` logits at int32 `labels` `(rows,)`, as TensorFlow
    XLA-compiled functions with the gradient by hand.

    TensorFlow's `SparseSoftmaxCrossEntropyWithLogits` kernel, which
    Keras' cross-entropy runs, computes the loss and its gradient in one
    op whether the gradient is asked for or not, and a masked-LM step runs
    it twice, for the loss and for the perplexity (which takes no
    gradient). Here the loss `log(sum(exp(logits))) - logits[label]` and
    its gradient `softmax - one_hot` times the upstream gradient are two
    XLA-compiled functions, which make masked-LM steps 1.12-1.17x faster
    (`benchmarks/masked_lm_speed.py`). A label outside the classes is an
    `InvalidArgumentError`, as
    the kernel's is on a CPU (inside a step that XLA compiles whole,
    `jit_compile=True`, TensorFlow drops the check). The same values to
    float32 rounding.
    """
    import tensorflow as tf

    @tf.function(jit_compile=True, autograph=False)
    def values(logits, labels):
        top = tf.reduce_max(logits, axis=-1)
        log_sum = tf.math.log(
            tf.reduce_sum(tf.exp(logits - top[:, None]), axis=-1)
        )
        at_label = tf.gather(logits, labels[:, None], batch_dims=1)[:, 0]
        return log_sum + top - at_label, log_sum + top

    @tf.function(jit_compile=True, autograph=False)
    def gradient(logits, labels, log_normaliser, upstream):
        one_hot = tf.one_hot(labels, tf.shape(logits)[-1], dtype=logits.dtype)
        probabilities = tf.exp(logits - log_normaliser[:, None])
        return (probabilities - one_hot) * upstream[:, None]

    def checked(labels, classes):
        valid = (labels >= 0) & (labels < classes)
        return tf.debugging.Assert(
            tf.reduce_all(valid),
            [
                "Expected target token ids in [0, number of classes); received",
                tf.boolean_mask(labels, ~valid),
                "with classes =",
                classes,
            ],
            summarize=8,
        )

    @tf.custom_gradient
    def cross_entropy(logits, labels):
        with tf.control_dependencies([checked(labels, tf.shape(logits)[-1])]):
            losses, log_normaliser = values(logits, labels)

        def backward(upstream):
            return gradient(logits, labels, log_normaliser, upstream), None

        return losses, backward

    return cross_entropy


def token_accuracy(y_true, y_pred):
    """Whether each target token is the class of the highest score.

    Equal to `keras.metrics.sparse_categorical_accuracy`: 1 where the first
    class of the highest score on the last axis is `y_true`, else 0 (a
    label outside the classes is never right). Under JAX it does not take
    an `argmax`, whose pair of value and index XLA:CPU reduces slowly: a
    label is right where its score equals the row's maximum and no earlier
    class also reaches it. TensorFlow's steps are as fast either way and
    torch's `argmax` is the faster there: both take the `argmax`.

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
    if keras.config.backend() != "jax":
        return ops.cast(
            ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), y_true),
            "float32",
        )
    classes = ops.shape(y_pred)[-1]
    label = ops.expand_dims(y_true, -1)
    valid = ops.logical_and(y_true >= 0, y_true < classes)
    top = ops.max(y_pred, axis=-1, keepdims=True)
    at_label = ops.take_along_axis(
        y_pred, ops.clip(label, 0, classes - 1), axis=-1
    )
    earlier = ops.any(
        ops.logical_and(
            ops.equal(y_pred, top),
            ops.arange(classes, dtype="int32") < label,
        ),
        axis=-1,
    )
    right = ops.logical_and(
        ops.equal(at_label, top)[..., 0], ops.logical_not(earlier)
    )
    return ops.cast(ops.logical_and(right, valid), "float32")


@keras.saving.register_keras_serializable(package="keras_gmlp")
class TokenAccuracy(keras.metrics.MeanMetricWrapper):
    """The mean of `token_accuracy`: `SparseCategoricalAccuracy`'s value,
    computed without an `argmax` under JAX.

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
