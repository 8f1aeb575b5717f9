"""Peak memory (RSS) of a gMLP training step against timm's.

Issue 12, benchmark 5. Each measurement is a fresh process: it imports
the framework, builds the model and its optimizer and one batch, reads
the peak resident set size (`ru_maxrss`), runs N training steps and reads
it again. `step_peak_mib` is the growth of the peak over the built model:
activations kept for the backward pass, gradients, optimizer slots and,
on the first step, compilation. `steady_step_peak_mib` is the peak of
`--steady-steps` further steps over the RSS before them, the peak reset
first (`common.steady_step_peak`, Linux): the training step's own
memory, compilation excluded. `peak_mib` is the process's whole peak.
timm (PyTorch eager, `benchmarks/timm_worker.py` in the timm virtualenv)
is measured the same way with the same batch; `x timm` = keras / timm.
Memory does not depend on the machine's load, so one process per row.

Measured (gMLP-Ti/16, batch 8, 224 px, float32, 2 steps then 3 steady
steps, an idle 2-core AMD EPYC with AVX2;
`benchmarks/results/memory_gmlp_ti16_224*.json`), x timm:

| backend | steady step | first steps | whole peak |
|---|---|---|---|
| jax | 1.29 (779 / 604 MiB) | 2.34 | 1.58 |
| torch | 1.29 (779 / 604 MiB) | 1.62 | 1.42 |
| torch, both `MALLOC_MMAP_THRESHOLD_=131072` | 1.05 (541 / 513) | 1.49 | 1.37 |
| jax, both `MALLOC_MMAP_THRESHOLD_=131072` | 1.53 (785 / 513) | 2.62 | 1.62 |
| tensorflow (2-core Xeon, earlier) | not measurable | 2.53 | 1.92 |

On an idle 2-core Xeon with AVX-512, AVX512-BF16 and AMX, after the
one-kernel LayerNorm (torch) and the JAX functions (`jax_functions.py`),
same settings, no `MALLOC_` variable (`memory_gmlp_ti16_224_xeon_amx.json`):
torch 1.30 (797 / 611 MiB), 1.55, 1.40; jax 1.33 (815 / 611), 2.39, 1.61
(steady step, first steps, whole peak, x timm).

Under torch, after the spatial gating unit's recomputing training call
(`keras_gmlp.layers.torch_spatial_gate`: the GELU's output and the
normalised `v` recomputed in the backward pass, not kept), the same AMD
EPYC with AVX-512, the HEAD before it measured in the same session
(`memory_gmlp_*16_224_recomputed_gate.json` against
`_before_recomputed_gate.json`), x timm:

| model | steady step | first steps | whole peak |
|---|---|---|---|
| gMLP-Ti/16 | 0.80 (482 / 603 MiB) | 1.19 | 1.27 |
| gMLP-Ti/16, before | 1.32 (792 / 603 MiB) | 1.62 | 1.43 |
| gMLP-S/16 | 0.74 (894 / 1,210 MiB) | 0.85 | 1.07 |
| gMLP-S/16, before | 1.13 (1,370 / 1,210 MiB) | 1.32 | 1.35 |
| gMLP-Ti/16, projection folded | 0.72 (437 / 604 MiB) | 0.85 | 1.15 |
| gMLP-S/16, projection folded | 0.68 (833 / 1,220 MiB) | 0.73 | 1.00 |

The last two rows (`_recomputed_gate_folded.json`) are the unit as it is:
the block's second projection folded into the same function, its input
recomputed rather than kept.

The steady torch step now peaks below timm's. The whole peak stays
above it by what the process holds before training: the built gMLP-Ti
model's process has 1,212 MiB resident against timm's 918, for
`keras_gmlp.models` imports keras-hub, which imports TensorFlow (a
torch-backend Keras alone: about 520 MiB). The live tensors
(`live_memory.py`) at the step's peak: 414 MiB against timm's 607
(0.68x), activations 320 against 522.

Under JAX, after the unit's recomputing training call
(`keras_gmlp.layers.jax_spatial_gate`), same machine and session
(`memory_gmlp_ti16_224_jax_recomputed_gate.json` against
`_jax_before_recomputed_gate.json`), gMLP-Ti: steady step 0.64x timm's
(389 / 607 MiB; before 1.31x, 786 / 600), first steps 1.65x (before
2.36x, XLA's compilation included), whole peak 1.34x (before 1.60x).
With the block's second projection folded into the same function (its
input recomputed too; `_jax_recomputed_gate_folded.json`): steady step
0.53x (319 / 599 MiB), first steps 1.64x, whole peak 1.34x.

The target, peak training memory <= timm's, is met in the steady step
under torch and JAX, and under torch in the first steps too; JAX's first
steps (compilation) and, but for torch's gMLP-S, the whole process
(imports) stay above timm's. The first-step
figures of JAX and TensorFlow include XLA compilation; the steady
figures do not. TensorFlow keeps its step's buffers resident
between steps even after `malloc_trim`, so RSS cannot see its peak.

At the issue's batch of 32 (the same EPYC, float32;
`memory_<model>_epyc_avx512_batch32.json`), x timm, steady step / first
steps / whole peak: gMLP-Ti jax 0.66 (1,620 / 2,460 MiB) / 0.91 / 0.99,
torch 0.75 (1,850 / 2,460) / 0.64 / 0.84; gMLP-S jax 0.65 (3,220 /
4,970) / 0.84 / 0.90, torch 0.64 (3,200 / 4,970) / 0.60 / 0.73. The
activations outweigh the imports there, and every measure is at or
below timm's, JAX's first steps (compilation) included.

With `--reuse-freed-memory` (the JAX process calls
`keras_gmlp.training.reuse_freed_memory()` first, as the `keras-gmlp`
command does; `memory_<model>_epyc_avx512_batch32_reuse_jax.json`):
gMLP-Ti 0.65 / 0.93 / 1.01, unchanged, but gMLP-S 0.64 / 1.47 / 1.44
(a whole peak of 8,667 MiB against 5,472; 5,455 MiB after the first
step, 8,645 after the second). The cause: JAX runs a step on the calling
thread only when its inputs are ready, and it copies a numpy batch
(`random_image_batch`'s, or Keras' copy of a tf.data batch) on one of
its own threads when the array does not start on 64 bytes; the step
then ran on that thread, whose arena cannot keep the 3.3 GB buffer, so
glibc mapped a second one beside the main heap's (an `LD_PRELOAD`
logger of `posix_memalign` showed every other step's buffer at an
`mmap` address; a `fit` on tf.data ran 20-50 % of its steps there).
The gMLP tasks first made each JAX step wait for its batch's copies
when asynchronous dispatch is off
(`keras_gmlp.training.allocator.with_ready_inputs`):
gMLP-S 0.65 / 0.87 / 0.93 (5,518 MiB against 5,947; after each step
5,460, 5,481, 5,518); gMLP-Ti in three processes 0.66 / 0.91-0.92 /
1.00 twice, but once 0.66 / 1.57 / 1.47 (3,265 MiB after the first step,
4,874 after the second)
(`memory_<model>_epyc_avx512_batch32_reuse_jax_ready_inputs*.json`;
runs 2 and 3 were written as `_scratch_{2,3}` and renamed). That
remaining case was glibc's placement: JAX still copied the unaligned
batch, through a 19 MB staging block on the main heap; made while the
freed step buffer was the only free block large enough, it was cut from
it, and what was left was too small for the next step's buffer unless
it bordered the top of the heap. Now the tasks hand JAX a 64-byte-aligned
copy of such an array, which it uses in place
(`keras_gmlp.training.allocator.aligned`), and `random_image_batch`
aligns its batch likewise (`train_on_batch` does not align it): gMLP-Ti
0.65 / 0.91 / 1.00 (3,316 against 3,319 MiB), 0.65 / 0.91 / 1.00 and
0.65 / 0.92 / 1.00, three processes; gMLP-S 0.64 / 0.83 / 0.90 (5,469
against 6,076 MiB; after each step 5,448, 5,469, 5,469)
(`memory_<model>_epyc_avx512_batch32_reuse_jax_aligned_inputs*.json`).
A `fit` on tf.data (batch 32, 8 steps, a scratch check with an
`LD_PRELOAD` logger of `posix_memalign`) put every step's buffer on the
main heap, for gMLP-Ti and gMLP-S, and held gMLP-Ti's RSS at 3.3-3.4 GB
from its first step to its last.

Where torch's extra RSS goes: not into tensors. The live tensors at the
step's peak, from torch's memory timeline (`live_memory.py`,
`live_memory_gmlp_ti16_224.json`), are 612 MiB for keras_gmlp against
607 for timm (1.01x): the same activations (527 / 522 MiB), parameters
and optimizer state. The tensors autograd saves are the same too, 89.05
MiB per image (`torch.autograd.graph.saved_tensors_hooks`, storages
deduplicated). The rest is glibc's heap: past its first large free,
glibc raises its mmap threshold to the freed size, so the step's
megabyte-sized activations come from the heap, which keeps freed blocks
and fragments with the order of allocations; Keras' step makes more,
smaller allocations than timm's (its optimizer updates variable by
variable, the layer norm of the split gate input copies it to a
contiguous tensor). With the threshold fixed for both processes
(`MALLOC_MMAP_THRESHOLD_`, every large block mapped and unmapped) the
torch step's RSS falls to 1.05x timm's, the live-tensor ratio. It is no
remedy: the threshold maps and unmaps (and the kernel zeroes) every
large block each step, and the Keras-torch gMLP-Ti training step (batch
8, float32) took 0.90-0.93 s under it against 0.48 s without (the Xeon
with AMX, two pairs of processes run in turn, 5 steps each). What
reduced the allocations: the fused Dense (`keras_gmlp.layers.Dense`, one
`addmm` where Keras' Dense made a matmul and an add: 434 `add`
allocations a step, 276 MB, against timm's 30) and the batched token
product (the einsum copied `v` twice per block into a permuted layout).
The first took the steady step from 1.38x to 1.29x; the second moved it
within the runs' spread (1.26-1.29x). JAX's buffers are
XLA's: the threshold does not move them. The other way, glibc's
thresholds raised for the torch step (`MALLOC_MMAP_THRESHOLD_=256 MiB`,
`MALLOC_TRIM_THRESHOLD_=1 GiB`: freed blocks kept, no page refaulted)
left its time unchanged (0.658 / 0.636 s against 0.659 / 0.616, an AMD
EPYC with AVX-512, two pairs of processes), and the trim threshold alone
(which fixes the mmap threshold at 128 KiB) made it 1.9x slower.
Recomputing blocks in the backward pass (Keras' `RematScope`) would trade
memory for time. Under JAX it does not even do that on a CPU: each gMLP-Ti
block's call wrapped in `jax.checkpoint` with the `checkpoint_dots`
policy (residuals: the block's input and the first projection's output,
everything else recomputed) left XLA's temporaries for the float32
training step (batch 8) at 806,922,064 bytes, to the byte, and the step
time at 1.00x (7 rounds, an AMD EPYC with AVX-512). The HLO JAX hands
XLA has the 30 optimisation barriers it puts around the recomputation;
XLA:CPU's optimised HLO has none, and the same buffers.

TensorFlow at batch 32 (an idle 2-core Xeon with AMX, stop 39): the
first steps 1.34x (gMLP-Ti) and 1.10x (gMLP-S) timm's with TensorFlow's
own gradient, 0.86x and 0.67x with `--remat-activations` (the models made
under `keras.RematScope(mode="activations")`, whose spatial gating units
recompute: `keras_gmlp.layers.tensorflow_spatial_gate`);
`memory_gmlp_*16_224_xeon_amx_batch32_tf_*.json`, `benchmarks/README.md`.

TensorFlow's first steps also held two traces of the training step
(Keras built the optimizer while tracing it) and Keras' AdamW as about 45
graph nodes a variable. With the optimizer built before the trace and
`FusedAdamW` (stop 52, `benchmarks/optimizer_graph.py`; an idle 2-core AMD
EPYC with AVX-512), first steps / whole process x timm: gMLP-Ti 1.00 /
1.03 (1.19 / 1.18 before), gMLP-S 0.91 / 0.96 (1.01 / 1.04)
(`memory_gmlp_*16_224_epyc26_batch32_tf_fused_adamw_stop52.json`).

Usage:
    python benchmarks/memory.py --models gmlp_ti16_224 --batch-size 8
Results: benchmarks/results/memory_<model>.json
"""

