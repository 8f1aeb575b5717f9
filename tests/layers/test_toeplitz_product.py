"""The Toeplitz unit's FFT product with its backward pass by hand
(torch and TensorFlow), against a numpy circulant matrix."""

import keras
import numpy as np
import pytest

from keras_gmlp.layers.toeplitz_product import toeplitz_product

BACKEND = keras.config.backend()
pytestmark = pytest.mark.skipif(
    BACKEND == "jax", reason="JAX differentiates its own FFTs"
)


def circulant(taps, tokens):
    """`C[i, j] = taps[(i - j) mod L]` for `i, j < tokens`, float64."""
    offsets = np.subtract.outer(np.arange(tokens), np.arange(tokens))
    return taps.astype("float64")[offsets % len(taps)], offsets % len(taps)


def reference(v, taps, bias, upstream):
    """Output and gradients of `sum(output * upstream)`, in float64."""
    tokens = v.shape[-2]
    weight, offsets = circulant(taps, tokens)
    v, upstream = v.astype("float64"), upstream.astype("float64")
    output = np.einsum("ij,...jc->...ic", weight, v) + bias[:, None]
    by_v = np.einsum("ij,...ic->...jc", weight, upstream)
    by_weight = np.einsum(
        "bic,bjc->ij",
        upstream.reshape(-1, *upstream.shape[-2:]),
        v.reshape(-1, *v.shape[-2:]),
    )
    by_taps = np.bincount(
        offsets.ravel(), by_weight.ravel(), minlength=len(taps)
    )
    axes = tuple(a for a in range(upstream.ndim) if a != upstream.ndim - 2)
    return output, by_v, by_taps, upstream.sum(axes)


def run(v, taps, bias, upstream, fft_length, dtype="float32", weights=True):
    """Output and gradients (`None` where not asked) of
    `sum(output * upstream)`, in numpy, with their dtypes."""
    operands = [keras.ops.cast(v, dtype)] + [
        keras.ops.convert_to_tensor(x) for x in (taps, bias)
    ]
    if BACKEND == "torch":
        for operand in operands[: 3 if weights else 1]:
            operand.requires_grad_(True)
        output = toeplitz_product(*operands, fft_length)
        output.backward(keras.ops.cast(upstream, output.dtype))
        grads = [operand.grad for operand in operands]
    else:
        import tensorflow as tf

        with tf.GradientTape() as tape:
            watched = operands[: 3 if weights else 1]
            tape.watch(watched)
            output = toeplitz_product(*operands, fft_length)
            loss = tf.reduce_sum(output * tf.cast(upstream, output.dtype))
        grads = tape.gradient(loss, watched) + [None] * (3 - len(watched))
    tensors = [output] + grads
    return [
        None
        if t is None
        else keras.ops.convert_to_numpy(keras.ops.cast(t, "float32"))
        for t in tensors
    ], [
        None if t is None else keras.backend.standardize_dtype(t.dtype)
        for t in tensors
    ]


def assert_close(actual, expected, tolerance):
    scale = np.abs(expected).max()
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize(
    "batch_shape, tokens, channels",
    [
        ((2,), 12, 5),
        # More tokens than one block of the transposing copy, not a
        # multiple of it.
        ((1,), 300, 3),
        ((2, 3), 7, 4),
        ((), 1, 2),
    ],
)
@pytest.mark.parametrize("causal", [False, True])
def test_output_and_gradients_equal_a_circulant_matrix(
    batch_shape, tokens, channels, causal, rng
):
    fft_length = 2 * tokens + 3
    taps = rng.normal(size=fft_length).astype("float32")
    if causal:  # The Toeplitz unit's causal taps: no negative offset.
        taps[tokens:] = 0.0
    v = rng.normal(size=(*batch_shape, tokens, channels)).astype("float32")
    bias = rng.normal(size=tokens).astype("float32")
    upstream = rng.normal(size=v.shape).astype("float32")
    actual, dtypes = run(v, taps, bias, upstream, fft_length)
    for got, expected in zip(
        actual, reference(v, taps, bias, upstream), strict=True
    ):
        assert got.shape == expected.shape
        assert_close(got, expected, 1e-5)
    assert dtypes == ["float32"] * 4


def test_bfloat16_input_gives_bfloat16_output_and_gradient(rng):
    tokens, fft_length = 9, 20
    v = rng.normal(size=(2, tokens, 4)).astype("float32")
    taps = rng.normal(size=fft_length).astype("float32")
    bias = rng.normal(size=tokens).astype("float32")
    upstream = rng.normal(size=v.shape).astype("float32")
    # The reference takes the inputs as rounded to bfloat16.
    rounded = [
        keras.ops.convert_to_numpy(
            keras.ops.cast(keras.ops.cast(x, "bfloat16"), "float32")
        )
        for x in (v, upstream)
    ]
    expected = reference(rounded[0], taps, bias, rounded[1])
    actual, dtypes = run(v, taps, bias, upstream, fft_length, "bfloat16")
    assert dtypes == ["bfloat16", "bfloat16", "float32", "float32"]
    for got, want in zip(actual, expected, strict=True):
        assert_close(got, want, 1e-2)


def test_without_gradients_of_the_weights(rng):
    """Only `v` asks for a gradient, as in a frozen unit."""
    v = rng.normal(size=(2, 6, 3)).astype("float32")
    taps = rng.normal(size=11).astype("float32")
    bias = np.zeros(6, "float32")
    upstream = rng.normal(size=v.shape).astype("float32")
    actual, _ = run(v, taps, bias, upstream, 11, weights=False)
    assert actual[2] is None and actual[3] is None
    expected = reference(v, taps, bias, upstream)[1]
    assert_close(actual[1], expected, 1e-5)


def test_a_token_count_known_only_when_run(rng):
    """TensorFlow's form in a graph of unknown length, as a SavedModel
    with a `None` length runs it."""
    if BACKEND != "tensorflow":
        pytest.skip("torch runs eagerly, its shapes known")
    import tensorflow as tf

    v = rng.normal(size=(2, 5, 3)).astype("float32")
    taps = rng.normal(size=16).astype("float32")
    bias = rng.normal(size=5).astype("float32")

    @tf.function(
        input_signature=[
            tf.TensorSpec((None, None, 3)),
            tf.TensorSpec((None,)),
        ]
    )
    def served(v, bias):
        return toeplitz_product(v, tf.constant(taps), bias, 16)

    expected = reference(v, taps, bias, np.ones_like(v))[0]
    assert_close(served(v, bias).numpy(), expected, 1e-5)
