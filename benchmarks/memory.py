"""Peak memory (RSS) of a gMLP training step against timm's.

Each measurement is a fresh process: it imports the framework, builds the
image classifier, its optimizer and one batch, reads the peak resident set
size (`ru_maxrss`), runs `--steps` training steps and reads it again. The
baseline is timm's gMLP (PyTorch eager, AdamW, the same batch), measured
the same way by `timm_worker.py` under the timm virtualenv's python
(`--timm-python`). Columns, each with its `x_timm` ratio (keras / timm):

- `steady_step_peak_mib`: the peak of `--steady-steps` further steps over
  the RSS before them, the peak reset first (`common.steady_step_peak`,
  Linux): the training step's own memory, compilation excluded.
- `step_peak_mib`: the growth of the peak over the built model during the
  first steps (activations, gradients, optimizer slots and, under JAX and
  TensorFlow, XLA compilation).
- `peak_mib`: the process's whole peak, imports included.

With `--baseline` (another checkout, e.g. a git worktree of an older
commit) each backend's row is measured with that checkout's `keras_gmlp`
too, and `x_baseline` is this checkout's figure over the baseline's
(`--timm-python none` skips timm). With `--kernels-without OPERATION...`
this checkout is measured a second time with those operations' kernels off
(`keras_gmlp.kernels.configure("auto", operations=...)`, version
`without_kernels`), and `x_without_kernels` is this checkout's figure over
that row's: what the kernels save. `--fit-on-tf-data` trains with
`model.fit` on a `tf.data` dataset of the batch, as the image recipes feed
it, instead of `train_on_batch`.

Memory does not drift with the machine's load, so each row is one process,
not alternated rounds. TensorFlow keeps its step's buffers resident
between steps, so its steady figure is not meaningful. glibc's `MALLOC_*`
variables change RSS: the results record them.

Usage:
    python benchmarks/memory.py --models gmlp_ti16_224 gmlp_s16_224 \\
        --batch-size 32 --reuse-freed-memory --suffix _epyc25
    git worktree add ../baseline <commit>
    python benchmarks/memory.py --backends torch --batch-size 32 \\
        --baseline ../baseline --timm-python none --suffix _xeon_versions
    python benchmarks/memory.py --backends jax --models gmlp_s16_224 \\
        --batch-size 32 --reuse-freed-memory --fit-on-tf-data \\
        --kernels-without step_function --timm-python none \\
        --suffix _epyc26_step_function
Results: benchmarks/results/memory_<model><suffix>.json (every backend in
one file).
"""

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks.common import JIT_COMPILE  # noqa: E402

# The kernels' operations (`keras_gmlp.kernels.registry.KERNELS`), for
# `--kernels-without`; kept here so that the driver imports no backend.
KERNEL_OPERATIONS = (
    "attention",
    "batch_chains",
    "cache_update",
    "causal_lm_with_cache",
    "generate_function",
    "gmlp_block",
    "gmlp_block_with_cache",
    "step_function",
    "token_cross_entropy",
    "toeplitz_matrix",
)


def keras_measurement(args):
    """In a fresh process: peak RSS before and after the training steps.

    `keras_gmlp` comes from the first checkout on `PYTHONPATH`."""
    root = str(common.REPOSITORY)
    sys.path[:] = [path for path in sys.path if path != root] + [root]
    common.start_reusing_freed_memory(args.reuse_freed_memory)
    common.configure_threads(args.threads, args.share_cores)
    import keras

    if args.kernels_without:
        from keras_gmlp.kernels import registry

        operations = set(registry.KERNELS) - set(args.kernels_without)
        registry.configure("auto", operations=operations)

    remat_mode = "activations" if args.remat_activations else None
    with keras.RematScope(mode=remat_mode):
        model = common.build_image_classifier(
            args.model, args.image_size, JIT_COMPILE[args.jit], args.precision
        )
    images, labels = common.random_image_batch(args.batch_size, args.image_size)
    if args.fit_on_tf_data:
        import tensorflow as tf

        batch = tf.data.Dataset.from_tensors((images, labels))

        def train(steps):
            model.fit(batch.repeat(steps), verbose=0)

    else:

        def train(steps):
            for _ in range(steps):
                model.train_on_batch(images, labels)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    after_each_step = []
    for _ in range(args.steps):
        train(1)
        after_each_step.append(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        )
    after = after_each_step[-1] if after_each_step else before
    steady = common.steady_step_peak(lambda: train(args.steady_steps), 1)
    answer = {
        "maxrss_built_kib": before,
        "maxrss_trained_kib": after,
        "maxrss_after_each_step_kib": after_each_step,
    }
    print(json.dumps({**answer, **steady}))


