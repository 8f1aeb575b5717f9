from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.gmlp_text.gmlp_text_classifier import GMLPTextClassifier
from keras_gmlp.models.gmlp_text.masked_lm import TEXT_DEFAULTS
from keras_gmlp.models.gmlp_text.masked_lm import text_backbone
from keras_gmlp.models.gmlp_text.masked_lm import text_encoder

CLASSIFIER_DEFAULTS = dict(TEXT_DEFAULTS, num_classes=2, dropout=0.1)


def text_classifier(preset=None, encoder=None, **config):
    """Builds a gMLP text classifier.

    The short form of `GMLPTextClassifier(backbone, num_classes)`, without
    a preprocessor. A bidirectional backbone predicts, as in the paper
    (and BERT), from the first (`[CLS]`) token; a causal one (built with
    `causal=True` or taken from a `causal_lm`) from each row's last real
    token, the only one that has seen the whole text. The backbone is
    built from the preset and keywords, or taken, with its trained
    weights, from a language model.

    Args:
        preset: str. A text preset of `keras_gmlp.PRESETS`, for a backbone
            built from scratch; the keywords override its values. Defaults
            to `None`.
        encoder: a gMLP text task (`masked_lm`, `causal_lm`) or a
            `GMLPTextBackbone`, whose backbone and weights are reused; the
            backbone keywords are then ignored. Defaults to `None`.
        **config: `num_classes` (defaults to `2`), `dropout` before the
            head (defaults to `0.1`) and the keywords of `masked_lm`.

    Returns:
        A `keras_gmlp.GMLPTextClassifier`, compiled with its defaults.

    Example:

    >>> model = keras_gmlp.models.text_classifier("gmlp_tiny", num_classes=3)
    >>> model(keras.ops.ones((2, 16), "int32")).shape
    (2, 3)
    """
    if encoder is None:
        backbone, config = text_backbone(CLASSIFIER_DEFAULTS, preset, config)
    else:
        backbone = text_encoder(encoder)
        config = resolve_config("text", CLASSIFIER_DEFAULTS, preset, **config)
    return GMLPTextClassifier(
        backbone,
        num_classes=config["num_classes"],
        dropout=config["dropout"],
        name=config["name"] or "gmlp_text_classifier",
    )
