"""The gMLP block's gate in training under torch, with the activations it
keeps for the backward pass cut by recomputation (the `gmlp_block`
kernel's, on a CPU).

Imported by the kernels under the torch backend only.
"""

import torch
from torch.autograd.function import once_differentiable

from keras_gmlp.kernels.torch_linear import input_gradient
from keras_gmlp.kernels.torch_linear import linear
from keras_gmlp.kernels.torch_linear import over_tokens
from keras_gmlp.kernels.torch_linear import over_tokens_gradients
from keras_gmlp.kernels.torch_linear import weight_gradient


def recomputed_spatial_gate(
    hidden,
    gamma,
    beta,
    epsilon,
    weight,
    bias,
    attention,
    kernel=None,
    projection_bias=None,
):
    """`u * (W @ LayerNorm(v) + b [+ attention])`, `(u, v)` the halves of
    `gelu(hidden)`, and that times `kernel` plus `projection_bias` if
    given (the block's second projection), keeping only `hidden` and
    `W @ LayerNorm(v) + b` for the backward pass.

    Under autograd the gMLP block's gate keeps the GELU's input and
    output, the normalised `v`, the product and the second projection's
    input: `3.5 f` values per token for `f` expanded channels, where this
    keeps `1.5 f` (and the norm's mean and inverse deviation, one value
    per token each). The backward pass recomputes `gelu(hidden)`, the
    normalised `v` and the projection's input from them. The gradients
    are autograd's formulas: torch's `gelu_backward` and
    `native_layer_norm_backward`, and the products' transposes. Single
    reverse-mode differentiation only (no double backward).

    In float32 the GELU is taken of each half of `hidden` apart, so `u`
    and `v` come out contiguous; in lower precisions it is taken of the
    whole input once, `v` a strided view of it
    (`takes_gelu_of_halves`). The results are the same to rounding.

    Args:
        hidden: torch tensor `(..., tokens, 2 c)`, the block's first
            projection before its GELU.
        gamma: torch tensor `(c,)`, the norm's scale (float32 under a
            mixed policy, as torch's layer norm takes it).
        beta: torch tensor `(c,)`, the norm's center.
        epsilon: float, the norm's epsilon.
        weight: torch tensor `(tokens, tokens)`, `W`, in `hidden`'s dtype.
        bias: torch tensor `(tokens,)`, `b`, in `hidden`'s dtype.
        attention: `None` or a torch tensor `(..., tokens, c)` added to
            the product (aMLP).
        kernel: `None` or a torch tensor `(c, d)` in `hidden`'s dtype.
        projection_bias: `None` or a torch tensor `(d,)`, with `kernel`.

    Returns:
        Torch tensor `(..., tokens, c)`, or `(..., tokens, d)` with
        `kernel`, in `hidden`'s dtype.
    """
    return RecomputedGate.apply(
        hidden,
        gamma,
        beta,
        weight,
        bias,
        attention,
        epsilon,
        kernel,
        projection_bias,
    )


def takes_gelu_of_halves(dtype):
    """Whether the gate takes the GELU of each half of its input apart
    (for `hidden` of `dtype`) rather than once of the whole input.

    Of the whole input, `v` is a strided half of the GELU's output: the
    norm makes a contiguous copy of it, forward and backward, and the
    norm's input gradient is copied back into that output's buffer. Of
    each half, `u` and `v` come out contiguous, but the GELUs and their
    gradients write fresh buffers. Each half apart is as fast or faster in
    float32 and slower in bfloat16, so float32 takes the halves and other
    dtypes the whole input.
    """
    return dtype == torch.float32


def halves(x):
    """The two halves of `x`'s last axis (views)."""
    return x.chunk(2, dim=-1)


