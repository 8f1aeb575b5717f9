import contextlib
import functools
import numbers
import threading

import keras
from keras import ops

from keras_gmlp.layers import cpu_features
from keras_gmlp.layers.bias_add import bias_add
from keras_gmlp.layers.decoding_cache import write_cache
from keras_gmlp.layers.direct_call import direct_call
from keras_gmlp.layers.gelu import _KERAS_GELU
from keras_gmlp.layers.gelu import biased_gelu
from keras_gmlp.layers.gelu import gelu
from keras_gmlp.layers.layer_normalization import LayerNormalization
from keras_gmlp.layers.layer_normalization import jax_layer_norm
from keras_gmlp.layers.matmul import jax_dot
from keras_gmlp.layers.matmul import matmul
from keras_gmlp.layers.toeplitz_matrix import gathered_matrix
from keras_gmlp.layers.toeplitz_matrix import toeplitz_matrix
from keras_gmlp.layers.toeplitz_product import toeplitz_product
from keras_gmlp.layers.xla_functions import xla_functions_enabled

SPATIAL_MODES = ("dense", "toeplitz")
GATING_MODES = ("split", "multiplicative", "additive", "linear")
TOEPLITZ_METHODS = ("auto", "matmul", "fft")

# Token counts from which `toeplitz_method="auto"` applies a Toeplitz weight
# by FFT instead of the materialised product, per backend: where the FFT
# was at least as fast, forward and forward + backward, for a unit of 1536
# gated channels (gMLP-base text width; `benchmarks/spatial_gating.py`).
FFT_CROSSOVER = {"jax": 1024, "tensorflow": 1024, "torch": 1024}
# On an AMD CPU of family 25 (Zen 3, Zen 4: AVX-512, where it has any, on
# two 256-bit halves), whose float32 matmul runs at half family 26's rate,
# `(tokens, widest gate)`: the FFT from that many tokens for a unit of at
# most that many gated channels, where it made `gmlp_tiny` masked-LM
# training steps at 512 tokens 1.06-1.11x faster on every backend
# (`benchmarks/masked_lm_speed.py`).
AMD_FAMILY_FFT_CROSSOVER = {25: (512, 256)}


def fft_crossover(backend=None, gate_channels=None, cpuinfo_path=None):
    """The token count from which a Toeplitz unit's `"auto"` method takes
    the FFT product: `FFT_CROSSOVER[backend]`, or on an AMD CPU of a
    family in `AMD_FAMILY_FFT_CROSSOVER`, for a unit at most as wide as
    that family's widest gate, that family's (every backend).

    Args:
        backend: str or `None` (Keras' backend).
        gate_channels: int or `None` (not known): the unit's gated
            channels.
        cpuinfo_path: `None` (this machine's) or the path of a Linux
            `/proc/cpuinfo`-format file.

    Returns:
        int.

    Example:

    >>> from keras_gmlp.layers.spatial_gating_unit import fft_crossover
    >>> fft_crossover("jax")
    1024
    >>> fft_crossover("jax", gate_channels=256) in (512, 1024)
    True
    """
    path = () if cpuinfo_path is None else (cpuinfo_path,)
    if gate_channels is not None and cpu_features.is_amd(*path):
        family = cpu_features.cpu_family(*path)
        tokens, widest_gate = AMD_FAMILY_FFT_CROSSOVER.get(family, (0, 0))
        if gate_channels <= widest_gate:
            return tokens
    return FFT_CROSSOVER.get(backend or keras.config.backend(), 1024)


_tracing = threading.local()

# Export formats whose converters take no FFT: tf2onnx has no IRFFT, and
# LiteRT runs TensorFlow's RFFT and IRFFT only with its Flex delegate.
FFT_FREE_FORMATS = ("onnx", "litert")


@contextlib.contextmanager
def materialised_toeplitz():
    """Traces the Toeplitz units with the materialised `n x n` product,
    never the FFT (`FFT_FREE_FORMATS`).

    `keras_gmlp.export` and the models' `export()` trace those formats
    under it. The outputs are the same to float32 rounding; the product
    then costs `O(n^2)` time and memory per call.

    Example:

    >>> from keras_gmlp.layers import SpatialGatingUnit
    >>> from keras_gmlp.layers.spatial_gating_unit import (
    ...     materialised_toeplitz,
    ... )
    >>> unit = SpatialGatingUnit(1024, spatial="toeplitz")
    >>> unit.uses_fft(1024)
    True
    >>> with materialised_toeplitz():
    ...     unit.uses_fft(1024)
    False
    """
    previous = getattr(_tracing, "materialised", False)
    _tracing.materialised = True
    try:
        yield
    finally:
        _tracing.materialised = previous


def fast_fft_length(minimum):
    """The smallest `2^a 3^b 5^c` at least `minimum`: a fast FFT length."""
    best = 1
    while best < minimum:
        best *= 2
    power_of_three = 1
    while power_of_three < best:
        product = power_of_three
        while product < best:
            candidate = product
            while candidate < minimum:
                candidate *= 2
            best = min(best, candidate)
            product *= 5
        power_of_three *= 3
    return best


def is_static(length):
    """Whether a token count is a Python int (not a tensor or symbol)."""
    return isinstance(length, numbers.Integral)


