"""Vision training and inference images/s against timm's gMLP.

For gMLP-Ti/16 and gMLP-S/16 (`--models`) and each Keras backend, one run
alternates, round by round, a persistent timm worker (the baseline:
timm's `gmlp_*16_224`, PyTorch eager, AdamW, `timm_worker.py` under the
timm virtualenv's python, `--timm-python`) and a persistent Keras worker
per backend (this file with `--worker`): the same batch, precision and
threads, each warmed up, each step timed after an untimed one. Keras:
`keras_gmlp.models.image_classifier` compiled with `FusedAdamW` and sparse
cross-entropy, `train_on_batch` / `predict_on_batch`, per `--jit` mode;
`mixed_bfloat16` rows against timm under `torch.autocast` bfloat16.

Columns, medians over the rounds:
- `train_x_timm`, `infer_x_timm`: Keras images/s over timm's, same round;
  `*_x_timm_cpu` the same per CPU-second of each process.
- `train_mfu`: model FLOPs/s of the training step (counted from the
  architecture, `common.image_model_flops`; a step is 3x the forward) over
  the same process's dense 2048^3 matmul FLOPs/s, same round; timm's too.
- `train_cores`: CPU seconds over wall seconds during the step.
bfloat16 rows are marked where the CPU has neither AVX512-BF16 nor AMX.

Usage:
    python benchmarks/vision.py --models gmlp_ti16_224 gmlp_s16_224 \\
        --precisions float32 mixed_bfloat16 --jit auto --batch-size 32 \\
        --reuse-freed-memory --share-cores --suffix _epyc25
    KERAS_BACKEND=jax python benchmarks/vision.py --profile
Results: benchmarks/results/vision_<model><suffix>.json (every backend in
one file); the workers' stderr goes to benchmarks/results/vision_workers.log.
"""

import argparse
import concurrent.futures
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks.common import JIT_COMPILE  # noqa: E402

TIMM_PRECISION = {"float32": "float32", "mixed_bfloat16": "bfloat16"}


# ---------------------------------------------------------------- worker


def worker(args):
    """A Keras worker: builds every variant, then answers commands."""
    import keras
    import numpy as np

    if args.job_xla_flags:
        from keras_gmlp.kernels import set_job_xla_flags

        set_job_xla_flags()  # does nothing outside TensorFlow
    common.start_reusing_freed_memory(args.reuse_freed_memory)
    shared = common.configure_threads(args.threads, args.share_cores)
    images, labels = common.random_image_batch(args.batch_size, args.image_size)
    variants, errors = {}, {}
    for variant in args.variants:
        jit, precision = variant.split(":")
        try:
            model = common.build_image_classifier(
                args.model, args.image_size, JIT_COMPILE[jit], precision
            )
            for _ in range(args.warmup):
                model.train_on_batch(images, labels)
                model.predict_on_batch(images)
            variants[variant] = model
        except Exception as error:  # reported as a row, the run goes on
            errors[variant] = f"{type(error).__name__}: {error}"[:300]
            print(f"{variant}: {errors[variant]}", file=sys.stderr)

    def run(variant, mode, steps):
        if variant in errors:
            return {"error": errors[variant]}
        model = variants[variant]
        if mode == "train":
            step = lambda: model.train_on_batch(images, labels)  # noqa: E731
        else:
            step = lambda: model.predict_on_batch(images)  # noqa: E731
        wall, cpu = common.timed(step, steps)
        return {"seconds": wall, "cpu_seconds": cpu}

    from keras_gmlp.kernels.batch_chains import CHAINS
    from keras_gmlp.kernels.matmul import matmul as package_matmul

    operands = {}
    # With the cores shared between the chains, one product has only its
    # share: the rate is that of `CHAINS` products side by side.
    side_by_side = CHAINS if shared else 1
    pool = concurrent.futures.ThreadPoolExecutor(CHAINS) if shared else None

    def matmul(precision, size=2048, repeats=3):
        dtype = "float32" if precision == "float32" else "bfloat16"
        if dtype not in operands:
            a = np.random.default_rng(1).uniform(size=(size, size))
            operands[dtype] = [
                keras.ops.convert_to_tensor(a, dtype=dtype) for _ in range(2)
            ]
        a, b = operands[dtype]

        def products():
            if side_by_side == 1:  # on this thread
                return common.block(package_matmul(a, b))
            tasks = [
                pool.submit(lambda: common.block(package_matmul(a, b)))
                for _ in range(side_by_side)
            ]
            for task in tasks:
                task.result()

        products()
        wall, cpu = common.timed(products, repeats)
        # Seconds per product, as the driver counts FLOPs.
        return {
            "seconds": wall / side_by_side,
            "cpu_seconds": cpu / side_by_side,
        }

    def info():
        return {
            "versions": common.versions(),
            "parameters": {
                name: model.count_params() for name, model in variants.items()
            },
            "errors": errors,
            "xla_flags": os.environ.get("XLA_FLAGS"),
        }

    common.serve({"run": run, "matmul": matmul, "info": info})


