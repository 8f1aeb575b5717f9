"""A/B: the gMLP block's exact GELU, TensorFlow's kernel vs an XLA function.

Issue 12. Under TensorFlow, `keras_gmlp.layers.gelu.gelu` computes the
block's exact GELU as `0.5 x erfc(-x / sqrt(2))` in an XLA-compiled
function (float32 at least) with the closed-form gradient `Phi(x) + x
phi(x)` in another; the baseline, `keras.activations.gelu(x,
approximate=False)`, is TensorFlow's `tf.nn.gelu`, the same formula as
separate kernels. Found with a per-op timing of the block's pieces
(8 x 196 x 768, gMLP-Ti's expansion, in a `tf.function`): TensorFlow's GELU
took 2.2-2.5 ms in float32 and 4.5-5.0 ms in bfloat16, more than the
block's first projection (1.4 / 0.7 ms through oneDNN), so 30 of them were
a third of a gMLP-Ti inference step in float32 and more than half in
bfloat16 (`erf` alone: 0.84 / 0.99 ms; the rest is the elementwise ops
around it, each a pass over memory, and bfloat16 ones without a vector
kernel).

Two measures, each in interleaved rounds (`common.alternate`), the figure
`x baseline` the baseline's seconds over keras_gmlp's (above 1: faster):

- `op`: the GELU of a `(batch, 196, channels)` tensor in a `tf.function`,
  forward (`fwd`) and forward plus the input gradient (`fwd+bwd`), at
  gMLP-Ti's and gMLP-S's expansions (768, 1536 channels).
- `model`: a gMLP-Ti/16 classifier's `train_on_batch` and
  `predict_on_batch` (`common.build_image_classifier`, AdamW, batch 8,
  224 px): two models, each traced with one GELU.

Measured (an idle 2-core Xeon with AVX-512, AVX512-BF16 and AMX, batch 8,
5 rounds, medians, rounds' range in brackets; `gelu_tensorflow.json`),
x baseline:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| op fwd, 768 channels | 2.11 (1.91-2.20) | 4.17 (3.94-4.36) |
| op fwd+bwd, 768 | 1.87 (1.78-2.02) | 3.34 (3.01-3.46) |
| op fwd, 1536 | 2.39 (2.20-2.44) | 4.98 (4.80-5.14) |
| op fwd+bwd, 1536 | 2.13 (2.05-2.26) | 3.92 (3.62-4.19) |
| gMLP-Ti train step | 1.05 (1.03-1.05) | 1.30 (1.20-1.39) |
| gMLP-Ti inference step | 1.05 (1.01-1.06) | 1.47 (1.36-1.51) |

The float32 model gains less than its GELUs' op times promise (30 x 1.1
ms of a 200 ms inference step): in the whole graph TensorFlow overlaps
part of its GELU with other ops, and each XLA call has a launch cost.
Against timm (`vision.py`, the same machine, gMLP-Ti, 3 rounds; results
`vision_gmlp_ti16_224_xeon_amx.json` before, `_xeon_amx_xla_gelu.json`
after), TensorFlow's train / inference x timm went from 0.97 / 0.81 to
1.06 / 0.86 in float32 and from 0.65 / 0.49 to 0.87 / 0.73 in bfloat16
(timm under autocast).

The outputs of the two differ by float32 rounding only (the same `erfc`
formula): the tests that pin outputs (timm parity) pass unchanged.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/gelu.py --rounds 5
Results: benchmarks/results/gelu_tensorflow.json
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "tf.nn.gelu"
CANDIDATE = "keras_gmlp"
PRECISIONS = ("float32", "mixed_bfloat16")


def keras_gelu(x):
    import keras

    return keras.activations.gelu(x, approximate=False)


def gelus():
    from keras_gmlp.layers.gelu import gelu

    return {BASELINE: keras_gelu, CANDIDATE: gelu}


def op_functions(batch_size, channels, precision):
    """name -> warm callable: each GELU, forward and forward + backward."""
    import tensorflow as tf

    dtype = "float32" if precision == "float32" else "bfloat16"
    x = tf.cast(
        tf.random.stateless_normal((batch_size, 196, channels), (0, 1)), dtype
    )
    functions = {}
    for name, gelu in gelus().items():
        forward = tf.function(gelu)

        def both(x, gelu=gelu):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = gelu(x)
            return y, tape.gradient(y, x, output_gradients=x)

        both = tf.function(both)
        functions[f"fwd {name}"] = lambda f=forward: f(x)
        functions[f"fwd+bwd {name}"] = lambda f=both: f(x)
    for function in functions.values():
        function()
    return functions


def model_functions(batch_size, precision):
    """name -> warm callable: a gMLP-Ti step traced with each GELU."""
    from keras_gmlp.layers import gmlp_block

    images, labels = common.random_image_batch(batch_size, 224)
    functions = {}
    original = gmlp_block.gelu
    try:
        for name, gelu in gelus().items():
            gmlp_block.gelu = gelu
            model = common.build_image_classifier(
                "gmlp_ti16_224", 224, "auto", precision
            )
            # Trace both steps now: the traced graphs keep this GELU.
            model.train_on_batch(images, labels)
            model.predict_on_batch(images)
            functions[f"train {name}"] = lambda m=model: m.train_on_batch(
                images, labels
            )
            functions[f"infer {name}"] = lambda m=model: m.predict_on_batch(
                images
            )
    finally:
        gmlp_block.gelu = original
    return functions


def ratios(times, measures):
    """Rows: the baseline's median seconds over keras_gmlp's, per measure."""
    rows = []
    for measure in measures:
        baseline = times[f"{measure} {BASELINE}"]
        candidate = times[f"{measure} {CANDIDATE}"]
        per_round = [b / c for b, c in zip(baseline, candidate, strict=True)]
        rows.append(
            {
                "measure": measure,
                "baseline_ms": 1e3 * common.median(baseline),
                "keras_gmlp_ms": 1e3 * common.median(candidate),
                "x_baseline": common.median(per_round),
                "rounds_min": min(per_round),
                "rounds_max": max(per_round),
            }
        )
    return rows


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS
    )
    parser.add_argument(
        "--no-model", action="store_true", help="the op measures only"
    )
    args = parser.parse_args()
    import keras

    if keras.config.backend() != "tensorflow":
        raise SystemExit(
            "Received KERAS_BACKEND="
            f"{keras.config.backend()!r}; expected 'tensorflow': the XLA "
            "GELU is TensorFlow's only."
        )
    common.configure_threads(args.threads)
    run = common.header()
    rows = []
    for precision in args.precisions:
        for channels in (768, 1536):
            functions = op_functions(args.batch_size, channels, precision)
            times = common.alternate(functions, args.rounds)
            for row in ratios(times, ["fwd", "fwd+bwd"]):
                rows.append(
                    dict(row, precision=precision, shape=f"op {channels}")
                )
        if not args.no_model:
            functions = model_functions(args.batch_size, precision)
            times = common.alternate(functions, args.rounds)
            for row in ratios(times, ["train", "infer"]):
                rows.append(dict(row, precision=precision, shape="gmlp_ti16"))
    print(common.describe(run))
    columns = [
        "shape",
        "measure",
        "precision",
        "baseline_ms",
        "keras_gmlp_ms",
        "x_baseline",
        "rounds_min",
        "rounds_max",
    ]
    common.print_table(rows, columns)
    report = dict(run, rounds=args.rounds, batch_size=args.batch_size)
    report["rows"] = rows
    path = common.write_results(f"gelu_{run['backend']}", report)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
