"""The text builders' shared configuration, and `masked_lm`."""

from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.gmlp_text.gmlp_masked_lm import GMLPMaskedLM
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import BACKBONE_DEFAULTS
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone

# Every keyword of the text builders, with its default: the arguments of
# `GMLPTextBackbone` (a 48-block gMLP of width 512 over 512 tokens of a
# 32,000-token vocabulary, Toeplitz spatial weights), `name` (the task's)
# and `padding_id`.
TEXT_DEFAULTS = {**BACKBONE_DEFAULTS, "padding_id": 0}


def text_backbone(defaults, preset=None, config=None, causal=None):
    """Resolves a text builder's configuration and builds its backbone.

    Args:
        defaults: dict. The builder's keywords and defaults.
        preset: str. A text preset of `keras_gmlp.PRESETS`, or `None`.
        config: dict. The builder's keyword overrides.
        causal: bool. Overrides the resolved `causal`, or `None`.

    Returns:
        `(backbone, config)`: a new `GMLPTextBackbone` and the resolved
        configuration.
    """
    config = resolve_config("text", defaults, preset, **(config or {}))
    if causal is not None:
        config["causal"] = causal
    if config["padding_id"] not in (0, None):
        raise ValueError(
            f"Received padding_id={config['padding_id']}; expected 0 (the "
            "tokenizers' [PAD] id) or None."
        )
    backbone = GMLPTextBackbone(
        **{key: config[key] for key in BACKBONE_DEFAULTS if key != "name"}
    )
    return backbone, config


def masked_lm(preset=None, **config):
    """Builds a gMLP (or aMLP) masked language model.

    The short form of `GMLPMaskedLM(GMLPTextBackbone(...))`, without a
    preprocessor: vocabulary logits through the transposed token
    embedding, so the paper's parameter counts hold exactly. Called on
    token ids alone, it predicts every position.

    Args:
        preset: str. A text preset of `keras_gmlp.PRESETS`, such as
            `"gmlp_base"` or `"amlp_tiny"`; the keywords override its
            values. Defaults to `None`.
        **config: the arguments of `keras_gmlp.GMLPTextBackbone`
            (`vocabulary_size`, `sequence_length`, `num_layers`,
            `hidden_dim`, `ffn_dim`, `attention_dim`, `spatial`, `causal`,
            `gating`, `drop_path_rate`, `dtype`), `name` (the task's) and
            `padding_id` (`0`, or `None`; the padding mask of token ids
            alone is `token_ids != 0`: pass a dict with a `"padding_mask"`
            for another). Their defaults are `TEXT_DEFAULTS`.

    Returns:
        A `keras_gmlp.GMLPMaskedLM`, compiled with its defaults.

    Example:

    >>> model = keras_gmlp.models.masked_lm("gmlp_tiny")
    >>> model(keras.ops.ones((2, 16), "int32")).shape
    (2, 16, 8192)
    """
    backbone, config = text_backbone(TEXT_DEFAULTS, preset, config)
    return GMLPMaskedLM(backbone, name=config["name"] or "gmlp_masked_lm")


def text_encoder(model):
    """Returns the text backbone of a gMLP text task.

    Args:
        model: a gMLP text task (`masked_lm`, `causal_lm`,
            `text_classifier`) or a `GMLPTextBackbone`.

    Returns:
        Its `keras_gmlp.GMLPTextBackbone`, from `{"token_ids",
        "padding_mask"}` to the final hidden states, sharing its weights
        with `model`.
    """
    if isinstance(model, GMLPTextBackbone):
        return model
    backbone = getattr(model, "backbone", None)
    if not isinstance(backbone, GMLPTextBackbone):
        raise ValueError(
            f"Received model {model.name!r} ({type(model).__name__}), which "
            "has no GMLPTextBackbone; expected a gMLP text task (built by "
            "keras_gmlp.models.masked_lm, causal_lm or text_classifier) or "
            "a GMLPTextBackbone."
        )
    return backbone
