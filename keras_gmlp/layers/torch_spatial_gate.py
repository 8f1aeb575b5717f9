"""The spatial gating unit's training call under torch, with the
activations it keeps for the backward pass cut by recomputation.

Imported by the unit under the torch backend only.
"""

import torch
from torch.autograd.function import once_differentiable


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

    The GELU is taken of each half of `hidden` apart, so `u` and `v` come
    out contiguous: the norm made a contiguous copy of the strided half
    of one GELU's output, forward and backward, and the norm's input
    gradient was copied back into that output's buffer. Training steps
    at batch 32, float32: gMLP-S/16 1.04x faster (rounds 1.03-1.08),
    gMLP-Ti/16 1.02x (0.98-1.06); bfloat16 1.00x; the idle 2-core Xeon
    with AMX (`benchmarks/torch_gate_halves.py`). The results are the
    same to float32 rounding (bit for bit in bfloat16).

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


def halves(x):
    """The two halves of `x`'s last axis (views)."""
    return x.chunk(2, dim=-1)


def over_tokens(weight, x):
    """`weight @ x` for `x` `(..., tokens, c)`: a batched matmul of the
    broadcast weight, as the unit's product is (no copy of `x`)."""
    return torch.matmul(weight.expand(*x.shape[:-2], *weight.shape), x)


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
        u, v = map(torch.nn.functional.gelu, halves(hidden))
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
        gated = u.mul_(product)
        if kernel is None:
            return gated
        return torch.nn.functional.linear(gated, kernel.t(), projection_bias)

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
        u = torch.nn.functional.gelu(hidden_u)
        by_kernel = by_projection_bias = None
        if kernel is not None:
            # The second projection's gradients, its input recomputed.
            rows = upstream.reshape(-1, upstream.shape[-1])
            by_kernel = (u * product).reshape(-1, u.shape[-1]).t() @ rows
            by_projection_bias = rows.sum(dim=0)
            upstream = upstream @ kernel.t()
        by_product = upstream * u
        # `u`'s gradient takes the place of `u`.
        by_u = torch.mul(upstream, product, out=u)
        batch_axes = tuple(range(by_product.dim() - 2))
        by_bias = by_product.sum(dim=(*batch_axes, -1))
        # The normalised `v`, as the forward computed it.
        v = torch.nn.functional.gelu(hidden_v)
        normalized = torch.native_layer_norm(
            v, (v.shape[-1],), gamma, beta, ctx.epsilon
        )[0]
        by_weight = torch.matmul(by_product, normalized.transpose(-1, -2))
        del normalized
        if batch_axes:
            by_weight = by_weight.sum(dim=batch_axes)
        by_normalized = over_tokens(weight.transpose(0, 1), by_product)
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
        # The GELU's input gradient, each half written in place.
        by_hidden = torch.empty_like(hidden)
        for by_half, half, into in zip(
            (by_u, by_v), (hidden_u, hidden_v), halves(by_hidden), strict=True
        ):
            torch.ops.aten.gelu_backward.grad_input(
                by_half, half, grad_input=into
            )
        by_attention = by_product if ctx.has_attention else None
        return (
            by_hidden,
            by_gamma,
            by_beta,
            by_weight,
            by_bias,
            by_attention,
            None,
            by_kernel,
            by_projection_bias,
        )
