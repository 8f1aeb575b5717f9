"""A/B: glibc malloc settings for a training process, per backend.

Issue 12. Found by counting a JAX training step's page faults
(`getrusage`, then `strace -e trace=mmap,munmap`): XLA:CPU allocates a
step's temporaries as one buffer per execution (gMLP-Ti/16, float32:
325 MB at batch 8, 1.66 GB at batch 32) and frees it after. glibc
serves a block that large with a fresh `mmap` every time (above its
largest mmap threshold, 32 MiB; from a thread's own arena, whose heaps
are at most 64 MiB, always),
so every step faults the whole buffer in again, 4 KiB at a time: about
80,000 minor faults and 0.14-0.19 s of system time per gMLP-Ti step at
batch 8 (a step of 0.6-0.8 s on 2 cores), 414,000 faults and 0.8-0.9 s
at batch 32. TensorFlow's steps (its own allocator keeps its memory) and
torch's fault a few hundred to 10,000 times (counted the same way, batch
8).

glibc reads these settings when a process starts, so they cannot be
switched inside one: each variant is its own persistent worker process
(the same model, seed and batch), and the driver alternates them round
by round, the order flipped every other round. Variants (`VARIANTS`):

- `default`: glibc's defaults.
- `huge_pages`: `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`: glibc asks for
  transparent huge pages (`madvise(MADV_HUGEPAGE)`) on what it maps, so
  a 2 MiB page faults in at once (the kernel's
  `transparent_hugepage/enabled` must be `madvise` or `always`).
- `one_arena`: `MALLOC_ARENA_MAX=1 MALLOC_MMAP_MAX_=0
  MALLOC_TRIM_THRESHOLD_=<64 GiB>`: every thread allocates from the main
  heap, which grows with `brk` and is never trimmed, so a freed buffer
  is reused, already faulted in, by the next step. The process keeps its
  peak memory resident, and its threads share one allocator lock.
- `reuse_freed_memory`: no environment; the worker calls
  `keras_gmlp.training.reuse_freed_memory()` first, as the `keras-gmlp`
  command does: JAX runs each computation on the calling (main) thread,
  and glibc's main heap serves every block and is never trimmed
  (`mallopt`); the other threads keep their own arenas.

Measures: `train_on_batch` (AdamW) and `predict_on_batch` of a gMLP
image classifier at 224 px; per step, wall seconds, minor page faults,
and user and system CPU seconds. `x default` is the default's wall
seconds over the variant's, per round, median (above 1: the variant is
faster).

Measured (an idle 2-core AMD EPYC with AVX-512 and AVX512-BF16, the
kernel's transparent huge pages `madvise`, its `defrag` `madvise`;
gMLP-Ti/16, float32, JAX, 5 rounds of 3 steps;
`malloc_settings_epyc_avx512.json`), x default (the rounds' range):

| batch | measure | huge_pages | one_arena |
|---|---|---|---|
| 8 | train | 0.84 (0.77-0.99) | 1.04 (0.89-1.27) |
| 8 | infer | 1.02 (0.91-1.24) | 0.98 (0.81-1.22) |
| 32 | train | 0.84 (0.82-0.89) | 1.12 (1.07-1.25) |
| 32 | infer | 1.08 (1.01-1.18) | 1.01 (0.95-1.12) |

Then `one_arena` against `reuse_freed_memory`, same settings, one run
(`malloc_settings_epyc_avx512_reuse.json`), x default:

| batch | measure | one_arena | reuse_freed_memory |
|---|---|---|---|
| 8 | train | 1.09 (1.06-1.13) | **1.16** (1.13-1.18) |
| 8 | infer | 0.96 (0.92-1.02) | 1.01 (1.01-1.11) |
| 32 | train | 1.14 (1.11-1.25) | **1.21** (1.16-1.32) |
| 32 | infer | 0.98 (0.95-1.04) | 1.01 (0.89-1.07) |

Per training step under `reuse_freed_memory`: 404 minor faults and
0.009 system seconds at batch 8, 1,570 and 0.018 s at batch 32 (default:
79,600 and 0.15 s; 418,000 and 0.86 s).

Per training step, default / huge_pages / one_arena: 79,600 / 705 /
392 minor faults and 0.16 / 0.31 / 0.02 system seconds at batch 8;
417,000 / 1,400 / 0 faults and 0.78 / 1.79 / 0.04 s at batch 32. Huge
pages fault less but cost more system time (with `defrag` `madvise` the
kernel may compact memory, synchronously, for each 2 MiB page) and are
slower. One arena removes the faults:
JAX training 1.04x faster at batch 8, 1.12x at batch 32; inference,
which allocates little, is unchanged.

`one_arena` is not for a program fed by tf.data. glibc takes these
settings from the environment when the process starts, and they hold
for every thread of the process, tf.data's too, which then share one
allocator lock. The
CIFAR-10 pipeline with the paper's augmentation
(`benchmarks/image_pipeline.py --quick`, JAX, separate processes
alternated, two runs each) produced 88 and 105 images/s under one arena
against 202 and 239 without, and `model.fit` fed by it ran at 131 and
171 against 274 and 294 images/s (the digits pipeline, light: within
the runs' spread). So neither the package nor the `keras-gmlp` command,
whose recipes train from tf.data, sets them.

`reuse_freed_memory` leaves the arenas alone: only the main thread,
which now runs JAX's computations, allocates from the main heap, and
tf.data's threads keep theirs. `benchmarks/image_pipeline.py --quick`,
JAX, runs alternated, images/s without / with, the CIFAR-10 pipeline
with the paper's augmentation: 8 timed batches
(`image_pipeline_jax_quick_{plain,reuse}_{1,2}.json`): pipeline 201,
204 / 177, 181, `model.fit` fed by it 318, 311 / 296, 328, its training
step 626, 620 / 779, 754; 20 timed batches (`_quick20_`): pipeline
187, 179 / 187, 192, `fit` 184, 174 / 206, 211, training step 546, 569
/ 662, 786. The digits quick-start's `fit` (8 batches): 2,459, 2,936 /
3,567, 3,301. So the `keras-gmlp` command and the recipes call it
(under JAX only: TensorFlow's steps fault a few hundred times, torch's
27,000 at batch 32 for 0.05 of a 2.2 s step's system seconds).

`main_heap` (stop 58): the worker makes the `mallopt` calls of
`reuse_freed_memory` itself, on any backend (JAX's dispatch setting
left alone). Under torch, a masked-LM step (`--task masked_lm`, the
models of `masked_lm_speed.py`, 4,096 tokens a batch) faults 12,000 to
20,000 pages by default, 1 to 2 with it; a gMLP-Ti/16 training step at
batch 32 about 8,600 (the 27,000 above were at batch 8 on another
machine). On an idle 2-core AMD EPYC of family 25, model 17 (AVX-512,
AVX512-BF16, no AMX), 0ddc5cc, x default (rounds' range), 9 rounds of 5
steps (masked LM) and 5 of 3 (`malloc_settings_epyc25_*_stop58.json`):

| torch step | n = 128 / batch 32 | n = 512 |
|---|---|---|
| `gmlp_tiny` masked LM | 1.02 (0.94-1.12) | 1.00 (0.92-1.10) |
| matched BERT masked LM | 1.00 (0.92-1.11) | 1.04 (0.97-1.13) |
| gMLP-Ti/16 train / infer | 0.99 (0.96-0.99) / 1.02 (0.95-1.05) | |

The system time fell by 0.017-0.031 s a masked-LM step (both cores'
sum), the wall time by less than the rounds' spread, and the image
step's system time rose (0.019 to 0.039 s). So `reuse_freed_memory`
stays JAX's only.

Usage:
    python benchmarks/malloc_settings.py --backends jax tensorflow torch \
        --batch-sizes 8 32 --rounds 5
    python benchmarks/malloc_settings.py --backends torch --task masked_lm \
        --text-model gmlp --lengths 128 512 --variants main_heap
Results: benchmarks/results/malloc_settings<suffix>.json
"""

