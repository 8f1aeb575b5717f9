"""The spatial gating unit with a symbolic token count, and its FFT path."""

import keras
import numpy as np
import pytest

from keras_gmlp.layers import GMLPBlock
from keras_gmlp.layers import SpatialGatingUnit
from keras_gmlp.layers.spatial_gating_unit import FFT_CROSSOVER
from keras_gmlp.layers.toeplitz_matrix import fft_token_product
from tests.gradients import gradients as layer_gradients

BACKEND = keras.config.backend()


def randomize(layer, rng, scale=0.5):
    for weight in layer.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32") * scale)


@pytest.mark.skipif(
    BACKEND not in ("tensorflow", "jax"),
    reason="Keras exports a tf_saved_model from TensorFlow and JAX only",
)
def test_saved_model_with_a_variable_length_serves_every_length(tmp_path, rng):
    import tensorflow as tf

    length = 8
    inputs = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(20, 8)(inputs)
    for spatial in ("dense", "toeplitz"):
        for causal in (False, True):
            x = GMLPBlock(
                16, sequence_length=length, spatial=spatial, causal=causal
            )(x)
    # The FFT path, forced at this length.
    for causal in (False, True):
        x = keras.layers.Dense(16)(x)
        x = SpatialGatingUnit(
            length, spatial="toeplitz", causal=causal, toeplitz_method="fft"
        )(x)
    model = keras.Model(inputs, x)
    randomize(model, rng)
    # Under JAX the `None` length is exported as a symbolic dimension.
    model.export(str(tmp_path), format="tf_saved_model", verbose=False)
    loaded = tf.saved_model.load(str(tmp_path))
    for tokens in (3, length):
        ids = rng.integers(0, 20, size=(2, tokens)).astype("int32")
        expected = keras.ops.convert_to_numpy(model(ids))
        served = loaded.serve(tf.constant(ids)).numpy()
        assert served.shape == (2, tokens, 8)
        np.testing.assert_allclose(served, expected, rtol=1e-4, atol=1e-4)


def numpy_weights(layer):
    return [
        keras.ops.convert_to_numpy(w)
        for w in (layer.kernel, layer.bias, layer.norm.gamma, layer.norm.beta)
    ]


def toeplitz_reference(kernel, length, causal):
    """`W[i, j] = w[i - j + n - 1]` (zero above the diagonal if causal)."""
    n = (len(kernel) + 1) // 2
    weight = np.zeros((length, length))
    for i in range(length):
        for j in range(length):
            if j <= i or not causal:
                weight[i, j] = kernel[i - j + n - 1]
    return weight


def sgu_reference(layer, z):
    """`u * (W @ LN(v) + b)` in float64, from the layer's weights."""
    kernel, bias, gamma, beta = (
        w.astype("float64") for w in numpy_weights(layer)
    )
    length = z.shape[1]
    u, v = np.split(z.astype("float64"), 2, axis=-1)
    mean = v.mean(-1, keepdims=True)
    v = (v - mean) / np.sqrt(v.var(-1, keepdims=True) + 1e-5) * gamma + beta
    weight = toeplitz_reference(kernel, length, layer.causal)
    return u * (np.einsum("ij,bjc->bic", weight, v) + bias[:length, None])


def make_pair(rng, causal, sequence_length=12, channels=10, dtype=None):
    """A Toeplitz unit by FFT and one by matmul, with equal random weights."""
    units = [
        SpatialGatingUnit(
            sequence_length=sequence_length,
            spatial="toeplitz",
            causal=causal,
            toeplitz_method=method,
            dtype=dtype,
        )
        for method in ("fft", "matmul")
    ]
    for unit in units:
        unit.build((None, sequence_length, channels))
    for weights in zip(*(unit.weights for unit in units), strict=True):
        values = rng.normal(size=weights[0].shape).astype("float32")
        for weight in weights:
            weight.assign(values)
    return units


def gradients(layer, z, cotangent):
    """d sum(layer(z) * cotangent) / d (z, kernel, bias), in numpy."""
    return layer_gradients(layer, z, cotangent, [layer.kernel, layer.bias])


