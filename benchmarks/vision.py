"""Vision throughput and model FLOPs utilisation against timm's gMLP.

Issue 12, benchmarks 1 and 2. For each model (`gmlp_ti16_224`,
`gmlp_s16_224`) and each Keras backend, one run alternates, round by round,
a persistent timm worker (PyTorch eager, `benchmarks/timm_worker.py` under
the timm virtualenv) and a persistent Keras worker per backend (this file
with `--worker`, `KERAS_BACKEND` set), each warmed up, each timing N steps
on command. Every figure is a ratio to a baseline measured in the same
round, and the table shows the median over the rounds (this machine is
shared, so absolute timings drift):

- `train x timm`, `infer x timm`: images/s of the Keras model over timm's,
  same batch, same precision, same number of threads. Keras: the
  `keras_gmlp.models.image_classifier(model)` compiled with AdamW and
  sparse cross-entropy from logits, `model.train_on_batch` /
  `model.predict_on_batch`, with `jit_compile` True and False. timm:
  `model.train()` + AdamW step, inference under `torch.inference_mode()`.
  The `mixed_bfloat16` rows compare with timm under
  `torch.autocast("cpu", torch.bfloat16)`.
- `train MFU`: model FLOPs per second of the training step over the same
  process's dense `2048^3` matmul FLOPs per second (float32, or bfloat16
  for the bfloat16 rows; `keras_gmlp.layers.matmul.matmul`, which under
  JAX accumulates a bfloat16 product in float32, 5-6x as fast as
  `keras.ops.matmul`'s bfloat16 result on a CPU with AMX), measured in the
  same round. The model's FLOPs
  are counted from the architecture (`common.image_model_flops`):
  per image forward multiply-adds
      n * 768 * d                                    (stem, n = 196)
    + 30 * (n * d * f + n * n * f / 2 + n * f / 2 * d)  (fc1, SGU, fc2)
    + d * 1000                                       (head)
  i.e. 1.33 G (gMLP-Ti, d = 128, f = 768) and 4.39 G (gMLP-S, d = 256,
  f = 1536); FLOPs = 2 x that, a training step 3 x the forward: 7.97 and
  26.4 GFLOP per image. timm's MFU uses the same count and timm's torch.
- `x timm cpu`: the same ratio per CPU-second of each process (images/s
  / cores): on a shared machine the two processes get different shares of
  the cores, and this ratio was much steadier round to round (the wall
  ratios of one run spread 1.2-3.0, these 0.89-1.04).
- `cores`: process CPU seconds / wall seconds during the step, the number
  of cores the step kept busy (2 at most here, less under load).

bfloat16 needs a CPU with AVX512-BF16 or AMX to be fast; the run reads
/proc/cpuinfo and marks the bfloat16 rows when the CPU has neither.

Measured with timm under torch's own OpenMP wait policy and an untimed
step before every timing (since ceb3217; an idle 2-core Xeon with
AVX-512, AVX512-BF16 and AMX, gMLP-Ti, 3 rounds,
`vision_gmlp_ti16_224_xeon_amx_fair.json`), x timm, float32 train /
inference, bf16 train / inference: jax 0.61 / 0.74 / 0.36 / 0.44,
tensorflow 0.92 / 0.73 / 0.60 / 0.55, torch 1.09 / 0.96 / 0.96 / 0.94.

Every figure below was measured before ceb3217, with the timm worker
under `OMP_WAIT_POLICY=PASSIVE` (keras_gmlp's default, inherited from the
driver), 1.3-1.4x slower than under torch's default on the Xeon: they
overstate keras_gmlp against timm by up to that factor.

Measured (batch 8, 224 px, `--jit auto`, 3 alternated rounds of 2 steps,
medians; an idle 2-core AMD EPYC with AVX512-BF16, so the bfloat16 rows
are real; `benchmarks/results/vision_<model>*.json`), x timm:

| model | backend | float32 train | infer | mixed_bfloat16 train | infer |
|---|---|---|---|---|---|
| gMLP-Ti | jax | 1.00 (was 0.47) | 0.82 | 0.54 | 0.88 |
| gMLP-Ti | tensorflow | 1.33 | 0.98 | 0.88 | 0.66 |
| gMLP-Ti | torch | 0.95 | 0.79 | 0.94 | 0.79 |
| gMLP-S | jax | 0.78 (was 0.47) | 0.81 | 0.47 | 0.64 |
| gMLP-S | tensorflow | 1.11 | 1.07 | 0.89 | 0.71 |
| gMLP-S | torch | 0.99 | 0.92 | 0.95 | 0.91 |

On an idle 2-core AMD EPYC with AVX2 only (float32; batch 8, 3 rounds;
results `vision_<model>_amd_avx2_batched.json` for jax and tensorflow,
`_amd_avx2_onednn.json` for tensorflow with oneDNN, `_amd_avx2_torch.json`
for torch; torch's ranges: two runs), after the fused Dense
(`keras_gmlp.layers.Dense`), the direct sublayer calls
(`benchmarks/direct_call.py`) and the batched token product under torch
(`benchmarks/token_product.py`), x timm:

| model | backend | train | infer | train MFU (timm's) |
|---|---|---|---|---|
| gMLP-Ti | jax | 0.72 | 0.92 | 0.33 (0.49) |
| gMLP-Ti | tensorflow | 0.81 -> 1.06 | 0.81 -> 1.04 | 0.50 (0.50) |
| gMLP-Ti | torch | 1.10 | 0.89-1.01 | 0.51-0.52 (0.47-0.49) |
| gMLP-S | jax | 0.76 | 1.02 | 0.44 (0.76) |
| gMLP-S | tensorflow | 0.85 -> 1.01 | 0.88 -> 1.02 | 0.59 (0.59) |
| gMLP-S | torch | 1.10-1.16 | 1.07-1.08 | 0.66 (0.55-0.57) |

TensorFlow's "->": `TF_ENABLE_ONEDNN_OPTS` 0 (its default on AMD CPUs)
-> 1 (what `import keras_gmlp` sets). Where its time went: its dense
matmul ran at 133 GFLOP/s against torch's 172-180 in the same rounds
(`matmul_gflops`), at the same MFU as timm's; with oneDNN, 170-183.
Before the torch changes, on the same machine: Ti 0.91 / 0.85, S 1.14 /
0.93 with the fused Dense alone (`_torch_fused_dense`). The JAX
inference rows gained from the batched token product (0.82 / 0.81 ->
0.85-0.92 / 0.84-1.02 over two runs); JAX training remains XLA:CPU's
(about 15 % in the exact GELU, see below).

The JAX rows "was" are the same run before the closed-form LayerNorm
gradient below (`_jax_closed_form_ln` results: after). Training MFU
(float32): tensorflow 0.50 / 0.59 (Ti / S), torch 0.43 / 0.60, jax 0.40 /
0.45, timm 0.44 / 0.61. JAX's bfloat16 matmul runs at 160 GFLOP/s against
its float32 200 (torch and TensorFlow: 410 against 190-220), so its
bfloat16 rows stay behind. (That was a dot with a bfloat16 result, which
XLA:CPU converts to float32; with a float32 result it runs on the CPU's
bfloat16 units: `keras_gmlp.layers.matmul`. On a 2-core Xeon with AMX,
gMLP-Ti at batch 32, `--reuse-freed-memory`, JAX bf16 train / inference
went from 0.52 / 0.51 to 0.77 / 1.00x timm, gMLP-S 0.71 / 0.89
(`_xeon_amx_bf16_{before,float32_dots}.json`); not measured on this
EPYC, whose bfloat16 units are AVX512-BF16's.)

Where the time goes on JAX, found this way: a pure-JAX gMLP-Ti stack (30
blocks, batch 8, no Keras) trains at the same 0.47x timm as keras_gmlp, so
the gap was XLA:CPU, not Keras. Its matmuls at the model's shapes run at
torch's rate (jnp `(1568, 128) x (128, 768)`: 190-200 GFLOP/s, torch
176-188; `(196, 196) x (196, 3072)`: 182-195, torch 122-169). Removing
the LayerNorms halved the step (1.57 s -> 0.75 s), and replacing JAX's
derived LayerNorm gradient by the closed form `(g - mean(g) - y *
mean(g y)) / std` (a `jax.custom_vjp`) gave 1.86 s -> 0.87 s with equal
losses; a `custom_jvp` of the same rule did not help (1.74 s), nor did a
tokens-first layout that drops the spatial product's transposes (train
0.98-1.06x, inference 1.06-1.13x). `keras_gmlp.layers.LayerNormalization`
is that closed form, used in the block and the gating unit on JAX. The
same closed form as a `tf.custom_gradient` under TensorFlow gave training
1.21 / 1.14 x timm (Ti / S; results `_tensorflow_closed_form_ln`) against
1.33 / 1.11 in the table's run: no gain beyond the rounds' spread, so
TensorFlow keeps Keras' own LayerNorm. What is left at gMLP-S widths
(pure JAX, closed-form LayerNorm, batch 8): 2.14 s a step, 1.95 s with no
LayerNorm at all, 1.82 s with ReLU for the exact GELU, so erf GELU costs
about 15 %; a closed-form GELU gradient (`custom_vjp`) was slower (2.68
against 2.28 s), so it was not adopted either.

Earlier profiles (a gMLP-Ti training step, batch 8; run `--profile` for a
backend's step time and torch's profiler table), measured on the 2-core
Xeon without AVX512-BF16/AMX, load 6-9:

- JAX (XLA:CPU, `jit_compile` auto), `jax.profiler` trace read back with
  `jax.profiler.ProfileData`: 43 % of the step's XLA time is in 150
  `copy_bitcast_fusion` kernels and only 26 % in the matmuls
  (`ynn_fusion`, YNNPACK). In the optimised HLO (`XLA_FLAGS=--xla_dump_to`)
  some backward fusions take about 200 operands (the LayerNorm-backward /
  residual-gradient chain of the later blocks), which first read as work
  quadratic in depth. It is not: XLA's own cost analysis of the compiled
  gradient grows linearly with depth (`benchmarks/xla_depth_cost.py`:
  5.14 / 9.66 / 18.75 GFLOP for 2 / 4 / 8 gMLP-Ti blocks at batch 8, a
  constant 2.26-2.27 GFLOP per added block; the formula count: 2.10), and
  so do the copies (31 / 57 / 109 HLO `copy` instructions: 13 per added
  block; `benchmarks/results/xla_depth_cost_jax.json`). The copies are
  layout transposes around the spatial
  product: the einsum `ij,...jc->...ic` becomes a 2-D dot over
  `(batch x channels, tokens)`, so z is transposed there and back (about
  6 copies of 8 x 196 x 384 per block). Writing the product as a
  batch-broadcast matmul (W broadcast to `(batch, n, n)`) leaves no copy
  in the unit's compiled gradient. Measured on every backend
  (`benchmarks/token_product.py`): JAX inference 1.2x, but JAX training
  4-7 % slower and TensorFlow within noise; torch 1.04-1.07x on the AVX2
  EPYC. So the unit uses it in JAX inference and under torch only.
  `--xla_cpu_use_fusion_emitters=false` and
  `--xla_cpu_experimental_ynn_fusion_type=` changed nothing;
  `--xla_cpu_use_multi_output_fusion=false` crashed. Compiling the step
  takes 100-145 s.
- The issue's "JAX runs the matmul on one core": not reproduced. A 2048^3
  float32 `jnp.matmul` spread its CPU time over XLA's threads (shares 0.68 /
  0.25 / 0.06 of one run; TensorFlow 0.50 / 0.50, torch 0.52 / 0.48).
  With the machine's load at 6-9 every process got 0.3-0.5 cores, and
  `--xla_cpu_multi_thread_eigen=false`, `--xla_cpu_use_xnnpack=true`,
  `--xla_cpu_use_onednn=true` and `taskset -c 0` all gave 18-40 GFLOP/s,
  within the noise of the default (27-39): no setting was clearly faster,
  so `keras_gmlp/backend_settings.py` was not written.
- torch with `jit_compile=True` (torch.compile): compiling the 30-block
  training step had not finished after 14 minutes (inductor building C++
  kernels on the loaded machine); left out unless `--torch-compile`. On
  the idle Xeon with AMX (gMLP-Ti, batch 8, float32, one process, eager
  first): the first step took 176 s, and a step 0.430 s against eager's
  0.462 s (1.07x; median of 5 steps, one run), too little for the
  compile time to make it the default.
- TensorFlow with `jit_compile=True` (the whole step through XLA:CPU,
  instead of the graph of TensorFlow kernels with the block's XLA
  functions): on an idle 2-core AMD EPYC with AVX-512, gMLP-Ti, batch 8,
  float32, separate processes, two runs each, median of 8 steps:
  training 0.554 and 0.653 s against 0.492 and 0.494 s, inference 0.182
  and 0.175 s against 0.181 and 0.202 s. Keras' `auto` (no XLA on a CPU)
  stays.
- TensorFlow, the optimizer's update as one XLA function (Keras'
  `optimizer.apply` wrapped in `tf.function(jit_compile=True)` inside the
  graph step; scratch): the AdamW update of gMLP-Ti's 306 variables is
  about 9,000 small ops a step, 45 of the step's 714 traced op-ms (TF
  profiler, float32 training, batch 8, the AMD EPYC with AVX-512). As
  one XLA function the step was 1.003x as fast (7 interleaved rounds,
  0.98-1.12): the executor already runs each variable's update as soon
  as its gradient exists, beside the backward matmuls still running,
  and the XLA function waits for all of them. Not adopted.
- TensorFlow's matmuls at gMLP's shapes (the AMD EPYC with AVX-512,
  float32, rows of 8 x 196 images, 2-D `MatMul` timed alone): forward,
  input gradient (`transpose_b`) and kernel gradient (`transpose_a`) run
  at 148-168 GFLOP/s for gMLP-Ti's 128 x 384 / 128 x 768 / 384 x 128
  products and 164-193 for gMLP-S's; a transpose written out, or the
  kernel gradient computed transposed, was never faster. At those rates
  the 64 GFLOP of a gMLP-Ti training step (batch 8) take about 0.4 s,
  against the step's 0.48 s: the non-matmul work left is about a sixth
  of the step.
- TensorFlow with one inter-op thread instead of two (the intra-op pool
  at 2): 0.544, 0.558 and 0.536 s a float32 gMLP-Ti training step
  against 0.506, 0.562 and 0.465 s (separate processes, alternated,
  median of 8 steps). Two stay.
- Per CPU-second, the TensorFlow and torch training steps are at about
  timm's rate (0.95, 1.08 x) and the JAX one at 0.42 x (before the
  closed-form LayerNorm gradient); inference 0.75 (jax) to 0.91 (torch).
- JAX at batch 32 against batch 8 (gMLP-Ti, float32 training, the AMD
  EPYC with AVX-512, `jax.profiler` traces): a step took 84.5 against
  77.9 ms per image, its dots (`ynn_fusion`) 68.7 against 56.7 thread-ms
  per image. XLA compiles a different step at batch 32: the LayerNorm's
  and GELU's gradients with their reductions become YNNPACK fusions, fed
  by 92 broadcasts written out to full `(32, 196, c)` arrays, 91 of them
  of 1-D variables (`(128,)` and `(384,)`, a LayerNorm's or a bias'
  size) and one of a constant (`wrapped_broadcast`, 10.3 thread-ms per
  image; 1 broadcast at batch 8).
  `--xla_cpu_experimental_ynn_fusion_type=-reduce` did not help (2.9 and
  3.0-3.6 s a step against 2.8-3.1 s, two processes each). And every step
  faults its 1.66 GB of temporaries in afresh (`malloc_settings.py`).
  `--reuse-freed-memory` (the workers call
  `keras_gmlp.training.reuse_freed_memory()`, as the `keras-gmlp` command
  does) removes the faults: float32 training 1.17x timm on gMLP-Ti
  (rounds 1.14-1.25; 0.91 without, the same settings) and 1.29x and
  1.20x on gMLP-S (1.23-1.35, 1.04-1.25; two runs), one precision per run
  (`vision_gmlp_*16_224_epyc_avx512_batch32_f32_{reuse,default}_jax.json`).
  Those runs let some steps run on JAX's copying thread (the batch is a
  numpy array JAX copies there); since the tasks wait for the copies
  (`keras_gmlp.training.allocator.with_ready_inputs`), gMLP-Ti: 1.13x
  (rounds 0.98-1.29, `_f32_reuse_jax_ready_inputs.json`); with the batch
  aligned, used in place (`_f32_reuse_jax_aligned_inputs.json`), gMLP-Ti
  1.11x (1.03-1.18), gMLP-S 1.29x (1.16-1.29) at an MFU of 0.67 (timm
  0.59).
- One worker holds every variant's model. Under JAX that slowed the
  float32 step by about a fifth when the bf16 model was there too
  (gMLP-Ti at batch 32: 9.7 against 12.0 images/s by default, 10.7
  against 14.0 with `--reuse-freed-memory`) while the batch was an
  unaligned numpy array: JAX copied it on one of its threads and ran
  some steps there. With the batch aligned (`common.random_image_batch`),
  the two-model worker trains float32 at 14.9 images/s, 1.21x timm
  (rounds 1.16-1.24, `_batch32_reuse_jax_aligned_inputs.json`).
- `--share-cores` (stop 50): the TensorFlow worker runs as the image
  jobs do, each op on its chain's share of the cores
  (`keras_gmlp.training.share_cores_between_chains`); its matmul rate is
  then that of `CHAINS` products side by side, each on its share, so the
  MFU divides by what the cores do in that setting.
- `--job-xla-flags` (stop 60): the TensorFlow worker's XLA functions are
  compiled as the jobs' are, after `set_job_xla_flags()` (512-bit
  vectors on a CPU with AVX-512, no YNNPACK fusions); the results record
  each Keras worker's `XLA_FLAGS`.

Usage:
    python benchmarks/vision.py --models gmlp_ti16_224 --rounds 3
    python benchmarks/vision.py --backends jax --profile
Results: benchmarks/results/vision_<model>.json
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


def sync(value):
    """Waits for an asynchronous backend (JAX) to finish `value`."""
    if hasattr(value, "block_until_ready"):
        value.block_until_ready()
    return value


def worker(args):
    """A Keras worker: builds every variant, then answers commands."""
    import keras
    import numpy as np

    if args.job_xla_flags:
        from keras_gmlp.training import set_job_xla_flags

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

    from keras_gmlp.layers.matmul import matmul as package_matmul
    from keras_gmlp.models.batch_chains import CHAINS

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
            if side_by_side == 1:  # on this thread, as before stop 50
                return sync(package_matmul(a, b))
            tasks = [
                pool.submit(lambda: sync(package_matmul(a, b)))
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
                common.worker_env(None, args.threads),
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
    its step does not. (Until 5297409 the timings had no such step.)"""
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
        help="also jit_compile=True on torch (torch.compile: compiling the "
        "30-block step took over 14 minutes on the loaded 2-core machine)",
    )
    common.add_reuse_freed_memory_argument(parser)
    parser.add_argument(
        "--share-cores",
        action="store_true",
        help="the TensorFlow worker calls keras_gmlp.training."
        "share_cores_between_chains() first, as the image jobs do; its "
        "matmul rate is then that of the chains' products side by side",
    )
    parser.add_argument(
        "--job-xla-flags",
        action="store_true",
        help="the TensorFlow worker calls keras_gmlp.training."
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
