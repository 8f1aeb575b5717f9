"""The Toeplitz unit's FFT product with a hand-written backward pass,
under torch and TensorFlow.

`W @ v + b` over the token axis for a Toeplitz `W`, by real FFT in
float32: the circular convolution of `v`, zero-padded to `fft_length`
tokens, with the taps, its leading `tokens` outputs, plus `b`. Its
backward pass is two real FFTs: `G = rfft(g)` of the upstream gradient,
then `irfft(G conj(T))` for `v` and `irfft(sum G conj(X))` for the taps
(the circular cross-correlations, `T` and `X` the taps' and `v`'s
spectra, kept from the forward pass as autograd keeps them).

The backends' own gradients of the padded `rfft` and of `irfft` cost
more: torch's is a complex-to-complex FFT of the whole padded length
where a real inverse FFT does, zero fills and concatenations for the
padding and its gradient, and the output and the input gradient left in
the transposed `(channels, tokens)` layout, which makes the gating
multiply that reads them strided; TensorFlow's are likewise slices, pads
and masks around the FFTs. With this backward pass `gmlp_tiny` masked-LM
training at 2048 tokens runs about 1.2x faster under torch and
TensorFlow (`benchmarks/masked_lm_speed.py`). JAX's own gradient of
`jnp.fft` is the transposed FFTs already.
"""

import functools

import keras

# Tokens per slice of `_torch_transposed_padded`'s copy.
TRANSPOSE_BLOCK = 256


def toeplitz_product(v, taps, bias, fft_length):
    """`W @ v + b` for a Toeplitz `W` given by its taps, by FFT, with the
    hand-written backward pass above. Under torch and TensorFlow.

    Args:
        v: tensor `(..., tokens, channels)`, float32 or lower.
        taps: float32 tensor `(fft_length,)`, the Toeplitz weight's
            offsets `0, 1, ...` first and the negative ones at the end.
        bias: float32 tensor `(tokens,)`.
        fft_length: int, at least `2 * tokens - 1` (`tokens` where the
            negative offsets' taps are zero).

    Returns:
        Tensor `(..., tokens, channels)` in `v`'s dtype.
    """
    backend = keras.config.backend()
    if backend == "torch":
        return _torch_function().apply(v, taps, bias, fft_length)
    if backend == "tensorflow":
        return _tensorflow_product(v, taps, bias, fft_length)
    raise ValueError(
        "`toeplitz_product` runs under torch and TensorFlow; the backend "
        f"is {backend!r} (JAX's own gradient of `jnp.fft` serves there)."
    )


def _torch_transposed_padded(x, fft_length):
    """`x` `(..., tokens, channels)` as float32 `(..., channels,
    fft_length)`, zero after the tokens.

    The transpose is copied a block of `TRANSPOSE_BLOCK` tokens at a time,
    in about half the time of one strided copy of the whole array.
    """
    import torch

    tokens = x.shape[-2]
    padded = x.new_empty(
        (*x.shape[:-2], x.shape[-1], fft_length), dtype=torch.float32
    )
    padded[..., tokens:].zero_()
    for start in range(0, tokens, TRANSPOSE_BLOCK):
        stop = min(start + TRANSPOSE_BLOCK, tokens)
        padded[..., start:stop].copy_(x[..., start:stop, :].transpose(-1, -2))
    return padded


@functools.cache
def _torch_function():
    """The `torch.autograd.Function`: the output and the gradient of `v`
    written in `v`'s layout."""
    import torch
    from torch.autograd.function import once_differentiable

    class ToeplitzProduct(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v, taps, bias, fft_length):
            tokens = v.shape[-2]
            spectrum = torch.fft.rfft(_torch_transposed_padded(v, fft_length))
            taps_spectrum = torch.fft.rfft(taps)
            convolved = torch.fft.irfft(spectrum * taps_spectrum, n=fft_length)
            output = torch.empty(v.shape, dtype=torch.float32, device=v.device)
            torch.add(
                convolved[..., :tokens].transpose(-1, -2),
                bias[:, None],
                out=output,
            )
            ctx.save_for_backward(spectrum, taps_spectrum)
            ctx.fft_length = fft_length
            ctx.dtype = v.dtype
            return output.to(v.dtype)

        @staticmethod
        @once_differentiable
        def backward(ctx, upstream):
            spectrum, taps_spectrum = ctx.saved_tensors
            tokens = upstream.shape[-2]
            by_v = by_taps = by_bias = None
            upstream_spectrum = torch.fft.rfft(
                _torch_transposed_padded(upstream, ctx.fft_length)
            )
            if ctx.needs_input_grad[1]:
                correlation = upstream_spectrum * spectrum.conj()
                correlation = correlation.reshape(-1, correlation.shape[-1])
                by_taps = torch.fft.irfft(correlation.sum(0), n=ctx.fft_length)
            if ctx.needs_input_grad[0]:
                correlated = torch.fft.irfft(
                    upstream_spectrum.mul_(taps_spectrum.conj()),
                    n=ctx.fft_length,
                )
                by_v = torch.empty(
                    upstream.shape, dtype=ctx.dtype, device=upstream.device
                )
                by_v.copy_(correlated[..., :tokens].transpose(-1, -2))
            if ctx.needs_input_grad[2]:
                axes = [
                    a for a in range(upstream.ndim) if a != upstream.ndim - 2
                ]
                by_bias = upstream.sum(dim=axes, dtype=torch.float32)
            return by_v, by_taps, by_bias, None

    return ToeplitzProduct


def _tensorflow_product(v, taps, bias, fft_length):
    """The TensorFlow form, a `tf.custom_gradient`; `v`'s token count may
    be known only when run."""
    import tensorflow as tf

    dtype = v.dtype

    def token_last(x):
        return tf.linalg.matrix_transpose(tf.cast(x, tf.float32))

    @tf.custom_gradient
    def product(v, taps, bias):
        tokens = tf.shape(v)[-2]
        spectrum = tf.signal.rfft(token_last(v), [fft_length])
        taps_spectrum = tf.signal.rfft(taps)
        convolved = tf.signal.irfft(spectrum * taps_spectrum, [fft_length])
        output = tf.linalg.matrix_transpose(convolved[..., :tokens])
        output.set_shape(v.shape)

        def backward(upstream):
            upstream_spectrum = tf.signal.rfft(
                token_last(upstream), [fft_length]
            )
            rank = len(upstream.shape)
            by_bias = tf.reduce_sum(
                tf.cast(upstream, tf.float32),
                [axis for axis in range(rank) if axis != rank - 2],
            )
            correlated = tf.signal.irfft(
                upstream_spectrum * tf.math.conj(taps_spectrum), [fft_length]
            )
            by_v = tf.linalg.matrix_transpose(correlated[..., :tokens])
            correlation = upstream_spectrum * tf.math.conj(spectrum)
            correlation = tf.reshape(correlation, [-1, fft_length // 2 + 1])
            by_taps = tf.signal.irfft(
                tf.reduce_sum(correlation, 0), [fft_length]
            )
            by_v.set_shape(v.shape)  # What slicing by `tokens` lost.
            return tf.cast(by_v, dtype), by_taps, by_bias

        return tf.cast(output + bias[:, None], dtype), backward

    return product(v, taps, bias)
