"""The Toeplitz weight built from its taps, and its taps' gradient, against
numpy on every backend."""

import contextlib

import keras
import numpy as np
import pytest

from keras_gmlp.kernels import reference_only
from keras_gmlp.kernels.toeplitz_matrix import tiled_matrix
from keras_gmlp.layers.toeplitz_matrix import gathered_matrix
from keras_gmlp.layers.toeplitz_matrix import toeplitz_matrix

BACKEND = keras.config.backend()
# The tokens of the taps: 2 * TOKENS - 1 of them.
TOKENS = 7


def reference_matrix(taps, length):
    tokens = (len(taps) + 1) // 2
    rows, columns = np.indices((length, length))
    return taps[rows - columns + tokens - 1]


def reference_gradient(upstream, taps_count):
    """d sum(W * upstream) / d taps: the sums of `upstream`'s diagonals."""
    tokens = (taps_count + 1) // 2
    length = upstream.shape[0]
    rows, columns = np.indices((length, length))
    sums = np.zeros(taps_count)
    np.add.at(sums, rows - columns + tokens - 1, upstream.astype("float64"))
    return sums


def matrix_and_gradient(taps, length, upstream, build=toeplitz_matrix):
    """`W = build(taps, length)` and d sum(W * upstream) / d taps with the
    backend's differentiation, the gradient as the backend gives it."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        taps = tf.constant(taps)
        with tf.GradientTape() as tape:
            tape.watch(taps)
            weight = build(taps, length)
            loss = tf.reduce_sum(tf.cast(weight, "float32") * upstream)
        return weight, tape.gradient(loss, taps)
    if BACKEND == "jax":
        import jax

        weight, pullback = jax.vjp(
            lambda t: build(t, length), jax.numpy.asarray(taps)
        )
        return weight, pullback(jax.numpy.asarray(upstream, weight.dtype))[0]
    import torch

    taps = torch.as_tensor(taps).detach().clone().requires_grad_(True)
    weight = build(taps, length)
    (weight.float() * torch.tensor(upstream)).sum().backward()
    return weight.detach(), taps.grad


def as_numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


# The default path (torch's tiled taps in training off an AMD CPU), and the
# reference gather.
TRACES = [contextlib.nullcontext, reference_only]


@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("length", [1, 4, TOKENS])
def test_matrix_and_taps_gradient_equal_numpy(trace, length, rng):
    taps = rng.normal(size=2 * TOKENS - 1).astype("float32")
    upstream = rng.normal(size=(length, length)).astype("float32")
    with trace():
        weight, by_taps = matrix_and_gradient(taps, length, upstream)
    assert_equal_numpy(weight, by_taps, taps, length, upstream)


@pytest.mark.parametrize("build", [gathered_matrix, tiled_matrix])
@pytest.mark.parametrize("length", [1, 4, TOKENS])
def test_both_forms_equal_numpy_on_every_backend(build, length, rng):
    """The form each backend does not take by default too (the
    benchmark's A/B runs both)."""
    taps = rng.normal(size=2 * TOKENS - 1).astype("float32")
    upstream = rng.normal(size=(length, length)).astype("float32")
    weight, by_taps = matrix_and_gradient(taps, length, upstream, build)
    assert_equal_numpy(weight, by_taps, taps, length, upstream)


def assert_equal_numpy(weight, by_taps, taps, length, upstream):
    np.testing.assert_array_equal(
        as_numpy(weight), reference_matrix(taps, length)
    )
    np.testing.assert_allclose(
        as_numpy(by_taps),
        reference_gradient(upstream, len(taps)),
        rtol=1e-6,
        atol=1e-5,
    )


@pytest.mark.parametrize("trace", TRACES)
def test_bfloat16_taps_give_their_matrix_and_a_rounded_gradient(trace, rng):
    """Under `mixed_bfloat16` the taps come in bfloat16: the matrix is
    theirs exactly; each path sums each tap's up to 64 products in float32
    and rounds once to bfloat16 (a gather in bfloat16 would round at every
    add of its gradient)."""
    length = 64
    taps = rng.normal(size=2 * length - 1).astype("float32")
    taps = as_numpy(keras.ops.cast(taps, "bfloat16"))
    upstream = rng.normal(size=(length, length)).astype("float32")
    upstream = as_numpy(keras.ops.cast(upstream, "bfloat16"))
    with trace():
        weight, by_taps = matrix_and_gradient(
            keras.ops.cast(taps, "bfloat16"), length, upstream
        )
    assert keras.backend.standardize_dtype(weight.dtype) == "bfloat16"
    np.testing.assert_array_equal(
        as_numpy(weight), reference_matrix(taps, length)
    )
    want = reference_gradient(upstream, len(taps))
    # One bfloat16 rounding: 2^-9 of each sum.
    np.testing.assert_allclose(
        as_numpy(by_taps), want, rtol=2.0**-8, atol=2.0**-8
    )


@pytest.mark.parametrize("length", [0, TOKENS + 1])
def test_length_out_of_range_is_refused(length):
    taps = np.zeros(2 * TOKENS - 1, "float32")
    with pytest.raises(ValueError, match=f"length={length}.*1 to {TOKENS}"):
        toeplitz_matrix(taps, length)
