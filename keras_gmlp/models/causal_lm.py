import keras

from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.masked_lm import TEXT_DEFAULTS
from keras_gmlp.models.masked_lm import text_backbone

CAUSAL_DEFAULTS = {k: v for k, v in TEXT_DEFAULTS.items() if k != "causal"}


def causal_lm(preset=None, **config):
    """Builds a causal (autoregressive) gMLP language model.

    The masked-LM network with causal spatial weights (`W[i, j] = 0` for
    `j > i`) and causal tiny attention: the logits at position `i` depend
    on tokens `0..i` only and predict token `i + 1`, whatever padding the
    row holds.

    Args:
        preset: str. A text preset of `keras_gmlp.PRESETS`; the keywords
            below override its values. Defaults to `None`.
        vocabulary_size: int. Number of token ids. Defaults to `32000`.
        sequence_length: int. Largest number of tokens; shorter inputs
            work. Defaults to `512`.
        num_layers: int. Number of gMLP blocks. Defaults to `48`.
        hidden_dim: int. Width of the tokens (`d_model`). Defaults to
            `512`.
        ffn_dim: int. Width of the channel expansion (`d_ffn`). Defaults
            to `3072`.
        attention_dim: int. Tiny attention head size (aMLP), or `None`.
            Defaults to `None`.
        spatial: str. `"toeplitz"` (shift-invariant, the paper's language
            models) or `"dense"` spatial weights. Defaults to
            `"toeplitz"`.
        gating: str. `"split"` (the SGU) or an ablation of the paper's
            Table 3: `"multiplicative"`, `"additive"`, `"linear"`.
            Defaults to `"split"`.
        drop_path_rate: float. Stochastic depth rate of the last block.
            Defaults to `0.0`.
        padding_id: int. Token id of padding, masked out of the tiny
            attention and of the loss; `None` for no masking. Defaults to
            `0`.
        dtype: str or `keras.DTypePolicy`. Dtype policy of every layer.
            Defaults to `None`, the global policy.
        name: str. Name of the model. Defaults to `None`.

    Returns:
        A functional `keras.Model` from token ids `(batch, tokens)` to
        next-token logits `(batch, tokens, vocabulary_size)`.

    Example:

    >>> model = keras_gmlp.models.causal_lm("gmlp_tiny")
    >>> model(keras.ops.ones((2, 16), "int32")).shape
    (2, 16, 8192)
    """
    config = resolve_config("text", CAUSAL_DEFAULTS, preset, **config)
    token_ids, hidden, embedding = text_backbone(dict(config, causal=True))
    logits = embedding(hidden, reverse=True)
    return keras.Model(
        token_ids, logits, name=config["name"] or "gmlp_causal_lm"
    )
