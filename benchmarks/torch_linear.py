"""A/B: the torch backend's float32 linear products on oneDNN against
torch's MKL.

Issue 12. On the family-26 AMD EPYC, torch's float32 2048^3 matmul ran
at 206-223 GFLOP/s in `vision.py`'s runs (timm's process and the torch
backend's alike), JAX's and TensorFlow's at 453-485. torch's CPU wheels
compute a float32 `mm`/`addmm` with Intel's MKL, which on this AMD CPU
takes a slower path; the oneDNN the same wheels carry ran the product
at 477 GFLOP/s (`torch.ops.mkldnn._linear_pointwise`, the kernel
`torch.compile` uses for a CPU linear), and gMLP-S's projection shapes
1.5-2.2x as fast as MKL's, forward and both gradients. So on an AMD CPU
the package's float32 linear products
(`keras_gmlp.layers.torch_linear.linear`: the Dense layers and the
recomputing gate's folded second projection) run on oneDNN. The token
product (a batched matmul) stays on MKL.

- `mkl` (the baseline): the CPU taken for a non-AMD one, torch's own
  `linear` (`keras_gmlp.layers.cpu_features.is_amd` patched to
  `False`).
- `onednn` (the candidate): the CPU taken for an AMD one.

One process per model. Gaussian images, AdamW, float32; before every
timed call the answer is switched (eager torch traces nothing), in
interleaved rounds. `x mkl` is the baseline's seconds per step over the
candidate's (above 1: faster).

Measured on the idle 2-core AMD EPYC (family 26, model 2: AVX-512,
AVX512-BF16, no AMX), batch 32, 5 rounds, medians, rounds' range in
brackets (`torch_linear_epyc26_<model>.json`), x mkl:

| model | float32 train | float32 inference |
|---|---|---|
| gMLP-Ti/16 | 1.29 (1.20-1.33) | 1.34 (1.26-1.45) |
| gMLP-S/16 | 1.53 (1.49-1.53) | 1.56 (1.54-1.58) |

(`torch_linear_epyc26_final_<model>.json`, at 96a2ab6.) gMLP-Ti/16 at
smaller batches, at 13cf1ea: batch 8 train 1.30 (1.28-1.38), inference
1.29 (1.18-1.35); batch 2 1.23 (1.22-1.26) and 1.20 (1.19-1.23)
(`torch_linear_epyc26_batch{8,2}_gmlp_ti16_224.json`). A first run
(`torch_linear_epyc26_<model>.json`, at 0c844ca) had every product on
oneDNN and each weight gradient in one orientation: 1.22 / 1.32 and
1.41 / 1.56. oneDNN lost two ways, which 96a2ab6 avoids: products of
under 4 M multiply-adds (its call costs about 10 us more than MKL's:
`(64, 64) x (64, 64)` 0.42x, `(128, 64) x (64, 256)` 1.07x,
`(256, 128) x (128, 512)` 1.94x), and the weight gradient of gMLP-Ti's
first projection read the narrow way (`(6272, 768)^T (6272, 128)` 0.93x
MKL; as `((6272, 128)^T (6272, 768))^T` 1.78x).

A scratch run before it, with `torch.nn.functional.linear` replaced
process-wide (gMLP-Ti, two processes each): training 1,437-1,446 ms
against 1,675-1,682, inference 394-425 against 530-534. The products
alone, gMLP-S/16's first projection `(6272, 256) x (256, 1536)` and its
gradients, MKL against oneDNN: forward 151 against 239 GFLOP/s, input
gradient 201 against 451. Not measured on an Intel CPU, which keeps
MKL.

Usage:
    KERAS_BACKEND=torch python benchmarks/torch_linear.py --suffix _mine
Results: benchmarks/results/torch_linear<suffix>_<model>.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "mkl"
CANDIDATE = "onednn"
PRECISIONS = ("float32",)


def main():
    parser = common.ab_benchmark_parser(__doc__, PRECISIONS, rounds=5)
    args = parser.parse_args()
    common.require_backend("torch", "the linear products are torch's.")
    from keras_gmlp.layers import cpu_features

    common.configure_threads(args.threads)
    common.switched_rule_ab(
        args,
        cpu_features,
        "is_amd",
        {BASELINE: lambda: False, CANDIDATE: lambda: True},
        ("train", "infer"),
        "torch_linear",
    )


if __name__ == "__main__":
    main()