def timm_measurement(args, model):
    """timm in a fresh process: the worker's `memory` command (nothing
    with `--timm-python none`)."""
    if args.timm_python == "none":
        return {}
    command = common.timm_worker_command(
        args.timm_python,
        model,
        args.batch_size,
        args.image_size,
        args.threads,
        warmup=0,
    )
    process = subprocess.run(
        command,
        input=json.dumps(
            {
                "op": "memory",
                "steps": args.steps,
                "steady_steps": args.steady_steps,
            }
        )
        + "\n",
        env=common.worker_env(None, args.threads, timm=True),
        capture_output=True,
        text=True,
    )
    lines = process.stdout.splitlines()
    return json.loads(lines[1]) if len(lines) > 1 else {"error": "failed"}


def summarise(answer):
    """`(peak, step peak, steady step peak)` in MiB (None where missing)."""
    if "maxrss_trained_kib" not in answer:
        return None, None, None
    peak = answer["maxrss_trained_kib"] / 1024
    steady = None
    if "steady_hwm_kib" in answer:
        steady = (answer["steady_hwm_kib"] - answer["steady_rss_kib"]) / 1024
    return peak, peak - answer["maxrss_built_kib"] / 1024, steady


def ratio(value, baseline):
    return value / baseline if value and baseline else None


def compare_with_baseline(rows, version="baseline"):
    """Adds to each of this checkout's rows its figures over the `version`
    row of the same backend and compilation (`*_x_<version>`)."""
    baselines = {
        (row["backend"], row["jit_compile"]): row
        for row in rows
        if row["version"] == version
    }
    for row in rows:
        baseline = baselines.get((row["backend"], row["jit_compile"]))
        if row["version"] != "this" or baseline is None:
            continue
        for figure in ("steady_step_peak_mib", "step_peak_mib", "peak_mib"):
            name = figure.replace("_mib", f"_x_{version}")
            row[name] = ratio(row[figure], baseline[figure])


