import keras
from keras import ops
from keras.initializers import serialize

from keras_gmlp.layers.toeplitz_matrix import cache_position
from keras_gmlp.layers.toeplitz_matrix import causal_rows
from keras_gmlp.layers.toeplitz_matrix import is_static
from keras_gmlp.layers.toeplitz_matrix import leading
from keras_gmlp.layers.toeplitz_matrix import toeplitz_matrix
from keras_gmlp.layers.toeplitz_matrix import toeplitz_product_by_fft
from keras_gmlp.layers.toeplitz_matrix import traces_materialised_toeplitz
from keras_gmlp.layers.toeplitz_matrix import write_cache

SPATIAL_MODES = ("dense", "toeplitz")
GATING_MODES = ("split", "multiplicative", "additive", "linear")
TOEPLITZ_METHODS = ("auto", "matmul", "fft")
# From this many tokens `toeplitz_method="auto"` takes the FFT: a unit of
# 1536 gated channels trains 1.09x (JAX), 1.55x (TensorFlow) as fast so,
# torch from 4096 (`benchmarks/spatial_gating.py`, `spatial_gating_xeon_*`).
FFT_CROSSOVER = 2048


def check_modes(spatial, gating, toeplitz_method="auto"):
    """Raises a ValueError for an unknown mode or an FFT without Toeplitz."""
    for name, value, choices in (
        ("spatial", spatial, SPATIAL_MODES),
        ("gating", gating, GATING_MODES),
        ("toeplitz_method", toeplitz_method, TOEPLITZ_METHODS),
    ):
        if value not in choices:
            raise ValueError(
                f"Received {name}={value!r}; expected one of {choices}."
            )
    if toeplitz_method == "fft" and spatial != "toeplitz":
        raise ValueError(
            f"Received toeplitz_method='fft' with spatial={spatial!r}; "
            "the FFT applies to spatial='toeplitz' only."
        )


