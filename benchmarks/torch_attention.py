"""A/B under torch: the tiny attention's core as two batched products
around a masked softmax (`ops`, the previous form) vs torch's fused
`scaled_dot_product_attention` (`fused`,
`keras_gmlp.layers.torch_attention`).

Issue 12. A torch profile of `amlp_tiny` masked-LM training at n = 512
(8 sequences, an idle 2-core AMD EPYC with AVX-512, 190 ms a step): per
step about 22 ms of the attention's `bmm`s, 8 ms of 40 `where`s over
`(batch, n, n)` (the padding mask applied to the scores and to the
weights, and their gradients) and 3 ms of the softmax and its gradient,
beside the gMLP block's own work.

Both forms' models are built and run alternated in one process (the aMLP
masked LM of `--preset`, 4,096 tokens a batch, the recipe's loss and
metrics), x `ops` (above 1: faster). The outputs equal up to float32
rounding (`tests/layers/test_tiny_attention.py` checks both against
numpy, gradients by finite differences).

Measured on that EPYC at bf3ff9c (7 rounds,
`torch_attention_epyc26_stop48_torch.json`): 1.10x (1.06-1.25) at
n = 128, 1.21x (1.16-1.28) at 512. On an idle 2-core AMD EPYC of family
25, model 17 (AVX-512, AVX512-BF16, no AMX) at 0ddc5cc (9 rounds,
`torch_attention_epyc25_stop58_torch.json`): 1.02x (0.95-1.16) at 128,
1.12x (1.04-1.25) at 512. The fused form stays.

Usage:
    KERAS_BACKEND=torch python benchmarks/torch_attention.py
Results: benchmarks/results/torch_attention<suffix>_torch.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "ops"
CANDIDATE = "fused"


def variant(name):
    """A context in which the tiny attention takes the `name` form."""
    import contextlib

    from keras_gmlp.layers import tiny_attention

    if name == CANDIDATE:
        return contextlib.nullcontext()
    return common.patched(
        tiny_attention, "takes_fused_attention", lambda: False
    )


def main():
    parser = masked_lm_speed.variant_parser(__doc__, [128, 512])
    parser.set_defaults(preset="amlp_tiny")
    args = parser.parse_args()
    common.require_backend("torch", "the fused form is torch's")
    masked_lm_speed.variant_ab(
        variant,
        BASELINE,
        CANDIDATE,
        args,
        f"torch_attention{args.suffix}_{{backend}}",
    )


if __name__ == "__main__":
    main()