# ---------------------------------------------------------------- driver


def rate(answer, work):
    """Work per second of an answer, or None for an error."""
    if "seconds" not in answer:
        return None
    return work / answer["seconds"]


def measure_backend(args, model, backend, timm, log):
    """Alternates timm and one backend's variants; returns the rows."""
    jit_modes = [
        jit
        for jit in args.jit
        if not (backend == "torch" and jit == "jit" and not args.torch_compile)
    ]
    variants = [
        f"{jit}:{precision}"
        for precision in args.precisions
        for jit in jit_modes
    ]
    keras_worker = common.Worker(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            "--worker-model",
            model,
            "--batch-size",
            str(args.batch_size),
            "--image-size",
            str(args.image_size),
            "--threads",
            str(args.threads),
            "--warmup",
            str(args.warmup),
            "--variants",
            *variants,
            *common.reuse_freed_memory_flags(args.reuse_freed_memory),
            *(["--share-cores"] if args.share_cores else []),
            *(["--job-xla-flags"] if args.job_xla_flags else []),
        ],
        common.worker_env(backend, args.threads),
        log,
    )
    start = time.perf_counter()
    keras_worker.wait_ready()
    warmup_s = time.perf_counter() - start
    info = keras_worker.ask("info")
    images = args.batch_size * args.steps
    train_flops = 3 * common.forward_flops(model, args.image_size)
    matmul_flops = 2 * args.matmul_size**3 * args.matmul_repeats
    samples = {variant: [] for variant in variants}
    for round_index in range(args.rounds):
        order = variants if round_index % 2 == 0 else variants[::-1]
        for precision in args.precisions:
            timm_precision = TIMM_PRECISION[precision]
            matmul = {"precision": timm_precision}
            matmul.update(size=args.matmul_size, repeats=args.matmul_repeats)
            timm_matmul = rate(timm.ask("matmul", **matmul), matmul_flops)
            keras_matmul = rate(
                keras_worker.ask("matmul", **matmul), matmul_flops
            )
            for mode in ("train", "infer"):
                timm_answer = warm_then_time(
                    timm, mode=mode, precision=timm_precision, steps=args.steps
                )
                timm_rate = rate(timm_answer, images)
                for variant in order:
                    if not variant.endswith(precision):
                        continue
                    answer = warm_then_time(
                        keras_worker,
                        variant=variant,
                        mode=mode,
                        steps=args.steps,
                    )
                    keras_rate = rate(answer, images)
                    sample = {
                        "round": round_index,
                        "mode": mode,
                        "keras_images_per_s": keras_rate,
                        "timm_images_per_s": timm_rate,
                        "keras_cores": answer.get("cpu_seconds", 0)
                        / answer.get("seconds", 1),
                        "timm_cores": timm_answer.get("cpu_seconds", 0)
                        / timm_answer.get("seconds", 1),
                        "keras_matmul_flops": keras_matmul,
                        "timm_matmul_flops": timm_matmul,
                        "error": answer.get("error"),
                    }
                    samples[variant].append(sample)
            print(
                f"  round {round_index} {backend} {precision} done",
                file=sys.stderr,
            )
    keras_worker.close()
    rows = []
    for variant in variants:
        jit, precision = variant.split(":")
        row = {
            "model": model,
            "backend": backend,
            "jit_compile": JIT_COMPILE[jit],
            "precision": precision,
            "native_bf16": None,
        }
        for mode in ("train", "infer"):
            own = [s for s in samples[variant] if s["mode"] == mode]
            ratios = [
                s["keras_images_per_s"] / s["timm_images_per_s"]
                for s in own
                if s["keras_images_per_s"] and s["timm_images_per_s"]
            ]
            row[f"{mode}_x_timm"] = common.median(ratios)
            # Per CPU-second: fair when the shared machine gives the two
            # processes different shares of the cores.
            row[f"{mode}_x_timm_cpu"] = common.median(
                [
                    (s["keras_images_per_s"] / s["keras_cores"])
                    / (s["timm_images_per_s"] / s["timm_cores"])
                    for s in own
                    if s["keras_images_per_s"]
                    and s["timm_images_per_s"]
                    and s["keras_cores"]
                    and s["timm_cores"]
                ]
            )
            row[f"{mode}_images_per_s"] = common.median(
                [s["keras_images_per_s"] for s in own]
            )
            row[f"{mode}_cores"] = common.median(
                [s["keras_cores"] for s in own if s["keras_images_per_s"]]
            )
            row[f"timm_{mode}_images_per_s"] = common.median(
                [s["timm_images_per_s"] for s in own]
            )
            row[f"timm_{mode}_cores"] = common.median(
                [s["timm_cores"] for s in own]
            )
            if mode == "train":
                row["train_mfu"] = common.median(
                    [
                        s["keras_images_per_s"]
                        * train_flops
                        / s["keras_matmul_flops"]
                        for s in own
                        if s["keras_images_per_s"] and s["keras_matmul_flops"]
                    ]
                )
                row["timm_train_mfu"] = common.median(
                    [
                        s["timm_images_per_s"]
                        * train_flops
                        / s["timm_matmul_flops"]
                        for s in own
                        if s["timm_images_per_s"] and s["timm_matmul_flops"]
                    ]
                )
        row["matmul_gflops"] = common.median(
            [s["keras_matmul_flops"] for s in samples[variant]]
        )
        row["timm_matmul_gflops"] = common.median(
            [s["timm_matmul_flops"] for s in samples[variant]]
        )
        for key in ("matmul_gflops", "timm_matmul_gflops"):
            if row[key] is not None:
                row[key] /= 1e9
        row["error"] = info.get("errors", {}).get(variant)
        rows.append(row)
    return rows, {
        "versions": info.get("versions"),
        "parameters": info.get("parameters"),
        "xla_flags": info.get("xla_flags"),
        "warmup_s": warmup_s,
        "samples": samples,
    }


