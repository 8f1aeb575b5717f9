import keras
from keras import ops

SPATIAL_MODES = ("dense", "toeplitz")
GATING_MODES = ("split", "multiplicative", "additive", "linear")


def check_modes(spatial, gating):
    """Raises a ValueError for an unknown `spatial` or `gating` mode."""
    for name, value, choices in (
        ("spatial", spatial, SPATIAL_MODES),
        ("gating", gating, GATING_MODES),
    ):
        if value not in choices:
            raise ValueError(
                f"Received {name}={value!r}; expected one of {choices}."
            )


@keras.saving.register_keras_serializable(package="keras_gmlp")
class SpatialGatingUnit(keras.layers.Layer):
    """Spatial gating unit (SGU) of gMLP.

    Splits the channels of `z` into `u` (first half) and `v` (second half),
    normalises `v`, projects it over the token axis with a weight `W` and a
    per-token bias `b`, and gates `u` with the result:
    `u * (W @ LayerNorm(v) + b [+ attention])`.

    `W` starts near zero and `b` at one, so at initialisation the unit
    returns `u` and the gMLP block behaves as a plain feed-forward network.

    Args:
        sequence_length: int. The largest number of tokens the unit accepts.
            Shorter sequences use the leading block of `W`. Defaults to
            `None`, the token count of the first input it is built with.
        spatial: str. `"dense"` for a full `n x n` weight (the vision
            models) or `"toeplitz"` for a shift-invariant weight
            `W[i, j] = w[i - j]` with `2n - 1` parameters (the paper's
            language models). Defaults to `"dense"`.
        causal: bool. If `True`, output `i` depends on tokens `j <= i` only.
            Defaults to `False`.
        gating: str. The spatial unit of the paper's ablation (Table 3):
            `"split"` (`u * f(v)`, the SGU), `"multiplicative"`
            (`z * f(z)`), `"additive"` (`z + f(z)`) or `"linear"` (`f(z)`).
            Only `"split"` halves the channels. Defaults to `"split"`.
        epsilon: float. Epsilon of the layer normalisation of `v`.
            Defaults to `1e-5`.
        kernel_initializer: initializer for `W`. Defaults to a normal
            distribution with standard deviation `1e-6`.
        bias_initializer: initializer for `b`. Defaults to `"ones"`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor of shape `(batch, tokens, channels)`.
        attention: optional tensor of shape `(batch, tokens, channels / 2)`
            (channels for the non-split gatings), added to the spatial
            projection before the gating: the aMLP tiny attention.

    Example:

    >>> z = keras.random.normal((2, 16, 64))
    >>> keras_gmlp.layers.SpatialGatingUnit()(z).shape
    (2, 16, 32)

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    def __init__(
        self,
        sequence_length=None,
        spatial="dense",
        causal=False,
        gating="split",
        epsilon=1e-5,
        kernel_initializer=None,
        bias_initializer="ones",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_modes(spatial, gating)
        if sequence_length is not None and sequence_length < 1:
            raise ValueError(
                f"Received sequence_length={sequence_length}; expected a "
                "positive integer or None."
            )
        self.sequence_length = sequence_length
        self.spatial = spatial
        self.causal = causal
        self.gating = gating
        self.epsilon = epsilon
        if kernel_initializer is None:
            kernel_initializer = keras.initializers.RandomNormal(stddev=1e-6)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        channels = input_shape[-1]
        if self.gating == "split" and channels % 2:
            raise ValueError(
                f"SpatialGatingUnit splits the channels in two halves: "
                f"received {channels} channels; expected an even number."
            )
        if self.sequence_length is None:
            if input_shape[-2] is None:
                raise ValueError(
                    "SpatialGatingUnit needs a static token count to build "
                    "without sequence_length: received input shape "
                    f"{tuple(input_shape)}."
                )
            self.sequence_length = int(input_shape[-2])
        self._check_length(input_shape[-2])
        n = self.sequence_length
        gate_channels = channels // 2 if self.gating == "split" else channels
        self.norm = keras.layers.LayerNormalization(
            epsilon=self.epsilon, dtype=self.dtype_policy, name="norm"
        )
        self.norm.build(tuple(input_shape[:-1]) + (gate_channels,))
        kernel_shape = (n, n) if self.spatial == "dense" else (2 * n - 1,)
        self.kernel = self.add_weight(
            name="kernel",
            shape=kernel_shape,
            initializer=self.kernel_initializer,
        )
        self.bias = self.add_weight(
            name="bias", shape=(n,), initializer=self.bias_initializer
        )
        self.built = True

    def _check_length(self, length):
        if length is not None and length > self.sequence_length:
            raise ValueError(
                f"Received a sequence of {length} tokens; this "
                f"SpatialGatingUnit accepts at most {self.sequence_length} "
                "(its sequence_length)."
            )

    def spatial_weight(self, length=None):
        """Returns the `(length, length)` token-mixing matrix `W`.

        Args:
            length: int or scalar tensor. Number of tokens. Defaults to the
                layer's `sequence_length`.
        """
        n = self.sequence_length
        length = n if length is None else length
        if self.spatial == "dense":
            weight = self.kernel[:length, :length]
        else:
            positions = ops.arange(length, dtype="int32")
            offsets = positions[:, None] - positions[None, :] + (n - 1)
            weight = ops.take(self.kernel, offsets, axis=0)
        if self.causal:
            weight = ops.tril(weight)
        return weight

    def call(self, inputs, attention=None):
        length = inputs.shape[-2]
        self._check_length(length)
        if length is None:
            length = ops.shape(inputs)[-2]
        if self.gating == "split":
            u, v = ops.split(inputs, 2, axis=-1)
        else:
            u = v = inputs
        v = self.norm(v)
        weight = ops.cast(self.spatial_weight(length), v.dtype)
        bias = ops.cast(self.bias[:length], v.dtype)
        v = ops.einsum("ij,...jc->...ic", weight, v) + bias[:, None]
        if attention is not None:
            v = v + attention
        if self.gating == "linear":
            return v
        if self.gating == "additive":
            return u + v
        return u * v

    def compute_output_shape(self, input_shape):
        channels = input_shape[-1]
        if self.gating == "split" and channels is not None:
            channels = channels // 2
        return tuple(input_shape[:-1]) + (channels,)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "spatial": self.spatial,
                "causal": self.causal,
                "gating": self.gating,
                "epsilon": self.epsilon,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config
