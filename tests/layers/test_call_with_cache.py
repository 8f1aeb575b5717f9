"""Incremental decoding of the layers against their full causal pass."""

import keras
import numpy as np
import pytest

from keras_gmlp.layers import GMLPBlock
from keras_gmlp.layers import SpatialGatingUnit
from keras_gmlp.layers import TinyAttention
from tests import reference
from tests.layer_test import randomize_weights

LENGTH = 8
PREFILL = 3
GATINGS = ["split", "multiplicative", "additive", "linear"]
# Of the largest output: float32 rounding only; under mixed_bfloat16
# every activation is rounded to bfloat16 (8 bits) and summed in another
# order.
TOLERANCE = {"float32": 1e-5, "mixed_bfloat16": 3e-2}


def assert_close(actual, expected, policy):
    atol = TOLERANCE[policy] * max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol)


def as_numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def decode(layer, inputs, cache, extra=None, **kwargs):
    """Outputs of every position: a prefill of `PREFILL` tokens at index
    0, then one token at a time at a tensor index (as a sampler's loop
    passes it)."""
    extra = {} if extra is None else extra
    first = {key: value[:, :PREFILL] for key, value in extra.items()}
    output, cache = layer.call_with_cache(
        inputs[:, :PREFILL], cache, 0, **first, **kwargs
    )
    outputs = [as_numpy(output)]
    for index in range(PREFILL, inputs.shape[1]):
        step = {
            key: value[:, index : index + 1] for key, value in extra.items()
        }
        output, cache = layer.call_with_cache(
            inputs[:, index : index + 1],
            cache,
            keras.ops.convert_to_tensor(index, "int32"),
            **step,
            **kwargs,
        )
        outputs.append(as_numpy(output))
    return np.concatenate(outputs, axis=1), cache


@pytest.fixture(params=["float32", "mixed_bfloat16"])
def policy(request):
    keras.config.set_dtype_policy(request.param)
    return request.param


@pytest.mark.parametrize("gating", GATINGS)
@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_spatial_gating_unit_rows_match_the_full_pass(
    spatial, gating, policy, rng
):
    channels = 6
    z = rng.normal(size=(2, LENGTH, channels)).astype("float32")
    layer = SpatialGatingUnit(
        sequence_length=LENGTH + 2, spatial=spatial, causal=True, gating=gating
    )
    layer.build(z.shape)
    randomize_weights(layer, rng)
    # The cache may be shorter than the unit's sequence_length.
    cache = layer.empty_cache(2, LENGTH)
    outputs, cache = decode(layer, z, cache)
    full = as_numpy(layer(z))
    assert_close(outputs, full, policy)

    # Independent reference: the cache holds LayerNorm(v), and output i
    # is the gate of sum_{j <= i} W[i, j] z_j + b_i.
    kernel = as_numpy(layer.kernel)
    bias = as_numpy(layer.bias)
    gamma, beta = as_numpy(layer.norm.gamma), as_numpy(layer.norm.beta)
    u, v = (z[..., :3], z[..., 3:]) if gating == "split" else (z, z)
    normalized = reference.layer_norm(v, gamma, beta, 1e-5)
    assert_close(as_numpy(cache), normalized, policy)
    if spatial == "dense":
        weight = kernel[:LENGTH, :LENGTH]
    else:
        n = LENGTH + 2
        weight = reference.toeplitz(kernel, n)[:LENGTH, :LENGTH]
    expected = []
    for i in range(LENGTH):
        row = np.einsum("j,bjc->bc", weight[i, : i + 1], normalized[:, : i + 1])
        expected.append(row + bias[i])
    mixed = np.stack(expected, axis=1)
    gate = {
        "split": lambda: u * mixed,
        "multiplicative": lambda: u * mixed,
        "additive": lambda: u + mixed,
        "linear": lambda: mixed,
    }[gating]()
    assert_close(outputs, gate, policy)


