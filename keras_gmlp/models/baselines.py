"""keras-hub Transformers matched by size to a gMLP, for fair comparisons.

Each baseline is a keras-hub task of the given width, feed-forward size and
depth, wrapped to take the very batches the gMLP models of the pretraining
workflow take (the padding mask, id 0, and the single segment are made
inside), so both train on the same data, targets and schedule:

| objective | name     | keras-hub task                                    |
|-----------|----------|---------------------------------------------------|
| masked LM | `"bert"` | `BertMaskedLM`: post-norm encoder, learned        |
|           |          | absolute positions, BERT's head over the          |
|           |          | transposed token embedding                        |
| causal LM | `"gpt2"` | `GPT2CausalLM`: pre-norm causal decoder, learned  |
|           |          | absolute positions, tied output embedding         |

`matched_transformer_layers` picks the depth whose parameters best match
the gMLP blocks'. New baselines (rotary or relative positions, FNet, ViT)
join the `MASKED_LM_BASELINES` / `CAUSAL_LM_BASELINES` tables.

This module imports keras-hub only when a baseline is built.
`import keras_gmlp.models` registers `BertInputs`, so a checkpoint holding
a baseline loads after it.
"""

import keras
from keras import ops

from keras_gmlp.layers.gmlp_block import GMLPBlock


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

    Example:

    >>> from keras_gmlp.models.baselines import BertInputs
    >>> mask, segments = BertInputs()(np.array([[5, 6, 0]]))
    >>> keras.ops.convert_to_numpy(mask).tolist()
    [[True, True, False]]
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


def bert_masked_lm(
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
    inputs as the gMLP training model.

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

    num_heads = default_heads(hidden_dim, num_heads)
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


def gpt2_causal_lm(
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
    gMLP `causal_lm` does.

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

    num_heads = default_heads(hidden_dim, num_heads)
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


# Baselines by name: builders taking (vocabulary_size, sequence_length,
# num_layers, hidden_dim, ffn_dim, num_heads, dropout).
MASKED_LM_BASELINES = {"bert": bert_masked_lm}
CAUSAL_LM_BASELINES = {"gpt2": gpt2_causal_lm}


def masked_lm_baseline(name, **size):
    """Builds the masked-LM baseline `name` of `MASKED_LM_BASELINES`.

    Args:
        name: str. A key of `MASKED_LM_BASELINES`.
        **size: the builder's keywords (`vocabulary_size`,
            `sequence_length`, `num_layers`, `hidden_dim`, `ffn_dim`,
            `num_heads`, `dropout`).

    Returns:
        `(training_model, masked_lm)`, as `bert_masked_lm`.
    """
    return _pick(MASKED_LM_BASELINES, name, "masked-LM")(**size)


def causal_lm_baseline(name, **size):
    """Builds the causal-LM baseline `name` of `CAUSAL_LM_BASELINES`.

    Args:
        name: str. A key of `CAUSAL_LM_BASELINES`.
        **size: the builder's keywords, as `masked_lm_baseline`.

    Returns:
        A `keras.Model` from token ids to next-token logits.
    """
    return _pick(CAUSAL_LM_BASELINES, name, "causal-LM")(**size)


def _pick(table, name, kind):
    if name not in table:
        raise ValueError(
            f"Unknown {kind} baseline {name!r}; expected one of "
            f"{sorted(table)}."
        )
    return table[name]


def default_heads(hidden_dim, num_heads=None):
    """Attention heads: `num_heads`, else one per 64 channels.

    Raises:
        ValueError: when `hidden_dim` is not divisible by the heads.
    """
    num_heads = num_heads or max(1, hidden_dim // 64)
    if hidden_dim % num_heads:
        raise ValueError(
            f"hidden_dim {hidden_dim} is not divisible by num_heads "
            f"{num_heads}."
        )
    return num_heads


def matched_transformer_layers(config, num_heads=None):
    """Transformer layers with about the parameters of the gMLP blocks.

    Args:
        config: dict. The gMLP model's resolved configuration
            (`sequence_length`, `hidden_dim`, `ffn_dim`, `attention_dim`,
            `spatial`, `gating`, `num_layers`).
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