class RecomputedGate(torch.autograd.Function):
    """`recomputed_spatial_gate`'s forward and backward passes."""

    @staticmethod
    def forward(
        ctx,
        hidden,
        gamma,
        beta,
        weight,
        bias,
        attention,
        epsilon,
        kernel,
        projection_bias,
    ):
        gelu_of_halves = takes_gelu_of_halves(hidden.dtype)
        if gelu_of_halves:
            u, v = map(torch.nn.functional.gelu, halves(hidden))
        else:
            u, v = halves(torch.nn.functional.gelu(hidden))
        normalized, mean, inverse_deviation = torch.native_layer_norm(
            v, (v.shape[-1],), gamma, beta, epsilon
        )
        del v
        product = over_tokens(weight, normalized).add_(bias[:, None])
        del normalized
        if attention is not None:
            product.add_(attention)
        ctx.save_for_backward(
            hidden,
            mean,
            inverse_deviation,
            product,
            gamma,
            beta,
            weight,
            kernel,
        )
        ctx.has_attention = attention is not None
        ctx.epsilon = epsilon
        ctx.gelu_of_halves = gelu_of_halves
        # A half of the one GELU's output is strided: the product goes to
        # a fresh, contiguous buffer instead.
        gated = u.mul_(product) if gelu_of_halves else u * product
        if kernel is None:
            return gated
        return linear(gated, kernel.t(), projection_bias)

    @staticmethod
    @once_differentiable
    def backward(ctx, upstream):
        (
            hidden,
            mean,
            inverse_deviation,
            product,
            gamma,
            beta,
            weight,
            kernel,
        ) = ctx.saved_tensors
        hidden_u, hidden_v = halves(hidden)
        if ctx.gelu_of_halves:
            activated = None
            u = torch.nn.functional.gelu(hidden_u)
        else:
            # Its gradient will take the place of the GELU's output.
            activated = torch.nn.functional.gelu(hidden)
            u, v = halves(activated)
            v = v.contiguous()
        by_kernel = by_projection_bias = None
        if kernel is not None:
            # The second projection's gradients, its input recomputed.
            rows = upstream.reshape(-1, upstream.shape[-1])
            gated = (u * product).reshape(-1, u.shape[-1])
            by_kernel = weight_gradient(rows, gated).t()
            by_projection_bias = rows.sum(dim=0)
            upstream = input_gradient(upstream, kernel.t())
        by_product = upstream * u
        # `u`'s gradient takes the place of `u`.
        by_u = torch.mul(upstream, product, out=u)
        del u
        batch_axes = tuple(range(by_product.dim() - 2))
        by_bias = by_product.sum(dim=(*batch_axes, -1))
        if activated is None:
            v = torch.nn.functional.gelu(hidden_v)
        # The normalised `v`, as the forward computed it.
        normalized = torch.native_layer_norm(
            v, (v.shape[-1],), gamma, beta, ctx.epsilon
        )[0]
        by_weight, by_normalized = over_tokens_gradients(
            weight, normalized, by_product
        )
        del normalized
        by_v, by_gamma, by_beta = torch.ops.aten.native_layer_norm_backward(
            by_normalized,
            v,
            (v.shape[-1],),
            mean,
            inverse_deviation,
            gamma,
            beta,
            [True, ctx.needs_input_grad[1], ctx.needs_input_grad[2]],
        )
        del by_normalized, v
        by_attention = by_product if ctx.has_attention else None
        return (
            gelu_input_gradient(hidden, by_u, by_v, activated),
            by_gamma,
            by_beta,
            by_weight,
            by_bias,
            by_attention,
            None,
            by_kernel,
            by_projection_bias,
        )


def gelu_input_gradient(hidden, by_u, by_v, activated):
    """The gradient of `hidden` from those of `gelu(hidden)`'s halves.

    With `activated`, the GELU's output whose first half `by_u` was
    written into, the gradient is written there too; without it, half by
    half into one fresh buffer.
    """
    if activated is not None:
        halves(activated)[1].copy_(by_v)
        return torch.ops.aten.gelu_backward.grad_input(
            activated, hidden, grad_input=activated
        )
    by_hidden = torch.empty_like(hidden)
    for by_half, half, into in zip(
        (by_u, by_v), halves(hidden), halves(by_hidden), strict=True
    ):
        torch.ops.aten.gelu_backward.grad_input(by_half, half, grad_input=into)
    return by_hidden
