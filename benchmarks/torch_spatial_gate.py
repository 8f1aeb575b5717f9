"""A/B: the spatial gating unit's recomputing training call under torch.

Issue 12 (peak training memory <= timm's). Under torch, while gradients
are recorded, the gMLP block's spatial gating unit is one
`torch.autograd.Function` (`keras_gmlp.layers.torch_spatial_gate`) that
keeps the GELU's input and the product `W @ LayerNorm(v) + b` for the
backward pass and recomputes the GELU and the normalised `v` there (and
the block's second projection's input, that projection folded in). The
baseline is the same unit under autograd (the GELU, `call_on_halves`),
which keeps the GELU's input and output, the normalised `v` and the
product.

One process. A gMLP-Ti/16 classifier (`common.build_image_classifier`,
AdamW, batch 8, 224 px); before every timed call the unit's path is
switched (eager torch traces nothing), in interleaved rounds
(`common.alternate`). `x autograd` is the baseline's seconds per step over
the recomputing one's (above 1: faster). `saved MiB` is what autograd
holds for the backward pass of one training forward, each storage counted
once (`torch.autograd.graph.saved_tensors_hooks`). Inference records no
gradients and takes the same path either way.

Measured (an idle 2-core AMD EPYC with AVX-512 and AVX512-BF16, no AMX;
8 rounds, two runs, medians, rounds' range in brackets;
`torch_spatial_gate_torch.json` holds the second), x autograd:

| step | float32 | mixed_bfloat16 |
|---|---|---|
| train, run 1 | 1.03 (1.02-1.11) | 1.02 (0.98-1.07) |
| train, run 2 | 1.02 (0.90-1.04) | 1.02 (0.98-1.04) |
| saved for the backward pass | 350 against 557 MiB | 176 against 279 MiB |
| train, projection folded | 1.00 (0.96-1.04) | 1.01 (0.97-1.07) |
| saved, projection folded | 281 against 557 MiB | 141 against 279 MiB |

The last two rows (the results file) are the unit as it is: the block's
second projection folded into the same function, its input `u * (W z +
b)` recomputed for its kernel's gradient instead of kept. That fold
alone, against the recomputing gate without it (6 rounds, scratch):
1.00x (0.97-1.04) float32, 1.005x (0.99-1.07) bfloat16.

How it got there. The first version allocated every buffer of its
backward pass afresh (the recomputed GELU, its two halves' gradients,
their concatenation) and measured 0.946 and 0.908 (float32, bfloat16; 6
rounds), though the recomputation itself, timed alone at gMLP-Ti's
shapes, is about 0.6 ms a block (GELU 0.30 ms, norm 0.11, a copy of `v`
0.04). Timed piece by piece inside a loop of backward passes, the same
ops took twice as long as alone (12.1 against 5.8 ms a block), and with
glibc told to keep freed memory (`MALLOC_MMAP_THRESHOLD_=256 MiB`,
`MALLOC_TRIM_THRESHOLD_=1 GiB`) they did not: the fresh buffers were
page-faulted in on every call. Writing the gradients into the recomputed
GELU's buffer (its `u` half once `u` is used, then the GELU's own
gradient in place) and adding the bias in place took the step from 0.95
to 1.02-1.03x. The copies of a strided half were no cheaper computed
half by half (a GELU of a strided half: 0.35 ms, of the whole: 0.41).

The same change measured against timm (`benchmarks/vision.py`, 5 rounds,
`vision_gmlp_ti16_224_epyc_avx512_fair_recomputed_gate.json`), float32
train / inference, bf16 train / inference: torch 1.19 / 1.00 / 1.08 /
1.05 x timm (before, two runs: 1.07-1.13 / 0.98-0.99 / 1.07 / 1.01-1.08).
Peak memory in `benchmarks/memory.py` and `benchmarks/live_memory.py`.

Usage:
    KERAS_BACKEND=torch python benchmarks/torch_spatial_gate.py --rounds 8
Results: benchmarks/results/torch_spatial_gate_torch.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "autograd"
CANDIDATE = "recomputed"
PRECISIONS = ("float32", "mixed_bfloat16")


def use_variant(variant, original):
    """Makes the spatial gating unit take `variant`'s training path."""
    from keras_gmlp.layers import SpatialGatingUnit

    if variant == BASELINE:
        SpatialGatingUnit._recomputes_torch = lambda self, hidden, length: False
    else:
        SpatialGatingUnit._recomputes_torch = original


def saved_mib(model, images):
    """MiB of the tensors autograd saves in one training forward of
    `model`, each storage once."""
    _, storages = common.saved_tensor_storages(
        lambda: model(images, training=True)
    )
    return sum(storages.values()) / 2**20


def main():
    parser = common.ab_benchmark_parser(__doc__, PRECISIONS, rounds=8)
    args = parser.parse_args()
    common.require_backend("torch", "the recomputing gate is torch's.")
    from keras_gmlp.layers import SpatialGatingUnit

    common.configure_threads(args.threads)
    run = common.header()
    original = SpatialGatingUnit._recomputes_torch
    images, labels = common.random_image_batch(args.batch_size, 224)
    rows = []
    for precision in args.precisions:
        model = common.build_image_classifier(
            "gmlp_ti16_224", 224, "auto", precision
        )
        functions = common.switched_variant_functions(
            {"train": lambda m=model: m.train_on_batch(images, labels)},
            (BASELINE, CANDIDATE),
            lambda variant: use_variant(variant, original),
        )
        saved = {}
        for variant in (BASELINE, CANDIDATE):
            use_variant(variant, original)
            saved[variant] = saved_mib(model, images)
        times = common.alternate(functions, args.rounds)
        use_variant(CANDIDATE, original)
        row = common.ab_row(
            times[f"train {BASELINE}"],
            times[f"train {CANDIDATE}"],
            BASELINE,
            CANDIDATE,
        )
        rows.append(
            dict(
                row,
                precision=precision,
                step="train",
                autograd_saved_mib=round(saved[BASELINE], 1),
                recomputed_saved_mib=round(saved[CANDIDATE], 1),
            )
        )
    common.finish_report(
        run,
        rows,
        [
            "precision",
            "step",
            "autograd_ms",
            "recomputed_ms",
            "x_autograd",
            "rounds_min",
            "rounds_max",
            "autograd_saved_mib",
            "recomputed_saved_mib",
        ],
        "torch_spatial_gate_torch",
        rounds=args.rounds,
        batch_size=args.batch_size,
    )


if __name__ == "__main__":
    main()
