"""A/B: the gMLP block's sublayers through `direct_call` vs `__call__`.

Issue 12. `GMLPBlock` and `SpatialGatingUnit` call their built sublayers
(the two LayerNorms, the two projections, the gating unit, the drop path)
through `keras_gmlp.layers.direct_call`, which does what `Layer.__call__`
does to the numbers (dtype conversion, autocast) and skips its
bookkeeping. Under JAX and TensorFlow the step is traced once, so only
eager torch can gain; this measures by how much.

One process (`KERAS_BACKEND`, torch by default in the usage below). One
gMLP image classifier (`common.build_image_classifier`, AdamW), one batch;
the module-level `direct_call` of the block and of the gating unit is
switched before every timed call between `direct_call` and a plain
`layer(inputs, **kwargs)`, in interleaved rounds (`common.alternate`).
`x layer_call` is the `__call__` variant's seconds per step over
`direct_call`'s (above 1: `direct_call` is faster).

Measured (an idle 2-core AMD EPYC with AVX2 only, torch, gMLP-Ti/16,
batch 8, 224 px, 8 rounds; `direct_call_torch.json`), x layer_call:
training 1.01 (rounds 0.86-1.32), inference 1.15 (0.91-1.36); an earlier
8-round A/B of the same switch gave 1.08 (0.96-1.29) and 1.16
(0.87-1.45). The forward pass of a step is the same for both; the
backward pass does not call layers, so training gains less.

Usage:
    KERAS_BACKEND=torch python benchmarks/direct_call.py --rounds 8
Results: benchmarks/results/direct_call_<backend>.json
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "layer_call"


def layer_call(layer, inputs, **kwargs):
    return layer(inputs, **kwargs)


def use_variant(variant):
    """Makes the block and the gating unit call sublayers by `variant`."""
    from keras_gmlp.layers import direct_call
    from keras_gmlp.layers import gmlp_block
    from keras_gmlp.layers import spatial_gating_unit

    call = layer_call if variant == BASELINE else direct_call.direct_call
    gmlp_block.direct_call = call
    spatial_gating_unit.direct_call = call


def in_variant(variant, function):
    def call():
        use_variant(variant)
        return function()

    return call


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--model", default="gmlp_ti16_224")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--target-seconds", type=float, default=1.0)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    common.configure_threads(args.threads)
    report = common.header()
    report["arguments"] = vars(args)
    print(common.describe(report), flush=True)
    model = common.build_image_classifier(
        args.model, args.image_size, "auto", "float32"
    )
    x, y = common.random_image_batch(args.batch_size, args.image_size)
    steps = {
        "train": functools.partial(model.train_on_batch, x, y),
        "infer": functools.partial(model.predict_on_batch, x),
    }
    functions = {}
    for variant in (BASELINE, "direct_call"):
        for case, step in steps.items():
            function = in_variant(variant, step)
            function()  # warm (compiles under JAX and TensorFlow)
            functions[f"{case}/{variant}"] = function
    times = common.alternate(functions, args.rounds, args.target_seconds)
    rows = []
    for case in steps:
        baseline = times[f"{case}/{BASELINE}"]
        seconds = times[f"{case}/direct_call"]
        ratios = [b / s for b, s in zip(baseline, seconds, strict=True)]
        rows.append(
            {
                "case": case,
                "layer_call_s": common.median(baseline),
                "direct_call_s": common.median(seconds),
                "x_layer_call": common.median(ratios),
                "round_ratios": ratios,
            }
        )
        print(
            f"{case:6s} __call__ {1e3 * common.median(baseline):7.1f} ms, "
            f"direct_call {1e3 * common.median(seconds):7.1f} ms: "
            f"x{rows[-1]['x_layer_call']:5.2f} "
            f"(rounds {min(ratios):.2f}-{max(ratios):.2f})",
            flush=True,
        )
    report["rows"] = rows
    print(
        "wrote",
        common.write_results(f"direct_call_{report['backend']}", report),
    )


if __name__ == "__main__":
    main()
