"""The Toeplitz spatial weight `W[i, j] = w[i - j]` from its taps."""

from keras import ops

from keras_gmlp import kernels


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
    """`toeplitz_matrix` as a gather of the taps."""
    tokens = (taps.shape[0] + 1) // 2
    positions = ops.arange(length, dtype="int32")
    offsets = positions[:, None] - positions[None, :] + (tokens - 1)
    return ops.take(taps, offsets, axis=0)


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
