import keras
import numpy as np
import pytest
from absl.testing import parameterized

from keras_gmlp.layers import GMLPBlock
from tests import reference
from tests.gradients import gradients
from tests.layer_test import LayerTestCase
from tests.layer_test import randomize_weights


def array(x):
    return keras.ops.convert_to_numpy(x)


def block_reference(block, x):
    """The paper's block in numpy, from the layer's weights."""
    norm = block.norm
    hidden = reference.layer_norm(x, array(norm.gamma), array(norm.beta), 1e-6)
    expanded = reference.gelu(
        hidden @ array(block.channel_projection_in.kernel)
        + array(block.channel_projection_in.bias)
    )
    attention = None
    if block.tiny_attention is not None:
        attn = block.tiny_attention
        attention = reference.tiny_attention(
            hidden,
            array(attn.qkv.kernel),
            array(attn.qkv.bias),
            array(attn.output_projection.kernel),
            array(attn.output_projection.bias),
        )
    sgu = block.spatial_gating_unit
    weight = array(sgu.kernel)
    if sgu.spatial == "toeplitz":
        weight = reference.toeplitz(weight, x.shape[-2])
    if sgu.causal:
        weight = np.tril(weight)
    gated = reference.spatial_gating(
        expanded,
        weight,
        array(sgu.bias),
        array(sgu.norm.gamma),
        array(sgu.norm.beta),
        attention=attention,
    )
    out = block.channel_projection_out
    return x + gated @ array(out.kernel) + array(out.bias)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("attention_dim", [None, 4])
def test_matches_numpy_reference(attention_dim, policy, rng):
    # Under TensorFlow the bfloat16 inference call takes its own gate on a
    # CPU with AMX (`keras_gmlp.kernels.tensorflow_spatial_gate.
    # inference_spatial_gate`), oneDNN's fused product elsewhere; the
    # gate's tests take it on any CPU.
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=12, attention_dim=attention_dim, dtype=policy)
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    expected = block_reference(block, x.astype("float64"))
    tolerance = 1e-4 if policy == "float32" else 2e-2
    for training in (False, True):
        outputs = array(block(x, training=training)).astype("float64")
        np.testing.assert_allclose(
            outputs, expected, rtol=0, atol=tolerance * np.abs(expected).max()
        )


def test_initial_block_is_residual_feed_forward(rng):
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=12)
    block.build(x.shape)
    hidden = reference.layer_norm(x, 1.0, 0.0, 1e-6)
    expanded = reference.gelu(
        hidden @ array(block.channel_projection_in.kernel)
    )
    expected = x + expanded[..., :6] @ array(
        block.channel_projection_out.kernel
    )
    np.testing.assert_allclose(array(block(x)), expected, atol=1e-4)


