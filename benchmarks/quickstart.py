"""The README's quick-start command on each backend: which one is fastest.

Each round runs the quick-start command (`keras-gmlp
train-image-classifier --dataset digits`, as `make quickstart`) once per
backend, in turn, each in a fresh process with a fresh output folder, and
records the whole command's wall time, the training time the run reports
(`results.json`'s `wall_time_seconds`) and the held-out accuracy. A
`--backends` entry may set environment variables for its runs
(`jax:KERAS_GMLP_JAX_DRAWS=0`), to time one setting against another.

The table gives medians over the rounds and `wall_x_<baseline>`: each
backend's whole-command time over the `--baseline` backend's (the
README's choice) in the same rounds; above 1 is slower than the baseline.

Before the training rounds, `--help-rounds` fresh processes time
`keras-gmlp --help` and `keras-gmlp train-image-classifier --help` (the
command's answer before any backend is imported); the report holds their
medians (`help_seconds`). `--help-only` times them alone.

Usage:
    python benchmarks/quickstart.py --rounds 3 --suffix _epyc25
    python benchmarks/quickstart.py --backends jax jax:KERAS_GMLP_JAX_DRAWS=0 \\
        --baseline jax:KERAS_GMLP_JAX_DRAWS=0 --rounds 4
    python benchmarks/quickstart.py --help-only --suffix _epyc25
Results: benchmarks/results/quickstart<suffix>.json (quickstart_help<suffix>
with --help-only)
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


HELP_COMMANDS = {
    "help": ["--help"],
    "train_help": ["train-image-classifier", "--help"],
}


def time_help(rounds):
    """Wall seconds of the command's `--help`s, each in a fresh process:
    `{name: [seconds of each round]}` for `HELP_COMMANDS`."""
    times = {name: [] for name in HELP_COMMANDS}
    for _ in range(rounds):
        for name, flags in HELP_COMMANDS.items():
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "keras_gmlp.cli", *flags],
                env=common.worker_env(None, None),
                check=True,
                stdout=subprocess.DEVNULL,
            )
            times[name].append(time.perf_counter() - started)
    return times


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
        "--help-rounds",
        type=int,
        default=5,
        help="fresh processes timing keras-gmlp --help (0: none)",
    )
    parser.add_argument(
        "--help-only",
        action="store_true",
        help="time the --help answers only, not the quick-start",
    )
    parser.add_argument(
        "--flags",
        nargs=argparse.REMAINDER,
        default=[],
        help="extra flags of the quick-start command",
    )
    args = parser.parse_args(argv)
    help_times = time_help(args.help_rounds)
    help_seconds = {
        name: common.median(times)
        for name, times in help_times.items()
        if times
    }
    for name, seconds in help_seconds.items():
        print(f"{name:10s} {seconds:6.2f} s (median)", flush=True)
    if args.help_only:
        report = common.header(with_backend=False)
        report.update(
            {
                "arguments": vars(args),
                "help_seconds": help_seconds,
                "help_runs": help_times,
            }
        )
        common.write_results(f"quickstart_help{args.suffix}", report)
        return
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
    report.update(
        {
            "arguments": vars(args),
            "help_seconds": help_seconds,
            "rows": rows,
            "runs": runs,
        }
    )
    common.write_results(f"quickstart{args.suffix}", report)


if __name__ == "__main__":
    main()