import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

# name -> the environment variables the variant sets (glibc's defaults
# when empty); every worker starts without any of the caller's
# `common.MALLOC_VARIABLES`.
VARIANTS = {
    "default": {},
    "huge_pages": {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"},
    "one_arena": {
        "MALLOC_ARENA_MAX": "1",
        "MALLOC_MMAP_MAX_": "0",
        "MALLOC_TRIM_THRESHOLD_": str(64 << 30),
    },
    "reuse_freed_memory": {},
    "main_heap": {},
}
# The variants whose worker calls `keras_gmlp.training.reuse_freed_memory()`
# before anything else.
REUSE_FREED_MEMORY = {"reuse_freed_memory"}
# The variants whose worker makes its main heap keep every block itself,
# on any backend: `reuse_freed_memory`'s `mallopt` calls alone.
MAIN_HEAP = {"main_heap"}


def keep_freed_memory_in_main_heap():
    """glibc's main heap serves every block and is never trimmed, as
    `keras_gmlp.training.reuse_freed_memory()` makes it under JAX
    (`allocator.keep_freed_memory_in_main_heap`)."""
    from keras_gmlp.training import allocator

    if not allocator.keep_freed_memory_in_main_heap():
        raise RuntimeError("glibc's mallopt refused the main-heap settings")


def variant_env(backend, threads, variant):
    """A worker's environment: `common.worker_env`, without the caller's
    malloc settings, with `variant`'s."""
    env = common.worker_env(backend, threads)
    for name in common.MALLOC_VARIABLES:
        env.pop(name, None)
    env.update(VARIANTS[variant])
    return env


def transparent_hugepage_mode():
    """The kernel's THP mode (`always`, `madvise`, `never`) or None."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as file:
            text = file.read()
    except OSError:
        return None
    return text[text.index("[") + 1 : text.index("]")] if "[" in text else None


def modes(task):
    """The steps a worker of `task` times."""
    return ("train",) if task == "masked_lm" else ("train", "infer")


def worker_steps(args):
    """`{mode: step}` of the worker's model, built as `args` say."""
    if args.task == "masked_lm":
        from benchmarks import masked_lm_speed

        model, _ = masked_lm_speed.build(
            args.text_model, "gmlp_tiny", args.length, 8192
        )
        inputs, labels = masked_lm_speed.batch(
            model, args.length, args.batch_tokens // args.length, 8192
        )
        return {"train": lambda: model.train_on_batch(inputs, labels)}
    model = common.build_image_classifier(
        args.model, 224, "auto", args.precision
    )
    images, labels = common.random_image_batch(args.batch_size, 224)
    return {
        "train": lambda: model.train_on_batch(images, labels),
        "infer": lambda: model.predict_on_batch(images),
    }


def worker(args):
    """Builds the model, warms it up, then times steps on request."""
    if args.main_heap:
        keep_freed_memory_in_main_heap()
    common.start_reusing_freed_memory(args.reuse_freed_memory)
    common.configure_threads(args.threads)
    steps = worker_steps(args)
    for step in steps.values():
        for _ in range(args.warmup):
            step()

    def run(mode, steps_per_measure):
        """Per-step wall and CPU seconds and minor faults of `mode`."""
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        for _ in range(steps_per_measure):
            steps[mode]()
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "wall_s": wall / steps_per_measure,
            "user_s": (after.ru_utime - before.ru_utime) / steps_per_measure,
            "system_s": (after.ru_stime - before.ru_stime) / steps_per_measure,
            "minor_faults": (after.ru_minflt - before.ru_minflt)
            / steps_per_measure,
        }

    common.serve({"run": run})


