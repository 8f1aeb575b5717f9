"""A/B under TensorFlow: the first projection's bias gradient summed by
TensorFlow's `Sum` vs inside the GELU's gradient function
(`keras_gmlp.layers.gelu.biased_gelu`).

Issue 12. Found with TensorFlow's profiler (xplane, per op, one gMLP-Ti/16
training step at batch 32, an idle 2-core Xeon with AVX-512, AVX512-BF16
and AMX): after the matmuls and the XLA functions, the largest kernels
were TensorFlow's own element-wise ops, and among them the `Sum`s of the
bias adds' gradients: 60 a step over `(32, 196, 384)`, the two halves of
each block's first projection, 123 thread-ms (float32) and 67
(mixed_bfloat16), about 2 and 1.1 ms a call.

The baseline (`sum_kernel`) is the previous code, `gelu(bias_add(x,
bias))`, whose bias gradient is TensorFlow's `Sum` of the GELU's input
gradient; the candidate (`fused_sum`) is the package's `biased_gelu`,
whose XLA gradient function writes that input gradient and sums it (in
float32, `column_sum`) in the same function. Two measures, each in
interleaved rounds (`common.alternate`), `x sum_kernel` the baseline's
seconds over the candidate's (above 1: faster):

- `op`: the biased GELU of a `(batch, 196, channels)` tensor with its
  gradients, in a `tf.function`, at gMLP-Ti's (384) and gMLP-S's (768)
  half widths.
- `model`: a gMLP-Ti/16 classifier's `train_on_batch` (AdamW, 224 px),
  one model traced with each.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/gelu_bias_gradient.py \\
        --batch-size 32
Results: benchmarks/results/gelu_bias_gradient_tensorflow.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "sum_kernel"
CANDIDATE = "fused_sum"
PRECISIONS = ("float32", "mixed_bfloat16")


def unfused_biased_gelu(x, bias):
    """The previous form: the GELU of `bias_add`'s sum."""
    from keras_gmlp.layers.bias_add import bias_add
    from keras_gmlp.layers.gelu import gelu

    return gelu(bias_add(x, bias))


def variant(name):
    """A context in which the blocks traced take the `name` form."""
    from keras_gmlp.layers import gelu as module

    function = unfused_biased_gelu if name == BASELINE else module.biased_gelu
    return common.patched(module, "biased_gelu", function)


def biased_gelu_op_functions(variant, names):
    """A function of `(batch_size, precision)` returning name -> warm
    callable: `keras_gmlp.layers.gelu.biased_gelu` and its gradients per
    width, traced inside `variant(name)` for each of `names`."""

    def op_functions(batch_size, precision):
        import keras
        import numpy as np
        import tensorflow as tf

        from keras_gmlp.layers import gelu as module

        dtype = "bfloat16" if precision == "mixed_bfloat16" else "float32"
        rng = np.random.default_rng(0)
        functions = {}
        for channels in (384, 768):
            shape = (batch_size, 196, channels)
            x = tf.constant(rng.normal(size=shape), dtype)
            bias = tf.constant(rng.normal(size=channels), dtype)
            upstream = tf.constant(rng.normal(size=shape), dtype)
            for name in names:

                @tf.function
                def step(x, bias, upstream):
                    with tf.GradientTape() as tape:
                        tape.watch([x, bias])
                        y = module.biased_gelu(x, bias)
                    return tape.gradient(y, [x, bias], upstream)

                with variant(name):
                    step(x, bias, upstream)
                operands = (x, bias, upstream)
                functions[f"op {channels} {name}"] = (
                    lambda step=step, operands=operands: [
                        keras.ops.convert_to_numpy(g) for g in step(*operands)
                    ]
                )
        return functions

    return op_functions


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "gelu_bias_gradient",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "tensorflow",
        variant,
        op_functions=biased_gelu_op_functions(variant, (BASELINE, CANDIDATE)),
        infer=False,
    )
