"""A/B: the spatial gating unit's recomputing training call under JAX.

Issue 12 (peak training memory <= timm's). In JAX training the gMLP
block's spatial gating unit is one `jax.custom_vjp`
(`keras_gmlp.layers.jax_spatial_gate`) that keeps the GELU's input and the
product `W @ LayerNorm(v) + b` for the backward pass and recomputes the
GELU and the norm there, the recomputation made to read the upstream
gradient so that XLA cannot merge it back into the forward pass. The
baseline is the same unit under JAX's own differentiation (the GELU,
`call_on_halves`).

One process. Two gMLP-Ti/16 classifiers (`common.variant_model_functions`,
AdamW, batch 8, 224 px), one traced in each form, timed in interleaved
rounds (`common.alternate`); `x autograd` is the baseline's seconds per
step over the recomputing one's (above 1: faster). Inference takes the
same path either way and is not timed. Peak memory: `benchmarks/memory.py`.

Measured (an idle 2-core AMD EPYC with AVX-512 and AVX512-BF16, no AMX;
medians, rounds' range in brackets; `jax_spatial_gate_jax.json` holds
the 7-round run), x autograd:

| step | float32 | mixed_bfloat16 |
|---|---|---|
| train, 7 rounds | 1.12 (1.06-1.13) | 1.19 (1.17-1.27) |
| train, 5 rounds, one precision a run | 1.12 (1.11-1.13) | 1.48 (0.76-1.76) |
| train, 7 rounds, projection folded | 1.09 (0.85-1.30) | 1.23 (1.17-1.26) |

The last row (the results file) is the unit as it is: the block's second
projection folded into the same function, so that its input `u * (W z +
b)` is recomputed too rather than kept for its kernel's gradient. That
fold alone, against the recomputing gate without it (5 rounds, scratch):
1.01x (0.97-1.02) float32, 1.05x (0.89-1.61) bfloat16; the steady step's
peak RSS 319 MiB against 389 (`benchmarks/memory.py`,
`memory_gmlp_ti16_224_jax_recomputed_gate_folded.json` against
`_jax_recomputed_gate.json`).

Faster, not only smaller: JAX's own gradient of the gate kept, beside
the GELU's input, its gated half, the normalised `v` before and after
the norm's scale and center, the product and the gated output, each
written by the forward pass and read back by the backward one; the
recomputing gradient reads the GELU's input and the product and fuses
the recomputed GELU, norm and gating into the fusions that consume them.

Why the recomputation reads the upstream gradient. In a pure-JAX stack of
30 gMLP-Ti gates (batch 8, float32, scratch), XLA's temporaries for the
training step were 754 MB with JAX's own differentiation, 679 MB with a
`jax.custom_vjp` that recomputes the GELU and the norm in its backward
rule, 679 MB again with the recomputation's inputs behind
`jax.lax.optimization_barrier`, and 402 MB with the recomputation
reading the upstream gradient (`hidden + 0 * g`): XLA:CPU merged the
recomputation with the forward pass's identical computation unless it
depended on the backward pass (steps 1.79, 1.50, 1.56 and 1.48 s). The
test `tests/layers/test_jax_spatial_gate.py` checks it on a stack of
blocks: without the dependency, the temporaries are autograd's to the
byte.

The same change measured against timm (`benchmarks/vision.py`, 5
rounds, `vision_gmlp_ti16_224_epyc_avx512_fair_recomputed_gate_jax
.json`), float32 train / inference, bf16 train / inference: jax 0.85 /
1.29 / 0.60 / 0.71 x timm, and 0.85 / 1.28 / 0.63 / 0.75 with the
projection folded (the results file) (before, over three runs: 0.74-0.89
/ 1.20-1.27 / 0.52-0.54 / 0.68-0.75). Peak RSS of the steady training
step (`benchmarks/memory.py`): 0.64x timm's, before 1.31x; 0.53x with
the second projection folded in.

Usage:
    KERAS_BACKEND=jax python benchmarks/jax_spatial_gate.py --rounds 7
Results: benchmarks/results/jax_spatial_gate_jax.json
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "autograd"
CANDIDATE = "recomputed"
PRECISIONS = ("float32", "mixed_bfloat16")


def variant(name):
    """A context in which the units traced take the `name` form."""
    from keras_gmlp.layers import SpatialGatingUnit

    if name != BASELINE:
        return contextlib.nullcontext()
    return common.patched(
        SpatialGatingUnit, "_recomputes_jax", lambda self, hidden, length: False
    )


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "jax_spatial_gate",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "jax",
        variant,
        infer=False,
    )
