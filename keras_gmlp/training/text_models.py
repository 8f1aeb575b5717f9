"""The language models the text recipes train: gMLP/aMLP and Transformers.

Masked-LM training predicts only the masked positions: the training model
takes `{"token_ids", "mask_positions"}`, gathers the final hidden states
at those positions and only then projects them on the vocabulary, which
spares the largest matrix product of the model at the other 85 % of the
positions. Each builder also returns the plain model (token ids to logits
at every position) that shares the same layers: the one saved for use.

The Transformer baselines are keras-hub's `BertMaskedLM` (a `BertBackbone`
and BERT's head over the transposed token embedding) for masked-LM training
and `GPT2CausalLM` (a pre-norm causal decoder over the same kind of
embedding) for next-token training, fed by the very same pipelines.
Checkpoints holding them load once `keras_hub` is imported.
"""

import keras
from keras import ops

from keras_gmlp.layers.gmlp_block import GMLPBlock
from keras_gmlp.models.causal_lm import causal_lm
from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.masked_lm import TEXT_DEFAULTS
from keras_gmlp.models.masked_lm import text_backbone


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GatherPositions(keras.layers.Layer):
    """Gathers the vectors of a sequence at given positions.

    Call arguments:
        inputs: tensor `(batch, tokens, channels)`.
        positions: int tensor `(batch, count)`.

    Returns:
        Tensor `(batch, count, channels)`.

    Example:

    >>> from keras_gmlp.training.text_models import GatherPositions
    >>> hidden = keras.random.normal((2, 8, 4))
    >>> GatherPositions()(hidden, keras.ops.zeros((2, 3), "int32")).shape
    (2, 3, 4)
    """

    def call(self, inputs, positions):
        positions = ops.expand_dims(ops.cast(positions, "int32"), axis=-1)
        return ops.take_along_axis(inputs, positions, axis=1)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, inputs_shape, positions_shape):
        return tuple(positions_shape) + (inputs_shape[-1],)


@keras.saving.register_keras_serializable(package="keras_gmlp")
class BertInputs(keras.layers.Layer):
    """Makes a padding mask and (single) segment ids from token ids.

    Args:
        mask_dtype: str. Dtype of the padding mask. Defaults to `"bool"`
            (BERT's); keras-hub's GPT-2 takes `"int32"`.

    Call arguments:
        token_ids: int tensor `(batch, tokens)`; id 0 is padding.

    Returns:
        `(padding_mask, segment_ids)`.
    """

    def __init__(self, mask_dtype="bool", **kwargs):
        super().__init__(**kwargs)
        self.mask_dtype = mask_dtype

    def call(self, token_ids):
        mask = ops.cast(ops.not_equal(token_ids, 0), self.mask_dtype)
        return mask, ops.zeros_like(token_ids)

    def compute_output_spec(self, token_ids):
        return (
            keras.KerasTensor(token_ids.shape, dtype=self.mask_dtype),
            keras.KerasTensor(token_ids.shape, dtype=token_ids.dtype),
        )

    def get_config(self):
        return {**super().get_config(), "mask_dtype": self.mask_dtype}


def gmlp_masked_lm_models(config):
    """Builds a gMLP masked LM and its training model, sharing weights.

    Args:
        config: dict. Keyword configuration of `keras_gmlp.models.masked_lm`
            (a `"preset"` key is resolved).

    Returns:
        `(training_model, model)`: `{"token_ids", "mask_positions"}` to
        logits `(batch, count, vocabulary)`, and token ids to logits at
        every position (the `masked_lm` model).
    """
    config = dict(config)
    config = resolve_config(
        "text", TEXT_DEFAULTS, config.pop("preset", None), **config
    )
    token_ids, hidden, embedding = text_backbone(config)
    name = config["name"] or "gmlp_masked_lm"
    model = keras.Model(token_ids, embedding(hidden, reverse=True), name=name)
    return _with_gathered_head(token_ids, hidden, embedding, name), model


def causal_lm_model(config):
    """Builds a gMLP causal LM (`keras_gmlp.models.causal_lm`).

    Args:
        config: dict. Its keyword configuration (`"preset"` resolved).
    """
    config = {k: v for k, v in config.items() if k != "causal"}
    return causal_lm(config.pop("preset", None), **config)


