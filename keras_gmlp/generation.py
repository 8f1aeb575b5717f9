"""Text generation with causal gMLP language models: greedy and top-k."""

import weakref

import keras
import numpy as np
from keras import ops

from keras_gmlp.kernels import owned_caches
from keras_gmlp.layers.gmlp_block import GMLPBlock

STRATEGIES = ("greedy", "top_k")


def _blocks(model):
    return [
        layer
        for layer in model._flatten_layers(include_self=False)
        if isinstance(layer, GMLPBlock)
    ]


def model_sequence_length(model):
    """The largest number of tokens a gMLP text model accepts, or `None`."""
    lengths = [block.sequence_length for block in _blocks(model)]
    lengths = [length for length in lengths if length is not None]
    return min(lengths) if lengths else None


def generate(
    model,
    prompt_ids,
    max_new_tokens,
    strategy="greedy",
    top_k=10,
    temperature=1.0,
    seed=None,
    end_token_id=None,
):
    """Extends token sequences with a causal gMLP language model.

    Decoding is incremental: a causal pass over the prompts fills each
    block's cache (the normalised gate inputs of its spatial gating unit,
    the keys and values of its tiny attention), then each new token costs
    one row of the spatial weights times that cache, `O(tokens)` per block,
    in a step compiled once per buffer shape. The tokens are those of
    rerunning the model on the growing prefix. Left-padded prompts are
    moved to the start of the buffer, so that a prompt gives the same
    tokens padded or alone.

    Args:
        model: a `keras_gmlp.GMLPCausalLM` (as `keras_gmlp.models.causal_lm`
            builds it), or a functional model from token ids to next-token
            logits.
        prompt_ids: int array-like `(tokens,)` or `(batch, tokens)`.
            Prompts of different lengths are padded on the left with `0`
            (`[PAD]`); each row is generated as its prompt alone would be.
            Every row needs at least one real (non-zero) token.
        max_new_tokens: int. Tokens to generate.
        strategy: str. `"greedy"` (the most likely token) or `"top_k"`
            (sampled among the `top_k` most likely). Defaults to
            `"greedy"`.
        top_k: int. Candidates of `"top_k"` sampling. Defaults to `10`.
        temperature: float. Divides the logits before sampling. Defaults
            to `1.0`.
        seed: int. Seed of the sampling. Defaults to `None`.
        end_token_id: int. A sequence that generates it stops: the tokens
            after it are `0` (`[PAD]`). Defaults to `None`.

    Returns:
        An int32 numpy array `(batch, tokens + max_new_tokens)` (or
        `(tokens + max_new_tokens,)` for a 1-D prompt): each row is its
        (left-padded) prompt followed by its new tokens.

    Example:

    >>> from keras_gmlp.generation import generate
    >>> model = keras_gmlp.models.causal_lm(
    ...     vocabulary_size=50, sequence_length=16, num_layers=2,
    ...     hidden_dim=8, ffn_dim=16)
    >>> generate(model, [2, 17, 42], max_new_tokens=5).shape
    (8,)
    >>> prompts = [[0, 2, 17, 42], [0, 0, 5, 9]]  # left-padded
    >>> generated = generate(model, prompts, max_new_tokens=3)
    >>> generated.shape
    (2, 7)
    >>> generated[:, :4].tolist()
    [[0, 2, 17, 42], [0, 0, 5, 9]]
    """
    if strategy not in STRATEGIES:
        raise ValueError(
            f"Received strategy={strategy!r}; expected one of {STRATEGIES}."
        )
    if max_new_tokens < 0:
        raise ValueError(
            f"Received max_new_tokens={max_new_tokens}; expected >= 0."
        )
    if strategy == "top_k" and top_k < 1:
        raise ValueError(f"Received top_k={top_k}; expected >= 1.")
    if temperature <= 0:
        raise ValueError(
            f"Received temperature={temperature}; expected a number > 0."
        )
    blocks = _blocks(model)
    if not blocks or not all(block.causal for block in blocks):
        raise ValueError(
            f"Model {model.name!r} is not a causal gMLP language model; "
            "expected a model built by keras_gmlp.models.causal_lm (a "
            "masked LM sees the future and cannot generate)."
        )
    prompt = np.asarray(prompt_ids, dtype="int32")
    single = prompt.ndim == 1
    if single:
        prompt = prompt[None, :]
    if prompt.ndim != 2 or prompt.shape[1] < 1:
        raise ValueError(
            f"Received prompt_ids of shape {prompt.shape}; expected "
            "(tokens,) or (batch, tokens) with at least one token."
        )
    batch, width = prompt.shape
    # Left padding: each row's real tokens start after its leading [PAD]s.
    # The rows are realigned so that every prompt starts at position 0 (a
    # causal model then sees exactly the unpadded prompt) and put back in
    # the caller's layout at the end.
    real = prompt != 0
    if not real.any(axis=1).all():
        row = int(np.flatnonzero(~real.any(axis=1))[0])
        raise ValueError(
            f"Prompt row {row} holds only padding (token id 0); expected at "
            "least one real token per prompt."
        )
    padding = real.argmax(axis=1)
    lengths = width - padding
    total = int(lengths.max()) + max_new_tokens
    limit = model_sequence_length(model)
    if limit is not None and total > limit:
        raise ValueError(
            f"A prompt of {int(lengths.max())} tokens plus max_new_tokens="
            f"{max_new_tokens} makes {total} tokens; the model takes at most "
            f"{limit} (its sequence_length)."
        )
    rng = np.random.default_rng(seed)
    rows = np.arange(batch)
    tokens = np.zeros((batch, total), "int32")
    for row in rows:
        tokens[row, : lengths[row]] = prompt[row, padding[row] :]
    # The uniform numbers of the sampling, one per step and row, drawn in
    # that order whatever the rows' prompt lengths.
    uniforms = rng.random((max_new_tokens, batch))
    finished = np.zeros(batch, bool)
    # Incremental decoding: the prefill runs the causal pass over the
    # buffer and fills each block's cache; each step then feeds the token
    # at `index - 1` of every row and reads the logits predicting the
    # token at `index`. Rows still inside their prompt keep its token.
    index = int(lengths.min())
    if max_new_tokens:
        decoder = _decoder(model)
        cache = decoder.prefill(tokens)
    while index < total and max_new_tokens:
        logits, cache = decoder.step(tokens, cache, index - 1)
        step = index - lengths
        generating = (step >= 0) & (step < max_new_tokens)
        logits = logits.astype("float64") / temperature
        if strategy == "greedy":
            chosen = logits.argmax(axis=-1)
        else:
            chosen = _sample_top_k(
                logits,
                top_k,
                uniforms[np.clip(step, 0, max_new_tokens - 1), rows],
            )
        chosen = np.where(finished, 0, chosen)
        tokens[generating, index] = chosen[generating]
        if end_token_id is not None:
            finished |= generating & (chosen == end_token_id)
            if finished.all():
                break
        index += 1
    output = np.zeros((batch, width + max_new_tokens), "int32")
    for row in rows:
        output[row, padding[row] :] = tokens[
            row, : lengths[row] + max_new_tokens
        ]
    tokens = output
    return tokens[0] if single else tokens