def cache_index(index):
    """A decoding position as a Python int, or else an int32 tensor.

    Under eager torch a tensor position is read as an int too: Keras'
    torch `slice_update` writes at a tensor position through index grids
    (`arange`, `meshgrid`, `index_put_`) and at an int one by assigning a
    slice, and each decoded token writes every block's cache: a
    `gmlp_tiny` token is 1.2x faster under torch this way
    (`benchmarks/generation.py`). Not while torch compiles or exports,
    where an int read from a tensor would be a data-dependent value.
    """
    if is_static(index):
        return int(index)
    if keras.config.backend() == "torch" and not _torch_compiling():
        return int(index)
    return ops.convert_to_tensor(index, "int32")


def _eager_torch():
    """Whether the backend is torch, running eagerly (not compiling)."""
    return keras.config.backend() == "torch" and not _torch_compiling()


def _torch_compiling():
    import torch

    return torch.compiler.is_compiling()


def leading(x, length, axis):
    """The first `length` entries of `x` along `axis`.

    A gather when `length` is not a Python int: slicing by a symbolic
    dimension (JAX export) cannot be shaped while tracing.
    """
    if is_static(length):
        index = [slice(None)] * len(x.shape)
        index[axis] = slice(None, length)
        return x[tuple(index)]
    return ops.take(x, ops.arange(length), axis=axis)


def token_product(weight, v, bias, batched=False):
    """`W @ v + b` over the token axis: `(n, m)` times `(..., m, c)`.

    An einsum and an add, or with `batched=True` a batched product with
    no layout copies of `v`, which the unit takes on every backend: under
    JAX one dot over the token axis and a transpose, with a hand-written
    gradient (`_jax_batched_product`); under TensorFlow `tf.matmul` of
    the 2-D `W` (a `BatchMatMulV2`, no broadcast copy); under torch
    `keras_gmlp.layers.torch_linear.over_tokens`; elsewhere a matmul of
    `W` broadcast over the leading axes. XLA lowers the einsum to one 2-D
    dot over `(batch x channels, tokens)`, with layout copies of `v`
    around it.

    Args:
        weight: tensor `(n, m)`.
        v: tensor `(..., m, c)`.
        bias: tensor `(n,)`.
        batched: bool. The batched matmul instead of the einsum.

    Returns:
        Tensor `(..., n, c)`.
    """
    if batched and keras.config.backend() == "jax" and len(v.shape) == 3:
        product = _jax_batched_product()(weight, v)
    elif batched and keras.config.backend() == "tensorflow":
        product = ops.matmul(weight, v)
    elif batched and keras.config.backend() == "torch":
        from keras_gmlp.layers.torch_linear import over_tokens

        product = over_tokens(weight, v)
    elif batched:
        shape = tuple(ops.shape(v)[:-2]) + tuple(ops.shape(weight))
        product = ops.matmul(ops.broadcast_to(weight, shape), v)
    else:
        product = ops.einsum("ij,...jc->...ic", weight, v)
    return bias_add(product, bias, axis=-2)


def circular_convolution(x, taps, fft_length, static=True):
    """The circular convolution of `x`, zero-padded to `fft_length` along
    its last axis, with `taps` `(fft_length,)`, by real FFT in float32.

    The spectra are the backend's complex tensors, multiplied as such.
    Keras' `ops.rfft` splits them into real and imaginary parts, which
    costs copies, a product in four real multiplications (or, under JAX,
    a reassembly), and a recombination before `ops.irfft`. Under JAX the
    product stays complex too: XLA turns the taps' gradient of the real
    form into slow reductions over the channels. The unit takes it under
    JAX and while torch compiles;
    under TensorFlow and eager torch it takes
    `keras_gmlp.layers.toeplitz_product`, the same FFTs with a backward
    pass by hand.

    Args:
        x: float32 tensor `(..., length)`, `length <= fft_length`.
        taps: float32 tensor `(fft_length,)`.
        fft_length: int.
        static: bool. Whether `length` is a Python int. JAX cannot pad a
            symbolic length in its FFT, so then `x` is padded first.

    Returns:
        float32 tensor `(..., fft_length)`.
    """
    backend = keras.config.backend()
    if backend == "torch":
        import torch

        spectrum = torch.fft.rfft(x, n=fft_length) * torch.fft.rfft(taps)
        return torch.fft.irfft(spectrum, n=fft_length)
    if backend == "tensorflow":
        import tensorflow as tf

        spectrum = tf.signal.rfft(x, [fft_length]) * tf.signal.rfft(taps)
        return tf.signal.irfft(spectrum, [fft_length])
    import jax.numpy as jnp

    length = fft_length
    if not static:
        zeros = jnp.zeros(x.shape[:-1] + (fft_length,), "float32")
        x = jnp.concatenate([x, zeros], axis=-1)[..., :fft_length]
        length = None
    spectrum = jnp.fft.rfft(x, n=length) * jnp.fft.rfft(taps)
    return jnp.fft.irfft(spectrum, n=fft_length)


