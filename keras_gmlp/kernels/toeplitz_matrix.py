"""Kernels of the `"toeplitz_matrix"` operation: the Toeplitz unit's
`n x n` weight built from its taps, with a gradient TensorFlow and torch
run fast.

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

from keras import ops

from keras_gmlp.kernels.xla_functions import widened


def tensorflow_toeplitz_matrix(taps, length):
    """`keras_gmlp.layers.toeplitz_matrix.toeplitz_matrix` under
    TensorFlow: the gather and its gradient as XLA functions."""
    if not isinstance(length, int):
        return NotImplemented
    tokens = (taps.shape[0] + 1) // 2
    return _tensorflow_matrix(length, tokens)(taps)


def torch_toeplitz_matrix(taps, length):
    """`keras_gmlp.layers.toeplitz_matrix.toeplitz_matrix` under torch:
    `tiled_matrix`."""
    if not isinstance(length, int):
        return NotImplemented
    return tiled_matrix(taps, length)


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
