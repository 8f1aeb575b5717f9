"""A/B: keras_gmlp's LayerNormalization under torch, one kernel vs Keras'.

Issue 12. Under torch, `keras_gmlp.layers.LayerNormalization` calls
`torch.nn.functional.layer_norm` on the inputs as they come, bfloat16 or
float16 ones with the float32 scale and center (torch computes in float32
and rounds once). Keras' own call, the baseline, casts the inputs to
float32, normalises, and casts back: two more copies of the activations
and a few Keras dispatches per call, 61 calls in a gMLP-Ti step. Found in
torch's profiler and cProfile of a `mixed_bfloat16` gMLP-Ti inference
step: its aten ops took less CPU time than timm's under autocast (55
against 65 ms) while its wall time was longer (78 against 67 ms), the
rest being Python, of which Keras' LayerNorm path was the largest part
after the block itself.

One process. A gMLP-Ti/16 classifier (`common.build_image_classifier`,
AdamW, batch 8, 224 px); before every timed call the class's torch path is
switched between keras_gmlp's and Keras' call (eager torch traces
nothing), in interleaved rounds (`common.alternate`). `x keras` is the
baseline's seconds per step over keras_gmlp's (above 1: faster).

Measured (an idle 2-core Xeon with AVX-512, AVX512-BF16 and AMX, 8
rounds, medians, rounds' range in brackets; `torch_layer_norm_torch.json`),
x keras:

| step | float32 | mixed_bfloat16 |
|---|---|---|
| train | 1.00 (0.96-1.04) | 1.05 (0.97-1.09) |
| inference | 1.02 (0.99-1.04) | 1.08 (1.04-1.10) |

float32 has no copies to save (its inputs are float32 already); only the
dispatches go.

Usage:
    KERAS_BACKEND=torch python benchmarks/torch_layer_norm.py --rounds 8
Results: benchmarks/results/torch_layer_norm_torch.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "keras"
CANDIDATE = "keras_gmlp"
PRECISIONS = ("float32", "mixed_bfloat16")


def use_variant(variant, original):
    """Makes keras_gmlp's LayerNormalization take `variant`'s torch path."""
    import keras

    from keras_gmlp.layers import LayerNormalization

    if variant == BASELINE:
        LayerNormalization._torch_call = keras.layers.LayerNormalization.call
    else:
        LayerNormalization._torch_call = original


def main():
    parser = common.ab_benchmark_parser(__doc__, PRECISIONS, rounds=8)
    args = parser.parse_args()
    common.require_backend("torch", "the one-kernel LayerNorm is torch's.")
    from keras_gmlp.layers import LayerNormalization

    common.configure_threads(args.threads)
    run = common.header()
    original = LayerNormalization._torch_call
    images, labels = common.random_image_batch(args.batch_size, 224)
    rows = []
    for precision in args.precisions:
        model = common.build_image_classifier(
            "gmlp_ti16_224", 224, "auto", precision
        )
        steps = {
            "train": lambda m=model: m.train_on_batch(images, labels),
            "infer": lambda m=model: m.predict_on_batch(images),
        }
        functions = common.switched_variant_functions(
            steps,
            (BASELINE, CANDIDATE),
            lambda variant: use_variant(variant, original),
        )
        times = common.alternate(functions, args.rounds)
        use_variant(CANDIDATE, original)
        for mode in steps:
            row = common.ab_row(
                times[f"{mode} {BASELINE}"],
                times[f"{mode} {CANDIDATE}"],
                "keras",
                "keras_gmlp",
            )
            rows.append(dict(row, precision=precision, step=mode))
    common.finish_report(
        run,
        rows,
        [
            "precision",
            "step",
            "keras_ms",
            "keras_gmlp_ms",
            "x_keras",
            "rounds_min",
            "rounds_max",
        ],
        "torch_layer_norm_torch",
        rounds=args.rounds,
        batch_size=args.batch_size,
    )


if __name__ == "__main__":
    main()
