"""The decoding kernels (torch) against their references:
`"gmlp_block_with_cache"` against `GMLPBlock.reference_call_with_cache`
and `"causal_lm_with_cache"` against
`GMLPCausalLM.reference_call_with_cache`: the prompt's pass and each
decoded token, outputs and caches, float32 and mixed_bfloat16; and
`"cache_update"` against `keras.ops.slice_update`."""

import contextlib

import keras
import numpy as np
import pytest

from keras_gmlp import kernels
from keras_gmlp.layers import GMLPBlock
from tests.layer_test import randomize_weights

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="torch's kernel"
)

BLOCKS = {
    "dense": {},
    "toeplitz": {"spatial": "toeplitz"},
    "amlp_toeplitz": {"spatial": "toeplitz", "attention_dim": 8},
}


def as_numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def decode(block, prompt, tokens, mode, index_type):
    """The prompt's pass, then one token at a time: every output and the
    last cache, as numpy."""
    import torch

    kernels.configure(mode)
    cache = block.empty_cache(prompt.shape[0], 10)
    outputs = []
    with torch.no_grad():
        output, cache = block.call_with_cache(prompt, cache, 0)
        outputs.append(output)
        for offset in range(tokens.shape[1]):
            index = index_type(prompt.shape[1] + offset)
            output, cache = block.call_with_cache(
                tokens[:, offset : offset + 1], cache, index
            )
            outputs.append(output)
    return [as_numpy(x) for x in outputs] + [
        as_numpy(x) for x in keras.tree.flatten(cache)
    ]


@pytest.mark.parametrize("index_type", [int, "tensor"])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_kernel_decodes_as_the_reference(
    name, policy, index_type, rng, kernel_mode
):
    block = GMLPBlock(
        ffn_dim=48,
        sequence_length=10,
        causal=True,
        dtype=policy,
        **BLOCKS[name],
    )
    block.build((2, 10, 16))
    randomize_weights(block, rng)
    prompt = rng.normal(size=(2, 4, 16)).astype("float32")
    tokens = rng.normal(size=(2, 5, 16)).astype("float32")
    if index_type == "tensor":
        index_type = lambda i: keras.ops.convert_to_tensor(i, "int32")  # noqa: E731
    reference = decode(block, prompt, tokens, "off", index_type)
    kernel = decode(block, prompt, tokens, "on", index_type)
    tolerance = 2e-5 if policy == "float32" else 3e-2
    for got, want in zip(kernel, reference, strict=True):
        scale = max(np.abs(want).max(), 1e-3)
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * scale)


def test_kernel_declines_under_autograd_and_for_several_new_tokens(
    rng, kernel_mode
):
    from keras_gmlp.kernels.decoding import torch_gmlp_block_with_cache

    block = GMLPBlock(ffn_dim=48, sequence_length=10, causal=True)
    block.build((1, 10, 16))
    cache = block.empty_cache(1, 10)
    x = keras.ops.convert_to_tensor(rng.normal(size=(1, 2, 16)), "float32")
    assert torch_gmlp_block_with_cache(block, x, cache, 3) is NotImplemented
    import torch

    with torch.no_grad():
        assert torch_gmlp_block_with_cache(block, x, cache, 3) is NotImplemented
        assert (
            torch_gmlp_block_with_cache(block, x, cache, 0)
            is not NotImplemented
        )


def decode_causal_lm(model, token_ids, prompt_length, mode):
    """`GMLPCausalLM.call_with_cache` on the prompt, then one token at a
    time, under `torch.no_grad` as `generate` runs it: every logit and
    hidden state, and the last cache, as numpy."""
    import torch

    kernels.configure(mode)
    cache = model.backbone.empty_cache(token_ids.shape[0], token_ids.shape[1])
    outputs = []
    with torch.no_grad():
        logits, hidden, cache = model.call_with_cache(
            token_ids[:, :prompt_length], cache, 0
        )
        outputs += [logits, hidden]
        for index in range(prompt_length, token_ids.shape[1]):
            logits, hidden, cache = model.call_with_cache(
                token_ids[:, index : index + 1], cache, index
            )
            outputs += [logits, hidden]
    return [as_numpy(x) for x in outputs + keras.tree.flatten(cache)]


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("config", ["gmlp-toeplitz", "amlp-dense"])
def test_causal_lm_kernel_decodes_as_the_reference(
    config, policy, rng, kernel_mode
):
    from tests.models.test_decoding_cache import CONFIGS
    from tests.models.test_decoding_cache import LENGTH
    from tests.models.test_decoding_cache import VOCABULARY_SIZE
    from tests.models.test_decoding_cache import causal_lm

    model = causal_lm(CONFIGS[config], dtype=policy)
    token_ids = rng.integers(1, VOCABULARY_SIZE, size=(2, LENGTH))
    token_ids = keras.ops.convert_to_tensor(token_ids, "int32")
    reference = decode_causal_lm(model, token_ids, 4, "off")
    kernel = decode_causal_lm(model, token_ids, 4, "on")
    tolerance = 2e-5 if policy == "float32" else 3e-2
    for got, want in zip(kernel, reference, strict=True):
        scale = max(np.abs(want).max(), 1e-3)
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * scale)


