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
- `halves` (the candidate): `gelu` of each half of `hidden`, so `u` and
  `v` are contiguous; the input gradient is written half by half into
  one buffer.

Both are forms of `keras_gmlp.layers.torch_spatial_gate.RecomputedGate`;
its `takes_gelu_of_halves(dtype)` picks one (since stop 45: the halves
in float32 only). One process per model. Gaussian images, AdamW; before
every timed call the rule is switched (eager torch traces nothing), in
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
page-faulted in on every call (`benchmarks/torch_spatial_gate.py`).

On an idle 2-core AMD EPYC (family 26, model 2: AVX-512, AVX512-BF16,
no AMX), batch 32, the halves lose in bfloat16
(`torch_gate_halves_epyc26_<model>.json`, 7 rounds, stop 45):

| model | float32 | mixed_bfloat16 |
|---|---|---|
| gMLP-Ti/16 | 0.98 (0.96-1.01) | 0.93 (0.92-0.95) |
| gMLP-S/16 | 1.01 (0.95-2.82) | 0.94 (0.91-0.96) |

(Stop 44, the same machine, before the rule was switchable: gMLP-Ti
1.02 float32, 0.89 and 0.90 bfloat16 in two runs; gMLP-S 1.06 / 0.94.)
So bfloat16 takes one GELU: 1.00x on the Xeon, 1.06-1.12x faster here.
On an idle 2-core AMD EPYC of family 25, model 17 (AVX-512, AVX512-BF16,
no AMX; stop 54, `torch_gate_halves_epyc25_gmlp_ti16_224.json`, 7 rounds)
gMLP-Ti/16's bfloat16 halves read 0.93 (0.83-1.00): one GELU there too.

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


def main():
    parser = common.ab_benchmark_parser(__doc__, PRECISIONS, rounds=7)
    args = parser.parse_args()
    common.require_backend("torch", "the recomputing gate is torch's.")
    from keras_gmlp.layers import torch_spatial_gate

    common.configure_threads(args.threads)
    common.switched_rule_ab(
        args,
        torch_spatial_gate,
        "takes_gelu_of_halves",
        {BASELINE: lambda dtype: False, CANDIDATE: lambda dtype: True},
        ("train",),
        "torch_gate_halves",
    )


if __name__ == "__main__":
    main()
