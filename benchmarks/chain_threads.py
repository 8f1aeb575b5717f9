"""A/B under TensorFlow: every op on all the cores (TensorFlow's default)
vs each on its chain's share (`keras_gmlp.training
.share_cores_between_chains`).

Issue 12 (MFU, TensorFlow's vision rows). Found in a TensorFlow profile
of a float32 gMLP-S/16 training step (batch 32, an idle 2-core AMD EPYC
with AVX-512, read with `jax.profiler.ProfileData`): the image backbone
runs its blocks as two chains over the halves of the batch
(`keras_gmlp.models.batch_chains`), so two of oneDNN's products, or an
XLA function and a product, run at once, each on both intra-op threads:
four threads on two cores. The profile cannot show the cost (an op's
event spans its waits too); the masked LM's token product gradients,
one chain but two independent products, took 4.4-5.8 ms each in its
step where alone (`tf.function`, same shapes) they take 2.4-2.7.
With one intra-op thread per op each chain has a core.

TensorFlow fixes its thread pools when its runtime starts, so each form
runs in processes of its own: the baseline (`all_cores`) with
`KERAS_GMLP_SHARE_CORES=0`, the candidate (`shared_cores`) calling
`share_cores_between_chains()` first, as the `keras-gmlp` command and
the recipes do. Each round starts one process per form and
measure, the forms' order alternating between rounds; a process builds
the model, warms it up and reports its median step (`common
.measured_step`: batch 32, 224 px; the masked LM `gmlp_tiny` with 4,096
tokens). `x all_cores` is the median over the rounds of the baseline's
step over the candidate's (above 1: faster). Both forms run with
`prefer_wide_vectors()` (since stop 60 `skip_ynn_fusions()` too), as
the jobs do.

Measured on d02b88c plus this change (an idle 2-core AMD EPYC, family
26, with AVX-512 and AVX512-BF16; 3 rounds, 4 steps a process, 32 for
the masked LM; `chain_threads_epyc26_stop50_tensorflow.json`), x
all_cores:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| gMLP-Ti/16 train | 1.06 (1.03-1.10) | 1.15 (1.11-1.17) |
| gMLP-S/16 train | 1.05 (1.05-1.09) | 1.07 (1.04-1.07) |
| gMLP-Ti/16 inference | 1.04 (1.00-1.04) | |
| gMLP-S/16 inference | | 0.97 (0.92-0.99) |
| masked LM, n = 128 / 512, one chain | 0.95 (0.93-0.99) / 0.90 (0.89-0.96) | |

The masked LM's text backbone was one chain then. Since it runs as two
chains where the cores are shared (`batch_chains.chains_fit_the_cores`;
5 rounds, 5 x 8 steps a process,
`chain_threads_masked_lm_chains_epyc26_stop50_tensorflow.json`): **1.07**
(1.01-1.09) at n = 128, **1.04** (1.03-1.08) at 512. Every training job
shares the cores.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/chain_threads.py
Results: benchmarks/results/chain_threads_tensorflow.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "all_cores"
CANDIDATE = "shared_cores"
MEASURES = [
    "image gmlp_ti16_224 float32 train",
    "image gmlp_ti16_224 mixed_bfloat16 train",
    "image gmlp_s16_224 float32 train",
    "image gmlp_s16_224 mixed_bfloat16 train",
    "image gmlp_ti16_224 float32 infer",
    "image gmlp_s16_224 mixed_bfloat16 infer",
    "masked_lm 128",
    "masked_lm 512",
]


def worker(form, measure, steps):
    """Times `measure` in this process, in `form`."""
    common.threads_worker(measure, form == CANDIDATE, steps)


def timed_process(form, measure, steps):
    """The median step (seconds) of `measure` in a fresh process in
    `form`."""
    return common.threads_process(
        __file__, form, measure, steps, form == CANDIDATE
    )


def main():
    common.process_ab_main(
        __doc__,
        "chain_threads",
        (BASELINE, CANDIDATE),
        MEASURES,
        worker,
        timed_process,
        "tensorflow",
        "the intra-op threads are TensorFlow's.",
    )


if __name__ == "__main__":
    main()