def main():
    parser = common.image_benchmark_parser(__doc__)
    parser.add_argument(
        "--jit-modes",
        nargs="+",
        default=["auto"],
        choices=list(JIT_COMPILE),
    )
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument(
        "--remat-activations",
        action="store_true",
        help="build the Keras models under keras.RematScope(mode="
        "'activations'): under TensorFlow, the spatial gating unit's "
        "recomputing gate",
    )
    common.add_reuse_freed_memory_argument(parser)
    parser.add_argument(
        "--share-cores",
        action="store_true",
        help="the TensorFlow workers call keras_gmlp.kernels."
        "share_cores_between_chains() first, as the image jobs do",
    )
    parser.add_argument(
        "--steady-steps",
        type=int,
        default=3,
        help="steps measured after a reset of the peak (compilation over)",
    )
    # Internal: one measurement in this process.
    parser.add_argument(
        "--measure", action="store_true", help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--baseline",
        help="another checkout's folder: its keras_gmlp measured too",
    )
    parser.add_argument(
        "--kernels-without",
        nargs="+",
        default=[],
        choices=sorted(KERNEL_OPERATIONS),
        help="also measure this checkout with these operations' kernels off",
    )
    parser.add_argument(
        "--fit-on-tf-data",
        action="store_true",
        help="train with model.fit on a tf.data dataset, not train_on_batch",
    )
    parser.add_argument("--jit", default="jit")
    parser.add_argument("--precision", default="float32")
    args = parser.parse_args()
    if args.measure:
        keras_measurement(args)
        return
    if args.baseline:
        args.baseline = common.checkout_folder(args.baseline)

    rows = []
    for model in args.models:
        record = common.header(with_backend=False)
        record["arguments"] = vars(args)
        # glibc's allocator settings change RSS (see the docstring).
        record["malloc_environment"] = {
            name: value
            for name, value in os.environ.items()
            if name.startswith("MALLOC_")
        }
        timm_peak, timm_step, timm_steady = summarise(
            timm_measurement(args, model)
        )
        record["timm"] = {
            "peak_mib": timm_peak,
            "step_peak_mib": timm_step,
            "steady_step_peak_mib": timm_steady,
        }
        model_rows = []
        checkouts = {"this": (str(common.REPOSITORY), [])}
        if args.baseline:
            checkouts["baseline"] = (os.path.abspath(args.baseline), [])
        if args.kernels_without:
            checkouts["without_kernels"] = (
                str(common.REPOSITORY),
                ["--kernels-without", *args.kernels_without],
            )
        for backend, jit, (version, (checkout, flags)) in itertools.product(
            args.backends, args.jit_modes, checkouts.items()
        ):
            env = common.worker_env(backend, args.threads)
            env["PYTHONPATH"] = os.pathsep.join([checkout, env["PYTHONPATH"]])
            answer = common.run_json(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--measure",
                    "--worker-model",
                    model,
                    "--jit",
                    jit,
                    "--batch-size",
                    str(args.batch_size),
                    "--image-size",
                    str(args.image_size),
                    "--steps",
                    str(args.steps),
                    "--steady-steps",
                    str(args.steady_steps),
                    "--threads",
                    str(args.threads),
                    *common.reuse_freed_memory_flags(args.reuse_freed_memory),
                    *(
                        ["--remat-activations"]
                        if args.remat_activations
                        else []
                    ),
                    *(["--share-cores"] if args.share_cores else []),
                    *(["--fit-on-tf-data"] if args.fit_on_tf_data else []),
                    *flags,
                ],
                env,
            )
            peak, step, steady = summarise(answer)
            model_rows.append(
                {
                    "model": model,
                    "backend": backend,
                    "version": version,
                    "jit_compile": JIT_COMPILE[jit],
                    "steady_step_peak_mib": steady,
                    "timm_steady_step_peak_mib": timm_steady,
                    "steady_x_timm": ratio(steady, timm_steady),
                    "step_peak_mib": step,
                    "timm_step_peak_mib": timm_step,
                    "step_x_timm": ratio(step, timm_step),
                    "peak_mib": peak,
                    "timm_peak_mib": timm_peak,
                    "peak_x_timm": ratio(peak, timm_peak),
                    "peak_after_each_step_mib": [
                        kib / 1024
                        for kib in answer.get("maxrss_after_each_step_kib", [])
                    ],
                    "error": answer.get("error"),
                }
            )
            print(model_rows[-1], file=sys.stderr)
        compare_with_baseline(model_rows)
        compare_with_baseline(model_rows, "without_kernels")
        record["rows"] = model_rows
        common.write_results(f"memory_{model}{args.suffix}", record)
        rows.extend(model_rows)
    machine = common.cpu_info()
    print(
        f"\n{common.cpu_name(machine)}, flags "
        f"{' '.join(machine['flags'])}; batch "
        f"{args.batch_size}, {args.image_size}px, {args.steps} steps\n"
    )
    common.print_table(
        rows,
        [
            "model",
            "backend",
            "version",
            "jit_compile",
            "steady_step_peak_mib",
            "timm_steady_step_peak_mib",
            "steady_x_timm",
            "step_peak_mib",
            "timm_step_peak_mib",
            "step_x_timm",
            "peak_mib",
            "timm_peak_mib",
            "peak_x_timm",
            "steady_step_peak_x_baseline",
            "step_peak_x_baseline",
            "peak_x_baseline",
            "steady_step_peak_x_without_kernels",
            "peak_x_without_kernels",
            "error",
        ],
    )


if __name__ == "__main__":
    main()
