"""`torch.nn.functional.linear` in float32 on oneDNN where torch's MKL is
slow.

Imported by the layers under the torch backend only.
"""

import functools

import torch
from torch.autograd.function import once_differentiable

from keras_gmlp.layers import cpu_features
from keras_gmlp.layers.xla_functions import tracing_portable_ops


def linear(x, weight, bias=None):
    """`x @ weight.T + bias`, as `torch.nn.functional.linear`.

    torch's CPU wheels compute a float32 matmul with Intel's MKL, which on
    an AMD CPU takes a slower path than the oneDNN they also carry: a
    2048^3 product at 214 GFLOP/s against oneDNN's 477, on an idle 2-core
    AMD EPYC with AVX-512 (family 26), whose JAX and TensorFlow reach
    453-485. So where `takes_onednn` holds this runs the product and both
    of its gradients on oneDNN (`torch.ops.mkldnn._linear_pointwise`, the
    kernel `torch.compile` uses for a CPU linear). With the blocks'
    projections so, float32 training steps at batch 32 there ran 1.29x
    (gMLP-Ti/16) and 1.53x (gMLP-S/16) as fast, inference 1.34x and
    1.56x (`benchmarks/torch_linear.py`). Products of fewer than
    `MIN_MULTIPLY_ADDS` keep MKL. The sums are float32's in
    another order. An Intel CPU keeps MKL, fast there (389-391 GFLOP/s on
    a 2-core Xeon with AMX; oneDNN not measured there). Elsewhere it is
    `torch.nn.functional.linear`.

    Args:
        x: torch tensor `(..., in)`.
        weight: torch tensor `(out, in)`.
        bias: `None` or a torch tensor `(out,)`.

    Returns:
        Torch tensor `(..., out)`.
    """
    if takes_onednn(x, weight, x.numel() * weight.shape[0], bias):
        return OneDnnLinear.apply(x, weight, bias)
    return torch.nn.functional.linear(x, weight, bias)


# oneDNN's call costs about 10 us more than MKL's: a product of fewer
# multiply-adds than this ran as fast or slower on it (the EPYC above;
# 2 M: 1.07x, 16 M: 1.94x).
MIN_MULTIPLY_ADDS = 2**22


def takes_onednn(a, b, multiply_adds, bias=None):
    """Whether a product of `a` and `b` (`multiply_adds` of them, and
    `bias`) runs on oneDNN: float32 operands, at least
    `MIN_MULTIPLY_ADDS`, on an AMD CPU
    (`keras_gmlp.layers.cpu_features.is_amd`), with torch's oneDNN linear
    available, outside `torch.compile`, `torch.export`, tracing and
    `keras_gmlp.layers.xla_functions.portable_ops()` (which see the
    plain op)."""
    return (
        a.dtype == torch.float32
        and b.dtype == torch.float32
        and (bias is None or bias.dtype == torch.float32)
        and multiply_adds >= MIN_MULTIPLY_ADDS
        and a.device.type == "cpu"
        and cpu_features.is_amd()
        and _has_onednn_linear()
        and not torch.compiler.is_compiling()
        and not torch.jit.is_tracing()
        and not tracing_portable_ops()
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
    if not takes_onednn(upstream, weight, upstream.numel() * weight.shape[1]):
        return upstream @ weight
    rows = upstream.reshape(-1, upstream.shape[-1])
    return _onednn(rows, weight.t()).reshape(
        *upstream.shape[:-1], weight.shape[-1]
    )


def weight_gradient(upstream, x):
    """`upstream.T @ x` of rows `(n, out)` and `(n, in)`, `linear`'s weight
    gradient, on oneDNN where `takes_onednn`.

    oneDNN reads both operands transposed in place. With `out` the wider
    side it computes `(x.T @ upstream).T`: `(6272, 128)` and `(6272,
    768)` rows, gMLP-Ti's first projection, took 3.6 ms so against MKL's
    6.3 and 6.9 the other way round; with `in` the wider, `(6272, 384)`
    and `(6272, 128)`, 1.8 ms against 3.1 and 3.1.
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
