"""The Toeplitz spatial weight `W[i, j] = w[i - j]`: its matrix, its rows
for decoding, and its product by FFT."""

import numbers

import keras
from keras import ops

from keras_gmlp import kernels
from keras_gmlp.thread_flag import ThreadFlag

# Export formats whose converters take no FFT: tf2onnx has no IRFFT, and
# LiteRT runs TensorFlow's RFFT and IRFFT only with its Flex delegate.
FFT_FREE_FORMATS = ("onnx", "litert")
_materialised = ThreadFlag()


def materialised_toeplitz():
    """Within it, Toeplitz weights are applied as the `n x n` product,
    never by FFT (the exports to `FFT_FREE_FORMATS` trace under it)."""
    return _materialised.scope()


def traces_materialised_toeplitz():
    """Whether the calls run inside `materialised_toeplitz()`."""
    return _materialised.is_set()


def fast_fft_length(minimum):
    """The smallest `2^a 3^b 5^c` at least `minimum`: a fast FFT length."""
    best, three = 1, 1
    while best < minimum:
        best *= 2
    while three < best:
        odd = three
        while odd < best:
            candidate = odd
            while candidate < minimum:
                candidate *= 2
            best, odd = min(best, candidate), odd * 5
        three *= 3
    return best


def is_static(length):
    """Whether a length is a Python int (not a tensor or a symbol)."""
    return isinstance(length, int)


def cache_position(index):
    """A decoding position as a Python int, or else an int32 tensor."""
    if isinstance(index, numbers.Integral):
        return int(index)
    return ops.convert_to_tensor(index, "int32")


def write_cache(cache, start_indices, update):
    """`ops.slice_update(cache, start_indices, update)` of a decoding
    cache, as the `"cache_update"` operation of `keras_gmlp.kernels`."""
    return kernels.dispatch(
        "cache_update", ops.slice_update, cache, start_indices, update
    )


def leading(x, length, axis):
    """The first `length` entries of `x` along `axis` (a gather for a
    symbolic `length`, as in a JAX export)."""
    if is_static(length):
        index = [slice(None)] * len(x.shape)
        index[axis] = slice(None, length)
        return x[tuple(index)]
    return ops.take(x, ops.arange(length), axis=axis)


def fft_token_product(v, taps, bias, fft_length):
    """`W @ v + b` for a Toeplitz `W`: the circular convolution of `v`
    `(batch, length, channels)`, zero-padded to `fft_length` tokens, with
    the filter `taps` `(fft_length,)`, by real FFT in float32."""
    length = v.shape[-2] if is_static(v.shape[-2]) else ops.shape(v)[-2]
    x = ops.swapaxes(ops.cast(v, "float32"), -1, -2)
    zeros = ops.zeros(tuple(ops.shape(x)[:-1]) + (fft_length,), "float32")
    x = ops.concatenate([x, zeros], axis=-1)[..., :fft_length]
    x_real, x_imag = ops.rfft(x, fft_length)
    h_real, h_imag = ops.rfft(taps, fft_length)
    y = ops.irfft(
        (x_real * h_real - x_imag * h_imag, x_real * h_imag + x_imag * h_real),
        fft_length,
    )
    y = ops.swapaxes(leading(y, length, axis=-1), -1, -2)
    return ops.cast(y + bias[:, None], v.dtype)


def toeplitz_product_by_fft(taps, v, bias, length, sequence_length, causal):
    """`W @ v + b` for the Toeplitz `W` of `taps` `(2 n - 1,)` over `v`
    `(batch, length, channels)`, as a linear convolution by real FFT:
    `(W v)[i] = sum_j taps[i - j + n - 1] v[j]`, the filter's taps of
    negative offset at its end, `v` zero-padded past `2 length - 1`
    tokens so that no output wraps around (causal: no negative offsets).
    `length` may be symbolic (then the filter spans `n` tokens)."""
    n = sequence_length
    span = length if is_static(length) else n
    fft_length = fast_fft_length(2 * span - 1)
    taps = ops.cast(taps, "float32")
    backward = 0 if causal else span - 1
    filter_taps = ops.concatenate(
        [
            taps[n - 1 : n - 1 + span],
            ops.zeros((fft_length - span - backward,), "float32"),
            taps[n - 1 - backward : n - 1],
        ],
        axis=0,
    )
    return fft_token_product(v, filter_taps, bias, fft_length)


def toeplitz_matrix(taps, length):
    """`W[i, j] = taps[i - j + m - 1]` for `i, j < length`.

    Args:
        taps: tensor `(2 m - 1,)`, the weights of the offsets
            `-(m - 1), ..., m - 1` in order.
        length: int (at most `m`), or a scalar tensor or symbolic
            dimension: the matrix's tokens.

    Returns:
        Tensor `(length, length)` in `taps`' dtype.

    Example:

    >>> from keras_gmlp.layers.toeplitz_matrix import toeplitz_matrix
    >>> taps = np.array([1.0, 2.0, 3.0, 4.0, 5.0], "float32")
    >>> keras.ops.convert_to_numpy(toeplitz_matrix(taps, 3))
    array([[3., 2., 1.],
           [4., 3., 2.],
           [5., 4., 3.]], dtype=float32)
    """
    taps = ops.convert_to_tensor(taps)
    tokens = (taps.shape[0] + 1) // 2
    if isinstance(length, int) and not 0 < length <= tokens:
        raise ValueError(
            f"Received length={length}; a Toeplitz matrix of "
            f"{taps.shape[0]} taps has 1 to {tokens} tokens."
        )
    return kernels.dispatch("toeplitz_matrix", gathered_matrix, taps, length)


def gathered_matrix(taps, length):
    """`toeplitz_matrix` as a gather of the taps, of float16 or bfloat16
    taps in float32: each tap's gradient, the sum of a diagonal of up to
    `length` entries, is then summed in float32 and rounded once."""
    tokens = (taps.shape[0] + 1) // 2
    positions = ops.arange(length, dtype="int32")
    offsets = positions[:, None] - positions[None, :] + (tokens - 1)
    dtype = keras.backend.standardize_dtype(taps.dtype)
    if dtype not in ("float16", "bfloat16"):
        return ops.take(taps, offsets, axis=0)
    matrix = ops.take(ops.cast(taps, "float32"), offsets, axis=0)
    return ops.cast(matrix, dtype)


def causal_rows(kernel, spatial, sequence_length, max_length, start, count):
    """Rows `[start, start + count)` of a causal spatial weight over
    `max_length` tokens, zero after the diagonal: what a decoding step
    multiplies its cache by.

    Args:
        kernel: the unit's weight, `(n, n)` (`spatial="dense"`) or its
            `2 n - 1` taps (`"toeplitz"`).
        spatial: str, `"dense"` or `"toeplitz"`.
        sequence_length: int, `n`.
        max_length: int, the cache's tokens.
        start: int or int scalar tensor.
        count: int.

    Returns:
        Tensor `(count, max_length)`.
    """
    kernel = ops.convert_to_tensor(kernel)
    rows = ops.cast(start, "int32") + ops.arange(count, dtype="int32")
    columns = ops.arange(max_length, dtype="int32")
    if spatial == "dense":
        weight = ops.slice(kernel, [start, 0], [count, max_length])
    else:
        offsets = rows[:, None] - columns[None, :] + (sequence_length - 1)
        weight = ops.take(kernel, ops.maximum(offsets, 0), axis=0)
    visible = columns[None, :] <= rows[:, None]
    return ops.where(visible, weight, ops.zeros_like(weight))