def start_worker(args, backend, size, variant):
    """A persistent worker process of one variant (`common.Worker`), of
    batch `size` (images) or sequence length `size` (masked LM)."""
    text = args.task == "masked_lm"
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        "--model",
        args.model,
        "--batch-size",
        str(args.batch_size if text else size),
        "--precision",
        args.precision,
        "--threads",
        str(args.threads),
        "--warmup",
        str(args.warmup),
        "--task",
        args.task,
        "--text-model",
        args.text_model,
        "--length",
        str(size if text else args.length),
        "--batch-tokens",
        str(args.batch_tokens),
        *common.reuse_freed_memory_flags(variant in REUSE_FREED_MEMORY),
        *(["--main-heap"] if variant in MAIN_HEAP else []),
    ]
    worker = common.Worker(
        command, variant_env(backend, args.threads, variant), None
    )
    if not worker.wait_ready():
        raise RuntimeError(f"{variant} worker for {backend} did not start")
    return worker


def ask(worker, **arguments):
    """`worker.ask(**arguments)`, raising its error if it has one."""
    answer = worker.ask(**arguments)
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer


def measure(args, backend, size):
    """Rows of one backend and size (`start_worker`): each of
    `args.variants` against `default`, all alternated."""
    if args.task == "masked_lm":
        label = {"model": args.text_model, "length": size}
    else:
        label = {"model": args.model, "batch_size": size}
    names = ["default", *[v for v in args.variants if v != "default"]]
    workers = {}
    try:
        for variant in names:
            print(f"  {backend} {variant}, {label}", flush=True)
            workers[variant] = start_worker(args, backend, size, variant)
        samples = {(mode, v): [] for mode in modes(args.task) for v in names}
        for round_index in range(args.rounds):
            # Flip the order every other round, so no variant always runs
            # right after the same other one's memory churn.
            order = names if round_index % 2 == 0 else names[::-1]
            for mode in modes(args.task):
                for variant in order:
                    samples[(mode, variant)].append(
                        ask(
                            workers[variant],
                            op="run",
                            mode=mode,
                            steps_per_measure=args.steps,
                        )
                    )
            print(f"  round {round_index} done", flush=True)
    finally:
        for process in workers.values():
            process.close()
    rows = []
    for mode in modes(args.task):
        default = samples[(mode, "default")]
        for variant in names[1:]:
            candidate = samples[(mode, variant)]
            rows.append(
                {
                    "backend": backend,
                    **label,
                    "measure": mode,
                    "variant": variant,
                    **common.ab_row(
                        [s["wall_s"] for s in default],
                        [s["wall_s"] for s in candidate],
                        "default",
                        "variant",
                    ),
                    **{
                        f"{side}_{field}": common.median(
                            [sample[field] for sample in runs]
                        )
                        for side, runs in (
                            ("default", default),
                            ("variant", candidate),
                        )
                        for field in ("minor_faults", "system_s", "user_s")
                    },
                    "samples": {"default": default, variant: candidate},
                }
            )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--backends", nargs="+", default=["jax"], choices=common.BACKENDS
    )
    parser.add_argument(
        "--task",
        default="image",
        choices=["image", "masked_lm"],
        help="an image classifier (--model) or a masked LM (--text-model)",
    )
    parser.add_argument("--model", default="gmlp_ti16_224")
    parser.add_argument(
        "--text-model",
        default="gmlp",
        help="a masked_lm_speed.py model: gmlp, amlp, bert, bert_amlp",
    )
    parser.add_argument("--lengths", nargs="+", type=int, default=[128])
    parser.add_argument("--length", type=int, default=128, help="worker")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS
    )
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[8])
    parser.add_argument("--batch-size", type=int, default=8, help="worker")
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="per measure")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--suffix", default="", help="of the results file")
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--main-heap", action="store_true", help="worker")
    common.add_reuse_freed_memory_argument(parser)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    run = common.header(with_backend=False)
    run["transparent_hugepage"] = transparent_hugepage_mode()
    rows = []
    for backend in args.backends:
        sizes = args.lengths if args.task == "masked_lm" else args.batch_sizes
        for size in sizes:
            rows.extend(measure(args, backend, size))
    columns = [
        "backend",
        "model",
        "length" if args.task == "masked_lm" else "batch_size",
        "measure",
        "variant",
        "default_ms",
        "variant_ms",
        "x_default",
        "rounds_min",
        "rounds_max",
        "default_minor_faults",
        "variant_minor_faults",
        "default_system_s",
        "variant_system_s",
    ]
    common.finish_report(
        run,
        rows,
        columns,
        f"malloc_settings{args.suffix}",
        arguments=vars(args),
    )


if __name__ == "__main__":
    main()