@keras.saving.register_keras_serializable(package="keras_gmlp")
class SpatialGatingUnit(keras.layers.Layer):
    """Spatial gating unit (SGU) of gMLP.

    Splits the channels of `z` into `u` and `v`, and returns
    `u * (W @ LayerNorm(v) + b [+ attention])`, the product over the token
    axis. `W` starts near zero and `b` at one, so at initialisation the
    unit returns `u` and the gMLP block is a plain feed-forward network.

    A token count shorter than `sequence_length` uses the leading block of
    `W`. It may be symbolic (a SavedModel exported from JAX with a `None`
    length); such a model must be served at most `sequence_length` tokens.

    Args:
        sequence_length: int. Largest number of tokens. Defaults to `None`,
            the token count of the first input the unit is built with.
        spatial: str. `"dense"` for a full `n x n` weight (the vision
            models) or `"toeplitz"` for a shift-invariant
            `W[i, j] = w[i - j]` of `2n - 1` taps (the paper's language
            models). Defaults to `"dense"`.
        causal: bool. Output `i` depends on tokens `j <= i` only.
            Defaults to `False`.
        gating: str. The spatial unit of the paper's ablation (Table 3):
            `"split"` (`u * f(v)`, the SGU), `"multiplicative"`
            (`z * f(z)`), `"additive"` (`z + f(z)`) or `"linear"` (`f(z)`).
            Only `"split"` halves the channels. Defaults to `"split"`.
        epsilon: float. Epsilon of the norm of `v`. Defaults to `1e-5`.
        toeplitz_method: str. `"matmul"` materialises a Toeplitz `W`
            (`O(n^2)`); `"fft"` applies it as a convolution by real FFT,
            zero-padded to a fast length of at least `2n - 1` (`O(n log
            n)`, float32); `"auto"` takes the FFT from `FFT_CROSSOVER`
            tokens. Defaults to `"auto"`.
        kernel_initializer: initializer of `W`. Defaults to a normal of
            standard deviation `1e-6`.
        bias_initializer: initializer of `b`. Defaults to `"ones"`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `(batch, tokens, channels)`.
        attention: optional tensor `(batch, tokens, gated channels)` added
            to the token product: the aMLP tiny attention.

    Example:

    >>> z = keras.random.normal((2, 16, 64))
    >>> tuple(keras_gmlp.layers.SpatialGatingUnit()(z).shape)
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
        toeplitz_method="auto",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_modes(spatial, gating, toeplitz_method)
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
        self.toeplitz_method = toeplitz_method
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
        self.check_length(input_shape[-2])
        n = self.sequence_length
        self.gate_channels = channels // (2 if self.gating == "split" else 1)
        self.norm = keras.layers.LayerNormalization(
            epsilon=self.epsilon, dtype=self.dtype_policy, name="norm"
        )
        self.norm.build(tuple(input_shape[:-1]) + (self.gate_channels,))
        # Not autocast: the FFT reads them in float32.
        self.kernel = self.add_weight(
            name="kernel",
            shape=(n, n) if self.spatial == "dense" else (2 * n - 1,),
            initializer=self.kernel_initializer,
            autocast=False,
        )
        self.bias = self.add_weight(
            name="bias",
            shape=(n,),
            initializer=self.bias_initializer,
            autocast=False,
        )
        self.built = True

    def check_length(self, length):
        """Raises a ValueError for more tokens than `sequence_length`."""
        if is_static(length) and length > self.sequence_length:
            raise ValueError(
                f"Received a sequence of {length} tokens; this "
                f"SpatialGatingUnit accepts at most {self.sequence_length} "
                "(its sequence_length)."
            )

    def spatial_weight(self, length=None):
        """The `(length, length)` token-mixing matrix `W` (lower
        triangular if causal); `length` may be symbolic and defaults to
        `sequence_length`."""
        length = self.sequence_length if length is None else length
        if self.spatial == "toeplitz":
            weight = toeplitz_matrix(self.kernel, length)
        else:
            weight = leading(leading(self.kernel, length, 0), length, 1)
        return ops.tril(weight) if self.causal else weight

    def uses_fft(self, length):
        """Whether a call on `length` tokens applies `W` by FFT."""
        if self.spatial != "toeplitz" or self.toeplitz_method == "matmul":
            return False
        if traces_materialised_toeplitz():  # an ONNX or LiteRT export
            return False
        length = length if is_static(length) else self.sequence_length
        return self.toeplitz_method == "fft" or length >= FFT_CROSSOVER

    def call(self, inputs, attention=None):
        u, v = self.halves(inputs)
        return self.gate(u, self.token_product(self.norm(v)), attention)

    def halves(self, inputs):
        """`(u, v)`: the split gating's halves, else the input twice."""
        if self.gating == "split":
            return tuple(ops.split(inputs, 2, axis=-1))
        return inputs, inputs

    def token_product(self, v):
        """`W @ v + b` over the tokens of `v` `(batch, tokens, channels)`."""
        length = v.shape[-2]
        self.check_length(length)
        length = length if is_static(length) else ops.shape(v)[-2]
        if self.uses_fft(length):
            bias = leading(ops.cast(self.bias, "float32"), length, 0)
            return toeplitz_product_by_fft(
                self.kernel, v, bias, length, self.sequence_length, self.causal
            )
        weight = ops.cast(self.spatial_weight(length), v.dtype)
        bias = ops.cast(leading(self.bias, length, 0), v.dtype)
        return ops.einsum("ij,...jc->...ic", weight, v) + bias[:, None]

    def gate(self, u, mixed, attention=None):
        """The gating of `u` by the token product `mixed`."""
        if attention is not None:
            mixed = mixed + attention
        if self.gating == "linear":
            return mixed
        return u + mixed if self.gating == "additive" else u * mixed

    def empty_cache(self, batch_size, max_length):
        """A zero decoding cache of the normalised gate inputs,
        `(batch_size, max_length, gate_channels)`."""
        if not self.causal:
            raise ValueError(
                f"Received causal={self.causal}; decoding with a cache needs "
                "a causal SpatialGatingUnit (causal=True)."
            )
        if not is_static(max_length):
            raise ValueError(
                f"Received max_length={max_length}; expected a Python int."
            )
        self.check_length(max_length)
        return ops.zeros(
            (batch_size, max_length, self.gate_channels), self.compute_dtype
        )

    def call_with_cache(
        self, inputs, cache, cache_update_index, attention=None
    ):
        """The outputs of positions `[start, start + k)`, with a cache.

        The cache holds the normalised gate input `z` of every position so
        far; the new ones are written at `cache_update_index`, and output
        `i` is `u_i * (sum_{j <= i} W[i, j] z_j + b_i)`, one row of `W`
        times the cache. With `cache_update_index=0` (the prompt's
        prefill) the product is `call`'s.

        Args:
            inputs: tensor `(batch, k, channels)`.
            cache: tensor `(batch, max_length, gate_channels)`, from
                `empty_cache` or this method.
            cache_update_index: int or int scalar tensor, the first new
                position.
            attention: optional tensor `(batch, k, gate_channels)`.

        Returns:
            `(outputs, cache)`.
        """
        max_length = cache.shape[-2]
        u, v = self.halves(ops.cast(inputs, self.compute_dtype))
        z = self.norm(v)
        start = cache_position(cache_update_index)
        cache = write_cache(cache, [0, start, 0], ops.cast(z, cache.dtype))
        if is_static(start) and start == 0:
            mixed = self.token_product(z)
        else:
            k, n = inputs.shape[-2], self.sequence_length
            weight = causal_rows(
                self.kernel, self.spatial, n, max_length, start, k
            )
            bias = ops.slice(ops.convert_to_tensor(self.bias), [start], [k])
            mixed = (
                ops.einsum("ij,bjc->bic", ops.cast(weight, cache.dtype), cache)
                + ops.cast(bias, cache.dtype)[:, None]
            )
        if attention is not None:
            mixed = mixed + ops.cast(attention, self.compute_dtype)
        return self.gate(u, mixed), cache

    def compute_output_shape(self, input_shape):
        channels = input_shape[-1]
        if self.gating == "split" and channels is not None:
            channels = channels // 2
        return tuple(input_shape[:-1]) + (channels,)

    def get_config(self):
        config = super().get_config()
        config.update(
            sequence_length=self.sequence_length,
            spatial=self.spatial,
            causal=self.causal,
            gating=self.gating,
            epsilon=self.epsilon,
            toeplitz_method=self.toeplitz_method,
            kernel_initializer=serialize(self.kernel_initializer),
            bias_initializer=serialize(self.bias_initializer),
        )
        return config
