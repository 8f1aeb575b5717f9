"""A/B: a Toeplitz masked LM's training step with the FFT product forced
from `--crossover` tokens, against the materialised product.

Issue 12: where `keras_gmlp.layers.spatial_gating_unit.fft_crossover`
puts the FFT. Both forms' models are built and run alternated in one
process (the gMLP masked LM of `--preset`, `--num-layers` blocks if
given, 4,096 tokens a batch, the recipe's loss, metrics and optimizer;
`masked_lm_speed.variant_ab`), x `materialised` (above 1: the FFT
faster). The forms' outputs agree to float32 rounding
(`tests/layers/test_spatial_gating_unit_toeplitz.py`). Under JAX after
`reuse_freed_memory()`, under TensorFlow after `set_job_xla_flags()`,
as the `keras-gmlp` command runs them. Where
the materialised product runs, the training call recomputes the gate;
the FFT's does not.

Measured on an idle 2-core AMD EPYC of family 25, model 17 (AVX-512 on
256-bit halves, AVX512-BF16, no AMX) at be41efc, x materialised (rounds'
range), 9 rounds at 512 tokens, 7 at 256, 5 for the wide rows
(`fft_crossover_epyc25_scratch{,256,wide}_<backend>.json`: this script's
first form, run from a scratch folder):

| backend | 256 channels, n = 512 | 256 channels, n = 256 | 1,536, n = 512 |
|---|---|---|---|
| torch | **1.08** (1.01-1.14) | 1.01 (0.92-1.94) | 0.81 (0.74-0.81) |
| jax | **1.06** (1.03-1.11) | 0.90 (0.85-0.93) | 1.00 (0.98-1.02) |
| tensorflow | **1.11** (1.01-1.27) | 0.90 (0.87-0.93) | 1.01 (0.96-1.07) |

(256 gated channels: `gmlp_tiny`, 4 blocks; 1,536: `gmlp_base`'s
width, 2 blocks.)

On the family-26 EPYC and on the Xeon with AMX, whose float32 matmul runs
at twice this one's rate, the FFT lost at 512 tokens and 256 channels
(0.70-0.91, stops 38 and 46). So on AMD's family 25 the narrow units (at
most 256 gated channels: the CPU presets) take the FFT from 512 tokens
(`AMD_FAMILY_FFT_CROSSOVER`); elsewhere and for wider units it stays at
`FFT_CROSSOVER` (1024).

Usage:
    KERAS_BACKEND=torch python benchmarks/fft_crossover.py --lengths 512
    KERAS_BACKEND=jax python benchmarks/fft_crossover.py --lengths 512 \\
        --preset gmlp_base --num-layers 2
Results: benchmarks/results/fft_crossover<suffix>_<backend>.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "materialised"
CANDIDATE = "fft"


def variant_of(crossover):
    """`variant(name)`: a context in which every Toeplitz unit takes the
    FFT from `crossover` tokens (`fft`) or from none (`materialised`)."""

    def variant(name):
        from keras_gmlp.layers import spatial_gating_unit

        tokens = crossover if name == CANDIDATE else 2**62
        return common.patched(
            spatial_gating_unit,
            "fft_crossover",
            lambda backend=None, gate_channels=None, cpuinfo_path=None: tokens,
        )

    return variant


def main():
    parser = masked_lm_speed.variant_parser(__doc__, [512])
    parser.add_argument("--crossover", type=int, default=None)
    parser.add_argument("--num-layers", type=int, default=None)
    args = parser.parse_args()
    import keras

    if keras.config.backend() == "jax":
        from keras_gmlp.training import reuse_freed_memory

        reuse_freed_memory()
    if keras.config.backend() == "tensorflow":
        from keras_gmlp.training import set_job_xla_flags

        set_job_xla_flags()
    if args.num_layers is not None:
        masked_lm_speed.MODELS["gmlp"] = ["--num-layers", str(args.num_layers)]
    crossover = args.crossover or min(args.lengths)
    masked_lm_speed.variant_ab(
        variant_of(crossover),
        BASELINE,
        CANDIDATE,
        args,
        f"fft_crossover{args.suffix}_{{backend}}",
    )


if __name__ == "__main__":
    main()
