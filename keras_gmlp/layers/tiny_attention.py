import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_gmlp")
class TinyAttention(keras.layers.Layer):
    """Single-head "tiny" self-attention of aMLP.

    Projects the input to one query, key and value head of size
    `attention_dim`, attends, and projects the result to `output_dim`
    channels. The softmax is computed in float32, also under mixed
    precision.

    Args:
        attention_dim: int. Size of the single attention head.
            Defaults to `64`.
        output_dim: int. Channels of the output; in aMLP, half of the
            block's `ffn_dim`. Defaults to `None`, the input's channels.
        causal: bool. If `True`, token `i` attends to tokens `j <= i` only.
            Defaults to `False`.
        kernel_initializer: initializer for both projections.
            Defaults to `"glorot_uniform"`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor of shape `(batch, tokens, channels)`.
        padding_mask: optional boolean tensor of shape `(batch, tokens)`,
            `True` for real tokens; padded keys receive no attention. A
            query that may see no real key (a padded token before the first
            real one when causal, or a row of padding only) attends to
            nothing: its output is the output projection's bias.

    Example:

    >>> x = keras.random.normal((2, 16, 32))
    >>> attention = keras_gmlp.layers.TinyAttention(8, output_dim=48)
    >>> tuple(attention(x).shape)
    (2, 16, 48)

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    def __init__(
        self,
        attention_dim=64,
        output_dim=None,
        causal=False,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if attention_dim is None or attention_dim < 1:
            raise ValueError(
                f"Received attention_dim={attention_dim}; expected a "
                "positive integer."
            )
        self.attention_dim = attention_dim
        self.output_dim = output_dim
        self.causal = causal
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        output_dim = self.output_dim or input_shape[-1]
        self.qkv = keras.layers.Dense(
            3 * self.attention_dim,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="qkv",
        )
        self.qkv.build(input_shape)
        self.output_projection = keras.layers.Dense(
            output_dim,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="output_projection",
        )
        self.output_projection.build(
            tuple(input_shape[:-1]) + (self.attention_dim,)
        )
        self.built = True

    def call(self, inputs, padding_mask=None, mask=None):
        if padding_mask is None:
            padding_mask = mask
        query, key, value = ops.split(self.qkv(inputs), 3, axis=-1)
        scores = ops.einsum("...id,...jd->...ij", query, key)
        scores = ops.cast(scores, "float32") / math.sqrt(self.attention_dim)
        allowed = None
        if self.causal:
            length = ops.shape(scores)[-1]
            allowed = ops.tril(ops.ones((length, length), dtype="bool"))
        if padding_mask is not None:
            keys = ops.cast(padding_mask, "bool")[..., None, :]
            allowed = (
                keys if allowed is None else ops.logical_and(allowed, keys)
            )
        weights = ops.softmax(
            scores
            if allowed is None
            else ops.where(allowed, scores, ops.full_like(scores, -1e9)),
            axis=-1,
        )
        if allowed is not None:
            # A query with no visible key (a padded one before any real
            # token, or a row of padding only) would spread its softmax
            # over every key, future ones included: it attends to nothing.
            weights = ops.where(allowed, weights, ops.zeros_like(weights))
        weights = ops.cast(weights, value.dtype)
        attended = ops.einsum("...ij,...jd->...id", weights, value)
        return self.output_projection(attended)

    def compute_output_shape(self, input_shape):
        output_dim = self.output_dim or input_shape[-1]
        return tuple(input_shape[:-1]) + (output_dim,)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "attention_dim": self.attention_dim,
                "output_dim": self.output_dim,
                "causal": self.causal,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
