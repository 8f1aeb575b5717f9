import keras

from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.masked_lm import TEXT_ARGS_DOC
from keras_gmlp.models.masked_lm import TEXT_DEFAULTS
from keras_gmlp.models.masked_lm import text_backbone

CAUSAL_DEFAULTS = {k: v for k, v in TEXT_DEFAULTS.items() if k != "causal"}


def causal_lm(preset=None, **config):
    (
        """Builds a causal (autoregressive) gMLP language model.

    The masked-LM network with causal spatial weights (`W[i, j] = 0` for
    `j > i`) and causal tiny attention: the logits at position `i` depend
    on tokens `0..i` only and predict token `i + 1`.

    Args:
        preset: str. A text preset of `keras_gmlp.PRESETS`. Defaults to
            `None`.
    """
        + TEXT_ARGS_DOC
        + """

    Returns:
        A functional `keras.Model` from token ids `(batch, tokens)` to
        next-token logits `(batch, tokens, vocabulary_size)`.

    Example:

    >>> model = keras_gmlp.models.causal_lm("gmlp_tiny")
    >>> model(keras.ops.ones((2, 16), "int32")).shape
    (2, 16, 8192)
    """
    )
    config = resolve_config("text", CAUSAL_DEFAULTS, preset, **config)
    token_ids, hidden, embedding = text_backbone(dict(config, causal=True))
    logits = embedding(hidden, reverse=True)
    return keras.Model(
        token_ids, logits, name=config["name"] or "gmlp_causal_lm"
    )