@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_spatial_gating_unit_chunks_match_the_full_pass(spatial, rng):
    # Several new positions per call at a nonzero index (speculative or
    # chunked decoding): each chunk's rows, not one row.
    z = rng.normal(size=(2, LENGTH, 6)).astype("float32")
    layer = SpatialGatingUnit(
        sequence_length=LENGTH + 3, spatial=spatial, causal=True
    )
    layer.build(z.shape)
    randomize_weights(layer, rng)
    cache = layer.empty_cache(2, LENGTH)
    outputs = []
    for start, stop in ((0, 2), (2, 5), (5, LENGTH)):
        index = start if start == 0 else keras.ops.convert_to_tensor(start)
        output, cache = layer.call_with_cache(z[:, start:stop], cache, index)
        outputs.append(as_numpy(output))
    kernel = as_numpy(layer.kernel)
    if spatial == "dense":
        weight = kernel[:LENGTH, :LENGTH]
    else:
        weight = reference.toeplitz(kernel, LENGTH + 3)[:LENGTH, :LENGTH]
    gamma, beta = as_numpy(layer.norm.gamma), as_numpy(layer.norm.beta)
    normalized = reference.layer_norm(z[..., 3:], gamma, beta, 1e-5)
    mixed = np.einsum("ij,bjc->bic", np.tril(weight), normalized)
    expected = z[..., :3] * (mixed + as_numpy(layer.bias)[:LENGTH, None])
    np.testing.assert_allclose(
        np.concatenate(outputs, axis=1), expected, rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_spatial_gating_unit_row_ignores_the_cache_after_it(
    spatial, policy, rng
):
    # generate() prefills the whole buffer, padding included, so while
    # decoding position i the cache holds stale entries after i: the row
    # must not see them, however large.
    z = rng.normal(size=(2, LENGTH, 6)).astype("float32")
    layer = SpatialGatingUnit(
        sequence_length=LENGTH + 2, spatial=spatial, causal=True
    )
    layer.build(z.shape)
    randomize_weights(layer, rng)
    gamma, beta = as_numpy(layer.norm.gamma), as_numpy(layer.norm.beta)
    normalized = reference.layer_norm(z[..., 3:], gamma, beta, 1e-5)
    index = 4
    stale = normalized.copy()
    stale[:, index:] = 1e3 * rng.normal(size=stale[:, index:].shape)
    output, cache = layer.call_with_cache(
        z[:, index : index + 1],
        keras.ops.cast(stale, layer.compute_dtype),
        keras.ops.convert_to_tensor(index, "int32"),
    )
    kernel = as_numpy(layer.kernel)
    if spatial == "dense":
        row = kernel[index, : index + 1]
    else:
        row = reference.toeplitz(kernel, LENGTH + 2)[index, : index + 1]
    mixed = np.einsum("j,bjc->bc", row, normalized[:, : index + 1])
    expected = z[:, index, :3] * (mixed + as_numpy(layer.bias)[index])
    assert_close(as_numpy(output)[:, 0], expected, policy)
    # The cache's other entries are kept as they were.
    kept = np.delete(np.arange(LENGTH), index)
    assert_close(as_numpy(cache)[:, kept], stale[:, kept], policy)


@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_spatial_gating_unit_rows_at_a_tensor_position(spatial, rng):
    # A compiled decoding loop (JAX, TensorFlow) holds the position as a
    # tensor: the row is the masked max_length one.
    z = rng.normal(size=(2, LENGTH, 6)).astype("float32")
    layer = SpatialGatingUnit(
        sequence_length=LENGTH + 2, spatial=spatial, causal=True
    )
    layer.build(z.shape)
    randomize_weights(layer, rng)
    cache = layer.empty_cache(2, LENGTH)
    _, cache = layer.call_with_cache(z[:, :3], cache, 0)
    outputs, _ = layer.call_with_cache(
        z[:, 3:4], cache, keras.ops.convert_to_tensor(3, "int32")
    )
    assert_close(as_numpy(outputs), as_numpy(layer(z))[:, 3:4], "float32")


def test_spatial_gating_unit_adds_the_attention(rng):
    z = rng.normal(size=(2, LENGTH, 8)).astype("float32")
    attention = rng.normal(size=(2, LENGTH, 4)).astype("float32")
    layer = SpatialGatingUnit(spatial="toeplitz", causal=True)
    layer.build(z.shape)
    randomize_weights(layer, rng)
    outputs, _ = decode(
        layer,
        z,
        layer.empty_cache(2, LENGTH),
        extra={"attention": attention},
    )
    full = as_numpy(layer(z, attention=attention))
    np.testing.assert_allclose(outputs, full, rtol=1e-5, atol=1e-5)


def test_fft_prefill_matches_the_rows(rng):
    # The prefill goes through the FFT as the full pass does; the rows of
    # the later steps are materialised.
    z = rng.normal(size=(1, LENGTH, 4)).astype("float32")
    layer = SpatialGatingUnit(
        spatial="toeplitz", causal=True, toeplitz_method="fft"
    )
    layer.build(z.shape)
    randomize_weights(layer, rng)
    outputs, _ = decode(layer, z, layer.empty_cache(1, LENGTH))
    np.testing.assert_allclose(
        outputs, as_numpy(layer(z)), rtol=1e-4, atol=1e-4
    )


def test_tiny_attention_matches_the_full_pass_with_padding(policy, rng):
    x = rng.normal(size=(2, LENGTH, 6)).astype("float32")
    # Padding inside the cached positions: keys 1 and 5 of row 0.
    padding_mask = np.ones((2, LENGTH), bool)
    padding_mask[0, [1, 5]] = False
    layer = TinyAttention(4, output_dim=5, causal=True)
    layer.build(x.shape)
    randomize_weights(layer, rng)
    outputs, cache = decode(
        layer,
        x,
        layer.empty_cache(2, LENGTH),
        padding_mask=padding_mask,
    )
    full = as_numpy(layer(x, padding_mask=padding_mask))
    assert_close(outputs, full, policy)
    qkv_kernel = as_numpy(layer.qkv.kernel)
    qkv_bias = as_numpy(layer.qkv.bias)
    allowed = np.tril(np.ones((LENGTH, LENGTH), bool)) & padding_mask[:, None]
    expected = reference.tiny_attention(
        x,
        qkv_kernel,
        qkv_bias,
        as_numpy(layer.output_projection.kernel),
        as_numpy(layer.output_projection.bias),
        mask=allowed,
    )
    assert_close(outputs, expected, policy)
    # The cache holds the keys and values.
    qkv = x @ qkv_kernel + qkv_bias
    assert_close(as_numpy(cache[:, 0]), qkv[..., 4:8], policy)
    assert_close(as_numpy(cache[:, 1]), qkv[..., 8:], policy)


@pytest.mark.parametrize("gating", GATINGS)
@pytest.mark.parametrize(
    "spatial, attention_dim",
    [("dense", None), ("toeplitz", None), ("dense", 4), ("toeplitz", 4)],
    ids=["gmlp-dense", "gmlp-toeplitz", "amlp-dense", "amlp-toeplitz"],
)
def test_block_matches_the_full_pass(
    spatial, attention_dim, gating, policy, rng
):
    x = rng.normal(size=(2, LENGTH, 8)).astype("float32")
    block = GMLPBlock(
        ffn_dim=12,
        sequence_length=LENGTH,
        attention_dim=attention_dim,
        spatial=spatial,
        causal=True,
        gating=gating,
    )
    block.build(x.shape)
    randomize_weights(block, rng)
    cache = block.empty_cache(2, LENGTH)
    assert sorted(cache) == (
        ["spatial_gating_unit"]
        if attention_dim is None
        else ["spatial_gating_unit", "tiny_attention"]
    )
    outputs, _ = decode(block, x, cache)
    full = as_numpy(block(x))
    assert_close(outputs, full, policy)
    # The steps do depend on the cache: a zero cache changes them.
    stale, _ = block.call_with_cache(
        x[:, -1:], block.empty_cache(2, LENGTH), LENGTH - 1
    )
    difference = np.abs(as_numpy(stale) - full[:, -1:]).max()
    assert difference > 100 * TOLERANCE["float32"] * np.abs(full).max()


def test_non_causal_layers_refuse_a_cache(rng):
    block = GMLPBlock(ffn_dim=8, attention_dim=4)
    block.build((1, LENGTH, 4))
    x = np.zeros((1, 1, 4), "float32")
    with pytest.raises(ValueError, match="causal=False.*causal GMLPBlock"):
        block.call_with_cache(x, {}, 0)
    with pytest.raises(ValueError, match="causal=False"):
        block.empty_cache(1, LENGTH)
    with pytest.raises(ValueError, match="causal=False.*TinyAttention"):
        block.tiny_attention.empty_cache(1, LENGTH)
    with pytest.raises(ValueError, match="causal=False.*SpatialGatingUnit"):
        block.spatial_gating_unit.empty_cache(1, LENGTH)


def test_a_cache_longer_than_the_weights_is_refused():
    layer = SpatialGatingUnit(causal=True)
    layer.build((1, LENGTH, 4))
    with pytest.raises(ValueError, match="9 tokens.*at most 8"):
        layer.empty_cache(1, LENGTH + 1)