COLUMNS = [
    "model",
    "backend",
    "jit_compile",
    "precision",
    "train_x_timm",
    "infer_x_timm",
    "train_x_timm_cpu",
    "infer_x_timm_cpu",
    "train_mfu",
    "timm_train_mfu",
    "train_cores",
    "timm_train_cores",
    "matmul_gflops",
    "timm_matmul_gflops",
    "error",
]


def drive(args):
    machine = common.cpu_info()
    log_path = os.path.join(common.RESULTS, "vision_workers.log")
    os.makedirs(common.RESULTS, exist_ok=True)
    all_rows = []
    with open(log_path, "a") as log:
        for model in args.models:
            timm = common.Worker(
                common.timm_worker_command(
                    args.timm_python,
                    model,
                    args.batch_size,
                    args.image_size,
                    args.threads,
                    args.warmup,
                )
                + [
                    "--precisions",
                    *[TIMM_PRECISION[p] for p in args.precisions],
                ],
                common.worker_env(None, args.threads, timm=True),
                log,
            )
            timm_info = timm.ask("info")
            record = common.header(with_backend=False)
            record.update(
                {
                    "arguments": vars(args),
                    "timm": timm_info,
                    "train_gflop_per_image": 3
                    * common.forward_flops(model, args.image_size)
                    / 1e9,
                    "backends": {},
                    "rows": [],
                }
            )
            for backend in args.backends:
                print(f"{model} on {backend} ...", file=sys.stderr)
                rows, details = measure_backend(args, model, backend, timm, log)
                for row in rows:
                    if row["precision"] == "mixed_bfloat16":
                        row["native_bf16"] = machine["native_bfloat16"]
                        if not machine["native_bfloat16"]:
                            row["note"] = "no native bf16 on this CPU"
                record["backends"][backend] = details
                record["rows"].extend(rows)
                all_rows.extend(rows)
                common.write_results(f"vision_{model}{args.suffix}", record)
            timm.close()
    print(
        f"\n{common.cpu_name(machine)}, {machine['usable_cpus']} of "
        f"{machine['logical_cpus']} cpus, flags "
        f"{' '.join(machine['flags'])}; native bfloat16: "
        f"{machine['native_bfloat16']}; batch {args.batch_size}, "
        f"{args.image_size}px, {args.rounds} rounds of {args.steps} steps, "
        f"medians\n"
    )
    common.print_table(all_rows, COLUMNS)
    if not machine["native_bfloat16"] and "mixed_bfloat16" in args.precisions:
        print(
            "\nmixed_bfloat16 rows: no native bf16 on this CPU (no "
            "AVX512-BF16 or AMX): the bfloat16 targets do not apply here."
        )


