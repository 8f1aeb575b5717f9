"""The language models' loss and accuracy kernels against the reference:
the same values and gradients with the kernels on and off."""

import keras
import numpy as np
import pytest

from keras_gmlp import kernels
from keras_gmlp.kernels.text_metrics import tensorflow_cross_entropy
from keras_gmlp.models.gmlp_text.text_metrics import token_cross_entropy
from tests.models.gmlp_text.test_text_metrics import numpy_token_cross_entropy

BACKEND = keras.config.backend()


def numpy_cross_entropy_gradient(labels, logits, upstream):
    """The gradient of `sum(upstream * cross_entropy)` in the logits."""
    shifted = logits.astype("float64") - logits.max(axis=-1, keepdims=True)
    softmax = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    one_hot = np.eye(logits.shape[-1])[labels]
    return (softmax - one_hot) * upstream[..., None]


def as_numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def losses_and_gradient(labels, logits, upstream, compiled):
    """`token_cross_entropy(labels, logits)` and the gradient of
    `sum(losses * upstream)` in the logits, as float64 numpy arrays, or
    the type of the error raised."""
    try:
        losses, gradient = _losses_and_gradient(
            labels, logits, upstream, compiled
        )
    except Exception as error:  # noqa: BLE001
        return type(error)
    return [as_numpy(x).astype("float64") for x in (losses, gradient)]


def _losses_and_gradient(labels, logits, upstream, compiled):
    if BACKEND == "jax":
        import jax

        def loss(logits):
            losses = token_cross_entropy(labels, logits)
            total = (losses.astype("float32") * upstream).sum()
            return total, losses

        function = jax.grad(loss, has_aux=True)
        if compiled:
            function = jax.jit(function)
        gradient, losses = function(logits)
        return losses, gradient
    if BACKEND == "tensorflow":
        import tensorflow as tf

        def function(logits):
            with tf.GradientTape() as tape:
                tape.watch(logits)
                losses = token_cross_entropy(labels, logits)
                total = tf.reduce_sum(tf.cast(losses, "float32") * upstream)
            return losses, tape.gradient(total, logits)

        if compiled:
            function = tf.function(function)
        return function(tf.convert_to_tensor(logits))
    import torch

    logits = keras.ops.convert_to_tensor(logits).detach().clone()
    logits.requires_grad_(True)
    losses = token_cross_entropy(torch.tensor(labels), logits)
    total = (losses.float() * torch.tensor(upstream)).sum()
    (gradient,) = torch.autograd.grad(total, [logits])
    return losses.detach(), gradient


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(12,), (3, 4)])
def test_cross_entropy_kernel_gives_the_references_values_and_gradient(
    kernel_mode, shape, dtype, compiled, rng
):
    classes = 9
    logits = rng.normal(scale=3.0, size=(*shape, classes)).astype("float32")
    logits = keras.ops.cast(logits, dtype)
    labels = rng.integers(0, classes, shape).astype("int32")
    upstream = rng.normal(size=shape).astype("float32")

    kernel_mode("off")
    reference = losses_and_gradient(labels, logits, upstream, compiled)
    kernel_mode("on")
    kernel = losses_and_gradient(labels, logits, upstream, compiled)

    assert not isinstance(reference, type), reference
    assert not isinstance(kernel, type), kernel
    for got, want in zip(kernel, reference, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # Both against numpy, in float32.
    if dtype == "float32":
        np.testing.assert_allclose(
            reference[0],
            numpy_token_cross_entropy(labels, as_numpy(logits)),
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_allclose(
            reference[1],
            numpy_cross_entropy_gradient(labels, as_numpy(logits), upstream),
            rtol=1e-5,
            atol=1e-6,
        )


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cross_entropy_kernel_treats_labels_outside_the_classes_as_keras(
    kernel_mode, dtype, compiled, rng
):
    # JAX's reference gives 0 (and no gradient) at such a label, as its
    # one-hot is 0; TensorFlow's and torch's raise an error on a CPU.
    logits = rng.normal(scale=3.0, size=(6, 9)).astype("float32")
    logits = keras.ops.cast(logits, dtype)
    labels = np.array([0, 9, 3, -1, 8, 4], "int32")
    upstream = rng.normal(size=6).astype("float32")

    kernel_mode("off")
    reference = losses_and_gradient(labels, logits, upstream, compiled)
    kernel_mode("on")
    kernel = losses_and_gradient(labels, logits, upstream, compiled)

    if BACKEND == "jax":
        for got, want in zip(kernel, reference, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        valid = (labels >= 0) & (labels < 9)
        assert np.all(reference[0][~valid] == 0)
        assert np.all(reference[1][~valid] == 0)
    else:
        assert isinstance(reference, type), reference
        assert isinstance(kernel, type), kernel
        assert issubclass(kernel, reference) or issubclass(reference, kernel)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's kernel")
@pytest.mark.parametrize("mode", ["on", "off"])
def test_tensorflow_kernel_runs_no_softmax_kernel_when_on(kernel_mode, mode):
    import tensorflow as tf

    kernel_mode(mode)

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
    if mode == "on":
        assert "SparseSoftmaxCrossEntropyWithLogits" not in types
        # The XLA-compiled loss and gradient are called.
        assert {"StatefulPartitionedCall", "PartitionedCall"} & types
    else:
        assert "SparseSoftmaxCrossEntropyWithLogits" in types


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's kernel")
def test_tensorflow_kernel_is_not_traced_by_the_exports(kernel_mode):
    import tensorflow as tf

    kernel_mode("on")

    @tf.function
    def loss(logits, labels):
        return tf.reduce_sum(token_cross_entropy(labels, logits))

    with kernels.reference_only():
        graph = loss.get_concrete_function(
            tf.TensorSpec((2, 11), tf.float32), tf.TensorSpec((2,), tf.int32)
        ).graph
    types = {op.type for op in graph.get_operations()}
    assert "SparseSoftmaxCrossEntropyWithLogits" in types


@pytest.mark.skipif(
    BACKEND != "tensorflow", reason="TensorFlow's cross-entropy by hand"
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
    BACKEND != "tensorflow", reason="TensorFlow's cross-entropy by hand"
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
