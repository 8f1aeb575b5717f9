import keras
from keras import ops

from keras_gmlp import kernels
from keras_gmlp.layers.drop_path import DropPath
from keras_gmlp.layers.spatial_gating_unit import SpatialGatingUnit
from keras_gmlp.layers.spatial_gating_unit import check_modes
from keras_gmlp.layers.tiny_attention import TinyAttention


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPBlock(keras.layers.Layer):
    """A gMLP block, or an aMLP block when `attention_dim` is set.

    `x + DropPath(Dense(d_model)(SGU(GELU(Dense(ffn_dim)(LayerNorm(x))))))`,
    with exact (erf) GELU. With `attention_dim`, a `TinyAttention` over the
    normalised input is added inside the spatial gating unit.

    The block is one operation of `keras_gmlp.kernels`: on a CPU, a
    backend's faster kernel for it runs instead of `reference_call`, with
    the same weights and outputs.

    Args:
        ffn_dim: int. Width of the channel expansion; even for the split
            gating.
        sequence_length: int. Largest number of tokens. Defaults to `None`,
            the token count of the first input the block is built with.
        attention_dim: int. Head size of the tiny attention. Defaults to
            `None` (gMLP, no attention).
        spatial: str. `"dense"` or `"toeplitz"`, see `SpatialGatingUnit`.
            Defaults to `"dense"`.
        causal: bool. Makes the spatial unit and the attention causal.
            Defaults to `False`.
        gating: str. Spatial unit of the paper's ablation, see
            `SpatialGatingUnit`. Defaults to `"split"`.
        drop_path_rate: float. Stochastic depth rate of the residual branch.
            Defaults to `0.0`.
        epsilon: float. Epsilon of the block's pre-norm. Defaults to `1e-6`.
        kernel_initializer: initializer of the channel projections.
            Defaults to `"glorot_uniform"`.
        spatial_initializer: initializer of the spatial weight `W`.
            Defaults to `None`, `SpatialGatingUnit`'s near-zero normal.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor of shape `(batch, tokens, d_model)`.
        padding_mask: optional boolean tensor `(batch, tokens)`, used by the
            tiny attention only. A Keras mask is used when it is not given.
        training: bool. Enables stochastic depth.

    Example:

    >>> x = keras.random.normal((2, 16, 32))
    >>> tuple(keras_gmlp.layers.GMLPBlock(ffn_dim=64)(x).shape)
    (2, 16, 32)

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    def __init__(
        self,
        ffn_dim,
        sequence_length=None,
        attention_dim=None,
        spatial="dense",
        causal=False,
        gating="split",
        drop_path_rate=0.0,
        epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        spatial_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if gating == "split" and ffn_dim % 2:
            raise ValueError(
                f"Received ffn_dim={ffn_dim}; expected an even number: the "
                "spatial gating unit splits it into two halves."
            )
        check_modes(spatial, gating)
        self.ffn_dim = ffn_dim
        self.sequence_length = sequence_length
        self.attention_dim = attention_dim
        self.spatial = spatial
        self.causal = causal
        self.gating = gating
        self.drop_path_rate = drop_path_rate
        self.epsilon = epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.spatial_initializer = (
            None
            if spatial_initializer is None
            else keras.initializers.get(spatial_initializer)
        )
        self.supports_masking = True

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        gate_dim = self.ffn_dim // 2 if self.gating == "split" else self.ffn_dim
        ffn_shape = tuple(input_shape[:-1]) + (self.ffn_dim,)
        self.norm = keras.layers.LayerNormalization(
            epsilon=self.epsilon, dtype=self.dtype_policy, name="norm"
        )
        self.norm.build(input_shape)
        self.channel_projection_in = keras.layers.Dense(
            self.ffn_dim,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="channel_projection_in",
        )
        self.channel_projection_in.build(input_shape)
        self.spatial_gating_unit = SpatialGatingUnit(
            sequence_length=self.sequence_length,
            spatial=self.spatial,
            causal=self.causal,
            gating=self.gating,
            kernel_initializer=self.spatial_initializer,
            dtype=self.dtype_policy,
            name="spatial_gating_unit",
        )
        self.spatial_gating_unit.build(ffn_shape)
        self.sequence_length = self.spatial_gating_unit.sequence_length
        self.tiny_attention = None
        if self.attention_dim is not None:
            self.tiny_attention = TinyAttention(
                self.attention_dim,
                output_dim=gate_dim,
                causal=self.causal,
                kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy,
                name="tiny_attention",
            )
            self.tiny_attention.build(input_shape)
        self.channel_projection_out = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="channel_projection_out",
        )
        self.channel_projection_out.build(tuple(input_shape[:-1]) + (gate_dim,))
        self.drop_path = DropPath(
            self.drop_path_rate, dtype=self.dtype_policy, name="drop_path"
        )
        self.built = True

    def call(self, inputs, padding_mask=None, training=None, mask=None):
        if padding_mask is None:
            padding_mask = mask
        return kernels.dispatch(
            "gmlp_block",
            GMLPBlock.reference_call,
            self,
            inputs,
            padding_mask,
            training,
        )

    def reference_call(self, inputs, padding_mask=None, training=None):
        """`call` in Keras ops, as the paper writes the block."""
        normalized = self.norm(inputs)
        attention = None
        if self.tiny_attention is not None:
            attention = self.tiny_attention(
                normalized, padding_mask=padding_mask
            )
        hidden = self.channel_projection_in(normalized)
        hidden = keras.activations.gelu(hidden, approximate=False)
        hidden = self.spatial_gating_unit(hidden, attention=attention)
        hidden = self.channel_projection_out(hidden)
        return inputs + self.drop_path(hidden, training=training)

    def empty_cache(self, batch_size, max_length):
        """A zero decoding cache for `call_with_cache`: a dict of the
        unit's cache and, for aMLP, the tiny attention's."""
        cache = {
            "spatial_gating_unit": self.spatial_gating_unit.empty_cache(
                batch_size, max_length
            )
        }
        if self.tiny_attention is not None:
            cache["tiny_attention"] = self.tiny_attention.empty_cache(
                batch_size, max_length
            )
        return cache

    def call_with_cache(
        self, inputs, cache, cache_update_index, padding_mask=None
    ):
        """`call` of positions `[start, start + k)` of a causal block,
        with a cache (incremental decoding, `O(max_length)` a token): the
        outputs equal `call`'s on the whole prefix, up to rounding.

        Another operation of `keras_gmlp.kernels`, as `call`.

        Args:
            inputs: tensor `(batch, k, d_model)`.
            cache: dict, from `empty_cache` or this method.
            cache_update_index: int or int scalar tensor, `start`.
            padding_mask: optional boolean tensor `(batch, max_length)`,
                for the tiny attention, as in `call`.

        Returns:
            `(outputs, cache)`.
        """
        if not self.causal:
            raise ValueError(
                f"Received causal={self.causal}; decoding with a cache "
                "needs a causal GMLPBlock (causal=True)."
            )
        return kernels.dispatch(
            "gmlp_block_with_cache",
            GMLPBlock.reference_call_with_cache,
            self,
            inputs,
            cache,
            cache_update_index,
            padding_mask,
        )

    def reference_call_with_cache(
        self, inputs, cache, cache_update_index, padding_mask=None
    ):
        """`call_with_cache` in Keras ops."""
        cache = dict(cache)
        inputs = ops.cast(inputs, self.compute_dtype)
        normalized = self.norm(inputs)
        hidden = self.channel_projection_in(normalized)
        hidden = keras.activations.gelu(hidden, approximate=False)
        attention = None
        if self.tiny_attention is not None:
            attention, cache["tiny_attention"] = (
                self.tiny_attention.call_with_cache(
                    normalized,
                    cache["tiny_attention"],
                    cache_update_index,
                    padding_mask=padding_mask,
                )
            )
        hidden, cache["spatial_gating_unit"] = (
            self.spatial_gating_unit.call_with_cache(
                hidden,
                cache["spatial_gating_unit"],
                cache_update_index,
                attention=attention,
            )
        )
        return inputs + self.channel_projection_out(hidden), cache

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "ffn_dim": self.ffn_dim,
                "sequence_length": self.sequence_length,
                "attention_dim": self.attention_dim,
                "spatial": self.spatial,
                "causal": self.causal,
                "gating": self.gating,
                "drop_path_rate": self.drop_path_rate,
                "epsilon": self.epsilon,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "spatial_initializer": (
                    None
                    if self.spatial_initializer is None
                    else keras.initializers.serialize(self.spatial_initializer)
                ),
            }
        )
        return config
