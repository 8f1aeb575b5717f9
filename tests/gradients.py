"""Gradients of a layer's outputs on every backend, as numpy."""

import keras
import numpy as np

BACKEND = keras.config.backend()


def gradients(layer, inputs, cotangent, weights, **kwargs):
    """d sum(layer(inputs, **kwargs) * cotangent) / d (inputs, *weights).

    Args:
        layer: a built Keras layer.
        inputs: float32 numpy array.
        cotangent: float32 numpy array of the outputs' shape.
        weights: trainable variables of `layer`, in the order wanted.
        **kwargs: further arguments of the layer's call (`training`).

    Returns:
        A list of float64 numpy arrays: the inputs' gradient, then each
        weight's.
    """
    if BACKEND == "jax":
        import jax

        def loss(trainable, inputs):
            outputs, _ = layer.stateless_call(
                trainable,
                [v.value for v in layer.non_trainable_variables],
                inputs,
                **kwargs,
            )
            return (outputs.astype("float32") * cotangent).sum()

        trainable = [w.value for w in layer.trainable_weights]
        by_weight, by_input = jax.grad(loss, argnums=(0, 1))(trainable, inputs)
        by_path = dict(
            zip(
                [w.path for w in layer.trainable_weights],
                by_weight,
                strict=True,
            )
        )
        grads = [by_input, *(by_path[w.path] for w in weights)]
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        inputs = tf.constant(inputs)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            loss = tf.reduce_sum(
                tf.cast(layer(inputs, **kwargs), "float32") * cotangent
            )
        grads = tape.gradient(loss, [inputs, *(w.value for w in weights)])
    else:
        import torch

        inputs = torch.tensor(inputs, requires_grad=True)
        outputs = layer(inputs, **kwargs)
        loss = (outputs.float() * torch.tensor(cotangent)).sum()
        grads = torch.autograd.grad(loss, [inputs, *(w.value for w in weights)])
    return [keras.ops.convert_to_numpy(g).astype("float64") for g in grads]


def assert_gradients_close(got, want, tolerance):
    """Each array of `got` equals `want`'s to `tolerance` times the
    largest magnitude of `want`'s (gradients summed in another order, or
    rounded to bfloat16 at other points)."""
    assert len(got) == len(want)
    for got_array, want_array in zip(got, want, strict=True):
        want_array = np.asarray(want_array, "float64")
        np.testing.assert_allclose(
            np.asarray(got_array, "float64"),
            want_array,
            rtol=0,
            atol=tolerance * np.abs(want_array).max(),
        )