def _sample_top_k(logits, top_k, uniforms):
    """One token per row among its `top_k` best, by inverse transform of
    the row's uniform number (as `numpy.random.Generator.choice` does)."""
    top_k = min(top_k, logits.shape[-1])
    candidates = np.argpartition(-logits, top_k - 1, axis=-1)[:, :top_k]
    chosen = np.empty(len(logits), "int64")
    for row, ids in enumerate(candidates):
        values = logits[row, ids]
        probabilities = np.exp(values - values.max())
        cumulative = np.cumsum(probabilities / probabilities.sum())
        cumulative /= cumulative[-1]
        position = np.searchsorted(cumulative, uniforms[row], side="right")
        chosen[row] = ids[position]
    return chosen


_DECODERS = weakref.WeakKeyDictionary()


def _decoder(model):
    """The `_Decoder` of `model`, made once: its step compiles once per
    buffer shape."""
    if model not in _DECODERS:
        _DECODERS[model] = _Decoder(model)
    return _DECODERS[model]


class _Decoder:
    """Incremental decoding with the blocks' caches, compiled on JAX and
    TensorFlow (one compilation per buffer shape), outside autograd on
    torch, where the loop owns the caches.

    Args:
        model: a causal gMLP text model: a `GMLPCausalLM` or a functional
            model with layers `token_embedding`, `block_*` and
            `final_norm`.
    """

    def __init__(self, model):
        source = getattr(model, "backbone", model)
        self.embedding = source.get_layer("token_embedding")
        self.final_norm = source.get_layer("final_norm")
        # In the order of the graph (tracking order differs on torch).
        self.blocks = [
            layer for layer in source.layers if isinstance(layer, GMLPBlock)
        ]
        # Which positions the tiny attention treats as padding: as the
        # full model does (the task's mask, or the embedding's zero mask).
        self.masks_padding = (
            isinstance(model.input, dict) or self.embedding.mask_zero
        )
        self.compiled = _compile(self._step, model)

    def _forward(self, token_ids, cache, index, padding_mask):
        x = self.embedding(token_ids)
        caches = []
        for block, block_cache in zip(self.blocks, cache, strict=True):
            x, block_cache = block.call_with_cache(
                x, block_cache, index, padding_mask=padding_mask
            )
            caches.append(block_cache)
        logits = self.embedding(self.final_norm(x), reverse=True)
        return logits, tuple(caches)

    def _step(self, token_ids, cache, index, padding_mask):
        batch_size = ops.shape(token_ids)[0]
        column = ops.slice(token_ids, [0, index], [batch_size, 1])
        logits, cache = self._forward(column, cache, index, padding_mask)
        return ops.cast(logits[:, 0], "float32"), cache

    def _padding_mask(self, tokens):
        return tokens != 0 if self.masks_padding else None

    def prefill(self, tokens):
        """The cache after the causal pass over the buffer `tokens`."""
        batch, length = tokens.shape
        cache = tuple(block.empty_cache(batch, length) for block in self.blocks)
        _, cache = _decoding(
            self._forward, tokens, cache, 0, self._padding_mask(tokens)
        )
        return cache

    def step(self, tokens, cache, index):
        """Logits `(batch, vocabulary)` after position `index` of each
        row of the buffer `tokens`, and the updated cache."""
        logits, cache = self.compiled(
            tokens,
            cache,
            np.array(index, "int32"),
            self._padding_mask(tokens),
        )
        return ops.convert_to_numpy(logits), cache


def _decoding(function, *args):
    """`function(*args)`, under torch outside autograd, the caches owned by
    the decoding loop (`keras_gmlp.kernels.owned_caches`)."""
    if keras.config.backend() == "torch":
        import torch

        with torch.no_grad(), owned_caches():
            return function(*args)
    return function(*args)


def _compile(function, model):
    """`function` compiled for the backend, reading `model`'s weights."""
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function, jit_compile=True)
    if backend == "jax":
        import jax

        variables = model.variables

        @jax.jit
        def stateless(values, *args):
            with keras.StatelessScope(
                state_mapping=zip(variables, values, strict=True)
            ):
                return function(*args)

        def run(*args):
            return stateless([variable.value for variable in variables], *args)

        return run
    return lambda *args: _decoding(function, *args)
