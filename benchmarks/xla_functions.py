"""A/B: the gMLP block's GELU and LayerNorms, TensorFlow's kernels vs XLA
functions.

Issue 12. Under TensorFlow (`jit_compile` auto is False there: the steps
run as graphs of separate kernels), `keras_gmlp.layers.gelu.gelu` computes
the block's exact GELU as `0.5 x erfc(-x / sqrt(2))` and
`keras_gmlp.layers.LayerNormalization` its normalisation and affine map,
each as an XLA-compiled function (float32 at least) with closed-form
gradients in another. The baseline is the same code under
`keras_gmlp.layers.xla_functions.portable_ops()`, as exports trace it:
TensorFlow's `tf.nn.gelu` and Keras' LayerNormalization.

Found with a per-op timing of the block's pieces (8 x 196 x 768, gMLP-Ti's
expansion, in a `tf.function`): TensorFlow's GELU took 2.2-2.5 ms in
float32 and 4.5-5.0 ms in bfloat16, more than the block's first projection
(1.4 / 0.7 ms through oneDNN; `erf` alone 0.84 / 0.99 ms, the rest is the
elementwise ops around it, each a pass over memory, the bfloat16 ones
without a vector kernel), and Keras' LayerNorm 0.9-1.1 ms at 128 channels
and 1.6-1.9 ms at 384 forward: together more than a third of a gMLP-Ti
float32 inference step and more than half of a bfloat16 one.

Two measures, each in interleaved rounds (`common.alternate`), the figure
`x baseline` the baseline's seconds over the XLA functions' (above 1:
faster):

- `op`: the GELU and a LayerNormalization of a `(batch, 196, channels)`
  tensor in a `tf.function`, forward (`fwd`) and forward plus the
  gradients (`fwd+bwd`), at 768 and 1536 channels.
- `model`: a gMLP-Ti/16 classifier's `train_on_batch` and
  `predict_on_batch` (`common.build_image_classifier`, AdamW, batch 8,
  224 px): two models, each traced in one variant.

Measured (an idle 2-core Xeon with AVX-512, AVX512-BF16 and AMX, batch 8,
5 rounds, medians, rounds' range in brackets;
`xla_functions_tensorflow.json`), x baseline:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| GELU fwd, 768 / 1536 channels | 2.03 / 2.30 | 3.95 / 4.87 |
| GELU fwd+bwd, 768 / 1536 | 2.11 / 2.36 | 3.46 / 3.92 |
| LayerNorm fwd, 768 / 1536 | 1.98 / 2.30 | 1.75 / 1.95 |
| LayerNorm fwd+bwd, 768 / 1536 | 1.31 / 1.30 | 1.17 / 1.13 |
| gMLP-Ti train step | 1.19 (1.17-1.22) | 1.54 (1.44-1.58) |
| gMLP-Ti inference step | 1.18 (1.12-1.24) | 1.78 (1.71-1.92) |

The same run with the GELU alone (this script at cc0da28, then
`benchmarks/gelu.py`; `gelu_tensorflow.json`): train 1.05 / 1.30,
inference 1.05 / 1.47 (float32 / bfloat16). The models gain less than
the ops' times promise: in the whole graph TensorFlow overlaps part of
these ops with others, and each XLA call has a launch cost. Against timm
(`vision.py`, the same machine, gMLP-Ti, 3 rounds; results
`vision_gmlp_ti16_224_xeon_amx.json` before, `_xeon_amx_xla_gelu.json`
with the GELU alone, `_xeon_amx_xla_functions.json` with both),
TensorFlow's train / inference x timm went from 0.97 / 0.81 to 1.06 / 0.86
and then 1.19 / 0.97 in float32, and from 0.65 / 0.49 to 0.87 / 0.73 and
then 1.01 / 1.00 in bfloat16 (timm under autocast).
(Those x timm figures had timm under `OMP_WAIT_POLICY=PASSIVE`, 1.3-1.4x
slower than its default: see `vision.py`. The A/B ratios above stand.)

The outputs differ by float32 rounding only (the same formulas): the tests
that pin outputs (timm parity) pass unchanged.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/xla_functions.py --rounds 5
Results: benchmarks/results/xla_functions_tensorflow.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "tensorflow"
CANDIDATE = "xla"
PRECISIONS = ("float32", "mixed_bfloat16")


def ops_of_variant(variant, channels):
    """name -> function of `x`: the GELU and a LayerNormalization (scale
    and center random), under `portable_ops()` for the baseline."""
    import numpy as np

    from keras_gmlp.layers import LayerNormalization
    from keras_gmlp.layers.gelu import gelu
    from keras_gmlp.layers.xla_functions import portable_ops

    norm = LayerNormalization(epsilon=1e-6)
    norm.build((None, 196, channels))
    rng = np.random.default_rng(0)
    for weight in norm.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32"))

    def switched(function):
        def call(x):
            if variant == BASELINE:
                with portable_ops():
                    return function(x)
            return function(x)

        return call

    return {"gelu": switched(gelu), "layer_norm": switched(norm)}


def op_functions(batch_size, channels, precision):
    """name -> warm callable: each op of each variant, forward and forward
    + backward (the input's gradient, and the LayerNorm's weights')."""
    import tensorflow as tf

    dtype = "float32" if precision == "float32" else "bfloat16"
    x = tf.cast(
        tf.random.stateless_normal((batch_size, 196, channels), (0, 1)), dtype
    )
    functions = {}
    for variant in (BASELINE, CANDIDATE):
        for op, function in ops_of_variant(variant, channels).items():
            forward = tf.function(function)

            def both(x, function=function):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = function(x)
                return y, tape.gradient(y, x, output_gradients=y)

            both = tf.function(both)
            functions[f"{op} fwd {variant}"] = lambda f=forward: f(x)
            functions[f"{op} fwd+bwd {variant}"] = lambda f=both: f(x)
    for function in functions.values():
        function()
    return functions


def model_functions(batch_size, precision):
    """name -> warm callable: a gMLP-Ti step traced in each variant."""
    from keras_gmlp.layers.xla_functions import portable_ops

    images, labels = common.random_image_batch(batch_size, 224)
    functions = {}
    for variant in (BASELINE, CANDIDATE):
        model = common.build_image_classifier(
            "gmlp_ti16_224", 224, "auto", precision
        )
        # Trace both steps now: the traced graphs keep their ops.
        if variant == BASELINE:
            with portable_ops():
                model.train_on_batch(images, labels)
                model.predict_on_batch(images)
        else:
            model.train_on_batch(images, labels)
            model.predict_on_batch(images)
        functions[f"train {variant}"] = lambda m=model: m.train_on_batch(
            images, labels
        )
        functions[f"infer {variant}"] = lambda m=model: m.predict_on_batch(
            images
        )
    return functions


def ratios(times, measures):
    """Rows: the baseline's median seconds over the XLA functions'."""
    return [
        dict(
            common.ab_row(
                times[f"{measure} {BASELINE}"],
                times[f"{measure} {CANDIDATE}"],
                "baseline",
                "xla",
            ),
            measure=measure,
        )
        for measure in measures
    ]


def main():
    parser = common.ab_benchmark_parser(__doc__, PRECISIONS)
    parser.add_argument(
        "--no-model", action="store_true", help="the op measures only"
    )
    args = parser.parse_args()
    common.require_backend("tensorflow", "the XLA functions are TensorFlow's.")
    common.configure_threads(args.threads)
    run = common.header()
    rows = []
    for precision in args.precisions:
        for channels in (768, 1536):
            functions = op_functions(args.batch_size, channels, precision)
            times = common.alternate(functions, args.rounds)
            measures = [
                f"{op} {way}"
                for op in ("gelu", "layer_norm")
                for way in ("fwd", "fwd+bwd")
            ]
            for row in ratios(times, measures):
                rows.append(
                    dict(row, precision=precision, shape=f"op {channels}")
                )
        if not args.no_model:
            functions = model_functions(args.batch_size, precision)
            times = common.alternate(functions, args.rounds)
            for row in ratios(times, ["train", "infer"]):
                rows.append(dict(row, precision=precision, shape="gmlp_ti16"))
    columns = common.ab_columns("baseline", "xla")
    common.finish_report(
        run,
        rows,
        columns,
        f"xla_functions{args.suffix}_{run['backend']}",
        rounds=args.rounds,
        batch_size=args.batch_size,
    )


if __name__ == "__main__":
    main()
