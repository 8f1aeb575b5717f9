"""A/B: the torch backend's float32 token product on oneDNN against
torch's MKL.

Issue 12. After stop 45 the torch backend's linear layers took oneDNN on
an AMD CPU (`benchmarks/torch_linear.py`), but the spatial gating unit's
product over the token axis, `W @ v` with `v` `(batch, tokens, c)`,
stayed a batched matmul of the broadcast `W` on MKL, at its slow rate
there. Alone on the family-26 EPYC (2 threads, medians of 20 calls), W
`(196, 196)` times `v` `(32, 196, 384)`, gMLP-Ti/16's unit at batch 32:
the batched matmul 4.67 ms (202 GFLOP/s); one oneDNN product of `v`'s
tokens as rows `(196, 32 x 384)` (a copy of `v`), its result left a
view, 2.48 ms (381); 32 oneDNN products, one per image, 2.75 ms; that
one product with its result copied back to `(32, 196, 384)`, 2.89 ms.
The weight gradient, batched and summed over the batch 4.92 ms, one
oneDNN product of the two operands' rows 3.51 ms. For a masked LM at
n = 512 (`(512, 512)` times `(8, 512, 256)`), 4.97 against 2.48 ms and
5.37 against 2.43 ms.

- `mkl` (the baseline): the batched matmul and its gradients on torch's
  MKL (`keras_gmlp.layers.torch_linear.takes_onednn_over_tokens`
  patched to `False`).
- `onednn` (the candidate): one 2-D product over `v`'s tokens as rows,
  `keras_gmlp.layers.torch_linear.over_tokens`.

The linear layers take oneDNN in both. One process per model. Gaussian
images, AdamW, float32; before every timed call the answer is switched
(eager torch traces nothing), in interleaved rounds. `x mkl` is the
baseline's seconds per step over the candidate's (above 1: faster).

Measured on the idle 2-core AMD EPYC (family 26, model 2: AVX-512,
AVX512-BF16, no AMX), batch 32, 5 rounds, medians, rounds' range in
brackets (`torch_token_product_epyc26_stop46_<model>.json`, at ec7ff3d),
x mkl:

| model | float32 train | float32 inference |
|---|---|---|
| gMLP-Ti/16 | 1.14 (1.08-1.19) | 1.16 (1.14-1.19) |
| gMLP-S/16 | 1.13 (1.11-1.14) | 1.13 (1.12-1.14) |

gMLP-Ti/16 at smaller batches, at 85e3116 (the same products):
batch 8 train 1.23 (1.14-1.34), inference 1.25 (1.15-1.31); batch 2
1.12 (1.02-1.16) and 1.12 (1.07-1.16)
(`torch_token_product_epyc26_batch{8,2}_stop46_gmlp_ti16_224.json`).

Tried and not adopted (scratch, the recomputing gate's two forms
switched in one process, gMLP-Ti/16, batch 32, 7 rounds): the gate's
`v` written tokens first by its GELU (`gelu.out` into a `(tokens,
batch, c)` buffer), so that the norm, the product and both gradients
read and write the rows without `token_rows`' copies (one copy a block
instead of four), in every dtype. float32 training 1.02x (0.98-1.06),
bfloat16 0.98x (0.975-1.01): the GELU's gradient then reads `v`'s
gradient across the layout and ran 2.2 ms a call against 1.7.

Usage:
    KERAS_BACKEND=torch python benchmarks/torch_token_product.py --suffix _mine
Results: benchmarks/results/torch_token_product<suffix>_<model>.json
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
    common.require_backend("torch", "the token product is torch's.")
    from keras_gmlp.layers import torch_linear

    common.configure_threads(args.threads)
    common.switched_rule_ab(
        args,
        torch_linear,
        "takes_onednn_over_tokens",
        {
            BASELINE: lambda *_: False,
            # The AMD rule whatever the CPU's family.
            CANDIDATE: torch_linear.takes_onednn,
        },
        ("train", "infer"),
        "torch_token_product",
    )


if __name__ == "__main__":
    main()
