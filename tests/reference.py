"""Independent numpy formulas of the paper's layers, for the tests."""

import math

import numpy as np

erf = np.vectorize(math.erf)


def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def toeplitz(w, length):
    """W[i, j] = w[i - j + n - 1] for a kernel of 2n - 1 weights."""
    n = (len(w) + 1) // 2
    return np.array(
        [[w[i - j + n - 1] for j in range(length)] for i in range(length)]
    )


def spatial_gating(z, weight, bias, gamma, beta, attention=None, eps=1e-5):
    """u * (W @ LN(v) + b [+ attention]) with u, v the channel halves."""
    half = z.shape[-1] // 2
    u, v = z[..., :half], z[..., half:]
    v = layer_norm(v, gamma, beta, eps)
    v = np.einsum("ij,...jc->...ic", weight, v) + bias[:, None]
    if attention is not None:
        v = v + attention
    return u * v


def tiny_attention(x, qkv_kernel, qkv_bias, out_kernel, out_bias, mask=None):
    """One-head attention; `mask[i, j]` True where i may attend to j."""
    d = qkv_kernel.shape[1] // 3
    qkv = x @ qkv_kernel + qkv_bias
    q, k, v = qkv[..., :d], qkv[..., d : 2 * d], qkv[..., 2 * d :]
    scores = np.einsum("bid,bjd->bij", q, k) / math.sqrt(d)
    if mask is None:
        weights = softmax(scores)
    else:
        # A query that may see no key attends to nothing.
        weights = softmax(np.where(mask, scores, -1e9)) * mask
    return np.einsum("bij,bjd->bid", weights, v) @ out_kernel + out_bias
