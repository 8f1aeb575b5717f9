"""The Toeplitz unit's `n x n` weight built from its taps, with a gradient
each backend runs fast.

A Toeplitz spatial weight of `m` tokens holds `2 m - 1` taps, one per
offset; the materialised product needs `W[i, j] = taps[i - j + m - 1]`.
As a gather (`ops.take` of an `n x n` index matrix) its gradient is a
scatter of `n^2` values into `2 m - 1` sums, which the backends run
poorly:

- TensorFlow hands the optimizer an `IndexedSlices` of `n^2` rows, and
  Keras' optimizer sums its duplicates with `UnsortedSegmentSum` for each
  of its moments. Here the gather and its gradient, the same sums
  written dense, are XLA functions, and the optimizer takes a dense
  update.
- torch writes the gather's gradient as an indexed add. Here the matrix
  is the taps reversed and tiled (`tiled_matrix`), whose gradient is a
  reshape and a sum.
- JAX keeps the gather: XLA's scatter-add runs it well enough that the
  tiled taps make its steps no faster.

The matrices are the gather's exactly; the gradients equal its sums up to
float32 rounding (another order of the adds).
"""

import functools

import keras
from keras import ops

from keras_gmlp.layers.xla_functions import widened
from keras_gmlp.layers.xla_functions import xla_functions_enabled


def toeplitz_matrix(taps, length):
    """`W[i, j] = taps[i - j + m - 1]` for `i, j < length`.

    Args:
        taps: tensor `(2 m - 1,)`, the offsets `-(m - 1) ... m - 1`'s
            weights in order of `i - j`.
        length: int, at most `m`: the matrix's tokens.

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
    if not 0 < length <= tokens:
        raise ValueError(
            f"Received length={length}; a Toeplitz matrix of "
            f"{taps.shape[0]} taps has 1 to {tokens} tokens."
        )
    if xla_functions_enabled():
        return _tensorflow_matrix(length, tokens)(taps)
    if keras.config.backend() == "torch":
        return tiled_matrix(taps, length)
    # JAX (whose steps are as fast either way) and TensorFlow's
    # exports (`portable_ops`).
    return gathered_matrix(taps, length)


def gathered_matrix(taps, length):
    """`toeplitz_matrix` as a gather of the taps."""
    tokens = (taps.shape[0] + 1) // 2
    positions = ops.arange(length, dtype="int32")
    offsets = positions[:, None] - positions[None, :] + (tokens - 1)
    return ops.take(taps, offsets, axis=0)


def tiled_matrix(taps, length):
    """`toeplitz_matrix` as the taps reversed, tiled `length` times and
    read as rows of `2 length - 1` values: row `i` starts `i` places
    before row 0 (mod `2 length`), so it reads `reversed[j - i + length -
    1]` at column `j + length - 1`."""
    tokens = (taps.shape[0] + 1) // 2
    taps = taps[tokens - length : tokens + length - 1]
    row = ops.concatenate([ops.flip(taps, 0), ops.zeros((1,), taps.dtype)])
    rows = ops.tile(row, [length])[: length * (2 * length - 1)]
    return ops.reshape(rows, (length, 2 * length - 1))[:, length - 1 :]


@functools.cache
def _tensorflow_matrix(length, tokens):
    """The matrix as an XLA gather, its gradient as the XLA sums of the
    upstream gradient's diagonals (float32 at least), with a
    `tf.custom_gradient`."""
    import tensorflow as tf

    def offsets():
        positions = tf.range(length)
        return positions[:, None] - positions[None, :] + (tokens - 1)

    @tf.function(jit_compile=True, autograph=False)
    def forward(taps):
        return tf.gather(taps, offsets())

    @tf.function(jit_compile=True, autograph=False)
    def backward(upstream):
        sums = tf.math.unsorted_segment_sum(
            tf.reshape(widened(upstream), [-1]),
            tf.reshape(offsets(), [-1]),
            2 * tokens - 1,
        )
        return tf.cast(sums, upstream.dtype)

    @tf.autograph.experimental.do_not_convert
    @tf.custom_gradient
    def matrix(taps):
        return forward(taps), backward

    return lambda taps: matrix(tf.convert_to_tensor(taps))
