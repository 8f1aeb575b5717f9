"""Every architecture at its best learning rate, at an equal time budget.

For one job (`mlm`: masked-LM pretraining, `image`: image classification),
gMLP and the keras-hub baselines of matched parameters (the baselines of
the quality tables, `keras_gmlp.baselines`) each train at several
peak learning rates and seeds, every run through the job's own workflow
for the same training time, a process pinned to one core (`taskset`),
`--parallel` at a time. A probe per architecture times its step, and each
run gets `--budget-seconds / step time` steps (its schedule ends in the
budget); a callback stops a run that passes the budget all the same.

The table keeps each architecture at the rate whose held-out metric
(perplexity for `mlm`, accuracy for `image`), averaged over the seeds, is
best: the metric's mean and spread over the seeds, the steps reached, the
final training loss, the parameters, and the baseline of the same
held-out data (unigram perplexity, or majority-class accuracy). The job's
own flags follow `--`; a `--variant LABEL=FLAGS` is one more model, the
job's flags plus FLAGS (the paper's ablation, the aMLP).

Usage:
    python benchmarks/sweep.py --job mlm --budget-seconds 300 \\
        --name mlm_pydocs -- --text-files \\
        "/usr/share/doc/python3.11/html/_sources/**/*.txt" \\
        --record paragraph --vocabulary runs/vocabulary.txt --preset gmlp_tiny
    python benchmarks/sweep.py --job image --budget-seconds 90 --name \\
        digits32 -- --dataset digits --image-size 32 --patch-size 4
    python benchmarks/sweep.py --job mlm --learning-rates 2e-3 \\
        --variant "amlp=--preset amlp_tiny" --variant \\
        "linear=--spatial-unit linear" --name mlm_pydocs_ablation -- ...
Results: benchmarks/results/sweep_<name>.json (every run) and .md (table)
"""

import argparse
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import common  # noqa: E402

JOBS = {
    "mlm": {
        "module": "pretraining",
        "architectures": ("gmlp", "bert", "roformer_v2", "deberta_v3", "fnet"),
        "metric": "val_perplexity",
        "lower_is_better": True,
        "baseline": "val_unigram_perplexity",
    },
    "image": {
        "module": "image_classification",
        "architectures": ("gmlp", "vit"),
        "metric": "val_accuracy",
        "lower_is_better": False,
        "baseline": "majority_class_accuracy",
    },
}
# Multiples of an architecture's default learning rate tried when
# --learning-rates is not given.
LEARNING_RATE_FACTORS = (0.5, 1.0, 2.0)
RUN_RECORD = "sweep_run.json"


# ---------------------------------------------------------------- worker


def run_worker(job, budget_seconds, job_flags, record_path):
    """One run in this process: the job's workflow, stopped at the budget.

    Writes `record_path`: the results' metrics, the steps reached, the
    training seconds, the median step time and the held-out baseline.
    """
    import keras

    from keras_gmlp import workflows

    class Budget(keras.callbacks.Callback):
        """Times the training steps; stops the run past the budget."""

        def __init__(self):
            super().__init__()
            self.steps, self.times, self.started = 0, [], None

        def on_train_batch_begin(self, batch, logs=None):
            self.started = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.times.append(time.perf_counter() - self.started)
            self.steps += 1
            # The first step compiles: it does not count.
            if sum(self.times[1:]) > budget_seconds:
                self.model.stop_training = True

    workflow = getattr(workflows, JOBS[job]["module"])
    config = workflow.config_from_argv(job_flags)
    budget = Budget()
    results = workflow.run(config, callbacks=[budget])
    steady = budget.times[1:] or budget.times
    record = {
        "metrics": results["metrics"],
        "final_training_loss": results["history"]["loss"][-1],
        "steps": budget.steps,
        "first_step_seconds": budget.times[0] if budget.times else None,
        "training_seconds": sum(budget.times[1:]),
        "step_seconds": statistics.median(steady) if steady else None,
        "peak_learning_rate": results.get("peak_learning_rate"),
        "model": results.get("model"),
    }
    if job == "image":
        record["metrics"]["majority_class_accuracy"] = majority_class(
            config.dataset, config.data_dir, config.label_offset
        )
    with open(record_path, "w") as file:
        json.dump(record, file, indent=1, default=str)


