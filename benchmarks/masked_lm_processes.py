"""The gMLP masked LM against its matched BERT under TensorFlow, each in
processes of its own, each with its own threads.

Issue 12 (the masked-LM target). `masked_lm_speed.py` times every model
in one process, alternating rounds, which needs one thread setting for
all. Since stop 50 the text jobs give each TensorFlow op its chain's
share of the cores (`keras_gmlp.training.share_cores_between_chains`),
and the text backbone then runs its blocks as two chains over the halves
of the batch (`keras_gmlp.models.batch_chains.chains_fit_the_cores`);
keras-hub's BERT, one chain, runs slower with one thread per op. So
here each model runs in processes of its own: the baseline (`bert`,
keras-hub's `BertMaskedLM` through the same recipe, matched to
`gmlp_tiny`'s parameters at each length) with TensorFlow's default
threads (`KERAS_GMLP_SHARE_CORES=0`), the candidate (`gmlp`, `gmlp_tiny`)
as the pretraining job runs it, after `share_cores_between_chains()`;
both with `prefer_wide_vectors()` (since stop 60 `skip_ynn_fusions()`
too). Each round starts one process per model and length, the order
alternating; a process builds the model, warms it up and reports its
median step over `8 x --steps` steps (4,096 tokens a batch, 15 %
masked). `x bert` is the median over the rounds of BERT's step over the
gMLP's: the gMLP's training tokens/s over BERT's. `--candidate amlp`:
the aMLP (`amlp_tiny`, the same chains and shared cores) against
`bert_amlp`, the BERT matched to its parameters. A worker killed by a
signal is started again, once (`common.worker_report`: gMLP and BERT
workers died of a segmentation fault in XLA:CPU's YNNPACK fusion thunk
in about one of 15-30 on the family-25 EPYC, stops 54 and 59, before
`skip_ynn_fusions`); the results' `restarted_workers` lists each
restart.

Measured: see `benchmarks/README.md`, "Stop 50"
(`masked_lm_processes_epyc26_stop50_tensorflow.json`) and "Stop 51"
(`masked_lm_processes_epyc26_stop51_tensorflow.json`, 7 rounds;
`masked_lm_processes_amlp_epyc26_stop51_tensorflow.json`).

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/masked_lm_processes.py \
        [--candidate amlp]
Results: benchmarks/results/masked_lm_processes[_amlp]_tensorflow.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "bert"
CANDIDATE = "gmlp"
# More (baseline, candidate) pairs (`--candidate`): the aMLP against the
# BERT matched to its own parameters (`masked_lm_speed.MATCHED_BASELINES`).
OTHER_PAIRS = [("bert_amlp", "amlp")]
CANDIDATES = (CANDIDATE, *(pair[1] for pair in OTHER_PAIRS))
MEASURES = ["masked_lm 128", "masked_lm 512"]


def worker(form, measure, steps):
    """Times `form`'s model at `measure` in this process."""
    common.threads_worker(f"{measure} {form}", form in CANDIDATES, steps)


def timed_process(form, measure, steps):
    """The median step (seconds) of `form`'s model at `measure` in a
    fresh process."""
    return common.threads_process(
        __file__, form, measure, steps, form in CANDIDATES
    )


def main():
    common.process_ab_main(
        __doc__,
        "masked_lm_processes",
        (BASELINE, CANDIDATE),
        MEASURES,
        worker,
        timed_process,
        "tensorflow",
        "the shared cores are TensorFlow's.",
        other_pairs=OTHER_PAIRS,
    )


if __name__ == "__main__":
    main()
