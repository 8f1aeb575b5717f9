"""A/B under TensorFlow: the recomputing gate with the first projection's
bias gradients summed by TensorFlow's `Sum` vs in its own gradient
functions (`hidden_biases`).

Issue 12. The gMLP block's default TensorFlow training path sums the
first projection's bias gradients inside the GELU's gradient function
(`keras_gmlp.layers.gelu.biased_gelu`, `benchmarks/gelu_bias_gradient.py`).
The recomputing gate (`keras_gmlp.layers.tensorflow_spatial_gate`, for
blocks made under `keras.RematScope(mode="activations")`) applies that
GELU itself: the block hands it the halves' products and biases
(`keras_gmlp.layers.gelu.split_products`), and its gradient functions
(the gated half's, and the GELU's of `v`) write the halves' gradients and
sum them in the same function.

The baseline (`sum_kernel`) is the previous code: the block adds the
biases (`split_dense`) and TensorFlow sums their gradients; the candidate
(`fused_sum`) is the package's. Both are the recomputing gate: the
models are traced with `SpatialGatingUnit.rematerializes_activations`
set, as under the scope. The gate keeps the same tensors either way, so
one process holds both models. `model`: a gMLP-Ti/16 (or `--model`)
classifier's `train_on_batch` (AdamW, 224 px), in interleaved rounds
(`common.alternate`), `x sum_kernel` the baseline's seconds over the
candidate's (above 1: faster).

Usage:
    KERAS_BACKEND=tensorflow \\
        python benchmarks/tensorflow_gate_bias_gradient.py --batch-size 32
Results: benchmarks/results/tensorflow_gate_bias_gradient_tensorflow.json
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "sum_kernel"
CANDIDATE = "fused_sum"
PRECISIONS = ("float32", "mixed_bfloat16")


def unbiased_products(dense, inputs):
    """The previous form: the halves with their biases added
    (`split_dense`), none left to the gate."""
    from keras_gmlp.layers.gelu import split_dense

    return split_dense(dense, inputs), None


@contextlib.contextmanager
def variant(name):
    """A context in which the blocks traced take the recomputing gate, the
    `name` way."""
    from keras_gmlp.layers import SpatialGatingUnit
    from keras_gmlp.layers import gmlp_block

    with contextlib.ExitStack() as stack:
        stack.enter_context(
            common.patched(
                SpatialGatingUnit,
                "rematerializes_activations",
                property(lambda self: True),
            )
        )
        if name == BASELINE:
            stack.enter_context(
                common.patched(gmlp_block, "split_products", unbiased_products)
            )
        yield


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "tensorflow_gate_bias_gradient",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "tensorflow",
        variant,
        infer=False,
    )
