"""Kernel of the `"toeplitz_matrix"` operation under torch.

The reference builds the Toeplitz weight `W[i, j] = taps[i - j + m - 1]`
as a gather, whose gradient torch writes as an indexed add of `n^2`
values into `2 m - 1` sums. Here the matrix is the taps reversed and
tiled (`tiled_matrix`), whose gradient is a reshape and a sum: the same
matrix, the same sums in another order. On an Intel CPU the masked LM
trains 1.03x (128 tokens) and 1.15x (512 tokens) as fast so
(`benchmarks/kernels.py`, `kernels_mlm_xeon_torch.json`); on an AMD CPU
it trains 0.97x and 1.00x as fast, so there the kernel declines.
"""

from keras import ops

from keras_gmlp.kernels import cpu_features


def torch_toeplitz_matrix(taps, length):
    """`keras_gmlp.layers.toeplitz_matrix.toeplitz_matrix` under torch:
    `tiled_matrix` while gradients are recorded, on a CPU other than
    AMD's (`cpu_features.is_amd`), for a Python int `length`; else
    `NotImplemented`."""
    import torch

    if not isinstance(length, int) or not torch.is_grad_enabled():
        return NotImplemented
    if cpu_features.is_amd():
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
