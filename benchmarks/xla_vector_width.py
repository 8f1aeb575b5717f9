"""A/B under TensorFlow: XLA:CPU's XLA functions with 256-bit vectors
(its default) vs 512-bit ones (`keras_gmlp.training.prefer_wide_vectors`).

Issue 12 (MFU, bfloat16 training, the masked-LM targets). After the
norms' means became products (`layer_norm_row_mean.py`), a float32
gMLP-S/16 TensorFlow step (batch 32, an idle 2-core AMD EPYC with
AVX-512) spent about 890 of 4,980 thread-ms in the XLA functions'
element-wise fusions: the GELUs (an erfc polynomial per value), the
norms and the training gate. XLA:CPU writes them with 256-bit vectors
unless `--xla_cpu_prefer_vector_width=512` is in `XLA_FLAGS`, which
XLA reads once per process: so each form runs in processes of its own.

The baseline (`vector_256`) runs with `KERAS_GMLP_WIDE_VECTORS=0`; the
candidate (`vector_512`) calls `prefer_wide_vectors()` first, as the
`keras-gmlp` command and the recipes do. Each round starts one process
per form and measure, the forms' order alternating between rounds; a
process builds the model, warms it up and reports its median step.
`x vector_256` is the median over the rounds of the baseline's step
over the candidate's (above 1: faster). Measures:

- `image <model> <policy>`: an image classifier's `train_on_batch`
  (AdamW, batch 32, 224 px);
- `masked_lm <n>`: the gMLP masked LM's training step (`gmlp_tiny`,
  4,096 tokens, `masked_lm_speed.py`'s recipe).

Measured at df85493 (an idle 2-core AMD EPYC, family 26, with AVX-512
and AVX512-BF16; 3 rounds, 5 steps a process, 40 for the masked LM;
`xla_vector_width_epyc26_stop49_tensorflow.json`), x vector_256:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| gMLP-Ti/16 train | 1.07 (1.07-1.10) | 0.99 (0.95-1.01) |
| gMLP-S/16 train | 1.04 (0.98-1.06) | 1.02 (1.01-1.04) |
| masked LM, n = 128 / 512 | 1.05 (1.03-1.17) / 1.01 (0.96-1.04) | |

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/xla_vector_width.py
Results: benchmarks/results/xla_vector_width_tensorflow.json
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "vector_256"
CANDIDATE = "vector_512"
IMAGE_MEASURES = [
    "image gmlp_ti16_224 float32",
    "image gmlp_ti16_224 mixed_bfloat16",
    "image gmlp_s16_224 float32",
    "image gmlp_s16_224 mixed_bfloat16",
]


def worker(form, measure, steps):
    """Times `measure` in this process, in `form`; prints its median step
    in seconds as JSON."""
    from keras_gmlp.training import prefer_wide_vectors

    wide = form == CANDIDATE and prefer_wide_vectors()
    seconds = common.median_step_seconds(common.measured_step(measure), steps)
    flags = os.environ.get("XLA_FLAGS", "")
    print(json.dumps(dict(seconds=seconds, wide=wide, flags=flags)))


def timed_process(form, measure, steps):
    """The median step (seconds) of `measure` in a fresh process in
    `form`."""
    env = dict(os.environ)
    if form == BASELINE:
        env["KERAS_GMLP_WIDE_VECTORS"] = "0"
    report = common.worker_report(
        __file__, form, measure, steps, env, restarted=common.RESTARTED_WORKERS
    )
    if report["wide"] != (form == CANDIDATE):
        raise RuntimeError(
            f"{form} {measure}: the process ran with XLA_FLAGS="
            f"{report['flags']!r}; this CPU or environment does not take "
            "the wide vectors."
        )
    return report["seconds"]


def main():
    common.process_ab_main(
        __doc__,
        "xla_vector_width",
        (BASELINE, CANDIDATE),
        IMAGE_MEASURES + ["masked_lm 128", "masked_lm 512"],
        worker,
        timed_process,
        "tensorflow",
        "the wide vectors are for TensorFlow's XLA functions.",
    )


if __name__ == "__main__":
    main()
