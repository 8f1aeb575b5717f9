"""A/B under TensorFlow: the image backbone's blocks as one chain of ops
over the batch (`one_chain`, the previous form) vs two chains, one per
half of the batch (`two_chains`, `keras_gmlp.models.batch_chains`).

Issue 12. Found with TensorFlow's profiler (xplane, per thread, one
`mixed_bfloat16` gMLP-S/16 `predict_on_batch` at batch 32, an idle 2-core
Xeon with AVX-512, AVX512-BF16 and AMX, after the bfloat16 inference
gate): of a 755 ms step, one of the executor's two inter-op threads was
busy 590 ms, 348 of them running the XLA functions; the other 290 ms;
the two intra-op threads 85-95 ms each. A gMLP block is a chain of ops,
each waiting for the one before, so the executor has one op to run at a
time; the XLA functions spread part of their work over the intra-op
threads, the rest runs on the calling thread. Each half of the batch is
an independent chain (the blocks mix tokens within an image, never
across images), which the executor runs beside the other's. A scratch
run (the blocks on 1, 2 or 4 parts, custom steps, gMLP-Ti/16 bfloat16)
put 4 parts behind 2: inference 1.02x against 1.12x, training 0.92x
against 1.00x.

Measured per model (the `--model` flag), `x one_chain` the baseline's
seconds over the candidate's (above 1: faster), interleaved rounds
(`common.alternate`).

The text backbone kept one chain then (since stop 50 it runs two where
TensorFlow's ops share the cores, `chain_threads.py`; since stop 51
under JAX, `jax_text_chains.py`): the same two chains there (a scratch
A/B of the `gmlp_tiny` masked LM's training step, `masked_lm_speed`'s
`variant_ab`, 5 rounds) ran 0.99x (0.96-1.08) at n = 128 (batch 32) and
0.95x (0.93-1.01) at 512 (batch 8): its ops are small, and half of them
smaller still.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/batch_chains.py \\
        --batch-size 32 --model gmlp_s16_224
Results: benchmarks/results/batch_chains_tensorflow.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "one_chain"
CANDIDATE = "two_chains"
PRECISIONS = ("float32", "mixed_bfloat16")


def one_chain(inputs):
    """The previous form: the functional graph's call, always."""
    return False


def variant(name):
    """A context in which the backbones traced take the `name` form."""
    from keras_gmlp.models import gmlp_image_backbone as module

    function = one_chain if name == BASELINE else module.runs_batch_chains
    return common.patched(module, "runs_batch_chains", function)


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "batch_chains",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "tensorflow",
        variant,
    )
