"""The README's quick-start on each backend: which one is fastest.

Issue 12: "the README's quick-start backend is the fastest one for that
job, measured". Each round runs the quick-start command (`keras-gmlp
train-image-classifier --dataset digits`, as `make quickstart`) once per
backend, in turn, each in a fresh process with a fresh output folder, and
records the whole command's wall time, the training time the run reports
(`results.json`'s `wall_time_seconds`) and the held-out accuracy. The
table gives medians over the rounds and each backend's whole-command time
over the `--baseline` backend's (the README's choice) in the same rounds:
a ratio above 1 is slower than the baseline.

Where the time goes (stop 62, an idle 2-core AMD EPYC of family 26, one
`cProfile` run of the command per backend, 26.8 s under JAX and 25.9 s
under TensorFlow with the profiler's overhead; seconds):

| part | jax | tensorflow |
|---|---|---|
| imports (TensorFlow in both: tf.data, keras-hub) | 6.2 | 5.7 |
| building the model | 1.7 | 0.2 |
| `fit`, 20 epochs of 22 steps and the held-out scoring | 15.1 | 14.3 |
| the outputs (`.keras`, preset, SavedModel, plots) | 3.1 | 4.6 |

Under JAX building the model is mostly compiling: each Keras initializer
draws its values with a `jax.random` function that XLA compiles once per
shape (`JAX_LOG_COMPILES=1`: four `_uniform` and one `_normal`, 0.12-0.42
s each, 1.15 s in all; alone, in a fresh process, 0.15 s a shape and
0.46 s for a `(64, 10)` kernel). `--xla_backend_optimization_level=0`
halves those compilations but changes the drawn values in their last
bits (a `(16, 64)` draw's sum 0.5008469 against 0.5008467), so the
package does not take it. Since stop 63 the `keras-gmlp` command calls
`keras_gmlp.training.compile_jax_draws_once()`, which draws in chunks
through one compilation per distribution, with the same bits: building
this model under JAX now takes 0.60 s instead of 1.84 s
(`benchmarks/model_build.py`); the whole command, 0.92x of the same
command with `KERAS_GMLP_JAX_DRAWS=0` (medians of four alternated
rounds, `quickstart_epyc25_stop64.json`; the rounds spread 23-31 s).
In `fit` XLA compiles the training step in 1.9 s and the test step in
0.45 s; the 560 compiled calls (440 training steps of 64 images, 120
held-out batches) take 4.5 s, the batches from tf.data 1.4 s. Under
TensorFlow the SavedModel export is the larger part of the outputs (3.8
s against 2.0 s from JAX).

Usage:
    python benchmarks/quickstart.py --rounds 3
Results: benchmarks/results/quickstart<suffix>.json
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

COMMAND = [
    "-m",
    "keras_gmlp.cli",
    "train-image-classifier",
    "--dataset",
    "digits",
]


def parse_form(form):
    """`(backend, environment)` of a `--backends` entry: a backend name,
    optionally with variables, e.g. `jax:KERAS_GMLP_JAX_DRAWS=0`."""
    backend, _, assignments = form.partition(":")
    environment = {}
    for assignment in filter(None, assignments.split(",")):
        name, equals, value = assignment.partition("=")
        if not equals:
            raise ValueError(
                f"expected NAME=VALUE in {form!r}, got {assignment!r}"
            )
        environment[name] = value
    return backend, environment


def run_once(form, extra_flags):
    """One quick-start run: `(wall seconds, results.json)`."""
    backend, environment = parse_form(form)
    folder = tempfile.mkdtemp(prefix=f"quickstart_{backend}_")
    try:
        command = [sys.executable, *COMMAND, "--output-dir", folder]
        started = time.perf_counter()
        subprocess.run(
            command + list(extra_flags),
            env={**common.worker_env(backend, None), **environment},
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - started
        with open(os.path.join(folder, "results.json")) as file:
            return wall, json.load(file)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        default=list(common.BACKENDS),
        help="backends, each optionally with environment variables "
        "(jax:KERAS_GMLP_JAX_DRAWS=0)",
    )
    parser.add_argument("--baseline", default="jax")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--suffix", default="", help="results file: quickstart<suffix>.json"
    )
    parser.add_argument(
        "--flags",
        nargs=argparse.REMAINDER,
        default=[],
        help="extra flags of the quick-start command",
    )
    args = parser.parse_args(argv)
    runs = {backend: [] for backend in args.backends}
    for round_index in range(args.rounds):
        for backend in args.backends:
            wall, results = run_once(backend, args.flags)
            runs[backend].append(
                {
                    "round": round_index,
                    "wall_seconds": wall,
                    "training_seconds": results.get("wall_time_seconds"),
                    "val_accuracy": results["metrics"].get("val_accuracy"),
                }
            )
            print(
                f"round {round_index} {backend:10s} {wall:6.1f} s", flush=True
            )
    rows = []
    for backend, measured in runs.items():
        ratios = [
            run["wall_seconds"] / base["wall_seconds"]
            for run, base in zip(measured, runs[args.baseline], strict=True)
        ]
        rows.append(
            {
                "backend": backend,
                "wall_seconds": common.median(
                    [r["wall_seconds"] for r in measured]
                ),
                "training_seconds": common.median(
                    [r["training_seconds"] for r in measured]
                ),
                "val_accuracy": common.median(
                    [r["val_accuracy"] for r in measured]
                ),
                f"wall_x_{args.baseline}": common.median(ratios),
            }
        )
    common.print_table(
        rows,
        [
            "backend",
            "wall_seconds",
            "training_seconds",
            "val_accuracy",
            f"wall_x_{args.baseline}",
        ],
    )
    report = common.header(with_backend=False)
    report.update({"arguments": vars(args), "rows": rows, "runs": runs})
    common.write_results(f"quickstart{args.suffix}", report)


if __name__ == "__main__":
    main()
