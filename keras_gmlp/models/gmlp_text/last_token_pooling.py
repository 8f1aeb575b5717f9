import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_gmlp")
class LastTokenPooling(keras.layers.Layer):
    """Picks each row's hidden state at its last real (non-padding) token.

    In a causal model only the last token has seen the whole text, so a
    classifier on a causal encoder pools there (as GPT-style classifiers
    do). A row of padding only gives its first token.

    Args:
        padding_id: int. Token id of padding, or `None` when every token is
            real (the last position is taken). Defaults to `0`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        hidden: tensor `(batch, tokens, channels)`.
        token_ids: int tensor `(batch, tokens)`.

    Example:

    >>> hidden = keras.ops.reshape(keras.ops.arange(12.0), (2, 3, 2))
    >>> ids = np.array([[5, 6, 0], [5, 6, 7]])
    >>> pooled = keras_gmlp.models.LastTokenPooling()(hidden, ids)
    >>> keras.ops.convert_to_numpy(pooled).tolist()
    [[2.0, 3.0], [10.0, 11.0]]
    """

    def __init__(self, padding_id=0, **kwargs):
        super().__init__(**kwargs)
        self.padding_id = padding_id
        # The token mask is consumed here: the pooled output has none.
        self.supports_masking = True

    def call(self, hidden, token_ids, mask=None):
        length = ops.shape(token_ids)[1]
        positions = ops.arange(length, dtype="int32")[None, :]
        if self.padding_id is None:
            last = ops.full_like(token_ids[:, 0], length - 1, dtype="int32")
        else:
            real = ops.not_equal(token_ids, self.padding_id)
            last = ops.max(
                ops.where(real, positions, ops.zeros_like(positions)), axis=1
            )
        last = ops.cast(last, "int32")[:, None, None]
        return ops.take_along_axis(hidden, last, axis=1)[:, 0, :]

    def compute_output_shape(self, hidden_shape, token_ids_shape=None):
        return (hidden_shape[0], hidden_shape[-1])

    def compute_mask(self, hidden, token_ids=None, mask=None):
        return None

    def get_config(self):
        config = super().get_config()
        config.update({"padding_id": self.padding_id})
        return config
