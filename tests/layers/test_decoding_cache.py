"""The decoding caches' writes (`keras_gmlp.layers.decoding_cache`): in
place only where a decoding loop owns the caches."""

import contextlib

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_gmlp.layers import SpatialGatingUnit
from keras_gmlp.layers.decoding_cache import owned_caches
from keras_gmlp.layers.decoding_cache import write_cache
from tests.models.test_decoding_cache import CONFIGS
from tests.models.test_decoding_cache import RecomputeCausalLM
from tests.models.test_decoding_cache import causal_lm
from tests.models.test_decoding_cache import prompts


def decoded_unit(rng):
    unit = SpatialGatingUnit(sequence_length=6, causal=True)
    unit.build((1, 6, 8))
    unit.kernel.assign(rng.normal(size=unit.kernel.shape).astype("float32"))
    prefill = rng.normal(size=(1, 3, 8)).astype("float32")
    _, cache = unit.call_with_cache(prefill, unit.empty_cache(1, 6), 0)
    return unit, cache


def test_a_cache_given_outside_a_decoding_loop_is_not_changed(rng):
    unit, cache = decoded_unit(rng)
    before = ops.convert_to_numpy(cache).copy()
    token = rng.normal(size=(1, 1, 8)).astype("float32")
    _, updated = unit.call_with_cache(token, cache, 3)
    np.testing.assert_array_equal(ops.convert_to_numpy(cache), before)
    assert np.any(ops.convert_to_numpy(updated)[0, 3] != 0)


def test_write_cache_writes_the_update_at_its_start(rng):
    cache = rng.normal(size=(2, 5, 3)).astype("float32")
    update = rng.normal(size=(2, 2, 3)).astype("float32")
    expected = cache.copy()
    expected[:, 1:3] = update
    for scope in (owned_caches, contextlib.nullcontext):
        with scope():
            written = write_cache(
                ops.convert_to_tensor(cache), [0, 1, 0], update
            )
        np.testing.assert_array_equal(ops.convert_to_numpy(written), expected)


@pytest.mark.skipif(keras.config.backend() != "torch", reason="eager torch")
def test_eager_torch_writes_an_owned_cache_in_place(rng):
    import torch

    unit, cache = decoded_unit(rng)
    token = rng.normal(size=(1, 1, 8)).astype("float32")
    with torch.no_grad(), owned_caches():
        _, updated = unit.call_with_cache(token, cache, 3)
    assert updated.data_ptr() == cache.data_ptr()
    # Not while a gradient is recorded, nor at a tensor position.
    with owned_caches():
        _, copied = unit.call_with_cache(token, cache, 4)
        with torch.no_grad():
            at_tensor = write_cache(
                cache, [0, torch.tensor(4), 0], torch.zeros(1, 1, 4)
            )
    assert copied.data_ptr() != cache.data_ptr()
    assert at_tensor.data_ptr() != cache.data_ptr()


def cloned_caches(function, cache_shapes):
    """How many cache-shaped tensors torch cloned while `function` ran
    (Keras' torch `slice_update` clones its input)."""
    import torch

    with torch.profiler.profile(record_shapes=True) as trace:
        function()
    return sum(
        event.count
        for event in trace.key_averages(group_by_input_shape=True)
        if event.key == "aten::clone"
        and event.input_shapes
        and tuple(event.input_shapes[0]) in cache_shapes
    )


@pytest.mark.skipif(keras.config.backend() != "torch", reason="eager torch")
@pytest.mark.parametrize("name", ["gmlp-toeplitz", "amlp-dense"])
def test_decoded_tokens_clone_no_cache_under_torch(name):
    """Each decoded token wrote every block's cache into a clone of it:
    the clones grew with the tokens generated. (The prefill's product may
    clone a tensor of the cache's shape, once.)"""
    model = causal_lm(CONFIGS[name])
    model.compile(sampler="greedy")
    short, long = prompts(), prompts()
    long["token_ids"][:, :9] = 3
    long["padding_mask"] = long["token_ids"] != 0
    batch, length = short["token_ids"].shape
    cache_shapes = {
        tuple(part.shape)
        for part in keras.tree.flatten(
            model.backbone.empty_cache(batch, length)
        )
    }
    clones = {}
    for case, inputs in (("8 steps", short), ("1 step", long)):
        model.generate(inputs, stop_token_ids=None)
        clones[case] = cloned_caches(
            lambda: model.generate(inputs, stop_token_ids=None),  # noqa: B023
            cache_shapes,
        )
    assert clones["8 steps"] == clones["1 step"], clones


@pytest.mark.skipif(keras.config.backend() != "torch", reason="eager torch")
@pytest.mark.parametrize("name", ["gmlp-dense", "amlp-toeplitz"])
def test_beam_samplers_give_the_tokens_of_recomputation(name):
    """The beam samplers copy the caches into beams and gather the kept
    ones after each step: the steps write those copies in place."""
    model = causal_lm(CONFIGS[name])
    reference = RecomputeCausalLM(model.backbone)
    for sampler in (
        keras_hub.samplers.BeamSampler(num_beams=3),
        keras_hub.samplers.ContrastiveSampler(k=3, alpha=0.4),
    ):
        outputs = []
        for task in (model, reference):
            task.compile(sampler=sampler)
            outputs.append(task.generate(prompts(), stop_token_ids=None))
        np.testing.assert_array_equal(
            outputs[0]["token_ids"], outputs[1]["token_ids"]
        )


@pytest.mark.skipif(keras.config.backend() != "torch", reason="eager torch")
def test_the_generation_function_clones_no_cache_under_torch():
    from keras_gmlp.generation import generate

    model = causal_lm(CONFIGS["amlp-toeplitz"])
    prompt = np.array([[0, 4, 9], [6, 1, 13]], "int32")
    # The step buffer holds the prompt and the new tokens.
    cache_shapes = {
        tuple(part.shape)
        for length in (4, 9)
        for part in keras.tree.flatten(model.backbone.empty_cache(2, length))
    }
    clones = {}
    for new_tokens in (1, 6):
        generate(model, prompt, max_new_tokens=new_tokens)
        clones[new_tokens] = cloned_caches(
            lambda: generate(model, prompt, max_new_tokens=new_tokens),  # noqa: B023
            cache_shapes,
        )
    assert clones[1] == clones[6], clones
