"""A/B: the torch recomputing gate's GELU taken of each half of its
input apart, against one GELU of the whole input.

Issue 12. A torch profile of a float32 gMLP-Ti/16 training step (batch
32, the idle 2-core Xeon with AMX; `benchmarks/README.md`) found three
copies of the gate's `v` half a block, about 4 % of the step: the norm
made a contiguous copy of the strided half of the GELU's output in the
forward pass and again in the backward pass, and the backward pass
copied the norm's input gradient back into the GELU's buffer.

- `one_gelu` (the baseline, the previous form): `gelu(hidden)` and its
  halves as views, the gradients written into the recomputed GELU's
  buffer.
- `halves` (the candidate, `keras_gmlp.layers.torch_spatial_gate`):
  `gelu` of each half of `hidden`, so `u` and `v` are contiguous; the
  input gradient is written half by half into one buffer.

One process per model. Gaussian images, AdamW; before every timed call
the gate's class is switched (eager torch traces nothing), in
interleaved rounds. `x one_gelu` is the baseline's seconds per step over
the candidate's (above 1: faster).

Measured on the idle 2-core Xeon with AMX (model 167: AVX-512,
AVX512-BF16, AMX), batch 32, 7 rounds, medians, rounds' range in
brackets (`torch_gate_halves_xeon_amx_<model>.json`):

| model | float32 | mixed_bfloat16 |
|---|---|---|
| gMLP-Ti/16 | 1.02 (0.98-1.06) | 1.00 (0.99-1.02) |
| gMLP-S/16 (5 rounds) | 1.04 (1.03-1.08) | 1.00 (0.99-1.00) |

Scratch A/Bs before it, the same machine: gMLP-Ti 0.99x (0.97-1.05) and
1.04x (1.01-1.08) in float32 (two runs), 1.05x (1.01-1.10) in bfloat16;
gMLP-S 1.04x (1.03-1.08) in float32. The results are equal to float32
rounding (2e-6), bit for bit in bfloat16. The candidate allocates its
buffers afresh (`u`, `v`, the input gradient) where the baseline reused
the GELU's; on an AMD EPYC, fresh buffers that glibc handed back were
page-faulted in on every call (`benchmarks/torch_spatial_gate.py`), not
measured there for this change.

Usage:
    KERAS_BACKEND=torch python benchmarks/torch_gate_halves.py --suffix _mine
Results: benchmarks/results/torch_gate_halves<suffix>_<model>.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "one_gelu"
CANDIDATE = "halves"
PRECISIONS = ("float32", "mixed_bfloat16")


def one_gelu_gate():
    """The previous form of `torch_spatial_gate.RecomputedGate`."""
    import torch
    from torch.autograd.function import once_differentiable

    from keras_gmlp.layers.torch_spatial_gate import over_tokens

    class OneGeluGate(torch.autograd.Function):
        """The previous `RecomputedGate`: one GELU of the whole input."""

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
            u, v = torch.nn.functional.gelu(hidden).chunk(2, dim=-1)
            normalized, mean, inverse_deviation = torch.native_layer_norm(
                v, (v.shape[-1],), gamma, beta, epsilon
            )
            product = over_tokens(weight, normalized).add_(bias[:, None])
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
            gated = u * product
            if kernel is None:
                return gated
            return torch.nn.functional.linear(
                gated, kernel.t(), projection_bias
            )

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
            activated = torch.nn.functional.gelu(hidden)
            u, v = activated.chunk(2, dim=-1)
            v = v.contiguous()
            by_kernel = by_projection_bias = None
            if kernel is not None:
                # The second projection's gradients, its input recomputed.
                rows = upstream.reshape(-1, upstream.shape[-1])
                by_kernel = (u * product).reshape(-1, u.shape[-1]).t() @ rows
                by_projection_bias = rows.sum(dim=0)
                upstream = upstream @ kernel.t()
            by_product = upstream * u
            # The GELU's output gradient takes the place of its output (no
            # fresh buffer, no concatenation), and its input's gradient
            # that place again.
            by_activated, (by_u, by_v) = (
                activated,
                (u, activated[..., u.shape[-1] :]),
            )
            torch.mul(upstream, product, out=by_u)
            del u
            batch_axes = tuple(range(by_product.dim() - 2))
            by_bias = by_product.sum(dim=(*batch_axes, -1))
            # The normalised `v`, as the forward computed it.
            normalized = torch.native_layer_norm(
                v, (v.shape[-1],), gamma, beta, ctx.epsilon
            )[0]
            by_weight = torch.matmul(by_product, normalized.transpose(-1, -2))
            del normalized
            if batch_axes:
                by_weight = by_weight.sum(dim=batch_axes)
            by_normalized = over_tokens(weight.transpose(0, 1), by_product)
            by_norm_input, by_gamma, by_beta = (
                torch.ops.aten.native_layer_norm_backward(
                    by_normalized,
                    v,
                    (v.shape[-1],),
                    mean,
                    inverse_deviation,
                    gamma,
                    beta,
                    [True, ctx.needs_input_grad[1], ctx.needs_input_grad[2]],
                )
            )
            del by_normalized, v
            by_v.copy_(by_norm_input)
            del by_norm_input
            by_hidden = torch.ops.aten.gelu_backward.grad_input(
                by_activated, hidden, grad_input=by_activated
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

    return OneGeluGate


def main():
    parser = common.ab_benchmark_parser(__doc__, PRECISIONS, rounds=7)
    args = parser.parse_args()
    common.require_backend("torch", "the recomputing gate is torch's.")
    from keras_gmlp.layers import torch_spatial_gate

    common.configure_threads(args.threads)
    run = common.header()
    gates = {
        BASELINE: one_gelu_gate(),
        CANDIDATE: torch_spatial_gate.RecomputedGate,
    }
    images, labels = common.random_image_batch(args.batch_size, 224)
    rows = []
    for precision in args.precisions:
        model = common.build_image_classifier(
            args.model, 224, "auto", precision
        )
        functions = common.switched_variant_functions(
            {"train": lambda m=model: m.train_on_batch(images, labels)},
            (BASELINE, CANDIDATE),
            lambda variant: setattr(
                torch_spatial_gate, "RecomputedGate", gates[variant]
            ),
        )
        times = common.alternate(functions, args.rounds)
        torch_spatial_gate.RecomputedGate = gates[CANDIDATE]
        row = common.ab_row(
            times[f"train {BASELINE}"],
            times[f"train {CANDIDATE}"],
            BASELINE,
            CANDIDATE,
        )
        rows.append(dict(row, precision=precision, step="train"))
    common.finish_report(
        run,
        rows,
        ["precision", "step", f"{BASELINE}_ms", f"{CANDIDATE}_ms"]
        + [f"x_{BASELINE}", "rounds_min", "rounds_max"],
        f"torch_gate_halves{args.suffix}_{args.model}",
        rounds=args.rounds,
        batch_size=args.batch_size,
        model=args.model,
    )


if __name__ == "__main__":
    main()