def majority_class(dataset, data_dir=None, label_offset=None):
    """Held-out accuracy of always answering the commonest training class."""
    import numpy as np

    from keras_gmlp.data.image_sources import load_images

    data = load_images(dataset, data_dir, label_offset)

    def labels(split):
        return np.array(
            [int(y) for _, y in data.split(split).as_numpy_iterator()]
        )

    commonest = np.bincount(labels("train")).argmax()
    return float(np.mean(labels("validation") == commonest))


# ---------------------------------------------------------------- driver


def run_all(commands, cores, parallel, log):
    """Runs `commands` (lists of str), each pinned to a free core of
    `cores`, `parallel` at a time; returns their exit codes in order."""
    free = list(cores)[:parallel]
    running, codes, queue = (
        {},
        [None] * len(commands),
        list(enumerate(commands)),
    )
    while queue or running:
        while queue and free:
            index, command = queue.pop(0)
            core = free.pop(0)
            pinned = (
                ["taskset", "-c", str(core)] if shutil.which("taskset") else []
            )
            env = dict(common.worker_env(None, 1))
            env.update(
                OMP_NUM_THREADS="1",
                TF_NUM_INTRAOP_THREADS="1",
                TF_NUM_INTEROP_THREADS="1",
            )
            process = subprocess.Popen(
                pinned + command, env=env, stdout=log, stderr=log, cwd=ROOT
            )
            running[process] = (index, core)
        time.sleep(0.2)
        for process in [p for p in running if p.poll() is not None]:
            index, core = running.pop(process)
            codes[index] = process.returncode
            free.append(core)
    return codes


def run_command(job, budget_seconds, record_path, job_flags):
    return [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        "--job",
        job,
        "--budget-seconds",
        str(budget_seconds),
        "--record",
        record_path,
        "--",
        *job_flags,
    ]


def run_flags(job_flags, architecture, learning_rate, seed, steps, output_dir):
    flags = [*job_flags, "--architecture", architecture, "--seed", str(seed)]
    flags += ["--epochs", "1", "--steps-per-epoch", str(steps)]
    flags += ["--output-dir", output_dir, "--verbose", "0", "--no-tensorboard"]
    # A sweep run again measures again: an earlier run is moved aside.
    flags += ["--overwrite"]
    if learning_rate is not None:
        flags += ["--learning-rate", repr(learning_rate)]
    if "--dataset" in job_flags:  # image runs: no SavedModel, no plots
        flags += ["--no-export", "--no-plots"]
    return flags


def default_rates(job, architecture, job_flags):
    """`LEARNING_RATE_FACTORS` times the architecture's default rate."""
    from keras_gmlp import workflows
    from keras_gmlp.baselines import default_learning_rate

    workflow = getattr(workflows, JOBS[job]["module"])
    config = workflow.config_from_argv(
        [*job_flags, "--architecture", architecture]
    )
    if job == "image":
        config = workflow.with_default_learning_rate(config).resolved()
        base = config.learning_rate
    else:
        base = default_learning_rate("mlm", architecture)
    return [base * factor for factor in LEARNING_RATE_FACTORS]


def summarise(job, runs):
    """The table: each architecture at the learning rate whose held-out
    metric, averaged over the seeds, is best.

    Args:
        job: str. A key of `JOBS`.
        runs: list of dicts with `architecture`, `learning_rate`, `seed`
            and, for a finished run, its `record` (`run_worker`'s).

    Returns:
        `(rows, by_rate)`: one row per architecture, best first, and every
        (architecture, learning rate) with its seeds' mean and spread.
    """
    spec = JOBS[job]
    groups = {}
    for run in runs:
        if run.get("record"):
            key = (run["architecture"], run["learning_rate"])
            groups.setdefault(key, []).append(run["record"])
    by_rate = []
    for (architecture, rate), records in groups.items():
        values = [r["metrics"][spec["metric"]] for r in records]
        by_rate.append(
            {
                "architecture": architecture,
                "learning_rate": rate,
                "seeds": len(records),
                "metric": spec["metric"],
                "mean": statistics.fmean(values),
                "spread": statistics.stdev(values) if len(values) > 1 else 0.0,
                "steps": statistics.fmean(r["steps"] for r in records),
                "final_training_loss": statistics.fmean(
                    r["final_training_loss"] for r in records
                ),
                "parameters": (records[0].get("model") or {}).get(
                    "trainable_parameters"
                ),
                "baseline": statistics.fmean(
                    r["metrics"].get(spec["baseline"], math.nan)
                    for r in records
                ),
            }
        )
    sign = 1 if spec["lower_is_better"] else -1
    best = {}
    for row in by_rate:
        kept = best.get(row["architecture"])
        if kept is None or sign * row["mean"] < sign * kept["mean"]:
            best[row["architecture"]] = row
    rows = sorted(best.values(), key=lambda row: sign * row["mean"])
    return rows, by_rate


