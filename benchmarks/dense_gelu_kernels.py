"""Which oneDNN kernel runs TensorFlow's first projection and GELU, and
what the alternatives cost (inference, one half of the split projection).

Issue 12. A TensorFlow profile of gMLP-Ti/16 `mixed_bfloat16` inference
(batch 32, an idle 2-core Xeon with AVX-512, AVX512-BF16 and AMX) spent
245 of about 500 thread-ms of a 0.32 s step in `_MklNativeFusedMatMul`.
That is the product, bias and GELU that Grappler fuses in inference
(`keras_gmlp.layers.gelu.dense_gelu`): 61 calls of about 4 ms, each
0.62 GFLOP. The block's second product, a plain `MatMul` of the same
size, took 0.5 ms. `ONEDNN_VERBOSE=1` shows why:

- The fused kernel is oneDNN's `inner_product`. In bfloat16 its
  implementation is `x64:gemm:jit`, not AMX.
- A plain `MatMul` and a 3-D `BatchMatMulV2` run oneDNN's `matmul` as
  `brg_matmul:avx10_1_512_amx`.
- Grappler fuses any 2-D `MatMul` followed by a bias (`BiasAdd`, or an
  `AddV2` of a vector) into that `inner_product`, with or without the
  GELU.
- A 1x1 `Conv2D` with its bias runs `brgconv_1x1` on AMX. Grappler does
  not fuse a GELU into it, so TensorFlow's own GELU kernel runs after it.

The forms timed, each against `fused` (the package's form), on
`(batch, 196, channels)`:

- `fused`: the rows' `MatMul`, `BiasAdd` and exact GELU, as one oneDNN
  kernel.
- `product only`: the rows' `MatMul`, with no bias or GELU. This is a
  bound, not the same function.
- `product and bias`: the rows' `MatMul` and `BiasAdd`, as one oneDNN
  kernel. Not the same function either.
- `batched, xla gelu`: a 3-D `tf.matmul` (AMX), an `AddV2` and the
  block's XLA GELU.
- `conv, xla gelu`: a 1x1 `Conv2D` with its bias (AMX), then the XLA
  GELU.
- `xla gelu only`: the XLA GELU of an input of the output's shape.

Measured (the Xeon with AMX, batch 32, 15 rounds, ms, medians;
`dense_gelu_kernels_xeon_amx_tensorflow.json`), bfloat16:

| form | 128 -> 384 | 256 -> 768 |
|---|---|---|
| fused | 2.18 | 4.36 |
| product only | 0.80 | 1.74 |
| product and bias | 1.86 | 3.43 |
| batched, xla gelu | 2.83 | 5.57 |
| conv, xla gelu | 2.40 | 4.24 |
| xla gelu only | 1.61 | 2.79 |

Reading the table:

- On AMX, the product alone runs 2.0-2.3x faster than oneDNN's fused
  kernel with only the bias.
- oneDNN's `gelu_erf` epilogue costs 0.3-0.9 ms of the fused kernel.
- The XLA function's exact GELU costs 1.6-2.8 ms. TensorFlow's own
  `tf.nn.gelu` in bfloat16 is slower still: 10-24 ms in a scratch run.
- So the same function with the product on AMX is 0.77-0.80x as fast as
  the fused kernel (batched) or 0.90-1.00x (conv).

In float32 both alternatives run at 0.74-0.84x.

The fusion stays. TensorFlow's bf16 inference on AMX (0.67-0.83x timm in
`vision.py`) is bound by its exact GELU, not by the product. The fast
path would be a oneDNN `matmul` with a `gelu_erf` post-op, and
TensorFlow's graph optimiser does not produce one.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/dense_gelu_kernels.py
Results: benchmarks/results/dense_gelu_kernels<suffix>_tensorflow.json
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "fused"
WIDTHS = ((128, 384), (256, 768))
# The forms that compute the fused kernel's function (the others are bounds).
SAME_FUNCTION = (BASELINE, "batched, xla gelu", "conv, xla gelu")


def forms(batch_size, channels, units, dtype):
    """name -> `tf.function` without arguments: the forms above, on
    random inputs of `dtype` (a TensorFlow dtype)."""
    import numpy as np
    import tensorflow as tf

    from keras_gmlp.layers.gelu import _onednn_dense_gelu
    from keras_gmlp.layers.gelu import gelu

    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(batch_size, 196, channels)), dtype)
    kernel = tf.constant(0.1 * rng.normal(size=(channels, units)), dtype)
    bias = tf.constant(0.1 * rng.normal(size=(units,)), dtype)
    rows = tf.reshape(x, (-1, channels))
    expanded = tf.constant(rng.normal(size=(batch_size, 196, units)), dtype)

    def conv_xla_gelu():
        image = x[:, :, None, :]
        product = tf.nn.conv2d(image, kernel[None, None], 1, "VALID")
        return gelu(tf.nn.bias_add(product, bias)[:, :, 0, :])

    functions = {
        BASELINE: lambda: _onednn_dense_gelu(x, kernel, bias),
        "product only": lambda: tf.matmul(rows, kernel),
        "product and bias": lambda: tf.nn.bias_add(
            tf.matmul(rows, kernel), bias
        ),
        "batched, xla gelu": lambda: gelu(tf.matmul(x, kernel) + bias),
        "conv, xla gelu": conv_xla_gelu,
        "xla gelu only": lambda: gelu(expanded),
    }
    return {name: tf.function(f) for name, f in functions.items()}


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--precisions",
        nargs="+",
        default=["bfloat16", "float32"],
        choices=["bfloat16", "float32"],
    )
    parser.add_argument("--suffix", default="", help="results file suffix")
    args = parser.parse_args()
    common.require_backend("tensorflow", "it times TensorFlow's kernels")
    import numpy as np
    import tensorflow as tf

    run = common.header()
    rows = []
    for precision in args.precisions:
        for channels, units in WIDTHS:
            functions = forms(
                args.batch_size, channels, units, getattr(tf, precision)
            )
            reference = functions[BASELINE]().numpy().astype(np.float32)
            times = common.alternate(functions, args.rounds, target_s=0.2)
            for name, function in functions.items():
                outputs = function().numpy().astype(np.float32)
                pairs = zip(times[BASELINE], times[name], strict=True)
                per_round = [fused / form for fused, form in pairs]
                rows.append(
                    {
                        "shape": f"{channels}->{units}",
                        "precision": precision,
                        "form": name,
                        "ms": 1e3 * common.median(times[name]),
                        "x_fused": common.median(per_round),
                        "rounds_min": min(per_round),
                        "rounds_max": max(per_round),
                        "max_difference": (
                            float(np.abs(outputs - reference).max())
                            if name in SAME_FUNCTION
                            else None
                        ),
                    }
                )
    columns = ["shape", "precision", "form", "ms", "x_fused"]
    columns += ["rounds_min", "rounds_max", "max_difference"]
    common.finish_report(
        run,
        rows,
        columns,
        f"dense_gelu_kernels{args.suffix}_tensorflow",
        arguments=vars(args),
    )


if __name__ == "__main__":
    main()
