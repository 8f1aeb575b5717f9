import math

import keras
from keras import ops

from keras_gmlp import kernels
from keras_gmlp.layers.toeplitz_matrix import cache_position
from keras_gmlp.layers.toeplitz_matrix import write_cache


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
        allowed = None
        if self.causal:
            length = ops.shape(key)[-2]
            allowed = ops.tril(ops.ones((length, length), dtype="bool"))
        return self.attend(query, key, value, allowed, padding_mask)

    def attend(self, query, key, value, allowed=None, padding_mask=None):
        """Attention of `query` over `key`, where `allowed` (and the
        padding mask of the keys) lets it, through the output projection:
        the `"attention"` operation of `keras_gmlp.kernels`."""
        return kernels.dispatch(
            "attention",
            TinyAttention.reference_attend,
            self,
            query,
            key,
            value,
            allowed,
            padding_mask,
        )

    def reference_attend(
        self, query, key, value, allowed=None, padding_mask=None
    ):
        """`attend` in Keras ops."""
        scores = ops.einsum("...id,...jd->...ij", query, key)
        scores = ops.cast(scores, "float32") / math.sqrt(self.attention_dim)
        if padding_mask is not None:
            keys = ops.cast(padding_mask, "bool")[..., None, :]
            allowed = (
                keys if allowed is None else ops.logical_and(allowed, keys)
            )
        # Scalars, not filled `(..., n, n)` tensors, for the masked
        # entries.
        weights = ops.softmax(
            scores if allowed is None else ops.where(allowed, scores, -1e9),
            axis=-1,
        )
        if allowed is not None:
            # A query with no visible key (a padded one before any real
            # token, or a row of padding only) would spread its softmax
            # over every key, future ones included: it attends to nothing.
            weights = ops.where(allowed, weights, 0.0)
        weights = ops.cast(weights, value.dtype)
        attended = ops.einsum("...ij,...jd->...id", weights, value)
        return self.output_projection(attended)

    def check_cache(self, max_length):
        """Raises a ValueError unless the layer can decode with a cache."""
        if not self.causal:
            raise ValueError(
                f"Received causal={self.causal}; decoding with a cache "
                "needs a causal TinyAttention (causal=True): a "
                "bidirectional one attends to tokens not generated yet."
            )
        if not isinstance(max_length, int):
            raise ValueError(
                f"Received a cache of {max_length} tokens; expected a "
                "static (Python int) length."
            )

    def empty_cache(self, batch_size, max_length):
        """A zero cache of keys and values, `(batch_size, 2, max_length,
        attention_dim)`.

        Args:
            batch_size: int or scalar tensor.
            max_length: int. Tokens the cache holds.
        """
        self.check_cache(max_length)
        return ops.zeros(
            (batch_size, 2, max_length, self.attention_dim),
            self.compute_dtype,
        )

    def call_with_cache(
        self, inputs, cache, cache_update_index, padding_mask=None
    ):
        """The outputs of positions `[start, start + k)`, with a cache.

        The keys and values of the new positions are written into the
        cache at `cache_update_index` (the `"cache_update"` operation of
        `keras_gmlp.kernels`); their queries attend to the cached keys up
        to their own position. Causal layers only.

        Args:
            inputs: tensor `(batch, k, channels)`, the inputs of positions
                `[cache_update_index, cache_update_index + k)`.
            cache: tensor `(batch, 2, max_length, attention_dim)`: keys
                and values, as `empty_cache` makes it or this method
                returns it.
            cache_update_index: int or int scalar tensor. Position of the
                first of `inputs`.
            padding_mask: optional boolean tensor `(batch, max_length)`,
                `False` for the cached positions that are padding (no
                attention goes to them), as in `call`.

        Returns:
            `(outputs, cache)`: outputs `(batch, k, output_dim)` and the
            updated cache.
        """
        max_length = cache.shape[-2]
        self.check_cache(max_length)
        length = inputs.shape[-2]
        inputs = ops.cast(inputs, self.compute_dtype)
        query, key, value = ops.split(self.qkv(inputs), 3, axis=-1)
        start = cache_position(cache_update_index)
        update = ops.cast(ops.stack([key, value], axis=1), cache.dtype)
        cache = write_cache(cache, [0, 0, start, 0], update)
        rows = ops.cast(start, "int32") + ops.arange(length, dtype="int32")
        columns = ops.arange(max_length, dtype="int32")
        allowed = columns[None, :] <= rows[:, None]
        outputs = self.attend(
            query, cache[:, 0], cache[:, 1], allowed, padding_mask
        )
        return outputs, cache

    def compute_output_shape(self, input_shape):
        output_dim = self.output_dim or input_shape[-1]
        return tuple(input_shape[:-1]) + (output_dim,)

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