def test_drop_path_per_sample_in_training_only(rng):
    x = rng.normal(size=(64, 4, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=8, drop_path_rate=0.5)
    inference = array(block(x, training=False))
    trained = array(block(x, training=True))
    branch = inference - x
    dropped = np.all(np.isclose(trained, x, atol=1e-6), axis=(1, 2))
    kept = np.all(np.isclose(trained, x + 2.0 * branch, atol=1e-4), axis=(1, 2))
    assert np.all(dropped | kept)
    assert 10 < dropped.sum() < 54


@pytest.mark.parametrize("causal", [True, False])
def test_causal_block_by_perturbation_with_padding(causal, rng):
    # Rows without padding, with left padding and with right padding.
    padding_mask = np.array(
        [[1] * 8, [0, 0, 0] + [1] * 5, [1] * 5 + [0, 0, 0]], bool
    )
    x = rng.normal(size=(3, 8, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=8, attention_dim=4, causal=causal)
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    before = array(block(x, padding_mask=padding_mask))
    for j in range(1, 8):
        perturbed = x.copy()
        perturbed[:, j] = rng.normal(size=(3, 8))
        after = array(block(perturbed, padding_mask=padding_mask))
        moved = np.abs(after - before).max(axis=-1)
        assert moved[:, j].min() > 0.0
        if causal:
            np.testing.assert_array_equal(moved[:, :j], 0.0)
        else:
            assert moved[:, :j].min() > 0.0


def numpy_block(x, w):
    """The block of `reference.gmlp_block_gradients`, forward."""
    hidden = reference.layer_norm(x, w["gamma1"], w["beta1"], 1e-6)
    expanded = reference.gelu(hidden @ w["kernel1"] + w["bias1"])
    gated = reference.spatial_gating(
        expanded, w["weight"], w["bias"], w["gamma2"], w["beta2"]
    )
    return x + gated @ w["kernel2"] + w["bias2"]


def test_numpy_block_gradients_match_finite_differences(rng):
    # The reference below is itself checked: central differences of the
    # numpy forward, in float64.
    x = rng.normal(size=(2, 3, 4))
    shapes = {
        "gamma1": (4,),
        "beta1": (4,),
        "kernel1": (4, 6),
        "bias1": (6,),
        "gamma2": (3,),
        "beta2": (3,),
        "weight": (3, 3),
        "bias": (3,),
        "kernel2": (3, 4),
        "bias2": (4,),
    }
    weights = {name: rng.normal(size=shape) for name, shape in shapes.items()}
    upstream = rng.normal(size=x.shape)
    analytic = reference.gmlp_block_gradients(x, weights, upstream)
    step = 1e-6
    for name, value in [("x", x), *weights.items()]:
        numeric = np.zeros(value.shape)
        for index in np.ndindex(value.shape):
            moved = []
            for sign in (1.0, -1.0):
                shifted = value.copy()
                shifted[index] += sign * step
                if name == "x":
                    out = numpy_block(shifted, weights)
                else:
                    out = numpy_block(x, {**weights, name: shifted})
                moved.append((out * upstream).sum())
            numeric[index] = (moved[0] - moved[1]) / (2 * step)
        np.testing.assert_allclose(
            analytic[name], numeric, rtol=1e-5, atol=1e-6, err_msg=name
        )


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize(
    "spatial, causal, method",
    [
        ("dense", False, None),
        ("toeplitz", True, "matmul"),
        ("toeplitz", True, "fft"),
    ],
)
def test_gradients_match_numpy_reference(
    spatial, causal, method, policy, training, rng
):
    # With the kernels (the default on a CPU), in JAX training the gate
    # recomputes its GELU and norm in the backward pass
    # (`keras_gmlp.kernels.jax_spatial_gate`) from the projection's halves
    # taken apart (`split_dense`); the FFT product takes the unit's call.
    # Under TensorFlow outside training a bfloat16 block takes the
    # inference gate's XLA functions, which TensorFlow differentiates
    # itself (a model fine-tuned in inference mode). Every backend's
    # gradients must be the chain rule's.
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=12, spatial=spatial, causal=causal, dtype=policy)
    block.build(x.shape)
    if method is not None:
        block.spatial_gating_unit.toeplitz_method = method
    randomize_weights(block, rng, scale=0.3)
    sgu = block.spatial_gating_unit
    variables = {
        "gamma1": block.norm.gamma,
        "beta1": block.norm.beta,
        "kernel1": block.channel_projection_in.kernel,
        "bias1": block.channel_projection_in.bias,
        "gamma2": sgu.norm.gamma,
        "beta2": sgu.norm.beta,
        "weight": sgu.kernel,
        "bias": sgu.bias,
        "kernel2": block.channel_projection_out.kernel,
        "bias2": block.channel_projection_out.bias,
    }
    weights = {
        name: array(v).astype("float64") for name, v in variables.items()
    }
    if spatial == "toeplitz":
        weights["weight"] = reference.toeplitz(weights["weight"], 6)
    if causal:
        weights["weight"] = np.tril(weights["weight"])
    upstream = rng.normal(size=x.shape)
    want = reference.gmlp_block_gradients(
        x.astype("float64"), weights, upstream
    )
    if spatial == "toeplitz":
        # The kernel's entry `k` is every `W[i, j]` with `i - j = k - 5`.
        matrix = want["weight"] * np.tril(np.ones((6, 6)))
        want["weight"] = np.array(
            [np.trace(matrix, offset=5 - k) for k in range(11)]
        )
    got = gradients(
        block,
        x,
        upstream.astype("float32"),
        list(variables.values()),
        training=training,
    )
    tolerance = 1e-5 if policy == "float32" else 3e-2
    for name, value in zip(["x", *variables], got, strict=True):
        scale = np.abs(want[name]).max()
        np.testing.assert_allclose(
            value, want[name], rtol=0, atol=tolerance * scale, err_msg=name
        )


def test_odd_ffn_dim_raises():
    with pytest.raises(ValueError, match="ffn_dim=7"):
        GMLPBlock(ffn_dim=7)


def test_unknown_spatial_raises():
    with pytest.raises(ValueError, match="spatial='circulant'"):
        GMLPBlock(ffn_dim=8, spatial="circulant")


class GMLPBlockLayerTest(LayerTestCase):
    @parameterized.named_parameters(
        ("gmlp", {}, 10),
        (
            "causal_amlp_toeplitz",
            {
                "sequence_length": 9,
                "attention_dim": 4,
                "spatial": "toeplitz",
                "causal": True,
                "drop_path_rate": 0.1,
                "spatial_initializer": "zeros",
            },
            14,
        ),
    )
    def test_layer_behaviors(self, kwargs, num_weights):
        rng = np.random.default_rng(0)
        self.run_layer_test(
            cls=GMLPBlock,
            init_kwargs={"ffn_dim": 12, **kwargs},
            input_data=rng.normal(size=(2, 6, 8)).astype("float32"),
            expected_output_shape=(2, 6, 8),
            padding_mask=np.array(
                [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], bool
            ),
            expected_num_trainable_weights=num_weights,
            expected_num_non_trainable_variables=1,  # the drop path's seed
        )


@pytest.mark.parametrize("layer_name", ["block", "unit", "attention"])
def test_layers_pass_the_keras_mask_on(layer_name):
    from keras_gmlp.layers import SpatialGatingUnit
    from keras_gmlp.layers import TinyAttention

    layer = {
        "block": lambda: GMLPBlock(ffn_dim=8),
        "unit": lambda: SpatialGatingUnit(),
        "attention": lambda: TinyAttention(4),
    }[layer_name]()
    x = keras.ops.ones((2, 5, 6))
    layer(x)
    mask = keras.ops.convert_to_tensor(
        [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "bool"
    )
    assert layer.supports_masking
    assert layer.compute_mask(x, mask) is mask