def gradients_reference(layer, z, cotangent):
    """The kernel and bias gradients of `sgu_reference`, in float64."""
    kernel, _, gamma, beta = (w.astype("float64") for w in numpy_weights(layer))
    n = layer.sequence_length
    length = z.shape[1]
    u, v = np.split(z.astype("float64"), 2, axis=-1)
    mean = v.mean(-1, keepdims=True)
    v = (v - mean) / np.sqrt(v.var(-1, keepdims=True) + 1e-5) * gamma + beta
    gated = cotangent * u  # d loss / d (W @ v + b)
    by_weight = np.einsum("bic,bjc->ij", gated, v)
    by_kernel = np.zeros(2 * n - 1)
    for i in range(length):
        for j in range(length):
            if j <= i or not layer.causal:
                by_kernel[i - j + n - 1] += by_weight[i, j]
    by_bias = np.zeros(n)
    by_bias[:length] = gated.sum(axis=(0, 2))
    return by_kernel, by_bias


def assert_close(actual, expected, tolerance):
    """Equal to `tolerance` relative to the largest magnitude expected."""
    scale = np.abs(expected).max()
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [12, 5, 1])
def test_fft_equals_materialised_product_and_reference(causal, length, rng):
    fft, matmul = make_pair(rng, causal)
    assert fft.uses_fft(length) and not matmul.uses_fft(length)
    z = rng.normal(size=(2, length, 10)).astype("float32")
    expected = sgu_reference(fft, z)
    by_fft = keras.ops.convert_to_numpy(fft(z))
    assert_close(by_fft, expected, 1e-5)
    assert_close(by_fft, keras.ops.convert_to_numpy(matmul(z)), 1e-5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [12, 5])
def test_fft_gradients_equal_materialised_and_reference(causal, length, rng):
    fft, matmul = make_pair(rng, causal)
    z = rng.normal(size=(2, length, 10)).astype("float32")
    cotangent = rng.normal(size=(2, length, 5)).astype("float32")
    by_fft = gradients(fft, z, cotangent)
    by_matmul = gradients(matmul, z, cotangent)
    for actual, expected in zip(by_fft, by_matmul, strict=True):
        assert_close(actual, expected, 1e-5)
    by_kernel, by_bias = gradients_reference(fft, z, cotangent)
    assert_close(by_fft[1], by_kernel, 1e-5)
    assert_close(by_fft[2], by_bias, 1e-5)
    if causal:  # Taps of negative offsets see no token: no gradient.
        np.testing.assert_array_equal(by_fft[1][:11], 0.0)


@pytest.mark.parametrize("causal", [False, True])
def test_fft_under_mixed_bfloat16(causal, rng):
    """Outputs in bfloat16, weights in float32, results to bfloat16's
    precision (2^-8): the FFT itself runs in float32."""
    fft, matmul = make_pair(rng, causal, dtype="mixed_bfloat16")
    z = rng.normal(size=(2, 12, 10)).astype("float32")
    cotangent = rng.normal(size=(2, 12, 5)).astype("float32")
    by_kernel, by_bias = gradients_reference(fft, z, cotangent)
    output = fft(z)
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert all(w.dtype == "float32" for w in fft.weights)
    output = keras.ops.convert_to_numpy(keras.ops.cast(output, "float32"))
    assert_close(output, sgu_reference(fft, z), 1e-2)
    by_fft = gradients(fft, z, cotangent)
    assert_close(by_fft[1], by_kernel, 1e-2)
    assert_close(by_fft[2], by_bias, 1e-2)
    assert_close(by_fft[0], gradients(matmul, z, cotangent)[0], 1e-2)


def test_auto_takes_the_fft_from_the_crossover_on():
    crossover = FFT_CROSSOVER
    unit = SpatialGatingUnit(sequence_length=crossover, spatial="toeplitz")
    assert unit.toeplitz_method == "auto"
    assert unit.uses_fft(crossover)
    assert not unit.uses_fft(crossover - 1)
    # A length known only when run: decided by the largest length.
    assert unit.uses_fft(None)
    short = SpatialGatingUnit(sequence_length=crossover - 1, spatial="toeplitz")
    assert not short.uses_fft(None)
    assert not SpatialGatingUnit(sequence_length=crossover).uses_fft(crossover)
    matmul = SpatialGatingUnit(
        sequence_length=crossover, spatial="toeplitz", toeplitz_method="matmul"
    )
    assert not matmul.uses_fft(crossover)


