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


def normal_density(x):
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def layer_norm_backward(x, gamma, epsilon, upstream):
    """`(dx, dgamma, dbeta)` of `layer_norm` over the last axis, the batch
    axes summed for the scale and the center."""
    mean = x.mean(-1, keepdims=True)
    deviation = np.sqrt(x.var(-1, keepdims=True) + epsilon)
    normalized = (x - mean) / deviation
    by_normalized = upstream * gamma
    by_x = (
        by_normalized
        - by_normalized.mean(-1, keepdims=True)
        - normalized * (by_normalized * normalized).mean(-1, keepdims=True)
    ) / deviation
    axes = tuple(range(x.ndim - 1))
    return by_x, (upstream * normalized).sum(axes), upstream.sum(axes)


def gmlp_block_gradients(x, weights, upstream):
    """The gradients of the paper's gMLP block (split gating, no tiny
    attention) `x + (u * (W @ LN(v) + b)) @ K2 + c2`, `(u, v)` the halves
    of `gelu(LN(x) @ K1 + c1)`, by the chain rule written out.

    Args:
        x: array `(batch, tokens, channels)`.
        weights: dict of arrays: `gamma1`, `beta1` (the block's norm,
            epsilon 1e-6), `kernel1`, `bias1`, `gamma2`, `beta2` (the
            gate's norm, epsilon 1e-5), `weight` (`(tokens, tokens)`),
            `bias` (`(tokens,)`), `kernel2`, `bias2`.
        upstream: array of the output's shape, the output's gradient.

    Returns:
        dict: `x` and each name of `weights` -> its gradient (`weight`:
        the `(tokens, tokens)` matrix's).
    """
    w = weights
    normalized = layer_norm(x, w["gamma1"], w["beta1"], 1e-6)
    hidden = normalized @ w["kernel1"] + w["bias1"]
    activated = gelu(hidden)
    half = activated.shape[-1] // 2
    u, v = activated[..., :half], activated[..., half:]
    z = layer_norm(v, w["gamma2"], w["beta2"], 1e-5)
    product = np.einsum("ij,bjc->bic", w["weight"], z) + w["bias"][:, None]
    gated = u * product
    by = {
        "kernel2": np.einsum("bti,bto->io", gated, upstream),
        "bias2": upstream.sum((0, 1)),
    }
    by_gated = upstream @ w["kernel2"].T
    by_u = by_gated * product
    by_product = by_gated * u
    by["bias"] = by_product.sum((0, 2))
    by["weight"] = np.einsum("bic,bjc->ij", by_product, z)
    by_z = np.einsum("ij,bic->bjc", w["weight"], by_product)
    by_v, by["gamma2"], by["beta2"] = layer_norm_backward(
        v, w["gamma2"], 1e-5, by_z
    )
    density = normal_density(hidden)
    cdf = 0.5 * (1.0 + erf(hidden / math.sqrt(2.0)))
    by_hidden = np.concatenate([by_u, by_v], -1) * (cdf + hidden * density)
    by["kernel1"] = np.einsum("bti,bto->io", normalized, by_hidden)
    by["bias1"] = by_hidden.sum((0, 1))
    by_normalized = by_hidden @ w["kernel1"].T
    by_x, by["gamma1"], by["beta1"] = layer_norm_backward(
        x, w["gamma1"], 1e-6, by_normalized
    )
    by["x"] = upstream + by_x
    return by