def markdown(job, rows, budget_seconds):
    spec = JOBS[job]
    baseline = {"mlm": "unigram ppl", "image": "majority acc"}[job]
    lines = [
        f"Budget {budget_seconds:g} s of training per run, one core each; "
        f"{spec['metric']} mean ± spread (std) over seeds, each "
        "architecture at its best learning rate.",
        "",
        f"| architecture | learning rate | {spec['metric']} | seeds | steps "
        f"| final train loss | parameters | {baseline} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['architecture']} | {row['learning_rate']:.2e} | "
            f"{row['mean']:.4g} ± {row['spread']:.2g} | {row['seeds']} | "
            f"{row['steps']:.0f} | {row['final_training_loss']:.4g} | "
            f"{row['parameters']} | {row['baseline']:.4g} |"
        )
    return "\n".join(lines) + "\n"


def included_runs(path, job):
    """The runs of an earlier sweep's results file, for one table.

    Raises:
        ValueError: if the file is of another job.
    """
    with open(path) as file:
        report = json.load(file)
    if report.get("job") != job:
        raise ValueError(
            f"--include {path}: a sweep of job {report.get('job')!r}; "
            f"expected {job!r}."
        )
    return report["runs"]


def parse_variant(text):
    """`"LABEL=FLAGS"` -> `(LABEL, architecture, [FLAGS...])`.

    The architecture is the one `FLAGS` name with `--architecture`, else
    `"gmlp"`.
    """
    label, separator, flags = text.partition("=")
    if not separator or not label.strip():
        raise ValueError(
            f"--variant {text!r}: expected LABEL=FLAGS, such as "
            '"amlp=--preset amlp_tiny".'
        )
    flags = shlex.split(flags)
    architecture = "gmlp"
    if "--architecture" in flags:
        architecture = flags[flags.index("--architecture") + 1]
    return label.strip(), architecture, flags


def sweep_models(job, architectures, variants):
    """Label -> `(architecture, extra flags)` of every model swept.

    Args:
        job: str. A key of `JOBS`.
        architectures: list of str, or None for every architecture of the
            job (none when `variants` are given).
        variants: list of `"LABEL=FLAGS"` strings.
    """
    if architectures is None:
        architectures = [] if variants else JOBS[job]["architectures"]
    models = {a: (a, []) for a in architectures}
    for text in variants:
        label, architecture, flags = parse_variant(text)
        if label in models:
            raise ValueError(f"--variant {text!r}: {label!r} is swept twice.")
        models[label] = (architecture, flags)
    return models