def transformer_masked_lm_models(
    vocabulary_size,
    sequence_length,
    num_layers,
    hidden_dim,
    ffn_dim,
    num_heads=None,
    dropout=0.0,
):
    """Builds a keras-hub BERT masked LM that takes the gMLP batches.

    keras-hub's `BertMaskedLM` (post-norm BERT encoder with learned
    absolute positions, and BERT's masked-LM head over the transposed token
    embedding), wrapped to take the same `{"token_ids", "mask_positions"}`
    inputs as the gMLP training model: the padding mask (id 0) and the
    single segment are made inside.

    Args:
        vocabulary_size: int.
        sequence_length: int. Largest number of tokens.
        num_layers: int. Transformer layers.
        hidden_dim: int. Width of the tokens.
        ffn_dim: int. Width of the feed-forward layers.
        num_heads: int. Attention heads; defaults to one per 64 channels.
        dropout: float. Dropout of the encoder. Defaults to `0.0`.

    Returns:
        `(training_model, masked_lm)`: the wrapper and the keras-hub task.
    """
    import keras_hub

    num_heads = _heads(hidden_dim, num_heads)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=ffn_dim,
        dropout=dropout,
        max_sequence_length=sequence_length,
        num_segments=1,
    )
    # The pooler is not used by masked-LM training: keep it out of the
    # gradients (and of weight decay).
    backbone.get_layer("pooled_dense").trainable = False
    masked_lm = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    mask_positions = keras.Input(
        shape=(None,), dtype="int32", name="mask_positions"
    )
    padding_mask, segment_ids = BertInputs(name="bert_inputs")(token_ids)
    logits = masked_lm(
        {
            "token_ids": token_ids,
            "segment_ids": segment_ids,
            "padding_mask": padding_mask,
            "mask_positions": mask_positions,
        }
    )
    training_model = keras.Model(
        {"token_ids": token_ids, "mask_positions": mask_positions},
        logits,
        name="transformer_masked_lm_training",
    )
    return training_model, masked_lm


def transformer_causal_lm_model(
    vocabulary_size,
    sequence_length,
    num_layers,
    hidden_dim,
    ffn_dim,
    num_heads=None,
    dropout=0.0,
):
    """Builds a keras-hub GPT-2 causal LM that takes the gMLP batches.

    keras-hub's `GPT2CausalLM` (pre-norm causal Transformer decoder with
    learned absolute positions, logits over the transposed token
    embedding) of the given size, wrapped to take token ids alone, as the
    gMLP `causal_lm` does: the padding mask (id 0) is made inside.

    Args:
        vocabulary_size: int.
        sequence_length: int. Largest number of tokens.
        num_layers: int. Transformer layers.
        hidden_dim: int. Width of the tokens.
        ffn_dim: int. Width of the feed-forward layers.
        num_heads: int. Attention heads; defaults to one per 64 channels.
        dropout: float. Dropout of the decoder. Defaults to `0.0`.

    Returns:
        A `keras.Model` from token ids `(batch, tokens)` to next-token
        logits `(batch, tokens, vocabulary_size)`.
    """
    import keras_hub

    num_heads = _heads(hidden_dim, num_heads)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=ffn_dim,
        dropout=dropout,
        max_sequence_length=sequence_length,
    )
    causal_lm = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    padding_mask, _ = BertInputs(mask_dtype="int32", name="gpt2_inputs")(
        token_ids
    )
    logits = causal_lm({"token_ids": token_ids, "padding_mask": padding_mask})
    return keras.Model(token_ids, logits, name="transformer_causal_lm")


def _heads(hidden_dim, num_heads):
    num_heads = num_heads or max(1, hidden_dim // 64)
    if hidden_dim % num_heads:
        raise ValueError(
            f"hidden_dim {hidden_dim} is not divisible by num_heads "
            f"{num_heads}."
        )
    return num_heads


def _with_gathered_head(token_ids, hidden, embedding, name):
    mask_positions = keras.Input(
        shape=(None,), dtype="int32", name="mask_positions"
    )
    gathered = GatherPositions(name="gather_masked")(hidden, mask_positions)
    logits = embedding(gathered, reverse=True)
    return keras.Model(
        {"token_ids": token_ids, "mask_positions": mask_positions},
        logits,
        name=f"{name}_training",
    )


def matched_transformer_layers(config, num_heads=None):
    """Transformer layers with about the parameters of the gMLP blocks.

    Args:
        config: dict. The gMLP model's resolved configuration.
        num_heads: int. Heads of the Transformer.

    Returns:
        `(num_layers, gmlp_block_parameters, transformer_layer_parameters)`.
    """
    import keras_hub

    shape = (None, config["sequence_length"], config["hidden_dim"])
    block = GMLPBlock(
        ffn_dim=config["ffn_dim"],
        sequence_length=config["sequence_length"],
        attention_dim=config["attention_dim"],
        spatial=config["spatial"],
        gating=config["gating"],
    )
    block.build(shape)
    layer = keras_hub.layers.TransformerEncoder(
        intermediate_dim=config["ffn_dim"],
        num_heads=num_heads or max(1, config["hidden_dim"] // 64),
    )
    layer.build(shape)
    gmlp_total = block.count_params() * config["num_layers"]
    num_layers = max(1, round(gmlp_total / layer.count_params()))
    return num_layers, block.count_params(), layer.count_params()
