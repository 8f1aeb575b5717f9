import keras

from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.masked_lm import TEXT_ARGS_DOC
from keras_gmlp.models.masked_lm import TEXT_DEFAULTS
from keras_gmlp.models.masked_lm import text_backbone
from keras_gmlp.models.masked_lm import text_encoder

CLASSIFIER_DEFAULTS = dict(TEXT_DEFAULTS, num_classes=2, dropout=0.1)


def text_classifier(preset=None, encoder=None, **config):
    (
        """Builds a gMLP text classifier that predicts from the first token.

    As in the paper (and BERT), the prediction comes from the hidden state
    of the first (`[CLS]`) token. The encoder is either built anew from the
    preset and keywords or taken, with its trained weights, from a masked
    language model.

    Args:
        preset: str. A text preset of `keras_gmlp.PRESETS`, for an encoder
            built from scratch. Defaults to `None`.
        encoder: a `masked_lm` model (or its `text_encoder`) whose encoder
            and weights are reused. Defaults to `None`.
        num_classes: int. Number of output logits. Defaults to `2`.
        dropout: float. Dropout before the head. Defaults to `0.1`.
    """
        + TEXT_ARGS_DOC
        + """

    Returns:
        A functional `keras.Model` from token ids `(batch, tokens)` to
        logits `(batch, num_classes)`.

    Example:

    >>> model = keras_gmlp.models.text_classifier("gmlp_tiny", num_classes=3)
    >>> model(keras.ops.ones((2, 16), "int32")).shape
    (2, 3)
    """
    )
    config = resolve_config("text", CLASSIFIER_DEFAULTS, preset, **config)
    dtype = config["dtype"]
    if encoder is None:
        token_ids, hidden, _ = text_backbone(config)
        encoder = keras.Model(token_ids, hidden, name="encoder")
    else:
        encoder = text_encoder(encoder)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    first_token = encoder(token_ids)[:, 0, :]
    if config["dropout"]:
        first_token = keras.layers.Dropout(
            config["dropout"], dtype=dtype, name="head_dropout"
        )(first_token)
    logits = keras.layers.Dense(
        config["num_classes"], dtype=dtype, name="head"
    )(first_token)
    return keras.Model(
        token_ids, logits, name=config["name"] or "gmlp_text_classifier"
    )
