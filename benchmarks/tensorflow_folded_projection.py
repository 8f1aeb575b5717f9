"""A/B under TensorFlow: the gMLP block's second projection after the
training gate (Keras' Dense, differentiated by TensorFlow) vs folded into
the gate's custom gradient (`tensorflow_spatial_gate.training_gelu_gate`
with `kernel`).

Issue 12, peak training memory. After the training gate (stop 47,
`tensorflow_training_gate.py`) TensorFlow still kept, for each block, the
gated output `u * (W z + b)`: the second projection's `MatMul` gradient
reads it for the kernel's gradient. That is `0.5 f` values a token for `f`
expanded channels, 9.6 MB a gMLP-Ti/16 block at batch 32 in float32 (30
blocks: 289 MB). The candidate (`folded`, the package's) runs the
projection's product inside the gate's `tf.custom_gradient`; its backward
pass's XLA function, which recomputes `u` anyway, writes the gated output
again for the kernel's gradient, so only the gate's inputs are kept. The
baseline (`dense_after_gate`) is the previous code (the projection not
folded: `spatial_gating_unit._plain_dense` false for it).

Both models in one process: `model` rows, a gMLP-Ti/16 (or `--model`)
classifier's `train_on_batch` (AdamW, 224 px), or with `--masked-lm` the
masked-LM recipe's `gmlp_tiny` step at `--lengths` (`masked_lm_speed.
variant_ab`), in interleaved rounds (`common.alternate`), `x
dense_after_gate` the baseline's seconds over the candidate's (above 1:
faster). The memory is `memory.py`'s, the previous
code measured from a checkout of it (the log, `benchmarks/README.md`,
stop 57).

Usage:
    KERAS_BACKEND=tensorflow \\
        python benchmarks/tensorflow_folded_projection.py --batch-size 32
    KERAS_BACKEND=tensorflow \\
        python benchmarks/tensorflow_folded_projection.py --masked-lm
Results: benchmarks/results/tensorflow_folded_projection[_masked_lm]_
tensorflow.json
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "dense_after_gate"
CANDIDATE = "folded"
PRECISIONS = ("float32", "mixed_bfloat16")


@contextlib.contextmanager
def variant(name):
    """A context in which the units traced train the `name` way."""
    from keras_gmlp.layers import spatial_gating_unit

    if name == CANDIDATE:
        yield
        return
    with common.patched(
        spatial_gating_unit, "_plain_dense", lambda layer: False
    ):
        yield


def main():
    from benchmarks import masked_lm_speed

    name = "tensorflow_folded_projection"
    if masked_lm_speed.MASKED_LM_FLAG not in sys.argv[1:]:
        common.run_ab(
            __doc__,
            name,
            BASELINE,
            CANDIDATE,
            PRECISIONS,
            "tensorflow",
            variant,
            infer=False,
        )
        return
    sys.argv.remove(masked_lm_speed.MASKED_LM_FLAG)
    args = masked_lm_speed.variant_parser(__doc__, [128, 512]).parse_args()
    common.require_backend("tensorflow", f"{name} measures TensorFlow's code.")
    masked_lm_speed.variant_ab(
        variant,
        BASELINE,
        CANDIDATE,
        args,
        f"{name}_masked_lm{args.suffix}_{{backend}}",
    )


if __name__ == "__main__":
    main()
