"""torch's float32 linear products on oneDNN where its MKL is slow: a
linear layer's (`linear`) and the spatial gating unit's product over the
token axis (`over_tokens`), each with its gradients.

Imported by the kernels under the torch backend only.
"""

import functools

import torch
from torch.autograd.function import once_differentiable

from keras_gmlp.kernels import cpu_features
from keras_gmlp.kernels.registry import mode


def linear(x, weight, bias=None):
    """`x @ weight.T + bias`, as `torch.nn.functional.linear`.

    torch's CPU wheels compute a float32 matmul with Intel's MKL, which on
    an AMD CPU takes a slower path than the oneDNN they also carry, at
    about half its rate. So where `takes_onednn` holds this runs the
    product and both of its gradients on oneDNN
    (`torch.ops.mkldnn._linear_pointwise`, the kernel `torch.compile`
    uses for a CPU linear): float32 gMLP-Ti/16 and gMLP-S/16 training at
    batch 32 runs 1.3-1.5x faster so on an AMD EPYC with AVX-512
    (`benchmarks/vision.py`). Products of fewer than `MIN_MULTIPLY_ADDS`
    keep MKL, unless `weight` has at least `MIN_WEIGHT_ELEMENTS` (a
    product of a few rows is bound by reading the weight, which MKL does
    on one thread). The sums are float32's in another order.
    An Intel CPU keeps MKL, fast there. Elsewhere it is
    `torch.nn.functional.linear`.

    Args:
        x: torch tensor `(..., in)`.
        weight: torch tensor `(out, in)`.
        bias: `None` or a torch tensor `(out,)`.

    Returns:
        Torch tensor `(..., out)`.
    """
    multiply_adds = x.numel() * weight.shape[0]
    if takes_onednn(x, weight, multiply_adds, bias, weight.numel()):
        return OneDnnLinear.apply(x, weight, bias)
    return torch.nn.functional.linear(x, weight, bias)


# oneDNN's call costs about 10 us more than MKL's: a product of fewer
# multiply-adds than this runs as fast or slower on it.
MIN_MULTIPLY_ADDS = 2**22
# A product of a few rows by a large weight reads the weight from memory:
# MKL does so on one thread, oneDNN on all, faster from about this many
# float32 elements. A decoded token's first projection in `gmlp_base`,
# `(1, 512) x (512, 3072)`, is one.
MIN_WEIGHT_ELEMENTS = 2**18
# AMD's family 26 (Zen 5) runs AVX-512 at full width: there oneDNN's
# token product runs at twice MKL's rate (`takes_onednn_over_tokens`).
ONEDNN_TOKEN_PRODUCT_FAMILY = 26


def takes_onednn(a, b, multiply_adds, bias=None, weight_elements=0):
    """Whether a product of `a` and `b` (`multiply_adds` of them, and
    `bias`; `b` a weight of `weight_elements`) runs on oneDNN: float32
    operands, at least `MIN_MULTIPLY_ADDS` or `MIN_WEIGHT_ELEMENTS`, on
    an AMD CPU (`keras_gmlp.kernels.cpu_features.is_amd`), with torch's
    oneDNN linear available, outside `torch.compile`, tracing and
    `keras_gmlp.kernels.reference_only()` (which see the plain op)."""
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


def input_gradient(upstream, weight):
    """`upstream @ weight`, `linear`'s input gradient for `upstream`
    `(..., out)`, on oneDNN where `takes_onednn`."""
    multiply_adds = upstream.numel() * weight.shape[1]
    if not takes_onednn(upstream, weight, multiply_adds, None, weight.numel()):
        return upstream @ weight
    rows = upstream.reshape(-1, upstream.shape[-1])
    return _onednn(rows, weight.t()).reshape(
        *upstream.shape[:-1], weight.shape[-1]
    )


def weight_gradient(upstream, x):
    """`upstream.T @ x` of rows `(n, out)` and `(n, in)`, `linear`'s weight
    gradient, on oneDNN where `takes_onednn`.

    oneDNN reads both operands transposed in place. With `out` the wider
    side it computes `(x.T @ upstream).T`, the faster order there.
    """
    if not takes_onednn(upstream, x, upstream.numel() * x.shape[1]):
        return upstream.t() @ x
    if upstream.shape[1] >= x.shape[1]:
        return _onednn(x.t(), upstream.t()).t()
    return _onednn(upstream.t(), x.t())


