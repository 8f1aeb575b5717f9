import keras

from keras_gmlp.layers.gmlp_block import GMLPBlock
from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.last_token_pooling import LastTokenPooling
from keras_gmlp.models.masked_lm import TEXT_DEFAULTS
from keras_gmlp.models.masked_lm import text_backbone
from keras_gmlp.models.masked_lm import text_encoder

CLASSIFIER_DEFAULTS = dict(TEXT_DEFAULTS, num_classes=2, dropout=0.1)


def is_causal(encoder):
    """Whether every gMLP block of `encoder` is causal."""
    blocks = [
        layer
        for layer in encoder._flatten_layers(include_self=False)
        if isinstance(layer, GMLPBlock)
    ]
    return bool(blocks) and all(block.causal for block in blocks)


def text_classifier(preset=None, encoder=None, **config):
    """Builds a gMLP text classifier.

    A bidirectional encoder predicts, as in the paper (and BERT), from the
    hidden state of the first (`[CLS]`) token. A causal encoder (built
    with `causal=True` or taken from a `causal_lm`) predicts from the
    hidden state of each row's last real (non-padding) token, the only
    one that has seen the whole text (see `LastTokenPooling`). The encoder
    is either built anew from the preset and keywords or taken, with its
    trained weights, from a language model.

    Args:
        preset: str. A text preset of `keras_gmlp.PRESETS`, for an encoder
            built from scratch; the keywords below override its values.
            Defaults to `None`.
        encoder: a `masked_lm` or `causal_lm` model (or its
            `text_encoder`) whose encoder and weights are reused; the
            encoder keywords below are then ignored. Defaults to `None`.
        num_classes: int. Number of output logits. Defaults to `2`.
        dropout: float. Dropout before the head. Defaults to `0.1`.
        causal: bool. Causal spatial weights and attention in an encoder
            built from scratch. Defaults to `False`.
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
        logits `(batch, num_classes)`.

    Example:

    >>> model = keras_gmlp.models.text_classifier("gmlp_tiny", num_classes=3)
    >>> model(keras.ops.ones((2, 16), "int32")).shape
    (2, 3)
    """
    config = resolve_config("text", CLASSIFIER_DEFAULTS, preset, **config)
    dtype = config["dtype"]
    padding_id = config["padding_id"]
    if encoder is None:
        token_ids, hidden, _ = text_backbone(config)
        encoder = keras.Model(token_ids, hidden, name="encoder")
    else:
        encoder = text_encoder(encoder)
        embedding = encoder.get_layer("token_embedding")
        padding_id = 0 if embedding.mask_zero else None
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    hidden = encoder(token_ids)
    if is_causal(encoder):
        # A causal token sees only the tokens before it: pool the last
        # real token, the only one that has seen the whole text.
        pooled = LastTokenPooling(
            padding_id=padding_id, dtype=dtype, name="pooling"
        )(hidden, token_ids)
    else:
        pooled = hidden[:, 0, :]
    if config["dropout"]:
        pooled = keras.layers.Dropout(
            config["dropout"], dtype=dtype, name="head_dropout"
        )(pooled)
    logits = keras.layers.Dense(
        config["num_classes"], dtype=dtype, name="head"
    )(pooled)
    return keras.Model(
        token_ids, logits, name=config["name"] or "gmlp_text_classifier"
    )