@functools.cache
def _jax_batched_product():
    """`W @ v[b]` for every `b` of `v` `(batch, m, c)`, as a JAX function
    with a hand-written gradient.

    The product is one dot of `W` with `v`'s token axis, `(n, batch, c)`,
    transposed to `(batch, n, c)`: XLA:CPU copies `v` to `(m, batch x c)`
    for the dot and fuses the result's transpose into the ops that read it
    (the bias add and the gating). A batched dot would need `W`
    broadcast to `(batch, n, m)` first, a copy XLA:CPU makes at about
    1 ms a block for gMLP-Ti at batch 8. The
    gradient of `v` is the same product with `W` transposed; that of `W`
    the sum over the batch of `g[b] @ v[b]^T` accumulated in float32
    (`jax_weight_gradient`), instead of JAX's batched dot into
    `(batch, n, m)` and its reduction. The same sums in another order:
    float32 rounding apart, the gradient JAX derives.
    """
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def product(weight, v):
        # One dot into `(n, batch, c)`, transposed to `(batch, n, c)`.
        return jnp.transpose(jax_dot(weight, v, ((1,), (1,))), (1, 0, 2))

    def forward(weight, v):
        return product(weight, v), (weight, v)

    def backward(residuals, upstream):
        weight, v = residuals
        if upstream.dtype == jnp.bfloat16:
            # `W^T @ upstream[b]` as one dot into `(batch, c, m)`: in
            # bfloat16 into float32, the dot contracting `W`'s first axis
            # fails at run time (`jax_dot`).
            by_channel = jax_dot(upstream, weight, ((1,), (0,)))
            v_gradient = jnp.swapaxes(by_channel, 1, 2)
        else:
            by_token = jax.lax.dot_general(
                weight, upstream, (((0,), (1,)), ((), ()))
            )
            v_gradient = jnp.transpose(by_token, (1, 0, 2))
        return jax_weight_gradient(upstream, v, weight.dtype), v_gradient

    product.defvjp(forward, backward)
    return product


# Batches up to this many examples take `W`'s gradient as one 2-D dot per
# example, larger or symbolic ones as one dot (`jax_weight_gradient`).
PER_EXAMPLE_DOTS_UP_TO = 32


def jax_weight_gradient(upstream, v, dtype):
    """`sum_b upstream[b] @ v[b]^T` in `dtype`, as JAX arrays, accumulated
    in float32: the gradient of `W` in `W @ v[b]` (`_jax_batched_product`).

    Up to `PER_EXAMPLE_DOTS_UP_TO` examples, one 2-D dot per example: each
    reads its example's rows in place. Above, or for a symbolic batch, one
    dot contracting the batch and the channels, for which XLA copies both
    operands to `(tokens, batch x channels)`: the per-example dots unroll the
    batch into the program, and XLA's compile time grows with it (a
    2-block classifier's first step at batch 512 takes 17 s).
    """
    import jax
    import jax.numpy as jnp

    batch_size = v.shape[0]
    if isinstance(batch_size, int) and batch_size <= PER_EXAMPLE_DOTS_UP_TO:
        gradient = sum(
            jax.lax.dot_general(
                upstream[b],
                v[b],
                (((1,), (1,)), ((), ())),
                preferred_element_type=jnp.float32,
            )
            for b in range(batch_size)
        )
    else:
        gradient = jax.lax.dot_general(
            upstream,
            v,
            (((0, 2), (0, 2)), ((), ())),
            preferred_element_type=jnp.float32,
        )
    return gradient.astype(dtype)


