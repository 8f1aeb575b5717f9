import keras

from keras_gmlp.layers.gmlp_block import GMLPBlock
from keras_gmlp.layers.tied_embedding import TiedEmbedding
from keras_gmlp.models.config import drop_path_rates
from keras_gmlp.models.config import resolve_config

TEXT_DEFAULTS = {
    "vocabulary_size": 32000,
    "sequence_length": 512,
    "num_layers": 48,
    "hidden_dim": 512,
    "ffn_dim": 3072,
    "attention_dim": None,
    "spatial": "toeplitz",
    "causal": False,
    "gating": "split",
    "drop_path_rate": 0.0,
    "padding_id": 0,
    "dtype": None,
    "name": None,
}


def text_backbone(config):
    """Builds the token-level network shared by the text models.

    Args:
        config: dict. A resolved text configuration.

    Returns:
        `(token_ids, hidden, embedding)`: the input, the final normalised
        hidden states `(batch, tokens, hidden_dim)` and the `TiedEmbedding`
        whose transpose gives vocabulary logits.
    """
    dtype = config["dtype"]
    embedding = TiedEmbedding(
        config["vocabulary_size"],
        config["hidden_dim"],
        mask_zero=config["padding_id"] == 0,
        dtype=dtype,
        name="token_embedding",
    )
    if config["padding_id"] not in (0, None):
        raise ValueError(
            f"Received padding_id={config['padding_id']}; expected 0 (the "
            "tokenizers' [PAD] id) or None."
        )
    rates = drop_path_rates(config["drop_path_rate"], config["num_layers"])
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    x = embedding(token_ids)
    for i, rate in enumerate(rates):
        x = GMLPBlock(
            ffn_dim=config["ffn_dim"],
            sequence_length=config["sequence_length"],
            attention_dim=config["attention_dim"],
            spatial=config["spatial"],
            causal=config["causal"],
            gating=config["gating"],
            drop_path_rate=rate,
            dtype=dtype,
            name=f"block_{i}",
        )(x)
    hidden = keras.layers.LayerNormalization(
        epsilon=1e-6, dtype=dtype, name="final_norm"
    )(x)
    return token_ids, hidden, embedding


def masked_lm(preset=None, **config):
    """Builds a gMLP (or aMLP) masked language model that returns logits.

    Token embedding, `num_layers` gMLP blocks, a final LayerNorm, and
    vocabulary logits through the transposed token embedding. There are
    no position embeddings: the spatial weights carry position.

    Args:
        preset: str. A name of a text preset of `keras_gmlp.PRESETS`, such
            as `"gmlp_base"` or `"amlp_tiny"`; the keywords below override
            its values. Defaults to `None`.
        causal: bool. Causal spatial weights and attention. Defaults to
            `False`.
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
        logits `(batch, tokens, vocabulary_size)`.

    Example:

    >>> model = keras_gmlp.models.masked_lm("gmlp_tiny")
    >>> model(keras.ops.ones((2, 16), "int32")).shape
    (2, 16, 8192)
    """
    config = resolve_config("text", TEXT_DEFAULTS, preset, **config)
    token_ids, hidden, embedding = text_backbone(config)
    logits = embedding(hidden, reverse=True)
    return keras.Model(
        token_ids, logits, name=config["name"] or "gmlp_masked_lm"
    )


def text_encoder(model):
    """Returns the encoder of a text model built by this package.

    Args:
        model: a `masked_lm` or `causal_lm` model (or an encoder).

    Returns:
        A `keras.Model` named `"encoder"` from token ids to the final
        hidden states, sharing its weights with `model`.
    """
    if model.name == "encoder":
        return model
    try:
        hidden = model.get_layer("final_norm").output
    except ValueError:
        raise ValueError(
            f"Model {model.name!r} has no layer 'final_norm'; expected a "
            "model built by keras_gmlp.models.masked_lm or causal_lm."
        ) from None
    return keras.Model(model.inputs, hidden, name="encoder")
