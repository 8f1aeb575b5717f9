"""torch's float32 linear products on oneDNN where its MKL is slow: a
linear layer's (`linear`) and the spatial gating unit's product over the
token axis (`over_tokens`), for the torch block kernel, which runs
outside autograd only (`keras_gmlp.kernels.gmlp_block.torch_gmlp_block`).

Imported by the kernels under the torch backend only.
"""

import functools

import torch

from keras_gmlp.kernels import cpu_features
from keras_gmlp.kernels.registry import mode


def linear(x, weight, bias=None):
    """`x @ weight.T + bias`, as `torch.nn.functional.linear`.

    torch's CPU wheels compute a float32 matmul with Intel's MKL, which on
    an AMD CPU takes a slower path than the oneDNN they also carry, at
    about half its rate. So where `takes_onednn` holds this runs the
    product on oneDNN (`torch.ops.mkldnn._linear_pointwise`, the kernel
    `torch.compile` uses for a CPU linear): float32 gMLP-Ti/16 and
    gMLP-S/16 at batch 32 run 1.3-1.5x faster so on an AMD EPYC with
    AVX-512 (`benchmarks/vision.py`). Products of fewer than
    `MIN_MULTIPLY_ADDS` keep MKL, unless `weight` has at least
    `MIN_WEIGHT_ELEMENTS` (a product of a few rows is bound by reading the
    weight, which MKL does on one thread). The sums are float32's in
    another order. An Intel CPU keeps MKL, fast there. Elsewhere, and
    while autograd records, it is `torch.nn.functional.linear`.

    Args:
        x: torch tensor `(..., in)`.
        weight: torch tensor `(out, in)`.
        bias: `None` or a torch tensor `(out,)`.

    Returns:
        Torch tensor `(..., out)`.
    """
    multiply_adds = x.numel() * weight.shape[0]
    if takes_onednn(x, weight, multiply_adds, bias, weight.numel()):
        rows = _onednn(x.reshape(-1, x.shape[-1]), weight, bias)
        return rows.reshape(*x.shape[:-1], weight.shape[0])
    return torch.nn.functional.linear(x, weight, bias)


# oneDNN's call costs about 10 us more than MKL's: a product of fewer
# multiply-adds than this runs as fast or slower on it.
MIN_MULTIPLY_ADDS = 2**22
# A product of a few rows by a large weight reads the weight from memory:
# MKL does so on one thread, oneDNN on all, faster from about this many
# float32 elements. `gmlp_tiny`'s decoded token's logits,
# `(1, 128) x (128, 8192)`, are one.
MIN_WEIGHT_ELEMENTS = 2**18
# AMD's family 26 (Zen 5) runs AVX-512 at full width: there oneDNN's
# token product runs at twice MKL's rate (`takes_onednn_over_tokens`).
ONEDNN_TOKEN_PRODUCT_FAMILY = 26


def takes_onednn(a, b, multiply_adds, bias=None, weight_elements=0):
    """Whether a product of `a` and `b` (`multiply_adds` of them, and
    `bias`; `b` a weight of `weight_elements`) runs on oneDNN: float32
    operands, at least `MIN_MULTIPLY_ADDS` or `MIN_WEIGHT_ELEMENTS`, on
    an AMD CPU (`keras_gmlp.kernels.cpu_features.is_amd`), with torch's
    oneDNN linear available, while autograd does not record, outside
    `torch.compile`, tracing and `keras_gmlp.kernels.reference_only()`
    (which see the plain op)."""
    return (
        a.dtype == torch.float32
        and b.dtype == torch.float32
        and (bias is None or bias.dtype == torch.float32)
        and multiply_adds > 0
        and (
            multiply_adds >= MIN_MULTIPLY_ADDS
            or weight_elements >= MIN_WEIGHT_ELEMENTS
        )
        and a.device.type == "cpu"
        and not torch.is_grad_enabled()
        and cpu_features.is_amd()
        and _has_onednn_linear()
        and not torch.compiler.is_compiling()
        and not torch.jit.is_tracing()
        and mode() != "off"
    )


@functools.cache
def _has_onednn_linear():
    return torch.backends.mkldnn.is_available() and hasattr(
        torch.ops.mkldnn, "_linear_pointwise"
    )


def _onednn(a, b, bias=None):
    """`a @ b.T (+ bias)` of 2-D float32 tensors on oneDNN."""
    return torch.ops.mkldnn._linear_pointwise(a, b, bias, "none", [None], "")


def over_tokens(weight, x):
    """`weight @ x` over the token axis, `(n, m)` times `(..., m, c)`: the
    batched matmul of `weight` broadcast over `x`'s leading axes.

    torch runs that batched matmul on MKL, at its slow rate on an AMD CPU of
    family 26 (`linear`). Where `takes_onednn_over_tokens` holds this
    computes it as one 2-D product on oneDNN: `weight` times `x`'s tokens
    as rows `(m, ... x c)`, a copy of `x` (`token_rows`); the result is a
    view of an `(n, ..., c)` buffer. float32 gMLP-Ti/16 and gMLP-S/16 at
    batch 32 run 1.13-1.14x faster so on a family-26 AMD EPYC
    (`benchmarks/vision.py`). The sums are float32's in another order.

    Args:
        weight: torch tensor `(n, m)`.
        x: torch tensor `(..., m, c)`.

    Returns:
        Torch tensor `(..., n, c)`.
    """
    if takes_onednn_over_tokens(weight, x, x.numel() * weight.shape[0]):
        product = _onednn(weight, token_rows(x).t())
        return _from_token_rows(product, x.shape)
    return torch.matmul(weight.expand(*x.shape[:-2], *weight.shape), x)


def takes_onednn_over_tokens(weight, x, multiply_adds):
    """Whether `over_tokens` of `weight` and `x`, `multiply_adds` of
    them, runs on oneDNN: `takes_onednn`'s rule, on an AMD CPU of family
    26 or later (`keras_gmlp.kernels.cpu_features.cpu_family`).

    On an earlier family (25) torch's MKL runs the batched product about
    as fast as oneDNN, and the rows' copies (`token_rows`) cost more than
    that."""
    return (
        takes_onednn(weight, x, multiply_adds)
        and cpu_features.cpu_family() >= ONEDNN_TOKEN_PRODUCT_FAMILY
    )


def token_rows(x):
    """`x` `(..., m, c)` as rows `(m, ... x c)`: the tokens of all its
    leading entries side by side (a copy where it has leading axes)."""
    return x.movedim(-2, 0).reshape(x.shape[-2], -1)


def _from_token_rows(rows, shape):
    """Rows `(n, ... x c)` as a view `(..., n, c)`, the leading axes and
    `c` those of `shape`."""
    return rows.view(rows.shape[0], *shape[:-2], shape[-1]).movedim(0, -2)