def test_causal_lm_kernel_declines_under_autograd(rng):
    from keras_gmlp.kernels.decoding import torch_causal_lm_with_cache
    from tests.models.test_decoding_cache import CONFIGS
    from tests.models.test_decoding_cache import causal_lm

    model = causal_lm(CONFIGS["gmlp-dense"])
    cache = model.backbone.empty_cache(1, 4)
    token_ids = keras.ops.ones((1, 4), "int32")
    assert (
        torch_causal_lm_with_cache(model, token_ids, cache, 0) is NotImplemented
    )


@pytest.mark.parametrize("owned", [False, True])
@pytest.mark.parametrize("name", ["dense", "amlp_toeplitz"])
def test_kernel_writes_in_place_only_within_owned_caches(name, owned, rng):
    import torch

    from keras_gmlp.kernels import owned_caches
    from keras_gmlp.kernels.decoding import torch_gmlp_block_with_cache

    block = GMLPBlock(
        ffn_dim=48, sequence_length=10, causal=True, **BLOCKS[name]
    )
    block.build((1, 10, 16))
    randomize_weights(block, rng)
    x = keras.ops.convert_to_tensor(rng.normal(size=(1, 1, 16)), "float32")
    given = block.empty_cache(1, 10)
    with torch.no_grad():
        want = block.reference_call_with_cache(x, dict(given), 3)
        with owned_caches() if owned else contextlib.nullcontext():
            got = torch_gmlp_block_with_cache(block, x, given, 3)
    for output, expected in zip(
        keras.tree.flatten(got), keras.tree.flatten(want), strict=True
    ):
        np.testing.assert_allclose(
            as_numpy(output), as_numpy(expected), rtol=1e-5, atol=1e-5
        )
    # Each given cache is the returned one within `owned_caches()`, and
    # never changed outside it.
    assert sorted(got[1]) == sorted(given)
    for key, cache in given.items():
        assert (got[1][key] is cache) == owned
        assert bool(as_numpy(cache).any()) == owned


@pytest.mark.parametrize("name", ["gmlp-toeplitz", "amlp-dense"])
def test_generate_owns_the_caches(name, kernel_mode, monkeypatch):
    from keras_gmlp.kernels import decoding
    from tests.models.test_decoding_cache import CONFIGS
    from tests.models.test_decoding_cache import causal_lm
    from tests.models.test_decoding_cache import prompts

    model = causal_lm(CONFIGS[name])
    model.compile(sampler="greedy")
    owned = []
    decode_block = decoding.torch_gmlp_block_with_cache

    def spied(*args, **kwargs):
        owned.append(kernels.owns_caches())
        return decode_block(*args, **kwargs)

    monkeypatch.setattr(decoding, "torch_gmlp_block_with_cache", spied)
    monkeypatch.setattr(kernels.registry, "_loaded", {})
    tokens = {}
    for mode in ("off", "on"):
        kernel_mode(mode)
        model.generate_function = None
        tokens[mode] = model.generate(prompts(), stop_token_ids=None)
    np.testing.assert_array_equal(
        tokens["on"]["token_ids"], tokens["off"]["token_ids"]
    )
    assert owned and all(owned)
    assert not kernels.owns_caches()


@pytest.mark.parametrize("start", [0, 3, "tensor"])
@pytest.mark.parametrize("owned", [False, True])
def test_cache_update_writes_in_place_only_within_owned_caches(
    start, owned, rng
):
    import torch

    from keras_gmlp.kernels.decoding import torch_cache_update

    cache = rng.normal(size=(2, 2, 10, 4)).astype("float32")
    updates = rng.normal(size=(2, 2, 1, 4)).astype("float32")
    index = 3 if start == "tensor" else start
    want = cache.copy()
    want[:, :, index : index + 1] = updates
    if start == "tensor":
        start = keras.ops.convert_to_tensor(3, "int32")
    given = keras.ops.convert_to_tensor(cache)
    with torch.no_grad():
        with kernels.owned_caches() if owned else contextlib.nullcontext():
            got = kernels.dispatch(
                "cache_update",
                keras.ops.slice_update,
                given,
                [0, 0, start, 0],
                keras.ops.convert_to_tensor(updates),
            )
            declined = torch_cache_update(
                given, [0, 0, start, 0], keras.ops.convert_to_tensor(updates)
            )
    np.testing.assert_array_equal(as_numpy(got), want)
    in_place = owned and not isinstance(start, torch.Tensor)
    assert (got is given) == in_place
    assert (declined is NotImplemented) == (not in_place)
    np.testing.assert_array_equal(as_numpy(given), want if in_place else cache)


def test_cache_update_declines_under_autograd(rng):
    from keras_gmlp.kernels.decoding import torch_cache_update

    cache = keras.ops.zeros((1, 10, 4))
    updates = keras.ops.ones((1, 1, 4))
    with kernels.owned_caches():
        assert torch_cache_update(cache, [0, 2, 0], updates) is NotImplemented
    assert not as_numpy(cache).any()
