"""Incremental decoding of the causal LM against recomputing the prefix."""

import keras_hub
import numpy as np
import pytest
from keras import ops

from keras_gmlp.generation import generate
from keras_gmlp.models.gmlp_text.gmlp_causal_lm import GMLPCausalLM
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from tests.backends import in_turn
from tests.models.gmlp_text.test_gmlp_text_masked_lm import randomize

VOCABULARY_SIZE = 20
LENGTH = 10
CONFIGS = {
    "gmlp-dense": dict(spatial="dense"),
    "gmlp-toeplitz": dict(spatial="toeplitz"),
    "amlp-dense": dict(spatial="dense", attention_dim=4),
    "amlp-toeplitz": dict(spatial="toeplitz", attention_dim=4),
}


class RecomputeCausalLM(GMLPCausalLM):
    """Reference: each step reruns the backbone on the whole token buffer
    and reads the position decoded (the decoding before the cache)."""

    def call_with_cache(self, token_ids, cache, cache_update_index):
        token_ids = ops.cast(token_ids, cache.dtype)
        cache = ops.slice_update(cache, [0, cache_update_index], token_ids)
        hidden = self.backbone(
            {"token_ids": cache, "padding_mask": ops.ones_like(cache)}
        )
        hidden = ops.slice(
            hidden,
            [0, cache_update_index, 0],
            [ops.shape(hidden)[0], 1, self.backbone.hidden_dim],
        )
        logits = self.backbone.token_embedding(hidden, reverse=True)
        return logits, hidden, cache

    def _build_cache(self, token_ids):
        hidden = self.backbone(
            {"token_ids": token_ids, "padding_mask": ops.ones_like(token_ids)}
        )
        return hidden, token_ids


def causal_lm(config, seed=7, dtype=None):
    backbone = GMLPTextBackbone(
        vocabulary_size=VOCABULARY_SIZE,
        sequence_length=LENGTH,
        num_layers=2,
        hidden_dim=8,
        ffn_dim=16,
        causal=True,
        dtype=dtype,
        **config,
    )
    model = GMLPCausalLM(backbone)
    # Random weights, the spatial ones included: fresh spatial weights
    # are near zero and would hide the cache's contribution.
    randomize(model, seed=seed)
    return model


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_incremental_logits_match_the_full_pass(name, dtype, rng):
    model = causal_lm(CONFIGS[name], dtype=dtype)
    token_ids = rng.integers(1, VOCABULARY_SIZE, size=(2, LENGTH)).astype(
        "int32"
    )
    full = model(
        {"token_ids": token_ids, "padding_mask": np.ones_like(token_ids)}
    )
    full = ops.convert_to_numpy(ops.cast(full, "float32"))
    cache = model.backbone.empty_cache(2, LENGTH)
    logits, _, cache = model.call_with_cache(token_ids[:, :4], cache, 0)
    steps = [logits]
    for index in range(4, LENGTH):
        logits, _, cache = model.call_with_cache(
            token_ids[:, index : index + 1],
            cache,
            ops.convert_to_tensor(index, "int32"),
        )
        steps.append(logits)
    steps = np.concatenate(
        [ops.convert_to_numpy(ops.cast(x, "float32")) for x in steps], axis=1
    )
    tolerance = 1e-4 if dtype == "float32" else 3e-2
    np.testing.assert_allclose(
        steps, full, rtol=0, atol=tolerance * np.abs(full).max()
    )


def prompts():
    # Right-padded prompts of 2 and 4 tokens in a buffer of LENGTH.
    token_ids = np.zeros((2, LENGTH), "int32")
    token_ids[0, :2] = [3, 11]
    token_ids[1, :4] = [5, 2, 17, 8]
    return {"token_ids": token_ids, "padding_mask": token_ids != 0}


@pytest.mark.parametrize(
    "sampler",
    in_turn(
        [
            "greedy",
            lambda: keras_hub.samplers.TopKSampler(k=4, seed=3),
            lambda: keras_hub.samplers.TopPSampler(p=0.9, seed=3),
            lambda: keras_hub.samplers.BeamSampler(num_beams=2),
            lambda: keras_hub.samplers.ContrastiveSampler(k=3, alpha=0.6),
        ],
        ids=["greedy", "top_k", "top_p", "beam", "contrastive"],
    ),
)
@pytest.mark.parametrize("name", ["gmlp-toeplitz", "amlp-dense"])
def test_generate_gives_the_tokens_of_recomputation(name, sampler, rng):
    model = causal_lm(CONFIGS[name])
    reference = RecomputeCausalLM(model.backbone)
    outputs = {}
    for key, task in (("cached", model), ("recomputed", reference)):
        task.compile(sampler=sampler if sampler == "greedy" else sampler())
        outputs[key] = task.generate(prompts(), stop_token_ids=None)
    np.testing.assert_array_equal(
        outputs["cached"]["token_ids"], outputs["recomputed"]["token_ids"]
    )
    # The prompts are kept and the continuations vary.
    tokens = outputs["cached"]["token_ids"]
    np.testing.assert_array_equal(tokens[1, :4], [5, 2, 17, 8])
    assert len(set(tokens[0, 2:].tolist())) > 1


def recompute_generate(model, prompt, max_new_tokens, top_k, seed):
    """Reference of `keras_gmlp.generation.generate` for left-padded
    prompts: each step reruns the model on each row's unpadded prefix and
    samples the rows in turn with `Generator.choice` among the `top_k`
    best (in `argpartition`'s order)."""
    rng = np.random.default_rng(seed)
    rows = [[int(i) for i in row[row != 0]] for row in prompt]
    for _ in range(max_new_tokens):
        for ids in rows:
            tokens = np.array([ids], "int32")
            logits = model(
                {"token_ids": tokens, "padding_mask": np.ones_like(tokens)}
            )
            logits = ops.convert_to_numpy(logits)[0, -1].astype("float64")
            best = np.argpartition(-logits, top_k - 1)[:top_k]
            probabilities = np.exp(logits[best] - logits[best].max())
            probabilities /= probabilities.sum()
            ids.append(int(rng.choice(best, p=probabilities)))
    return rows


@pytest.mark.parametrize("name", ["gmlp-dense", "amlp-toeplitz"])
def test_generation_function_gives_the_tokens_of_recomputation(name):
    model = causal_lm(CONFIGS[name])
    # Left-padded prompts of 2, 4 and 3 tokens.
    prompt = np.array([[0, 0, 4, 9], [6, 1, 13, 2], [0, 7, 7, 3]], "int32")
    for top_k, seed in ((3, 4), (1, 0)):
        generated = generate(
            model,
            prompt,
            max_new_tokens=5,
            strategy="top_k",
            top_k=top_k,
            seed=seed,
        )
        expected = recompute_generate(model, prompt, 5, top_k, seed)
        for row, ids in enumerate(expected):
            padding = 4 + 5 - len(ids)
            np.testing.assert_array_equal(generated[row, :padding], 0)
            np.testing.assert_array_equal(generated[row, padding:], ids)
    # Greedy is top-1.
    np.testing.assert_array_equal(generate(model, prompt, 5), generated)
