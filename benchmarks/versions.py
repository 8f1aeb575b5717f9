"""This checkout's training and inference steps against another checkout's.

For each backend (`--backends`) two worker processes, one importing
`keras_gmlp` from this checkout and one from `--baseline` (a checkout of
another commit, e.g. `git worktree add ../baseline <commit>`), build the
same rows: the gMLP-Ti/16 image classifier's training and inference steps
at `--batch-size`, and the pretraining recipe's masked LM (`gmlp_tiny`)
training step at 128 and 512 tokens (and, asked for, `generate`: the
causal LM's decoding, as `benchmarks/generation.py` times it). Each worker
is set up as the `keras-gmlp` command sets up the job that runs its rows
(`set_backend_environment()` where the version has it, then `PROCESSES`):
a training job for the training and inference rows
(`configure_training_process()`), `keras-gmlp generate` for `generate`
(`compile_jax_draws_once()` only). The driver times each row in both
workers in alternated rounds; `x_baseline` is the baseline's median step
time over this checkout's; each checkout runs first in every other round.

With `--references`, each row's baseline of `benchmarks/vision.py` and
`benchmarks/masked_lm_speed.py` runs in the same rounds: timm's
gMLP-Ti/16 (a `timm_worker.py` under `--timm-python`) for the image rows,
the matched keras-hub BERT (built in this checkout's worker) for the
masked-LM rows; `this_x_reference` and `baseline_x_reference` are the
reference's median step time over each checkout's. With `--kernels-off`, a
third worker runs this checkout with `KERAS_GMLP_KERNELS=off` (the
reference path) in the same rounds: `off_x_baseline`, `this_x_off` and,
with `--references`, `off_x_reference`.

Usage:
    git worktree add ../baseline <commit>
    python benchmarks/versions.py --baseline ../baseline --rounds 3 \\
        --name versions_xeon
    python benchmarks/versions.py --baseline ../baseline --references \\
        --timm-python /work/timm-venv/bin/python --name versions_references
    python benchmarks/versions.py --baseline ../baseline --references \\
        --kernels-off --name versions_references_kernels_off
Results: benchmarks/results/<name>.json (default name versions).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

ROWS = ("ti16_train", "ti16_infer", "mlm128_train", "mlm512_train")
# Asked for by name (`--rows generate generate_amlp`): `generate` of
# `gmlp_tiny` (`amlp_tiny`) with the decoding cache, 384 tokens after a
# 128-token prompt, batch 1.
EXTRA_ROWS = ("generate", "generate_amlp")
# How the `keras-gmlp` command sets a process up for each kind of job: a
# row runs in workers set up as the command's job that runs it does.
PROCESSES = {
    "training": "configure_training_process",
    "command": "compile_jax_draws_once",
}
ROW_PROCESSES = {"generate": "command", "generate_amlp": "command"}


def worker(batch_size, batch_tokens, process="training"):
    """A worker's loop: builds a row on `"build"`, times it on `"run"`.

    `keras_gmlp` comes from the first checkout on `PYTHONPATH`; the
    process is set up as `PROCESSES[process]`."""
    root = str(common.REPOSITORY)
    sys.path[:] = [p for p in sys.path if p != root] + [root]
    import keras_gmlp
    from keras_gmlp import kernels

    getattr(keras_gmlp, "set_backend_environment", lambda: None)()
    getattr(kernels, PROCESSES[process])()
    from benchmarks import masked_lm_speed

    steps = {}

    def build(row):
        if row == "generate":
            _, step = generation_step()
        elif row == "generate_amlp":
            _, step = generation_step("amlp_tiny")
        elif row.startswith("ti16"):
            model = common.build_image_classifier(
                "gmlp_ti16_224", 224, jit_compile="auto", precision="float32"
            )
            images, labels = common.random_image_batch(batch_size, 224)
            if row == "ti16_train":
                step = lambda: model.train_on_batch(images, labels)  # noqa: E731
            else:
                step = lambda: model.predict_on_batch(images)  # noqa: E731
        else:
            length = 128 if row.startswith("mlm128") else 512
            name = "bert" if row.endswith("_bert") else "gmlp"
            model, _ = masked_lm_speed.build(name, "gmlp_tiny", length, 8192)
            x, y = masked_lm_speed.batch(
                model, length, max(1, batch_tokens // length), 8192
            )
            step = lambda: model.train_on_batch(x, y)  # noqa: E731
        step()
        step()
        steps[row] = step
        return {
            "built": row,
            "package": os.path.dirname(keras_gmlp.__file__),
            "kernels": getattr(kernels, "mode", lambda: None)(),
        }

    def run(row, repeats):
        wall, cpu = common.timed(steps[row], repeats)
        return {"seconds": wall / repeats, "cpu_seconds": cpu / repeats}

    common.serve({"build": build, "run": run})


def generation_step(preset="gmlp_tiny"):
    """`generate` of `preset` (512 tokens, spatial weights at a trained
    model's scale, greedy) from a 128-token prompt: `(model, function)`."""
    import numpy as np

    from benchmarks import generation

    model = generation.build(preset, 512, "float32", seed=0)["cached"]
    rng = np.random.default_rng(0)
    token_ids = np.zeros((1, 512), "int32")
    token_ids[:, :128] = rng.integers(1, model.backbone.vocabulary_size, 128)
    inputs = {"token_ids": token_ids, "padding_mask": token_ids != 0}
    return model, lambda: model.generate(inputs, stop_token_ids=None)


def reference_timer(row, workers, timm, repeats):
    """A function timing one step of `row`'s reference (`--references`),
    or None: timm's model in `timm`, or the BERT in this checkout's
    worker, built here."""
    if row.startswith("ti16"):
        mode = "train" if row == "ti16_train" else "infer"

        def timm_step():
            answer = timm.ask(
                "run", mode=mode, precision="float32", steps=repeats
            )
            return answer.get("seconds", 0) / repeats or None

        return timm_step
    if row.startswith("mlm"):
        bert = f"{row}_bert"
        workers["this"].ask("build", row=bert)
        return lambda: (
            workers["this"].ask("run", row=bert, repeats=repeats).get("seconds")
        )
    return None


def measure(backend, args):
    """The rows of one backend, both versions alternated (and each row's
    reference, with `--references`)."""
    started = {}  # process -> {version: worker}, started on first use

    def workers_for(process):
        if process not in started:
            started[process] = {}
            versions = [
                ("this", common.REPOSITORY, {}),
                ("baseline", args.baseline, {}),
            ]
            if args.kernels_off:
                off = {"KERAS_GMLP_KERNELS": "off"}
                versions.append(("off", common.REPOSITORY, off))
            for version, path, settings in versions:
                env = dict(os.environ, KERAS_BACKEND=backend, **settings)
                env["PYTHONPATH"] = os.pathsep.join(
                    [os.path.abspath(path), str(common.REPOSITORY)]
                )
                command = [sys.executable, __file__, "--worker"]
                command += ["--batch-size", str(args.batch_size)]
                command += ["--batch-tokens", str(args.batch_tokens)]
                command += ["--process", process]
                started[process][version] = common.Worker(
                    command, env, sys.stderr
                )
        return started[process]

    timm = None
    if args.references and any(row.startswith("ti16") for row in args.rows):
        command = common.timm_worker_command(
            args.timm_python, "gmlp_ti16_224", args.batch_size, 224, 2, 2
        )
        env = common.worker_env(None, 2, timm=True)
        timm = common.Worker(command, env, sys.stderr)
    rows = []
    try:
        for row in args.rows:
            process = ROW_PROCESSES.get(row, "training")
            workers = workers_for(process)
            built = {v: w.ask("build", row=row) for v, w in workers.items()}
            package = built["baseline"].get("package", "")
            if not package.startswith(os.path.join(args.baseline, "")):
                raise SystemExit(
                    f"The baseline worker imported keras_gmlp from "
                    f"{package}; expected it from {args.baseline}."
                )
            if "off" in built and built["off"].get("kernels") != "off":
                raise SystemExit(
                    f"The kernels-off worker runs kernels "
                    f"{built['off'].get('kernels')!r}; expected 'off'."
                )
            reference = None
            if args.references:
                reference = reference_timer(row, workers, timm, args.repeats)
            times = {version: [] for version in workers}
            if reference is not None:
                times["reference"] = []
            for round_index in range(args.rounds):
                # ABBA: each checkout runs first in every other round.
                order = list(workers.items())[:: -1 if round_index % 2 else 1]
                for version, worker_process in order:
                    answer = worker_process.ask(
                        "run", row=row, repeats=args.repeats
                    )
                    times[version].append(answer.get("seconds"))
                if reference is not None:
                    times["reference"].append(reference())
            this = common.median(times["this"])
            baseline = common.median(times["baseline"])
            result = {
                "backend": backend,
                "row": row,
                "this_s": this,
                "baseline_s": baseline,
                "rounds_s": times,
                "x_baseline": baseline / this if this and baseline else None,
                "built": built,
                "process": process,
            }
            line = (
                f"{backend:10s} {row:13s} this {this:.3f} s  baseline "
                f"{baseline:.3f} s  x{result['x_baseline']:.2f}"
            )
            if "off" in times:
                result.update(against_kernels_off(times))
                line += (
                    f"  off {result['off_s']:.3f} s  this "
                    f"x{result['this_x_off']:.2f} of off"
                )
            if reference is not None:
                result.update(against_reference(times))
                line += (
                    f"  reference {result['reference_s']:.3f} s  this "
                    f"x{result['this_x_reference']:.2f}  baseline "
                    f"x{result['baseline_x_reference']:.2f}"
                )
            print(line, flush=True)
            rows.append(result)
    finally:
        everyone = [w for ws in started.values() for w in ws.values()]
        for worker_process in [*everyone, timm]:
            if worker_process is not None:
                worker_process.close()
    return rows


def against_reference(times):
    """The reference's median step time and each worker's ratio to it
    (the reference's time over the worker's), from one row's rounds."""
    reference = common.median(times["reference"])
    ratios = {"reference_s": reference}
    for version in ("this", "baseline", "off"):
        if version in times:
            ratios[f"{version}_x_reference"] = reference / common.median(
                times[version]
            )
    return ratios


def against_kernels_off(times):
    """The kernels-off worker's median step time, this checkout's speed
    over it and its speed over the baseline's, from one row's rounds."""
    off = common.median(times["off"])
    return {
        "off_s": off,
        "this_x_off": off / common.median(times["this"]),
        "off_x_baseline": common.median(times["baseline"]) / off,
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--baseline", help="the other checkout's folder")
    parser.add_argument(
        "--backends", nargs="+", default=["jax", "tensorflow", "torch"]
    )
    parser.add_argument(
        "--rows", nargs="+", default=list(ROWS), choices=ROWS + EXTRA_ROWS
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--references",
        action="store_true",
        help="also time timm's gMLP-Ti/16 and the matched BERT each round",
    )
    parser.add_argument(
        "--kernels-off",
        action="store_true",
        help="also time this checkout with KERAS_GMLP_KERNELS=off each round",
    )
    parser.add_argument("--timm-python", default=common.TIMM_PYTHON)
    parser.add_argument("--name", default="versions")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--process",
        choices=sorted(PROCESSES),
        default="training",
        help=argparse.SUPPRESS,
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args.batch_size, args.batch_tokens, args.process)
    if not args.baseline:
        raise SystemExit("Received no --baseline; expected a checkout folder.")
    args.baseline = common.checkout_folder(args.baseline)
    report = {**common.header(with_backend=False), "arguments": vars(args)}
    print(common.describe({**report, "backend": "all"}), flush=True)
    report["rows"] = [
        row for backend in args.backends for row in measure(backend, args)
    ]
    path = common.write_results(args.name, report)
    print(f"wrote {path}")
    print(
        json.dumps(
            [(r["backend"], r["row"], r["x_baseline"]) for r in report["rows"]]
        )
    )


if __name__ == "__main__":
    main()
