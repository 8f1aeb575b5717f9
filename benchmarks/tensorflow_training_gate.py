"""A/B under TensorFlow: the default training call of the spatial gating
unit through TensorFlow's own differentiation vs through the training
gate's XLA functions (`tensorflow_spatial_gate.training_gelu_gate` and,
in bfloat16, `training_normalized_gelu`).

Issue 12. A TensorFlow profiler trace of a float32 gMLP-S/16 training
step (batch 32, 2.5 s, an idle 2-core AMD EPYC with AVX-512), thread time
a step: oneDNN's `MatMul`s and `BatchMatMulV2`s 3,400 of 5,000 thread-ms,
at the CPU's matmul rate; the rest about 1,600. Of that, the gating after
the token product, `u * (W z + b)`, and its gradient were TensorFlow's
Eigen kernels, each a pass over `(batch, tokens, channels)`: the bias's
`AddV2` (0.8 ms a call), the gate's `Mul` (1.2 ms), the gradient's two
`Mul`s (0.7 ms each) and the bias gradient's `Sum` over the batch and
channels (1.9 ms), about 370 thread-ms a step. And TensorFlow kept for the
backward pass the first projection's halves after their biases, `u`,
`v`, the normalised `v`, the gate and the gated output: `3.5 f` values a
token for `f` expanded channels.

The candidate (`training_gate`, the package's) computes the gated half,
`gelu(hidden_u + bias_u) * (W z + b)`, in one XLA function and its
gradient (the GELU recomputed, the biases' sums included) in another, so
`u` and the gate are not kept; in bfloat16 the gate's input,
`LayerNorm(gelu(hidden_v + bias_v))`, is one more pair of functions, so
`v` is not kept either (`2.5 f` a token). The baseline (`tensorflow_ops`)
is the previous code (`SpatialGatingUnit.takes_tensorflow_training_gate`
false).

Both models in one process: `model` rows, a gMLP-Ti/16 (or `--model`)
classifier's `train_on_batch` (AdamW, 224 px), in interleaved rounds
(`common.alternate`), `x tensorflow_ops` the baseline's seconds over the
candidate's (above 1: faster). The forms keep different tensors, so each
change was also timed in pairs of processes of their own (the log,
`benchmarks/README.md`, stop 47).

Usage:
    KERAS_BACKEND=tensorflow \\
        python benchmarks/tensorflow_training_gate.py --batch-size 32
Results: benchmarks/results/tensorflow_training_gate_tensorflow.json
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "tensorflow_ops"
CANDIDATE = "training_gate"
PRECISIONS = ("float32", "mixed_bfloat16")


@contextlib.contextmanager
def variant(name):
    """A context in which the units traced train the `name` way."""
    from keras_gmlp.layers import SpatialGatingUnit

    if name == CANDIDATE:
        yield
        return
    with common.patched(
        SpatialGatingUnit,
        "takes_tensorflow_training_gate",
        lambda self, hidden: False,
    ):
        yield


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "tensorflow_training_gate",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "tensorflow",
        variant,
        infer=False,
    )
