"""The masked-LM training model of earlier versions, kept loadable.

Earlier versions trained a functional gMLP model that took
`{"token_ids", "mask_positions"}` and gathered the hidden states at the
masked positions with `GatherPositions`. Pretraining now trains
`keras_gmlp.GMLPMaskedLM`; `GatherPositions` stays registered so that the
checkpoints (`best.keras`, `last.keras`) of those runs load after
`import keras_gmlp.models`, and `keras-gmlp evaluate` and `fill-mask` read them.
"""

import keras
from keras import ops


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
