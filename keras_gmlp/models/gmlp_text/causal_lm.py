from keras_gmlp.models.gmlp_text.gmlp_causal_lm import GMLPCausalLM
from keras_gmlp.models.gmlp_text.masked_lm import TEXT_DEFAULTS
from keras_gmlp.models.gmlp_text.masked_lm import text_backbone

CAUSAL_DEFAULTS = {k: v for k, v in TEXT_DEFAULTS.items() if k != "causal"}


def causal_lm(preset=None, **config):
    """Builds a causal (autoregressive) gMLP language model.

    The short form of `GMLPCausalLM(GMLPTextBackbone(..., causal=True))`,
    without a preprocessor: the logits at position `i` depend on tokens
    `0..i` only and predict token `i + 1`, whatever padding the row holds.

    Args:
        preset: str. A text preset of `keras_gmlp.PRESETS`; the keywords
            override its values. Defaults to `None`.
        **config: the keywords of `masked_lm` but `causal`.

    Returns:
        A `keras_gmlp.GMLPCausalLM`, compiled with its defaults.

    Example:

    >>> model = keras_gmlp.models.causal_lm("gmlp_tiny")
    >>> model(keras.ops.ones((2, 16), "int32")).shape
    (2, 16, 8192)
    """
    backbone, config = text_backbone(
        CAUSAL_DEFAULTS, preset, config, causal=True
    )
    return GMLPCausalLM(backbone, name=config["name"] or "gmlp_causal_lm")
