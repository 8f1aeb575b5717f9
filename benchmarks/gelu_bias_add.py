"""A/B under TensorFlow: the biased GELU's bias added by TensorFlow's
`AddV2` vs inside its XLA functions (`keras_gmlp.layers.gelu.biased_gelu`).

Issue 12. After the training gate (`benchmarks/tensorflow_training_gate.py`)
a float32 step still runs the first projection's `v` half through
`biased_gelu`, whose custom gradient added the bias with a TensorFlow
`AddV2` (a pass over `(batch, tokens, channels / 2)` written out and
kept), then took the GELU and its gradient of that sum in XLA functions.
The candidate (`xla_add`, the package's) adds the bias inside the GELU's
forward function and again inside its gradient function, keeping the
product before the bias instead of the sum (the same size). The baseline
(`tensorflow_add`) is the previous form. Two measures, each in
interleaved rounds (`common.alternate`), `x tensorflow_add` the
baseline's seconds over the candidate's (above 1: faster):
- `op`: the biased GELU of a `(batch, 196, channels)` tensor with its
  gradients, in a `tf.function`, at gMLP-Ti's (384) and gMLP-S's (768)
  half widths.
- `model`: a gMLP-Ti/16 (or `--model`) classifier's `train_on_batch`
  (AdamW, 224 px), one model traced with each.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/gelu_bias_add.py \\
        --batch-size 32
Results: benchmarks/results/gelu_bias_add_tensorflow.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks.gelu_bias_gradient import biased_gelu_op_functions  # noqa: E402

BASELINE = "tensorflow_add"
CANDIDATE = "xla_add"
PRECISIONS = ("float32", "mixed_bfloat16")


def added_biased_gelu(x, bias):
    """The previous form: TensorFlow's add, then the GELU's functions."""
    import tensorflow as tf

    from keras_gmlp.layers.gelu import _tensorflow_gelu

    functions = _tensorflow_gelu()

    @tf.custom_gradient
    def biased_gelu(x, bias):
        hidden = x + bias

        def gradient(upstream):
            return functions.backward_with_bias(hidden, upstream)

        return functions.forward(hidden), gradient

    return biased_gelu(tf.convert_to_tensor(x), tf.convert_to_tensor(bias))


def variant(name):
    """A context in which the layers traced take the `name` form."""
    from keras_gmlp.layers.gelu import _tensorflow_gelu

    functions = _tensorflow_gelu()
    form = added_biased_gelu if name == BASELINE else functions.biased
    return common.patched(functions, "biased", form)


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "gelu_bias_add",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "tensorflow",
        variant,
        op_functions=biased_gelu_op_functions(variant, (BASELINE, CANDIDATE)),
        infer=False,
    )
