"""A/B: the spatial gating unit's recomputing training call under
TensorFlow, each form in its own process.

Issue 12 (peak training memory <= timm's). In TensorFlow training a gMLP
block made under `keras.RematScope(mode="activations")` runs its spatial
gating unit as one `tf.custom_gradient`
(`keras_gmlp.layers.tensorflow_spatial_gate`) that keeps the GELU's input
and the product `W @ LayerNorm(v) + b` for the backward pass and
recomputes the GELU, the norm and the second projection's input there.
The baseline (`autograd`) is the default: the same unit under
TensorFlow's own differentiation.

Each measurement is a fresh process that builds the model (the candidate
under the scope), runs `--warmup` steps and times `--steps` more (their
median); the two forms' processes alternate, `--rounds` pairs. `x
autograd` is the baseline's seconds per step over the recomputing one's
(above 1: faster), the median and range over the pairs. Models: a
gMLP-Ti/16 classifier (AdamW, 224 px) or, with `--masked-lm`, the
`gmlp_tiny` masked LM (the recipe's loss and metrics, 4,096 tokens a
batch, `masked_lm_speed.build`). Peak memory: `benchmarks/memory.py
--remat-activations`.

Why processes: with both models in one process (`common.run_ab`, 5
rounds) the recomputing gMLP-Ti step measured 0.89-0.90x (float32) and
0.93x (bfloat16) the default's in three runs, but 1.01x and 0.98x in a
fourth (`tensorflow_spatial_gate_in_process_xeon_amx_batch32_tensorflow
.json`), where every pair of processes of their own measured 0.81-0.91x
(float32). Alone, as a user runs it, the recomputation costs time.

Measured: see `benchmarks/README.md` (stops 39 and 40).

Usage:
    python benchmarks/tensorflow_spatial_gate.py --rounds 3
    python benchmarks/tensorflow_spatial_gate.py --masked-lm --lengths 128 512
Results: benchmarks/results/tensorflow_spatial_gate<suffix>.json
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "autograd"
CANDIDATE = "recomputed"
PRECISIONS = ("float32", "mixed_bfloat16")


def worker(args):
    """In a fresh process: the median seconds of one form's training
    steps, printed as JSON."""
    import keras

    from benchmarks import masked_lm_speed

    common.configure_threads(args.threads)
    remat_mode = "activations" if args.form == CANDIDATE else None
    with keras.RematScope(mode=remat_mode):
        if args.length:
            keras.config.set_dtype_policy(args.precision)
            model, _ = masked_lm_speed.build(
                "gmlp", "gmlp_tiny", args.length, args.vocabulary_size
            )
            x, y = masked_lm_speed.batch(
                model,
                args.length,
                max(1, args.batch_tokens // args.length),
                args.vocabulary_size,
            )
        else:
            model = common.build_image_classifier(
                "gmlp_ti16_224", 224, "auto", args.precision
            )
            x, y = common.random_image_batch(args.batch_size, 224)
    for _ in range(args.warmup):
        model.train_on_batch(x, y)
    seconds = []
    for _ in range(args.steps):
        start = time.perf_counter()
        model.train_on_batch(x, y)
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"seconds": common.median(seconds)}))


def measure(args, form, precision, length):
    """One form's median step seconds, from a fresh process."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        "--form",
        form,
        "--precision",
        precision,
        "--length",
        str(length or 0),
    ]
    for flag in ("batch_size", "batch_tokens", "vocabulary_size", "threads"):
        command += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    command += ["--steps", str(args.steps), "--warmup", str(args.warmup)]
    answer = common.run_json(
        command, common.worker_env("tensorflow", args.threads)
    )
    if "seconds" not in answer:
        raise RuntimeError(f"{form} worker failed: {answer.get('error')}")
    return answer["seconds"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog=__doc__.split("\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS
    )
    parser.add_argument(
        "--masked-lm",
        action="store_true",
        help="the gmlp_tiny masked LM at --lengths instead of gMLP-Ti/16",
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--vocabulary-size", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--suffix", default="", help="of the results file")
    # Internal: one measurement in this process.
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--form", default=BASELINE, help=argparse.SUPPRESS)
    parser.add_argument(
        "--precision", default="float32", help=argparse.SUPPRESS
    )
    parser.add_argument("--length", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return
    run = common.header(with_backend=False)
    run["backend"] = "tensorflow"
    rows = []
    lengths = args.lengths if args.masked_lm else [None]
    for precision in args.precisions:
        for length in lengths:
            times = {BASELINE: [], CANDIDATE: []}
            for _ in range(args.rounds):
                for form in times:
                    times[form].append(measure(args, form, precision, length))
            shape = f"gmlp_tiny_mlm_{length}" if length else "gmlp_ti16"
            row = common.ab_row(
                times[BASELINE], times[CANDIDATE], BASELINE, CANDIDATE
            )
            rows.append(dict(shape=shape, measure="train", precision=precision))
            rows[-1].update(row)
            print(rows[-1], flush=True)
    name = "tensorflow_spatial_gate" + ("_masked_lm" if args.masked_lm else "")
    common.finish_report(
        run,
        rows,
        common.ab_columns(BASELINE, CANDIDATE),
        name + args.suffix,
        arguments=vars(args),
    )


if __name__ == "__main__":
    main()
