"""A/B under TensorFlow: XLA:CPU's YNNPACK fusions (its default) vs none
(`keras_gmlp.training.skip_ynn_fusions`).

Issue 12 (the jobs' speed) and a crash. TensorFlow 2.21's XLA:CPU hands
some reductions of the XLA functions (a masked LM's loss over the
vocabulary, the bias gradients' sums) to YNNPACK, and about one
TensorFlow masked-LM process in 30 on an AMD EPYC of family 25 died in
building those fusions (stop 59). `--xla_cpu_experimental_ynn_fusion_type=`
in `XLA_FLAGS`, which XLA reads once per process, turns them off: so
each form runs in processes of its own.

Both forms run as the jobs do, after `prefer_wide_vectors()` and
`share_cores_between_chains()`; the baseline (`ynn_fusions`) with
`KERAS_GMLP_YNN_FUSIONS=1`, the candidate (`no_ynn_fusions`) after
`skip_ynn_fusions()`. Each round starts one process per form and
measure, the forms' order alternating between rounds; a process builds
the model, warms it up, reports its median step and how many YNNPACK
fusions its XLA functions compiled (from an HLO dump). `x ynn_fusions`
is the median over the rounds of the baseline's step over the
candidate's (above 1: faster). Measures:

- `image <model> <policy>`: an image classifier's `train_on_batch`
  (AdamW, batch 32, 224 px);
- `masked_lm <n>`: the gMLP masked LM's training step (`gmlp_tiny`,
  4,096 tokens, `masked_lm_speed.py`'s recipe).

Measured at ea2ecb6 plus this change (an idle 2-core AMD EPYC, family
25, model 17, AVX-512 and AVX512-BF16; 5 steps a process, 40 for the
masked LM; `xla_ynn_fusions_epyc25_stop60_tensorflow.json`, 5 rounds, and
`_epyc25_128_stop60_` for n = 128 again, 9 rounds), x ynn_fusions
(rounds' range):

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| gMLP-Ti/16 train | 1.01 (0.99-1.04) | **1.08** (1.02-1.09) |
| gMLP-S/16 train | 1.00 (0.99-1.02) | 0.99 (0.99-1.02) |
| masked LM, n = 128 | 0.96 (0.95-1.04); again 1.01 (0.92-1.10) | |
| masked LM, n = 512 | 1.02 (0.90-1.19) | |

A baseline process compiled 8 YNNPACK fusions for the masked LM's step
(all reductions), a candidate none. No worker of the 78 faulted.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/xla_ynn_fusions.py
Results: benchmarks/results/xla_ynn_fusions_tensorflow.json
"""

import glob
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "ynn_fusions"
CANDIDATE = "no_ynn_fusions"
MEASURES = [
    "image gmlp_ti16_224 float32",
    "image gmlp_ti16_224 mixed_bfloat16",
    "image gmlp_s16_224 float32",
    "image gmlp_s16_224 mixed_bfloat16",
    "masked_lm 128",
    "masked_lm 512",
]


def ynn_fusion_count(dump_directory):
    """How many YNNPACK fusions the optimised HLO modules in
    `dump_directory` hold."""
    pattern = os.path.join(dump_directory, "*cpu_after_optimizations.txt")
    count = 0
    for path in glob.glob(pattern):
        with open(path) as file:
            count += file.read().count("__ynn_fusion")
    return count


def worker(form, measure, steps):
    """Times `measure` in this process, in `form`; prints its median step
    in seconds and its YNNPACK fusions as JSON."""
    from keras_gmlp.training import prefer_wide_vectors
    from keras_gmlp.training import share_cores_between_chains
    from keras_gmlp.training import skip_ynn_fusions

    prefer_wide_vectors()
    share_cores_between_chains()
    skipped = skip_ynn_fusions()
    with tempfile.TemporaryDirectory() as dump:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = (
            f"{flags} --xla_dump_to={dump} --xla_dump_hlo_as_text"
        ).strip()
        step = common.measured_step(measure)
        seconds = common.median_step_seconds(step, steps)
        fusions = ynn_fusion_count(dump)
    print(json.dumps(dict(seconds=seconds, skipped=skipped, fusions=fusions)))


def timed_process(form, measure, steps):
    """The median step (seconds) of `measure` in a fresh process in
    `form`; an error if its YNNPACK fusions say otherwise."""
    env = dict(os.environ)
    env["KERAS_GMLP_YNN_FUSIONS"] = "1" if form == BASELINE else "0"
    report = common.worker_report(
        __file__, form, measure, steps, env, restarted=common.RESTARTED_WORKERS
    )
    expected = form == CANDIDATE
    if report["skipped"] != expected or (report["fusions"] == 0) != expected:
        raise RuntimeError(
            f"{form} {measure}: the process compiled {report['fusions']} "
            "YNNPACK fusions; the environment sets their kinds."
        )
    return report["seconds"]


def main():
    common.process_ab_main(
        __doc__,
        "xla_ynn_fusions",
        (BASELINE, CANDIDATE),
        MEASURES,
        worker,
        timed_process,
        "tensorflow",
        "the YNNPACK fusions are XLA:CPU's, for TensorFlow's XLA functions.",
    )


if __name__ == "__main__":
    main()
