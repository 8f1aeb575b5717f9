"""Kernels of the language models' loss and accuracy.

The references are `token_cross_entropy` and `token_accuracy` of
`keras_gmlp.models.gmlp_text.text_metrics`, which reach these through
`keras_gmlp.kernels.dispatch`: the cross-entropy of float32 logits under
JAX and TensorFlow, the accuracy under JAX.
"""

import functools

import keras
from keras import ops


def takes_float32_logits(logits, from_logits):
    """Whether the cross-entropy kernels serve these scores: float32
    logits (not probabilities)."""
    return from_logits and (
        keras.backend.standardize_dtype(logits.dtype) == "float32"
    )


def jax_token_cross_entropy(labels, logits, from_logits=True):
    """The cross-entropy of each row of float32 logits, under JAX.

    Keras' JAX cross-entropy multiplies the log-softmax by a one-hot of
    the labels: XLA:CPU materialises the one-hot (times the upstream
    gradient) as a `(rows, classes)` array in the backward pass. This
    computes `jax_cross_entropy`'s loss and gradient by hand instead.

    Args:
        labels: int32 tensor `(rows,)`: the target ids.
        logits: tensor `(rows, classes)`.
        from_logits: bool. Whether `logits` are logits. Defaults to
            `True`.

    Returns:
        A float32 tensor `(rows,)`, 0 at a label outside the classes (as
        Keras' one-hot gives), or `NotImplemented` for probabilities or
        logits of another dtype.
    """
    if not takes_float32_logits(logits, from_logits):
        return NotImplemented
    return jax_cross_entropy()(logits, labels)


def tensorflow_token_cross_entropy(labels, logits, from_logits=True):
    """The cross-entropy of each row of float32 logits, under TensorFlow.

    TensorFlow's `SparseSoftmaxCrossEntropyWithLogits` kernel, which
    Keras' cross-entropy runs, computes the loss and its gradient in one
    op whether the gradient is asked for or not, and a masked-LM step runs
    it twice, for the loss and for the perplexity (which takes no
    gradient). `tensorflow_cross_entropy`'s two XLA-compiled functions
    make masked-LM steps 1.12-1.17x faster
    (`benchmarks/masked_lm_speed.py`). TF Serving, ONNX and LiteRT run no
    XLA function: the exports trace the reference
    (`keras_gmlp.kernels.reference_only`).

    Args:
        labels: int32 tensor `(rows,)`: the target ids.
        logits: tensor `(rows, classes)`.
        from_logits: bool. Whether `logits` are logits. Defaults to
            `True`.

    Returns:
        A float32 tensor `(rows,)`, or `NotImplemented` for probabilities
        or logits of another dtype. A label outside the classes is an
        `InvalidArgumentError`, as with TensorFlow's kernel on a CPU.
    """
    if not takes_float32_logits(logits, from_logits):
        return NotImplemented
    return tensorflow_cross_entropy()(logits, labels)


@functools.cache
def jax_cross_entropy():
    """`cross_entropy(logits, labels)`: the cross-entropy of float32
    `(rows, classes)` logits at int32 `labels` `(rows,)`, 0 for a label
    outside the classes, as a JAX function.

    The loss is `log(sum(exp(logits))) - logits[label]` and its gradient,
    by hand (a `jax.custom_vjp`), `softmax - one_hot` scaled by the
    upstream gradient in one elementwise pass. The same values as Keras'
    to float32 rounding. Reverse-mode gradients only.
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

    The loss `log(sum(exp(logits))) - logits[label]` and its gradient
    `softmax - one_hot` times the upstream gradient are two XLA-compiled
    functions. A label outside the classes is an `InvalidArgumentError`,
    as the kernel's is on a CPU (inside a step that XLA compiles whole,
    `jit_compile=True`, TensorFlow drops the check). The same values as
    Keras' to float32 rounding.
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


def jax_token_accuracy(y_true, y_pred):
    """Whether each target is the first class of the highest score,
    without an `argmax`, under JAX.

    XLA:CPU reduces an `argmax`'s pair of value and index slowly: here a
    label is right where its score equals the row's maximum and no
    earlier class also reaches it. (TensorFlow's steps are as fast either
    way and torch's `argmax` is the faster there.)

    Args:
        y_true: int32 tensor `(...)`: the target ids.
        y_pred: float tensor `(..., classes)`.

    Returns:
        A float32 tensor `(...)` of 0 and 1; 0 at a label outside the
        classes.
    """
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
