"""The masked-LM quality bar: every model gets the same training wall time.

For each model of the comparison (gMLP, aMLP, the spatial units of the
paper's ablation, and keras-hub's BERT of matched size) a short calibration
run of `recipes/masked_lm.py` measures its seconds per training step (the
second epoch's `train_seconds`: compilation and evaluation excluded). The
real run then trains for as many steps as fit in `--minutes`, with the same
corpus, vocabulary, data stream and schedule shape. At the end every final
model (`last.keras`) is scored again on the very same masked held-out
batches (`keras_gmlp.workflows.pretraining.evaluate_run`, seeded), next
to the unigram baseline of those targets (`--rescore` does only this, for
runs already trained). Everything goes into one JSON file.

Usage (one core, so that other work on the machine does not change the
budget; the recipe's processes inherit the CPU affinity):

```
taskset -c 1 python benchmarks/text_quality_bar.py \\
    --text-files '/usr/share/doc/python3.11/html/_sources/**/*.txt' \\
    --minutes 10 --work-dir runs/quality_bar
```
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "recipes", "masked_lm.py")
CALIBRATION_STEPS = 10

MODELS = {
    "gmlp_tiny": ("gMLP tiny (SGU, split)", ["--preset", "gmlp_tiny"]),
    "amlp_tiny": (
        "aMLP tiny (SGU + tiny attention 32)",
        ["--preset", "amlp_tiny"],
    ),
    "transformer": (
        "Transformer (keras-hub BERT, matched size)",
        ["--architecture", "transformer"],
    ),
    "gmlp_multiplicative": (
        "gMLP, spatial unit multiplicative",
        ["--spatial-unit", "multiplicative"],
    ),
    "gmlp_additive": (
        "gMLP, spatial unit additive",
        ["--spatial-unit", "additive"],
    ),
    "gmlp_linear": ("gMLP, spatial unit linear", ["--spatial-unit", "linear"]),
}


def run_recipe(argv, log_path, backend):
    """Runs the recipe in a fresh process; returns its results.json."""
    output_dir = argv[argv.index("--output-dir") + 1]
    env = dict(os.environ, KERAS_BACKEND=backend)
    with open(log_path, "w") as log:
        process = subprocess.run(
            [sys.executable, RECIPE, *argv],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    if process.returncode:
        raise RuntimeError(
            f"{' '.join(argv)} failed with {process.returncode}; see "
            f"{log_path}."
        )
    with open(os.path.join(output_dir, "results.json")) as file:
        return json.load(file)


def seconds_per_step(common, flags, work_dir, backend):
    """Steady-state seconds of one training step of a model."""
    output_dir = os.path.join(work_dir, "calibration")
    name = os.path.basename(work_dir)
    argv = [
        *common,
        *flags,
        "--epochs", "2",
        "--steps-per-epoch", str(CALIBRATION_STEPS),
        "--validation-batches", "1",
        "--unigram-tokens", "0",
        "--output-dir", output_dir,
    ]  # fmt: skip
    run_recipe(argv, os.path.join(work_dir, "calibration.log"), backend)
    with open(os.path.join(output_dir, "history.json")) as file:
        second_epoch = json.load(file)[1]
    seconds = second_epoch["train_seconds"] / CALIBRATION_STEPS
    print(f"{name}: {seconds:.3f} s per step", flush=True)
    return seconds


def rescore(work_dir, names, backend):
    """Scores each run's final model on the same seeded held-out batches.

    Returns:
        `({name: {"heldout_perplexity", "heldout_masked_accuracy"}},
        unigram_perplexity)`.
    """
    os.environ["KERAS_BACKEND"] = backend
    from keras_gmlp.workflows import pretraining

    scores, unigram = {}, None
    for name in names:
        run_dir = os.path.join(work_dir, name, "run")
        metrics = pretraining.evaluate_run(run_dir, unigram=unigram is None)
        unigram = metrics.get("unigram_perplexity", unigram)
        scores[name] = {
            "heldout_perplexity": round(metrics["perplexity"], 2),
            "heldout_masked_accuracy": round(metrics["masked_accuracy"], 4),
        }
        print(name, scores[name], flush=True)
    return scores, unigram


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text-files", required=True)
    parser.add_argument("--vocabulary", help="Else learnt by the first run.")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--backend", default="tensorflow")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--work-dir", default="runs/quality_bar")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="Only score the trained runs of --work-dir again (and update "
        "--output).",
    )
    parser.add_argument(
        "--output",
        default=os.path.join(
            ROOT, "benchmarks", "results", "text_quality_bar.json"
        ),
    )
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        raise ValueError(f"Unknown models {unknown}; expected {list(MODELS)}.")
    common = [
        "--text-files", args.text_files,
        "--record", "paragraph",
        "--verbose", "2",
        "--no-tensorboard",
    ]  # fmt: skip
    if args.rescore:
        with open(args.output) as file:
            summary = json.load(file)["pretraining"]
        names = [entry["run"] for entry in summary]
    else:
        summary = train_all(args, names, common)
    scores, unigram = rescore(args.work_dir, names, args.backend)
    for entry in summary:
        entry.update(scores[entry["run"]])
        entry["heldout_unigram_perplexity"] = round(unigram, 2)
    write_summary(args, summary)


def write_summary(args, summary):
    with open(args.output, "w") as file:
        json.dump(
            {"minutes": args.minutes, "pretraining": summary}, file, indent=1
        )


def train_all(args, names, common):
    """Calibrates and trains every model; returns their summaries."""
    vocabulary = args.vocabulary
    summary = []
    for name in names:
        description, flags = MODELS[name]
        work_dir = os.path.join(args.work_dir, name)
        os.makedirs(work_dir, exist_ok=True)
        run_flags = list(common)
        if vocabulary:
            run_flags += ["--vocabulary", vocabulary]
        step = seconds_per_step(run_flags, flags, work_dir, args.backend)
        if vocabulary is None:
            vocabulary = os.path.join(work_dir, "calibration", "vocabulary.txt")
            run_flags += ["--vocabulary", vocabulary]
        steps_per_epoch = max(1, int(args.minutes * 60 / step) // args.epochs)
        run = [
            *run_flags,
            *flags,
            "--epochs", str(args.epochs),
            "--steps-per-epoch", str(steps_per_epoch),
            "--output-dir", os.path.join(work_dir, "run"),
        ]  # fmt: skip
        started = time.perf_counter()
        results = run_recipe(
            run, os.path.join(work_dir, "run.log"), backend=args.backend
        )
        with open(os.path.join(work_dir, "run", "history.json")) as file:
            train_seconds = sum(r["train_seconds"] for r in json.load(file))
        metrics = results["metrics"]
        model = results["model"]
        summary.append(
            {
                "run": name,
                "model": description,
                "parameters": model["parameters"],
                "transformer_layers": model.get("transformer_layers"),
                "calibrated_seconds_per_step": round(step, 4),
                "steps": results["steps"],
                "train_seconds": round(train_seconds, 1),
                "wall_time_seconds": round(results["wall_time_seconds"], 1),
                "command_seconds": round(time.perf_counter() - started, 1),
                "training_tokens": results["training_tokens"],
                "val_perplexity": round(metrics["val_perplexity"], 2),
                "val_masked_accuracy": round(metrics["val_masked_accuracy"], 4),
                "val_unigram_perplexity": round(
                    metrics["val_unigram_perplexity"], 2
                ),
                "backend": results["backend"],
                "cpus": len(os.sched_getaffinity(0)),
                "command": "recipes/masked_lm.py " + " ".join(run),
            }
        )
        print(json.dumps(summary[-1]), flush=True)
        write_summary(args, summary)
    return summary


if __name__ == "__main__":
    main()