def drive(args, job_flags):
    work_dir = os.path.abspath(
        args.work_dir or os.path.join("runs", "sweep", args.name)
    )
    os.makedirs(work_dir, exist_ok=True)
    log = open(os.path.join(work_dir, "sweep.log"), "a")
    models = sweep_models(args.job, args.architectures, args.variant)
    steps = {}
    if args.steps:
        steps = dict.fromkeys(models, args.steps)
    else:
        # Probes: the step time of each model on one core.
        probes = {m: os.path.join(work_dir, f"probe_{m}") for m in models}
        commands = [
            run_command(
                args.job,
                args.probe_steps * 1e6,
                os.path.join(folder, RUN_RECORD),
                run_flags(
                    [*job_flags, *models[m][1]],
                    models[m][0],
                    None,
                    0,
                    args.probe_steps,
                    folder,
                ),
            )
            for m, folder in probes.items()
        ]
        for folder in probes.values():
            os.makedirs(folder, exist_ok=True)
        run_all(commands, args.cores, args.parallel, log)
        for model, folder in probes.items():
            with open(os.path.join(folder, RUN_RECORD)) as file:
                step = json.load(file)["step_seconds"]
            steps[model] = max(1, int(args.budget_seconds / step))
    runs = []
    for model, (architecture, flags) in models.items():
        rates = args.learning_rates or default_rates(
            args.job, architecture, [*job_flags, *flags]
        )
        for rate in rates:
            for seed in args.seeds:
                folder = os.path.join(
                    work_dir, f"{model}_lr{rate:.2e}_seed{seed}"
                )
                os.makedirs(folder, exist_ok=True)
                runs.append(
                    {
                        "architecture": model,
                        "base_architecture": architecture,
                        "flags": flags,
                        "learning_rate": rate,
                        "seed": seed,
                        "output_dir": folder,
                        "steps_allowed": steps[model],
                    }
                )
    commands = [
        run_command(
            args.job,
            args.budget_seconds,
            os.path.join(run["output_dir"], RUN_RECORD),
            run_flags(
                [*job_flags, *run["flags"]],
                run["base_architecture"],
                run["learning_rate"],
                run["seed"],
                run["steps_allowed"],
                run["output_dir"],
            ),
        )
        for run in runs
    ]
    codes = run_all(commands, args.cores, args.parallel, log)
    for run, code in zip(runs, codes, strict=True):
        run["exit_code"] = code
        path = os.path.join(run["output_dir"], RUN_RECORD)
        if code == 0 and os.path.exists(path):
            with open(path) as file:
                run["record"] = json.load(file)
    log.close()
    for path in args.include:
        runs = included_runs(path, args.job) + runs
    rows, by_rate = summarise(args.job, runs)
    report = common.header(with_backend=False)
    report.update(
        {
            "job": args.job,
            "job_flags": job_flags,
            "budget_seconds": args.budget_seconds,
            "cores": args.cores,
            "parallel": args.parallel,
            "steps_allowed": steps,
            "table": rows,
            "by_learning_rate": by_rate,
            "runs": runs,
        }
    )
    os.makedirs(args.results_dir, exist_ok=True)
    path = os.path.join(args.results_dir, f"sweep_{args.name}")
    with open(f"{path}.json", "w") as file:
        json.dump(report, file, indent=1, default=str)
    table = markdown(args.job, rows, args.budget_seconds)
    with open(f"{path}.md", "w") as file:
        file.write(table)
    print(table)
    failed = [r["output_dir"] for r in runs if r["exit_code"] != 0]
    if failed:
        print(f"failed runs (see {work_dir}/sweep.log): {failed}")
    return report


def build_parser():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n", 1)[1],
    )
    parser.add_argument("--job", choices=tuple(JOBS), default="mlm")
    parser.add_argument(
        "--architectures",
        nargs="+",
        help="default: every architecture of the job",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=FLAGS",
        help="one more model: the job's flags plus FLAGS, named LABEL "
        "(repeatable; alone, it replaces the default architectures)",
    )
    parser.add_argument(
        "--learning-rates",
        nargs="+",
        type=float,
        help="default: 0.5, 1 and 2 times each architecture's default",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="RESULTS_JSON",
        help="an earlier sweep's results (same job and flags), whose runs "
        "join this table: to extend a grid whose best rate is at its edge",
    )
    parser.add_argument(
        "--budget-seconds",
        type=float,
        default=600,
        help="training seconds of every run (its first step apart)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        help="steps of every run instead of a probe's (still time-capped)",
    )
    parser.add_argument("--probe-steps", type=int, default=30)
    parser.add_argument("--cores", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--name", default="mlm")
    parser.add_argument("--work-dir", help="default: runs/sweep/NAME")
    parser.add_argument("--results-dir", default=common.RESULTS)
    # Internal: one run in this process.
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--record", help=argparse.SUPPRESS)
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    job_flags = []
    if "--" in argv:
        job_flags = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    args = build_parser().parse_args(argv)
    if args.worker:
        run_worker(args.job, args.budget_seconds, job_flags, args.record)
        return None
    return drive(args, job_flags)


if __name__ == "__main__":
    main()
