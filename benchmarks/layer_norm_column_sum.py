"""A/B under TensorFlow: the LayerNorm's gamma and beta gradients summed
in one reduction vs in two stages (`layer_normalization.column_sum`).

Issue 12. Found with TensorFlow's profiler (xplane, per op, a gMLP-Ti/16
training step, batch 8, an idle 2-core Xeon with AVX-512, AVX512-BF16
and AMX): the XLA functions of `keras_gmlp.layers.LayerNormalization`
spent 44 ms (float32) and 78 ms (mixed_bfloat16) of thread time a step
in `reduce-window` kernels: the sums of the gamma and beta gradients over
the `batch x tokens` rows, which XLA:CPU splits into a reduce-window and
a reduce. Those two sums over `(8, 196, 768)` took 1.8-3.2 ms in
TensorFlow's XLA function, 1.1-1.4 ms as TensorFlow kernels outside XLA
(JAX's newer XLA: 0.12 ms a sum); with the interleaved row blocks added
first (`column_sum`, 8 blocks) 0.9 ms.

The baseline (`one_reduction`) is the previous code, `tf.reduce_sum`
over every axis but the last; the candidate is the package's
`column_sum`. Two measures, each in interleaved rounds
(`common.alternate`), `x one_reduction` the baseline's seconds over the
candidate's (above 1: faster):

- `op`: `LayerNormalization` of a `(batch, 196, channels)` tensor with
  its three gradients, in a `tf.function`, at gMLP-Ti's (128, 384) and
  gMLP-S's (256, 768) widths.
- `model`: a gMLP-Ti/16 classifier's `train_on_batch` (AdamW, batch 8,
  224 px), one model traced with each.

Measured (the same Xeon, idle but for this run, batch 8, 5 rounds,
medians, the rounds' range in brackets;
`layer_norm_column_sum_tensorflow.json`), x one_reduction:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| LayerNorm fwd+bwd, 128 / 384 channels | 1.13 / 1.19 | 1.18 / 1.21 |
| LayerNorm fwd+bwd, 256 / 768 channels | 1.14 / 1.32 | 1.10 / 1.28 |
| gMLP-Ti train step | 1.05 (0.97-1.05) | 1.10 (1.06-1.14) |

The same profile (float32 and bf16 gMLP-Ti steps, TensorFlow) led to two
changes tried and dropped, each measured as a patched model in separate
processes, two runs each, median of 6 steps: the Dense layers as a 2-D
`MatMul` and `BiasAdd` (which grappler fuses) instead of Keras'
`Tensordot` and `BiasAdd`: train 0.92-1.03x float32, 0.92-0.97x bf16;
the unit's `Split` of its input replaced by two slices: inference
1.03-1.07x, training 0.83-0.88x (`StridedSliceGrad` is slow).

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/layer_norm_column_sum.py
Results: benchmarks/results/layer_norm_column_sum_tensorflow.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "one_reduction"
CANDIDATE = "column_sum"
PRECISIONS = ("float32", "mixed_bfloat16")


def one_reduction(x):
    """The previous sum: one `tf.reduce_sum` over every axis but the
    last."""
    import tensorflow as tf

    return tf.reduce_sum(x, axis=list(range(len(x.shape) - 1)))


def variant(name):
    """A context in which the LayerNorms traced sum their gamma and beta
    gradients the `name` way."""
    from keras_gmlp.layers import layer_normalization as module

    functions = module._tensorflow_layer_norm
    sum_rows = one_reduction if name == BASELINE else module.column_sum
    return common.patched(
        module, "_tensorflow_layer_norm", lambda: functions(sum_rows)
    )


def op_functions(batch_size, precision):
    """name -> warm callable: a LayerNorm and its gradients per width."""
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_gmlp.layers import LayerNormalization

    rng = np.random.default_rng(0)
    functions = {}
    for channels in (128, 384, 256, 768):
        shape = (batch_size, 196, channels)
        x = tf.constant(rng.normal(size=shape), "float32")
        upstream = tf.constant(rng.normal(size=shape), "float32")
        for name in (BASELINE, CANDIDATE):
            layer = LayerNormalization(epsilon=1e-6, dtype=precision)
            layer.build(shape)

            @tf.function
            def step(x, upstream, layer=layer):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = tf.cast(layer(x), "float32")
                return tape.gradient(
                    y, [x, layer.gamma.value, layer.beta.value], upstream
                )

            with variant(name):
                step(x, upstream)
            functions[f"op {channels} {name}"] = (
                lambda step=step, x=x, upstream=upstream: [
                    keras.ops.convert_to_numpy(g) for g in step(x, upstream)
                ]
            )
    return functions


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "layer_norm_column_sum",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "tensorflow",
        variant,
        op_functions=op_functions,
        infer=False,
    )
