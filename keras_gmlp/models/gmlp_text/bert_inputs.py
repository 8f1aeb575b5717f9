"""Padding mask and segment ids made from token ids, inside a model."""

import keras
from keras import ops


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

    >>> from keras_gmlp.models import BertInputs
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
