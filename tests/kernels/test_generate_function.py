"""The `"generate_function"` kernel (TensorFlow): `generate` as one XLA
function gives the tokens of keras-hub's graph without XLA, and steps
aside where Keras leaves XLA off."""

import keras
import keras_hub
import numpy as np
import pytest

from keras_gmlp import kernels
from tests.models.test_decoding_cache import CONFIGS
from tests.models.test_decoding_cache import causal_lm
from tests.models.test_decoding_cache import prompts

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="TensorFlow's kernel"
)


def generated(model, mode, stop_token_ids=None):
    kernels.configure(mode)
    model.generate_function = None
    return model.generate(prompts(), stop_token_ids=stop_token_ids)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", ["gmlp-toeplitz", "amlp-dense"])
def test_xla_generates_the_tokens_of_the_graph(name, policy, kernel_mode):
    model = causal_lm(CONFIGS[name], dtype=policy)
    model.compile(sampler="greedy")
    for stop_token_ids in (None, (7,)):
        reference = generated(model, "off", stop_token_ids)
        kernel = generated(model, "on", stop_token_ids)
        for key in ("token_ids", "padding_mask"):
            np.testing.assert_array_equal(kernel[key], reference[key])


def test_top_k_sampling_runs_under_xla(kernel_mode):
    model = causal_lm(CONFIGS["gmlp-toeplitz"])
    model.compile(sampler=keras_hub.samplers.TopKSampler(k=4, seed=3))
    tokens = generated(model, "on")["token_ids"]
    np.testing.assert_array_equal(tokens[1, :4], [5, 2, 17, 8])
    assert np.all((tokens >= 0) & (tokens < 20))


def xla_compiled(model):
    model.generate_function = None
    return getattr(model.make_generate_function(), "_jit_compile", None)


@pytest.mark.parametrize(
    "compiled, expected",
    [
        ({}, True),
        ({"jit_compile": False}, False),
        ({"run_eagerly": True}, None),
    ],
    ids=["auto", "jit_compile_false", "run_eagerly"],
)
def test_only_keras_auto_on_a_cpu_takes_xla(compiled, expected, kernel_mode):
    model = causal_lm(CONFIGS["gmlp-dense"])
    model.compile(sampler="greedy", **compiled)
    kernel_mode("auto")
    assert xla_compiled(model) is expected
    kernel_mode("off")
    # keras-hub's own: a graph without XLA, or the eager step.
    assert xla_compiled(model) is (None if expected is None else False)
