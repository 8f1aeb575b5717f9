import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_gmlp.layers import SpatialGatingUnit
from tests import reference
from tests.layer_test import LayerTestCase
from tests.layer_test import randomize_weights


def numpy_weights(layer):
    return (
        keras.ops.convert_to_numpy(layer.kernel),
        keras.ops.convert_to_numpy(layer.bias),
        keras.ops.convert_to_numpy(layer.norm.gamma),
        keras.ops.convert_to_numpy(layer.norm.beta),
    )


# The unit's token product is a batched matmul under every backend (an
# einsum for decoding); a 4-D input has two leading axes to broadcast over.
@pytest.mark.parametrize("shape", [(3, 7, 10), (2, 3, 7, 10)])
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_matches_numpy_formula(spatial, training, shape, rng):
    z = rng.normal(size=shape).astype("float32")
    layer = SpatialGatingUnit(spatial=spatial)
    layer.build(z.shape)
    randomize_weights(layer, rng)
    kernel, bias, gamma, beta = numpy_weights(layer)
    weight = kernel if spatial == "dense" else reference.toeplitz(kernel, 7)
    expected = reference.spatial_gating(z, weight, bias, gamma, beta)
    output = keras.ops.convert_to_numpy(layer(z, training=training))
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


def test_attention_is_added_before_the_gate(rng):
    z = rng.normal(size=(2, 5, 8)).astype("float32")
    attention = rng.normal(size=(2, 5, 4)).astype("float32")
    layer = SpatialGatingUnit()
    layer.build(z.shape)
    randomize_weights(layer, rng)
    kernel, bias, gamma, beta = numpy_weights(layer)
    expected = reference.spatial_gating(
        z, kernel, bias, gamma, beta, attention=attention
    )
    output = keras.ops.convert_to_numpy(layer(z, attention=attention))
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "gating, formula",
    [
        ("multiplicative", lambda z, f: z * f),
        ("additive", lambda z, f: z + f),
        ("linear", lambda z, f: f),
    ],
)
def test_ablation_gatings(gating, formula, rng):
    z = rng.normal(size=(2, 6, 5)).astype("float32")
    layer = SpatialGatingUnit(gating=gating)
    layer.build(z.shape)
    randomize_weights(layer, rng)
    kernel, bias, gamma, beta = numpy_weights(layer)
    projected = (
        np.einsum(
            "ij,bjc->bic", kernel, reference.layer_norm(z, gamma, beta, 1e-5)
        )
        + bias[:, None]
    )
    output = keras.ops.convert_to_numpy(layer(z))
    assert output.shape == z.shape
    np.testing.assert_allclose(
        output, formula(z, projected), rtol=1e-4, atol=1e-4
    )


def test_toeplitz_weight_is_shift_invariant(rng):
    layer = SpatialGatingUnit(sequence_length=6, spatial="toeplitz")
    layer.build((None, 6, 4))
    randomize_weights(layer, rng)
    weight = keras.ops.convert_to_numpy(layer.spatial_weight())
    assert layer.kernel.shape == (11,)
    for shift in range(-5, 6):
        diagonal = np.diagonal(weight, offset=-shift)
        np.testing.assert_array_equal(diagonal, diagonal[0])
    # Every one of the 2n - 1 weights is used, none is duplicated.
    assert len(np.unique(weight)) == 11


@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
@pytest.mark.parametrize("causal", [True, False])
def test_causality_by_perturbation(spatial, causal, rng):
    z = rng.normal(size=(1, 8, 6)).astype("float32")
    layer = SpatialGatingUnit(spatial=spatial, causal=causal)
    layer.build(z.shape)
    randomize_weights(layer, rng)
    j = 4
    perturbed = z.copy()
    perturbed[:, j] = rng.normal(size=perturbed[:, j].shape)
    before = keras.ops.convert_to_numpy(layer(z))
    after = keras.ops.convert_to_numpy(layer(perturbed))
    moved = np.abs(after - before).max(axis=(0, 2)) > 1e-6
    assert moved[j]
    assert moved[:j].any() == (not causal)
    if causal:
        weight = keras.ops.convert_to_numpy(layer.spatial_weight())
        np.testing.assert_array_equal(np.triu(weight, 1), 0.0)


@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_shorter_sequence_uses_leading_block(spatial, rng):
    layer = SpatialGatingUnit(sequence_length=9, spatial=spatial)
    layer.build((None, 9, 8))
    randomize_weights(layer, rng)
    z = rng.normal(size=(2, 5, 8)).astype("float32")
    kernel, bias, gamma, beta = numpy_weights(layer)
    if spatial == "dense":
        weight = kernel[:5, :5]
    else:
        weight = reference.toeplitz(kernel, 9)[:5, :5]
    expected = reference.spatial_gating(z, weight, bias[:5], gamma, beta)
    output = keras.ops.convert_to_numpy(layer(z))
    np.testing.assert_allclose(output, expected, rtol=1e-4, atol=1e-4)


def test_longer_sequence_raises_naming_both_lengths(rng):
    layer = SpatialGatingUnit(sequence_length=4)
    layer.build((None, 4, 8))
    with pytest.raises(ValueError, match=r"6 tokens.*at most 4"):
        layer(rng.normal(size=(1, 6, 8)).astype("float32"))


def test_initial_gate_is_identity(rng):
    z = rng.normal(size=(2, 16, 12)).astype("float32")
    layer = SpatialGatingUnit()
    output = keras.ops.convert_to_numpy(layer(z))
    np.testing.assert_allclose(output, z[..., :6], atol=1e-4)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.bias), 1.0)
    assert np.abs(keras.ops.convert_to_numpy(layer.kernel)).max() < 1e-4


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"spatial": "conv"}, "spatial='conv'"),
        ({"gating": "max"}, "gating='max'"),
        ({"sequence_length": 0}, "sequence_length=0"),
    ],
)
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SpatialGatingUnit(**kwargs)


def test_odd_channels_raise():
    with pytest.raises(ValueError, match="received 7 channels"):
        SpatialGatingUnit().build((None, 4, 7))


def test_mixed_precision(rng):
    layer = SpatialGatingUnit(dtype="mixed_bfloat16")
    z = rng.normal(size=(2, 4, 6)).astype("float32")
    attention = keras.ops.cast(rng.normal(size=(2, 4, 3)), "bfloat16")
    output = layer(z, attention=attention)
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert all(w.dtype == "float32" for w in layer.weights)


class SpatialGatingUnitLayerTest(LayerTestCase):
    @parameterized.named_parameters(
        ("dense", {}, (2, 6, 4)),
        (
            "causal_toeplitz_additive_shorter_input",
            {
                "sequence_length": 9,
                "spatial": "toeplitz",
                "causal": True,
                "gating": "additive",
            },
            (2, 6, 8),
        ),
    )
    def test_layer_behaviors(self, kwargs, output_shape):
        rng = np.random.default_rng(0)
        self.run_layer_test(
            cls=SpatialGatingUnit,
            init_kwargs=kwargs,
            input_data=rng.normal(size=(2, 6, 8)).astype("float32"),
            expected_output_shape=output_shape,
            expected_num_trainable_weights=4,
        )
