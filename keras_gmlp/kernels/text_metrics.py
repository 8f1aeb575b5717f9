"""Kernel of the `"token_cross_entropy"` operation: the language models'
loss of float32 logits under TensorFlow.

The reference is `token_cross_entropy` of
`keras_gmlp.models.gmlp_text.text_metrics`.
"""

import functools

import keras


def takes_float32_logits(logits, from_logits):
    """Whether the cross-entropy kernels serve these scores: float32
    logits (not probabilities)."""
    return from_logits and (
        keras.backend.standardize_dtype(logits.dtype) == "float32"
    )


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