def test_config_round_trip_keeps_the_method():
    unit = SpatialGatingUnit(
        sequence_length=5, spatial="toeplitz", toeplitz_method="fft"
    )
    config = unit.get_config()
    assert config["toeplitz_method"] == "fft"
    assert SpatialGatingUnit.from_config(config).get_config() == config


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"toeplitz_method": "conv"}, "toeplitz_method='conv'"),
        ({"toeplitz_method": "fft"}, "spatial='dense'"),
    ],
)
def test_invalid_method(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SpatialGatingUnit(**kwargs)


def test_masked_lm_of_8192_tokens_takes_a_training_step(rng):
    from keras_gmlp.models import masked_lm

    length = 8192
    model = masked_lm(
        vocabulary_size=50,
        sequence_length=length,
        num_layers=1,
        hidden_dim=16,
        ffn_dim=32,
    )
    unit = model.get_layer("block_0").spatial_gating_unit
    assert unit.uses_fft(length)
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    ids = rng.integers(1, 50, size=(1, length)).astype("int32")
    kernel = keras.ops.convert_to_numpy(unit.kernel)
    loss = model.train_on_batch(ids, ids, return_dict=True)["loss"]
    assert np.isfinite(loss)
    assert np.abs(keras.ops.convert_to_numpy(unit.kernel) - kernel).max() > 0


@pytest.mark.skipif(
    BACKEND != "tensorflow",
    reason="a token count known only when run: a TensorFlow graph traced "
    "with a None length (Keras relaxes fit's shapes to it)",
)
@pytest.mark.parametrize("causal", [False, True])
def test_unknown_length_in_a_graph_gives_the_same_values(causal, rng):
    import tensorflow as tf

    fft, matmul = make_pair(rng, causal)
    z = rng.normal(size=(2, 7, 10)).astype("float32")
    cotangent = rng.normal(size=(2, 7, 5)).astype("float32")
    eager = {unit: gradients(unit, z, cotangent) for unit in (fft, matmul)}
    for unit in (fft, matmul):

        @tf.function(input_signature=[tf.TensorSpec((None, None, 10))])
        def traced(z, unit=unit):
            assert z.shape[1] is None
            with tf.GradientTape() as tape:
                tape.watch(z)
                outputs = unit(z)
                loss = tf.reduce_sum(outputs * cotangent)
            grads = tape.gradient(loss, [z, unit.kernel.value, unit.bias.value])
            return outputs, grads

        outputs, grads = traced(tf.constant(z))
        assert_close(outputs.numpy(), sgu_reference(unit, z), 1e-5)
        for actual, expected in zip(grads, eager[unit], strict=True):
            # A gather's gradient comes as IndexedSlices.
            actual = tf.convert_to_tensor(actual).numpy()
            assert_close(actual, expected, 1e-5)


@pytest.mark.parametrize("fft_length", [8, 15])
@pytest.mark.parametrize("length", [8, 5, 1])
def test_fft_token_product_is_the_circular_convolution(length, fft_length, rng):
    """`y[k] = sum_j v[j] taps[(k - j) mod L] + b[k]` over the tokens, `v`
    zero-padded to `L`, the first `length` outputs kept."""
    v = rng.normal(size=(2, length, 3)).astype("float32")
    taps = rng.normal(size=(fft_length,)).astype("float32")
    bias = rng.normal(size=(length,)).astype("float32")
    padded = np.zeros((2, fft_length, 3))
    padded[:, :length] = v
    expected = np.zeros((2, fft_length, 3))
    for k in range(fft_length):
        for j in range(fft_length):
            expected[:, k] += padded[:, j] * taps[(k - j) % fft_length]
    expected = expected[:, :length] + bias[:, None]
    actual = fft_token_product(
        keras.ops.convert_to_tensor(v),
        keras.ops.convert_to_tensor(taps),
        keras.ops.convert_to_tensor(bias),
        fft_length,
    )
    assert_close(keras.ops.convert_to_numpy(actual), expected, 1e-5)