def profile(args):
    """Prints where a training step's time goes, on one backend."""

    backend = os.environ["KERAS_BACKEND"]
    common.configure_threads(args.threads)
    jit = JIT_COMPILE[args.jit[0]]
    model = common.build_image_classifier(
        args.model, args.image_size, jit, "float32"
    )
    images, labels = common.random_image_batch(args.batch_size, args.image_size)
    model.train_on_batch(images, labels)
    if backend == "torch":
        import torch

        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU]
        ) as trace:
            model.train_on_batch(images, labels)
        print(
            trace.key_averages().table(
                sort_by="self_cpu_time_total", row_limit=20
            )
        )
        return
    if backend == "jax":
        import jax

        trainer_function = model.train_function
        print("train function:", trainer_function)
        print("XLA_FLAGS:", os.environ.get("XLA_FLAGS"))
        print("jax devices:", jax.devices())
    wall, cpu = common.timed(
        lambda: model.train_on_batch(images, labels), args.steps
    )
    print(f"{backend}: {wall / args.steps:.3f} s/step, cores {cpu / wall:.2f}")


def warm_then_time(worker, steps, **command):
    """`worker`'s answer to `run` of `steps` steps, after one untimed step:
    the first step after the other worker's turn (or a matmul) pays for
    cold caches and fresh memory pages, which a training loop repeating
    its step does not."""
    worker.ask("run", steps=1, **command)
    return worker.ask("run", steps=steps, **command)


def main():
    parser = common.image_benchmark_parser(__doc__)
    parser.add_argument(
        "--precisions",
        nargs="+",
        default=["float32"],
        choices=list(TIMM_PRECISION),
    )
    parser.add_argument(
        "--jit",
        nargs="+",
        default=["jit", "nojit"],
        choices=list(JIT_COMPILE),
        help="jit_compile=True, False and/or 'auto' (Keras' default)",
    )
    parser.add_argument(
        "--torch-compile",
        action="store_true",
        help="also jit_compile=True on torch (torch.compile; compiling the "
        "30-block step takes minutes)",
    )
    common.add_reuse_freed_memory_argument(parser)
    parser.add_argument(
        "--share-cores",
        action="store_true",
        help="the TensorFlow worker calls keras_gmlp.kernels."
        "share_cores_between_chains() first, as the image jobs do; its "
        "matmul rate is then that of the chains' products side by side",
    )
    parser.add_argument(
        "--job-xla-flags",
        action="store_true",
        help="the TensorFlow worker calls keras_gmlp.kernels."
        "set_job_xla_flags() first, as the jobs do",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="per timing")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--matmul-repeats", type=int, default=3)
    parser.add_argument(
        "--profile", action="store_true", help="profile one backend's step"
    )
    # Internal: the Keras worker.
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variants", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
    elif args.profile:
        profile(args)
    else:
        drive(args)


if __name__ == "__main__":
    main()