class OneDnnLinear(torch.autograd.Function):
    """`linear`'s product on oneDNN, forward and backward. Single
    reverse-mode differentiation only."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        outputs = _onednn(x.reshape(-1, x.shape[-1]), weight, bias)
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return outputs.reshape(*x.shape[:-1], weight.shape[0])

    @staticmethod
    @once_differentiable
    def backward(ctx, upstream):
        x, weight = ctx.saved_tensors
        rows = upstream.reshape(-1, upstream.shape[-1])
        by_x = by_weight = by_bias = None
        if ctx.needs_input_grad[0]:
            by_x = input_gradient(upstream, weight)
        if ctx.needs_input_grad[1]:
            by_weight = weight_gradient(rows, x.reshape(-1, x.shape[-1]))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            by_bias = rows.sum(dim=0)
        return by_x, by_weight, by_bias


def over_tokens(weight, x):
    """`weight @ x` over the token axis, `(n, m)` times `(..., m, c)`: the
    batched matmul of `weight` broadcast over `x`'s leading axes.

    torch runs that batched matmul on MKL, at its slow rate on an AMD CPU of
    family 26 (`linear`). Where `takes_onednn_over_tokens` holds this
    computes it and both of its gradients (`OneDnnTokenProduct`) as one 2-D
    product on oneDNN: `weight` times `x`'s tokens as rows `(m, ... x c)`, a
    copy of `x` (`token_rows`); the result is a view of an `(n, ..., c)`
    buffer. float32 gMLP-Ti/16 and gMLP-S/16 training at batch 32 runs
    1.13-1.14x faster so on a family-26 AMD EPYC (`benchmarks/vision.py`).
    The sums are float32's in another order.

    Args:
        weight: torch tensor `(n, m)`.
        x: torch tensor `(..., m, c)`.

    Returns:
        Torch tensor `(..., n, c)`.
    """
    if takes_onednn_over_tokens(weight, x, x.numel() * weight.shape[0]):
        return OneDnnTokenProduct.apply(weight, x)
    return _batched_product(weight, x)


def over_tokens_gradients(weight, x, upstream):
    """The gradients of `over_tokens(weight, x)` for `upstream`
    `(..., n, c)`: `weight`'s `(n, m)`, summed over the leading axes, and
    `x`'s `(..., m, c)`, on oneDNN where `takes_onednn_over_tokens`
    holds."""
    multiply_adds = upstream.numel() * weight.shape[1]
    if not takes_onednn_over_tokens(weight, upstream, multiply_adds):
        by_weight = torch.matmul(upstream, x.transpose(-1, -2))
        if upstream.dim() > 2:
            by_weight = by_weight.sum(dim=tuple(range(upstream.dim() - 2)))
        return by_weight, _batched_product(weight.t(), upstream)
    rows = token_rows(upstream)
    by_weight = _onednn(rows, token_rows(x))
    by_x = _onednn(weight.t(), rows.t())
    return by_weight, _from_token_rows(by_x, x.shape)


def takes_onednn_over_tokens(weight, x, multiply_adds):
    """Whether `over_tokens` and its gradients of `weight` and `x` (or the
    upstream gradient), `multiply_adds` of them, run on oneDNN:
    `takes_onednn`'s rule, on an AMD CPU of family 26 or later
    (`keras_gmlp.kernels.cpu_features.cpu_family`).

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


def _batched_product(weight, x):
    return torch.matmul(weight.expand(*x.shape[:-2], *weight.shape), x)


class OneDnnTokenProduct(torch.autograd.Function):
    """`over_tokens`'s product on oneDNN, forward and backward. Single
    reverse-mode differentiation only."""

    @staticmethod
    def forward(ctx, weight, x):
        ctx.save_for_backward(weight, x)
        product = _onednn(weight, token_rows(x).t())
        return _from_token_rows(product, x.shape)

    @staticmethod
    @once_differentiable
    def backward(ctx, upstream):
        weight, x = ctx.saved_tensors
        return over_tokens_gradients(weight, x, upstream)
