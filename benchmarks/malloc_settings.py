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

Usage:
    python benchmarks/malloc_settings.py --backends jax tensorflow torch \
        --batch-sizes 8 32 --rounds 5
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
}
# The variants whose worker calls `keras_gmlp.training.reuse_freed_memory()`
# before anything else.
REUSE_FREED_MEMORY = {"reuse_freed_memory"}


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


def worker(args):
    """Builds the model, warms it up, then times steps on request."""
    common.start_reusing_freed_memory(args.reuse_freed_memory)
    common.configure_threads(args.threads)
    model = common.build_image_classifier(
        args.model, 224, "auto", args.precision
    )
    images, labels = common.random_image_batch(args.batch_size, 224)
    steps = {
        "train": lambda: model.train_on_batch(images, labels),
        "infer": lambda: model.predict_on_batch(images),
    }
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


def start_worker(args, backend, batch_size, variant):
    """A persistent worker process of one variant (`common.Worker`)."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        "--model",
        args.model,
        "--batch-size",
        str(batch_size),
        "--precision",
        args.precision,
        "--threads",
        str(args.threads),
        "--warmup",
        str(args.warmup),
        *common.reuse_freed_memory_flags(variant in REUSE_FREED_MEMORY),
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


def measure(args, backend, batch_size):
    """Rows of one backend and batch size: each of `args.variants` against
    `default`, all alternated."""
    names = ["default", *[v for v in args.variants if v != "default"]]
    workers = {}
    try:
        for variant in names:
            print(f"  {backend} {variant}, batch {batch_size}", flush=True)
            workers[variant] = start_worker(args, backend, batch_size, variant)
        samples = {(mode, v): [] for mode in ("train", "infer") for v in names}
        for round_index in range(args.rounds):
            # Flip the order every other round, so no variant always runs
            # right after the same other one's memory churn.
            order = names if round_index % 2 == 0 else names[::-1]
            for mode in ("train", "infer"):
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
    for mode in ("train", "infer"):
        default = samples[(mode, "default")]
        for variant in names[1:]:
            candidate = samples[(mode, variant)]
            rows.append(
                {
                    "backend": backend,
                    "batch_size": batch_size,
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
    parser.add_argument("--model", default="gmlp_ti16_224")
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
    common.add_reuse_freed_memory_argument(parser)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    run = common.header(with_backend=False)
    run["transparent_hugepage"] = transparent_hugepage_mode()
    rows = []
    for backend in args.backends:
        for batch_size in args.batch_sizes:
            rows.extend(measure(args, backend, batch_size))
    columns = [
        "backend",
        "batch_size",
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
