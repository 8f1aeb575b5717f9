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

import argparse
import json
import os
import subprocess
import sys
import time

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
    kind, *details = measure.split()
    if kind == "image":
        model_name, policy = details
        model = common.build_image_classifier(model_name, 224, "auto", policy)
        images, labels = common.random_image_batch(32, 224)

        def step():
            return model.train_on_batch(images, labels)

    else:
        from benchmarks import masked_lm_speed

        length = int(details[0])
        model, _ = masked_lm_speed.build("gmlp", "gmlp_tiny", length, 8192)
        x, y = masked_lm_speed.batch(model, length, 4096 // length, 8192)

        def step():
            return model.train_on_batch(x, y)

    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    flags = os.environ.get("XLA_FLAGS", "")
    report = dict(seconds=common.median(times), wide=wide, flags=flags)
    print(json.dumps(report))


def timed_process(form, measure, steps):
    """The median step (seconds) of `measure` in a fresh process in
    `form`."""
    env = dict(os.environ)
    if form == BASELINE:
        env["KERAS_GMLP_WIDE_VECTORS"] = "0"
    command = [sys.executable, os.path.abspath(__file__), "--worker", form]
    command += ["--measure", measure, "--steps", str(steps)]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"{form} {measure}: {result.stderr[-2000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if report["wide"] != (form == CANDIDATE):
        raise RuntimeError(
            f"{form} {measure}: the process ran with XLA_FLAGS="
            f"{report['flags']!r}; this CPU or environment does not take "
            "the wide vectors."
        )
    return report["seconds"]


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--measures",
        nargs="+",
        default=IMAGE_MEASURES + ["masked_lm 128", "masked_lm 512"],
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--suffix", default="", help="results file suffix")
    parser.add_argument("--worker", choices=[BASELINE, CANDIDATE])
    parser.add_argument("--measure")
    args = parser.parse_args()
    common.require_backend(
        "tensorflow", "the wide vectors are for TensorFlow's XLA functions."
    )
    if args.worker:
        worker(args.worker, args.measure, args.steps)
        return
    run = common.header()
    rows = []
    for measure in args.measures:
        steps = args.steps if measure.startswith("image") else 8 * args.steps
        times = {BASELINE: [], CANDIDATE: []}
        for round_index in range(args.rounds):
            forms = [BASELINE, CANDIDATE][:: 1 if round_index % 2 else -1]
            for form in forms:
                times[form].append(timed_process(form, measure, steps))
        row = common.ab_row(
            times[BASELINE], times[CANDIDATE], BASELINE, CANDIDATE
        )
        rows.append(dict(measure=measure, **row))
        print(rows[-1], flush=True)
    columns = ["measure", f"{BASELINE}_ms", f"{CANDIDATE}_ms"]
    columns += [f"x_{BASELINE}", "rounds_min", "rounds_max"]
    name = f"xla_vector_width{args.suffix}_{run['backend']}"
    common.finish_report(run, rows, columns, name, arguments=vars(args))


if __name__ == "__main__":
    main()
