"""Text generation with causal gMLP language models: greedy and top-k."""

import keras
import numpy as np

from keras_gmlp.layers.gmlp_block import GMLPBlock

STRATEGIES = ("greedy", "top_k")


def _blocks(model):
    return [
        layer
        for layer in model._flatten_layers(include_self=False)
        if isinstance(layer, GMLPBlock)
    ]


def _token_predictor(model):
    """A function from a token-id buffer to logits for `model`.

    A model from token ids takes the buffer; a task (a `GMLPCausalLM`, as
    `keras_gmlp.models.causal_lm` builds it) is run on its dict of ids and
    padding mask through a plain functional view of its graph, so that no
    preprocessor it may hold is applied.
    """
    if not isinstance(model.input, dict):
        return model.predict_on_batch
    plain = keras.Model(model.input, model.output)

    def predict(tokens):
        return plain.predict_on_batch(
            {"token_ids": tokens, "padding_mask": tokens != 0}
        )

    return predict


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

    Each step runs the model on a fixed-length buffer (the prompt, the
    tokens generated so far and `[PAD]` after them) and reads the logits at
    each row's last filled position: with a causal model the positions
    after it cannot change those logits, and the fixed shape is compiled
    once. Left-padded prompts are moved to the start of the buffer, so
    that a prompt gives the same tokens padded or alone.

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
    finished = np.zeros(batch, bool)
    predict = _token_predictor(model)
    for step in range(max_new_tokens):
        positions = lengths + step
        logits = predict(tokens)
        logits = keras.ops.convert_to_numpy(logits)[rows, positions - 1]
        logits = logits.astype("float64") / temperature
        if strategy == "greedy":
            chosen = logits.argmax(axis=-1)
        else:
            chosen = _sample_top_k(logits, top_k, rng)
        chosen = np.where(finished, 0, chosen)
        tokens[rows, positions] = chosen
        if end_token_id is not None:
            finished |= chosen == end_token_id
            if finished.all():
                break
    output = np.zeros((batch, width + max_new_tokens), "int32")
    for row in rows:
        output[row, padding[row] :] = tokens[
            row, : lengths[row] + max_new_tokens
        ]
    tokens = output
    return tokens[0] if single else tokens


def _sample_top_k(logits, top_k, rng):
    top_k = min(top_k, logits.shape[-1])
    candidates = np.argpartition(-logits, top_k - 1, axis=-1)[:, :top_k]
    chosen = np.empty(len(logits), "int64")
    for row, ids in enumerate(candidates):
        values = logits[row, ids]
        probabilities = np.exp(values - values.max())
        probabilities /= probabilities.sum()
        chosen[row] = rng.choice(ids, p=probabilities)
    return chosen
