"""The gMLP/aMLP language models the pretraining workflow trains.

Masked-LM training predicts only the masked positions: the training model
takes `{"token_ids", "mask_positions"}`, gathers the final hidden states
at those positions and only then projects them on the vocabulary, which
spares the largest matrix product of the model at the other 85 % of the
positions. Each builder also returns the plain model (token ids to logits
at every position) that shares the same layers: the one saved for use.

The Transformer baselines trained on the same batches live in
`keras_gmlp.models.baselines`.
"""

import keras
from keras import ops

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