def _plain_dense(layer):
    """Whether `layer` is a `keras_gmlp.layers.Dense` whose call is its
    product and bias alone (no activation, quantization or LoRA)."""
    from keras_gmlp.layers.dense import Dense
    from keras_gmlp.layers.dense import is_affine

    return isinstance(layer, Dense) and is_affine(layer)


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

    A Toeplitz `W` is applied in `O(n log n)` by FFT on long sequences
    (see `toeplitz_method`); the weights and the result are the same. The
    token count may be symbolic, as in a SavedModel exported from JAX with
    a `None` length: the unit then gathers the leading block of its weights
    instead of slicing, and cannot check the length while tracing, so such
    a model must be served at most `sequence_length` tokens.

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
        toeplitz_method: str. How a Toeplitz weight is applied: `"matmul"`
            materialises the `(tokens, tokens)` matrix and multiplies by it,
            `O(n^2)` time and memory; `"fft"` computes the same product as
            a linear convolution by real FFT over the token axis (in
            float32, zero-padded to a fast length of at least
            `2 * tokens - 1`), `O(n log n)`; `"auto"` takes the FFT from
            `fft_crossover(backend, gate_channels)` tokens on, where it
            was measured to be faster. The weights are the same. Only for
            `spatial="toeplitz"`. Defaults to `"auto"`.
        kernel_initializer: initializer for `W`. Defaults to a normal
            distribution with standard deviation `1e-6`.
        bias_initializer: initializer for `b`. Defaults to `"ones"`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor of shape `(batch, tokens, channels)`.
        attention: optional tensor of shape `(batch, tokens, channels / 2)`
            (channels for the non-split gatings), added to the spatial
            projection before the gating: the aMLP tiny attention.
        training: bool. Unused: the unit computes the same either way.

    Example:

    >>> z = keras.random.normal((2, 16, 64))
    >>> tuple(keras_gmlp.layers.SpatialGatingUnit()(z).shape)
    (2, 16, 32)
    >>> unit = keras_gmlp.layers.SpatialGatingUnit(
    ...     spatial="toeplitz", toeplitz_method="fft"
    ... )
    >>> tuple(unit(z).shape)
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
        check_modes(spatial, gating)
        if toeplitz_method not in TOEPLITZ_METHODS:
            raise ValueError(
                f"Received toeplitz_method={toeplitz_method!r}; expected one "
                f"of {TOEPLITZ_METHODS}."
            )
        if toeplitz_method == "fft" and spatial != "toeplitz":
            raise ValueError(
                f"Received toeplitz_method='fft' with spatial={spatial!r}; "
                "the FFT applies to spatial='toeplitz' only."
            )
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
        self._check_length(input_shape[-2])
        n = self.sequence_length
        gate_channels = channels // 2 if self.gating == "split" else channels
        # The FFT's crossover may depend on it (`fft_crossover`).
        self.gate_channels = gate_channels
        self.norm = LayerNormalization(
            epsilon=self.epsilon, dtype=self.dtype_policy, name="norm"
        )
        self.norm.build(tuple(input_shape[:-1]) + (gate_channels,))
        kernel_shape = (n, n) if self.spatial == "dense" else (2 * n - 1,)
        # No autocast: the FFT path reads the weights in float32; the
        # product casts them to the compute dtype itself.
        self.kernel = self.add_weight(
            name="kernel",
            shape=kernel_shape,
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
            length: int, scalar tensor or symbolic dimension. Number of
                tokens. Defaults to the layer's `sequence_length`.
        """
        n = self.sequence_length
        length = n if length is None else length
        positions = None if is_static(length) else ops.arange(length)
        if self.spatial == "dense":
            if positions is None:
                weight = self.kernel[:length, :length]
            else:
                weight = ops.take(self.kernel, positions, axis=0)
                weight = ops.take(weight, positions, axis=1)
        elif positions is None:
            weight = toeplitz_matrix(self.kernel, int(length))
        else:
            weight = gathered_matrix(self.kernel, length)
        if self.causal:
            weight = ops.tril(weight)
        return weight

    def uses_fft(self, length):
        """Whether a call on `length` tokens applies `W` by FFT.

        Args:
            length: int or `None` (a length known only when run).
        """
        if self.spatial != "toeplitz" or self.toeplitz_method == "matmul":
            return False
        if getattr(_tracing, "materialised", False):
            return False
        if self.toeplitz_method == "fft":
            return True
        if not is_static(length):
            length = self.sequence_length
        gate_channels = getattr(self, "gate_channels", None)
        return length >= fft_crossover(gate_channels=gate_channels)

    def call(self, inputs, attention=None, training=None):
        u, v = self._halves(inputs)
        return self.call_on_halves(u, v, attention=attention)

    def call_on_halves(self, u, v, attention=None):
        """`call` on its input already split: `u`, the gated half, and `v`,
        the gate's half (before the norm), each `(batch, tokens,
        gate_channels)`. For the `"additive"` and `"linear"` gatings both
        are the whole input. The gMLP block computes the halves as two
        products (`keras_gmlp.layers.gelu.split_dense_gelu`)."""
        length = v.shape[-2]
        # A symbolic length (JAX export) cannot be compared while tracing.
        static = is_static(length)
        if static:
            self._check_length(length)
        else:
            length = ops.shape(v)[-2]
        v = self._mix(direct_call(self.norm, v), length, static, batched=True)
        return self._gate(u, v, attention)

    def call_on_projection(
        self,
        hidden,
        attention=None,
        output_projection=None,
        hidden_biases=None,
        training=None,
    ):
        """`call` of `gelu(hidden)`: the gMLP block's first projection
        before its GELU, `(batch, tokens, channels)`; with
        `output_projection`, a built Dense (the block's second
        projection), that Dense of the result.

        Under torch, while gradients are recorded, the split gating (with
        the product as a matmul, not an FFT), and a plain
        `keras_gmlp.layers.Dense` given as `output_projection`, are one
        `torch.autograd.Function` that keeps for the backward pass the
        GELU's input and the product, and recomputes the GELU, the norm
        and the projection's input there
        (`keras_gmlp.layers.torch_spatial_gate`), which brings the steady
        gMLP-Ti training step's peak RSS to 0.72x timm's
        (`benchmarks/memory.py`). The outputs and gradients are the same.
        Under JAX (the gMLP block calls this in training only, with its
        projection's two halves as two products:
        `keras_gmlp.layers.gelu.split_dense`) the same is one
        `jax.custom_vjp` that keeps the same two and recomputes
        the rest with the unit's own functions
        (`keras_gmlp.layers.jax_spatial_gate`), which brings the steady
        gMLP-Ti training step's peak RSS to 0.53x timm's
        (`benchmarks/memory.py`); the outputs are the same, the gradients
        equal up to float32 rounding. Under TensorFlow the same is one
        `tf.custom_gradient` (`keras_gmlp.layers.tensorflow_spatial_gate`)
        for a unit made under `keras.RematScope(mode="activations")` (or
        by a block made under it) only: there it trades time for memory.
        Under TensorFlow in training for any other unit, with the
        halves' biases apart, the gated half `gelu(u's) * (W z + b)` is one
        XLA function with its gradient in another (the GELU recomputed),
        and in bfloat16 and float16 so is the gate input `z`
        (`tensorflow_spatial_gate.training_gelu_gate`,
        `training_normalized_gelu`); a plain `keras_gmlp.layers.Dense`
        given as `output_projection` is folded into that gate, its input
        recomputed in the backward pass rather than kept. Under
        TensorFlow outside training, under a bfloat16 policy, the halves'
        products with their biases apart are the products of
        plain `MatMul`s, whose biases and GELUs the norm's and the
        gating's XLA functions compute
        (`keras_gmlp.layers.tensorflow_spatial_gate.inference_spatial_gate`).
        Every other case is `call_on_halves` of the GELU's halves, then
        `output_projection` if given.

        Args:
            hidden: tensor `(batch, tokens, channels)`, or for the split
                gating the pair of its halves' projections `(u's, v's)`,
                each `(batch, tokens, channels / 2)`
                (`keras_gmlp.layers.gelu.split_dense`).
            attention: `None` or a tensor `(batch, tokens, gate channels)`
                added to the token product (aMLP).
            output_projection: `None` or a built Dense applied to the
                unit's output.
            hidden_biases: `None` or, with `hidden` the pair, the pair of
                biases `(channels / 2,)` its halves take, `hidden` then the
                products before them
                (`keras_gmlp.layers.gelu.split_products`). TensorFlow's
                recomputing gate sums their gradients in its own gradient
                functions; TensorFlow's bfloat16 inference gate adds them
                in its XLA functions.
            training: bool or `None`. Under TensorFlow, `True` takes the
                recomputing gate (for a unit made under the scope, else
                the training gate, with `hidden_biases`) and never the
                inference gate; `False` the inference gate
                (bfloat16, with `hidden_biases`) and never the recomputing
                one; `None` the recomputing gate for a unit made under the
                scope, else the inference gate.
        """
        pair = isinstance(hidden, (tuple, list))
        if pair and (self.gating != "split" or len(hidden) != 2):
            raise ValueError(
                "`call_on_projection` takes one tensor or, with "
                "gating='split', the pair (u's projection, v's); received "
                f"{len(hidden)} tensors with gating={self.gating!r}."
            )
        if hidden_biases is not None and (not pair or len(hidden_biases) != 2):
            raise ValueError(
                "`hidden_biases` is the pair of biases of `hidden`'s two "
                f"halves; received {len(hidden_biases)} biases with "
                f"{'a pair' if pair else 'one tensor'} as `hidden`."
            )
        first = hidden[0] if pair else hidden
        length = first.shape[-2]
        recomputes_tensorflow = (
            training is not False and self._recomputes_tensorflow(first, length)
        )
        infers_tensorflow = (
            not training
            and not recomputes_tensorflow
            and hidden_biases is not None
            and self.takes_tensorflow_inference_gate(first)
        )
        trains_tensorflow = (
            training
            and not recomputes_tensorflow
            and hidden_biases is not None
            and self.takes_tensorflow_training_gate(first)
        )
        if hidden_biases is not None and not (
            recomputes_tensorflow or infers_tensorflow or trains_tensorflow
        ):
            hidden = tuple(map(bias_add, hidden, hidden_biases))
            hidden_biases = None
        if self._recomputes_jax(first, length):
            self._check_length(length)
            return self._jax_recomputed_gate(
                tuple(hidden) if pair else hidden,
                length,
                attention,
                output_projection,
            )
        recomputes_torch = not pair and self._recomputes_torch(hidden, length)
        if recomputes_torch or recomputes_tensorflow:
            self._check_length(length)
            if recomputes_torch:
                from keras_gmlp.layers.torch_spatial_gate import (
                    recomputed_spatial_gate,
                )
            else:
                from keras_gmlp.layers import tensorflow_spatial_gate

                recomputed_spatial_gate = functools.partial(
                    tensorflow_spatial_gate.recomputed_spatial_gate,
                    hidden_biases=hidden_biases,
                )

            first = ops.convert_to_tensor(first)
            if not pair:
                hidden = first
            if attention is not None:
                attention = ops.cast(attention, first.dtype)
            product_weights, projection_weights = self._recomputed_operands(
                length, first.dtype, output_projection
            )
            gated = recomputed_spatial_gate(
                hidden,
                self.norm.gamma.value,
                self.norm.beta.value,
                self.norm.epsilon,
                *product_weights,
                attention,
                *projection_weights,
            )
            if projection_weights:
                return gated
        elif infers_tensorflow:
            from keras_gmlp.layers import tensorflow_spatial_gate

            self._check_length(length)
            product_weights, _ = self._recomputed_operands(
                length, first.dtype, None
            )
            if attention is not None:
                attention = ops.cast(attention, first.dtype)
            gated = tensorflow_spatial_gate.inference_spatial_gate(
                hidden,
                hidden_biases,
                self.norm.gamma.value,
                self.norm.beta.value,
                self.norm.epsilon,
                *product_weights,
                attention,
            )
        elif trains_tensorflow:
            from keras_gmlp.layers import tensorflow_spatial_gate

            self._check_length(length)
            hidden_u, hidden_v = hidden
            bias_u, bias_v = hidden_biases
            if keras.backend.standardize_dtype(hidden_v.dtype) == "float32":
                # In float32 the GELU and norm as one function are slower;
                # in bfloat16 and float16 as fast, keeping less.
                z = direct_call(self.norm, biased_gelu(hidden_v, bias_v))
            else:
                z = tensorflow_spatial_gate.training_normalized_gelu(
                    hidden_v,
                    bias_v,
                    self.norm.gamma.value,
                    self.norm.beta.value,
                    self.norm.epsilon,
                )
            (weight, bias), projection_weights = self._recomputed_operands(
                length, z.dtype, output_projection
            )
            if attention is not None:
                attention = ops.cast(attention, z.dtype)
            gated = tensorflow_spatial_gate.training_gelu_gate(
                hidden_u,
                bias_u,
                ops.matmul(weight, z),
                bias,
                attention,
                *projection_weights,
            )
            if projection_weights:
                return gated
        else:
            u, v = map(gelu, hidden) if pair else self._halves(gelu(hidden))
            gated = self.call_on_halves(u, v, attention=attention)
        if output_projection is None:
            return gated
        return direct_call(output_projection, gated)

    def _jax_recomputed_gate(self, hidden, length, attention, projection):
        from keras_gmlp.layers.jax_spatial_gate import recomputed_spatial_gate

        epsilon = self.norm.epsilon
        dtype = (hidden[0] if isinstance(hidden, tuple) else hidden).dtype

        def gate_input(hidden, gamma, beta):
            if isinstance(hidden, tuple):
                u, v = map(gelu, hidden)
            else:
                u, v = ops.split(gelu(hidden), 2, axis=-1)
            return u, jax_layer_norm(v, gamma, beta, epsilon, dtype)

        def product(weight, z, bias):
            return token_product(weight, z, bias, batched=True)

        def project(gated, kernel, bias):
            # `keras_gmlp.layers.Dense`'s call under JAX.
            return bias_add(matmul(gated, kernel), bias)

        product_weights, projection_weights = self._recomputed_operands(
            length, dtype, projection
        )
        gate = recomputed_spatial_gate(
            gate_input,
            product,
            has_attention=attention is not None,
            projection=project if projection_weights else None,
        )
        gated = gate(
            hidden,
            (self.norm.gamma.value, self.norm.beta.value),
            product_weights,
            projection_weights,
            () if attention is None else (ops.cast(attention, dtype),),
        )
        if projection is None or projection_weights:
            return gated
        return direct_call(projection, gated)

    def _recomputed_operands(self, length, dtype, projection):
        """`((W, b), projection weights)` for a recomputing gate, in
        `dtype`: the projection's `(kernel, bias)` where it is a plain
        Dense to fold in, else `()`."""
        product_weights = (
            ops.cast(self.spatial_weight(length), dtype),
            ops.cast(leading(self.bias, length, axis=0), dtype),
        )
        if not _plain_dense(projection):
            return product_weights, ()
        return product_weights, tuple(
            ops.cast(w.value, dtype)
            for w in (projection.kernel, projection.bias)
        )

    def _recomputes_jax(self, hidden, length):
        """Whether `call_on_projection` takes the recomputing JAX gate."""
        return keras.config.backend() == "jax" and self._recomputable_3d(
            hidden, length
        )

    @property
    def rematerializes_activations(self):
        """Whether the unit (or the gMLP block that made it) was made
        under `keras.RematScope(mode="activations")`."""
        mode = getattr(self, "_remat_mode", None)
        return getattr(mode, "mode", None) == "activations"

    def _recomputes_tensorflow(self, hidden, length):
        """Whether `call_on_projection` takes the recomputing TensorFlow
        gate: the XLA functions' training path (not exports), for a unit
        made under `keras.RematScope(mode="activations")`."""
        return (
            xla_functions_enabled()
            and self.rematerializes_activations
            and self._recomputable_3d(hidden, length)
        )

    def takes_tensorflow_training_gate(self, hidden):
        """Whether `call_on_projection` of `hidden` (or of a tensor of its
        shape and dtype), its biases apart, in training, takes TensorFlow's
        training gate for the gated half (`keras_gmlp.layers.
        tensorflow_spatial_gate.training_gelu_gate`): the XLA functions'
        path (not exports), `(batch, tokens, channels)`, what the
        recomputing gates need, a unit not made under
        `keras.RematScope(mode="activations")` (that one recomputes
        more)."""
        return (
            xla_functions_enabled()
            and not self.rematerializes_activations
            and self._recomputable_3d(hidden, hidden.shape[-2])
        )

    def takes_tensorflow_inference_gate(self, hidden):
        """Whether `call_on_projection` of `hidden` (or of a tensor of its
        shape and dtype), its biases apart and outside training, takes
        TensorFlow's bfloat16 inference gate: the XLA functions' path (not
        exports), bfloat16 `(batch, tokens, channels)`, what the
        recomputing gates need, and a CPU with AMX (`cpu_features.
        has_amx`). Without AMX, oneDNN's fused product, bias and GELU
        are faster."""
        return (
            xla_functions_enabled()
            and self._recomputable_3d(hidden, hidden.shape[-2])
            and keras.backend.standardize_dtype(hidden.dtype) == "bfloat16"
            and cpu_features.has_amx()
        )

    def _recomputable_3d(self, hidden, length):
        """`_recomputable`, for the JAX and TensorFlow gates' inputs: a
        floating `(batch, tokens, channels)` tensor."""
        return (
            self._recomputable(hidden, length)
            and len(hidden.shape) == 3
            and keras.backend.standardize_dtype(hidden.dtype)
            in ("float32", "bfloat16", "float16")
        )

    def _recomputable(self, hidden, length):
        """What both recomputing gates need: the split gating, the matmul
        product of a static length, the norm with a scale and a center,
        Keras' GELU."""
        return (
            self.gating == "split"
            and keras.activations.gelu is _KERAS_GELU
            and is_static(length)
            and not self.uses_fft(length)
            and self.norm.scale
            and self.norm.center
            and not self.norm.rms_scaling
            and not isinstance(hidden, keras.KerasTensor)
        )

    def _recomputes_torch(self, hidden, length):
        """Whether `call_on_projection` takes the recomputing torch gate
        (on a CPU only, where it was measured)."""
        if keras.config.backend() != "torch":
            return False
        import torch

        if isinstance(hidden, torch.Tensor) and hidden.device.type != "cpu":
            return False
        return (
            torch.is_grad_enabled()
            and self._recomputable(hidden, length)
            and ops.convert_to_tensor(hidden).dtype
            in (torch.float32, torch.bfloat16, torch.float16)
        )

    def _gate_input(self, inputs):
        """`(u, z)`: the gated part and the normalised gate input.

        The norm is called through `direct_call`: under eager torch,
        `Layer.__call__` costs about as much as the norm of one decoded
        token.
        """
        u, v = self._halves(inputs)
        return u, direct_call(self.norm, v)

    def _halves(self, inputs):
        """`(u, v)`: the input's two halves for the split gating, else the
        whole input twice."""
        if self.gating == "split":
            return tuple(ops.split(inputs, 2, axis=-1))
        return inputs, inputs

    def _mix(self, v, length, static, batched=False):
        """`W @ v + b` over the `length` leading tokens (`batched`: see
        `token_product`)."""
        if self.uses_fft(length if static else None):
            return self.toeplitz_by_fft(v, length)
        weight = ops.cast(self.spatial_weight(length), v.dtype)
        bias = ops.cast(leading(self.bias, length, axis=0), v.dtype)
        return token_product(weight, v, bias, batched)

    def _gate(self, u, v, attention):
        if attention is not None:
            v = v + attention
        if self.gating == "linear":
            return v
        if self.gating == "additive":
            return u + v
        return u * v

    def check_cache(self, max_length):
        """Raises a ValueError unless the unit can decode with a cache.

        Args:
            max_length: int. Tokens of the cache.
        """
        if not self.causal:
            raise ValueError(
                f"Received causal={self.causal}; decoding with a cache "
                "needs a causal SpatialGatingUnit (causal=True): a "
                "bidirectional one mixes in tokens not generated yet."
            )
        if not is_static(max_length):
            raise ValueError(
                f"Received a cache of {max_length} tokens; expected a "
                "static (Python int) length."
            )
        self._check_length(max_length)

    def empty_cache(self, batch_size, max_length):
        """A zero cache `(batch_size, max_length, gate_channels)`.

        Args:
            batch_size: int or scalar tensor.
            max_length: int. Tokens the cache holds: the prompt and the
                tokens to generate, at most `sequence_length`.
        """
        self.check_cache(max_length)
        gate_channels = self.norm.gamma.shape[-1]
        return ops.zeros(
            (batch_size, max_length, gate_channels), self.compute_dtype
        )

    def call_with_cache(
        self, inputs, cache, cache_update_index, attention=None
    ):
        """The outputs of positions `[start, start + k)`, with a cache.

        The cache holds the normalised gate input `z` of every position
        decoded so far (the gMLP counterpart of a key/value cache). The
        new positions' `z` are written into it at `cache_update_index`,
        and output `i` is `u_i * (sum_{j <= i} W[i, j] z_j + b_i)`: one
        row of `W` times the cache, `O(max_length)` per token. Entries of
        the cache after position `i` are masked out. With
        `cache_update_index=0` (a Python int, the prompt's prefill) the
        spatial product is the one `call` computes, by FFT where `call`
        would use it. Causal units only.

        Args:
            inputs: tensor `(batch, k, channels)`, the inputs of positions
                `[cache_update_index, cache_update_index + k)`.
            cache: tensor `(batch, max_length, gate_channels)`, as
                `empty_cache` makes it or this method returns it.
            cache_update_index: int or int scalar tensor. Position of the
                first of `inputs`.
            attention: optional tensor `(batch, k, gate_channels)`, the
                tiny attention of the new positions.

        Returns:
            `(outputs, cache)`: outputs `(batch, k, gate_channels)` and
            the updated cache.
        """
        max_length = cache.shape[-2]
        self.check_cache(max_length)
        length = inputs.shape[-2]
        u, v = self._gate_input(ops.cast(inputs, self.compute_dtype))
        if attention is not None:
            attention = ops.cast(attention, self.compute_dtype)
        start = cache_index(cache_update_index)
        cache = write_cache(cache, [0, start, 0], ops.cast(v, cache.dtype))
        if is_static(start) and start == 0:
            v = self._mix(v, length, True)
        else:
            v = self._mix_rows(cache, start, length)
        return self._gate(u, v, attention), cache

    def _mix_rows(self, cache, start, length):
        """Rows `[start, start + length)` of `W @ cache + b`, causal."""
        if (
            keras.config.backend() == "torch"
            and is_static(start)
            and is_static(length)
            and length == 1
        ):
            return self._torch_decoded_row(cache, start)
        kernel = ops.convert_to_tensor(self.kernel)
        if self.spatial == "dense":
            weight = self._dense_rows(kernel, cache.shape[-2], start, length)
        else:
            weight = self._toeplitz_rows(kernel, cache.shape[-2], start, length)
        weight = ops.cast(weight, cache.dtype)
        bias = ops.slice(ops.convert_to_tensor(self.bias), [start], [length])
        bias = ops.cast(bias, cache.dtype)
        return token_product(weight, cache, bias)

    def _torch_decoded_row(self, cache, index):
        """Row `i = index` of `W @ cache + b` under eager torch, from the
        `i + 1` positions it sees: `sum_{j <= i} W[i, j] z_j + b_i`.

        A compiled loop (JAX, TensorFlow) needs shapes that do not change
        with `i`, so there the row is `max_length` long, its entries after
        `i` zeroed (`_dense_rows`, `_toeplitz_rows`). Eager torch runs one
        op at a time and can slice `i + 1` entries: the row is a view of
        the dense kernel, or the taps `w[n - 1 + i], ..., w[n - 1]`
        reversed, times the first `i + 1` cached positions; no zero-padded
        taps, no mask, a product over `i + 1` positions instead of
        `max_length`. The positions after `i` are never read, whatever
        they hold (the prefill writes the padding's). A `gmlp_tiny` token
        is 1.2-1.4x faster under torch this way
        (`benchmarks/generation.py`). `index` is a Python int
        (`cache_index` reads it so under eager torch).
        """
        import torch

        kernel = ops.convert_to_tensor(self.kernel)
        if self.spatial == "dense":
            row = kernel[index, : index + 1]
        else:
            n = self.sequence_length
            row = torch.flip(kernel[n - 1 : n + index], (0,))
        row = row.to(cache.dtype)
        bias = ops.convert_to_tensor(self.bias)[index].to(cache.dtype)
        mixed = torch.matmul(row, cache[:, : index + 1, :]) + bias
        return mixed[:, None, :]

    def _dense_rows(self, kernel, max_length, start, length):
        """Rows `[start, start + length)` of the causal dense `W`."""
        rows = ops.cast(start, "int32") + ops.arange(length, dtype="int32")
        columns = ops.arange(max_length, dtype="int32")
        weight = ops.slice(kernel, [start, 0], [length, max_length])
        visible = columns[None, :] <= rows[:, None]
        return ops.where(visible, weight, ops.zeros_like(weight))

    def _toeplitz_rows(self, kernel, max_length, start, length):
        """Rows `[start, start + length)` of the causal Toeplitz `W`.

        Row `i` is `W[i, j] = w[n - 1 + i - j]` for `j <= i` and 0 after:
        the window `[max_length - 1 - i, 2 max_length - 1 - i)` of the taps
        `w[n - 2 + max_length], ..., w[n - 1]` followed by `max_length - 1`
        zeros. One token (the decoding step) is one slice of them, fewer
        ops than a gather and a mask, which is what an eager backend pays
        for at this size.
        """
        n = self.sequence_length
        taps = ops.concatenate(
            [
                ops.flip(kernel[n - 1 : n - 1 + max_length], axis=0),
                ops.zeros((max_length - 1,), kernel.dtype),
            ],
            axis=0,
        )
        first = max_length - 1 - ops.cast(start, "int32")
        if is_static(length) and length == 1:
            return ops.slice(taps, [first], [max_length])[None, :]
        rows = ops.arange(length, dtype="int32")
        columns = ops.arange(max_length, dtype="int32")
        offsets = first - rows[:, None] + columns[None, :]
        return ops.take(taps, offsets, axis=0)

    def toeplitz_by_fft(self, v, length):
        """`W @ v + b` for the Toeplitz `W`, as a convolution by real FFT.

        `(W @ v)[i] = sum_j w[i - j + n - 1] v[j]` is the linear convolution
        of `v` with the taps `h[d] = w[d + n - 1]`, `|d| < length`. With `v`
        zero-padded to `L >= 2 * length - 1` tokens, the circular
        convolution of length `L` has no wrap-around on the outputs kept,
        the taps of negative offset sitting at the end of `h`. Under
        TensorFlow and eager torch (a static length) the product and its
        backward pass are `keras_gmlp.layers.toeplitz_product`'s; else
        `circular_convolution` differentiated by the backend.

        Args:
            v: tensor `(..., length, channels)`.
            length: int, scalar tensor or symbolic dimension.
        """
        n = self.sequence_length
        static = is_static(length)
        taps = length if static else n
        fft_length = fast_fft_length(2 * taps - 1)
        kernel = ops.cast(self.kernel, "float32")
        parts = [kernel[n - 1 : n - 1 + taps]]
        backward_taps = 0 if self.causal else taps - 1
        zeros = fft_length - taps - backward_taps
        if zeros:
            parts.append(ops.zeros((zeros,), "float32"))
        if backward_taps:
            parts.append(kernel[n - taps : n - 1])
        filter_taps = ops.concatenate(parts, axis=0)
        bias = leading(ops.cast(self.bias, "float32"), length, axis=0)
        backend = keras.config.backend()
        if backend == "tensorflow" or (static and _eager_torch()):
            # The backward pass by hand (`keras_gmlp.layers.toeplitz_product`).
            return toeplitz_product(v, filter_taps, bias, fft_length)
        dtype = v.dtype
        x = ops.swapaxes(ops.cast(v, "float32"), -1, -2)
        y = circular_convolution(x, filter_taps, fft_length, static)
        y = ops.swapaxes(leading(y, length, axis=-1), -1, -2)
        return ops.cast(y + bias[:, None], dtype)

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
                "toeplitz_method": self.toeplitz_method,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "bias_initializer": keras.initializers.serialize(
                    self.bias_initializer
                ),
            }
        )
        return config