import argparse
import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks.common import JIT_COMPILE  # noqa: E402


def keras_measurement(args):
    """In a fresh process: peak RSS before and after the training steps."""
    common.start_reusing_freed_memory(args.reuse_freed_memory)
    common.configure_threads(args.threads, args.share_cores)
    import keras

    remat_mode = "activations" if args.remat_activations else None
    with keras.RematScope(mode=remat_mode):
        model = common.build_image_classifier(
            args.model, args.image_size, JIT_COMPILE[args.jit], args.precision
        )
    images, labels = common.random_image_batch(args.batch_size, args.image_size)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    after_each_step = []
    for _ in range(args.steps):
        model.train_on_batch(images, labels)
        after_each_step.append(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        )
    after = after_each_step[-1] if after_each_step else before
    steady = common.steady_step_peak(
        lambda: model.train_on_batch(images, labels), args.steady_steps
    )
    answer = {
        "maxrss_built_kib": before,
        "maxrss_trained_kib": after,
        "maxrss_after_each_step_kib": after_each_step,
    }
    print(json.dumps({**answer, **steady}))


def timm_measurement(args, model):
    """timm in a fresh process: the worker's `memory` command."""
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
        env=common.worker_env(None, args.threads),
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
        help="the TensorFlow workers call keras_gmlp.training."
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
    parser.add_argument("--jit", default="jit")
    parser.add_argument("--precision", default="float32")
    args = parser.parse_args()
    if args.measure:
        keras_measurement(args)
        return

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
        for backend in args.backends:
            for jit in args.jit_modes:
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
                        *common.reuse_freed_memory_flags(
                            args.reuse_freed_memory
                        ),
                        *(
                            ["--remat-activations"]
                            if args.remat_activations
                            else []
                        ),
                        *(["--share-cores"] if args.share_cores else []),
                    ],
                    common.worker_env(backend, args.threads),
                )
                peak, step, steady = summarise(answer)
                model_rows.append(
                    {
                        "model": model,
                        "backend": backend,
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
                            for kib in answer.get(
                                "maxrss_after_each_step_kib", []
                            )
                        ],
                        "error": answer.get("error"),
                    }
                )
                print(model_rows[-1], file=sys.stderr)
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
            "error",
        ],
    )


if __name__ == "__main__":
    main()
