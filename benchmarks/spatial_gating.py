"""Speed of the spatial gating unit alone: dense vs Toeplitz, matmul vs FFT.

For each sequence length n, times one `SpatialGatingUnit` as a one-layer
Keras model, forward (`predict_on_batch`) and forward + backward (a
`train_on_batch` step with SGD and an MSE loss), compiled as Keras compiles
by default (`jit_compile="auto"`: XLA under JAX, a `tf.function` graph under
TensorFlow on CPU, eager under torch), for three variants:

- `dense`: an `n x n` weight (the vision models),
- `toeplitz matmul`: the Toeplitz weight materialised as an `n x n` matrix
  by a gather, then multiplied (the baseline of the ratios),
- `toeplitz fft`: the same product as a linear convolution by real FFT.

The variants are timed in interleaved rounds and each row reports the
median and the speed-up over the materialised Toeplitz product of the same
run. It also checks the FFT against the materialised product at every
length it runs both (random weights).

Where the time goes (found before optimising with per-piece micro-timings,
jit-compiled per backend, n = 4096 and 8192, 128 gated channels, batch 1;
2-core Xeon shared with other jobs, so only ratios):

- Materialised Toeplitz: building `W` costs more than multiplying by it.
  The gather of n^2 taps took 1.2x the `W @ v` einsum under JAX, 4.5x under
  TensorFlow and 8.7x under torch, and its backward is a scatter-add of n^2
  gradient entries into 2n - 1 taps (JAX 0.23 s, TensorFlow 0.28 s, torch
  2.0 s at n = 4096): more than the product's own backward. O(n^2) time
  and memory: at n = 16384, `W`, its int32 offsets and its gradient take
  1 GiB each, which is why the default stops the materialised product at
  8192 here.
  Building `W` without a gather (the taps rolled, tiled `n` times,
  reshaped to `n x (2n - 2)` rows and cut to `n` columns: slices and
  reshapes, whose gradient is a sum) was measured on an idle 2-core AMD
  EPYC with AVX-512, `W` and its taps' gradient alone, medians of 5
  rounds: torch 2.7-3.0x faster at n = 512 and 1024 (0.56 against 1.54
  ms, 1.8 against 5.5 ms), JAX 1.8-2.0x (0.18 against 0.33 ms at 512);
  but under JAX, with the product `W @ v` (32 x n x 256) in the same
  function, XLA fused the reshapes into the dot's operand and the step
  took 220 against 64 ms at 512 and 1.6 against 0.2 s at 1024. At the
  masked LM's sizes (4 blocks, n = 512) torch's gain is about 4 ms of a
  step; not adopted.
- FFT path: two real FFTs of length L = 2n per channel, one of the taps,
  an elementwise complex product, and the token axis moved last and back
  (keras.ops FFTs act on the last axis). Under JAX the transposes cost as
  much as the FFTs (XLA fuses the transpose with the zero padding into a
  slow loop: 300-400 ms vs 70 ms for a plain transpose at 1536 channels),
  and XLA turned the taps' gradient of a product written in real and
  imaginary parts into slow reductions over the channels: a complex
  product made the backward 2.4x faster, so the layer uses it under JAX.
  Under TensorFlow and torch the real form of Keras' `ops.rfft` parts
  measured faster then, on a shared machine. Later, on an idle Xeon, the
  backends' own complex spectra (`circular_convolution`) made whole
  masked-LM steps 1.19x (torch) and 1.05x (TensorFlow) faster at
  n = 2048 (`benchmarks/fft_product.py`), and the layer uses those.
- torch on a machine shared by other jobs: its two OpenMP threads wait on
  each other, and the many small elementwise ops of the FFT path (and
  Keras' per-call overhead) suffer most: a 1M-element multiply took 22 ms
  on two threads and 0.7 ms on one. The torch figures are therefore given
  for the default threads and for `OMP_NUM_THREADS=1`
  (`spatial_gating_1thread_torch.json`); the crossover uses the latter.
- The crossover grows with the width: with 128 gated channels the FFT was
  faster from n = 512 on every backend, with 1536 gated channels (gMLP-base
  text) from 1024 (JAX, TensorFlow) and 2048 (torch), because the gather
  that the FFT saves does not grow with the channels while the product
  does. `FFT_CROSSOVER` in the layer takes the wide figures (on AMD's
  family 25, units of up to 256 gated channels cross over at 512
  tokens: `fft_crossover.py`).
- Checked again at the text presets' own width, in whole masked-LM
  training steps (`gmlp_tiny`, 256 gated channels, 4,096 tokens a batch,
  the FFT forced against the matmul product, whose training call now
  recomputes the gate; an idle 2-core AMD EPYC with AVX-512, one process,
  7 rounds, scratch), x matmul: JAX 0.88 at n = 512 and 0.85 at 256,
  TensorFlow 0.83 at 512, torch 1.03 at 512 (rounds 0.83-1.53) and 1.02
  at 1024. No case for a lower crossover there.

Usage:
    KERAS_BACKEND=jax python -m benchmarks.spatial_gating --lengths 128 8192
"""

import argparse

import keras
import numpy as np

from benchmarks import common
from keras_gmlp.layers import SpatialGatingUnit

VARIANTS = {
    "dense": {"spatial": "dense"},
    "toeplitz matmul": {"spatial": "toeplitz", "toeplitz_method": "matmul"},
    "toeplitz fft": {"spatial": "toeplitz", "toeplitz_method": "fft"},
}
BASELINE = "toeplitz matmul"


def build(variant, length, channels, causal, seed):
    """A compiled one-layer model around one spatial gating unit."""
    inputs = keras.Input((length, channels))
    unit = SpatialGatingUnit(
        sequence_length=length, causal=causal, **VARIANTS[variant]
    )
    model = keras.Model(inputs, unit(inputs))
    model.compile(optimizer="sgd", loss="mse", jit_compile="auto")
    # Weights of a trained unit's scale, equal across the Toeplitz variants.
    rng = np.random.default_rng(seed)
    unit.kernel.assign(
        rng.normal(size=unit.kernel.shape).astype("float32") / np.sqrt(length)
    )
    return model


def skip_reason(variant, length, max_dense, max_materialised):
    if variant == "dense" and length > max_dense:
        return f"dense above n = {max_dense} (--max-dense)"
    if variant == BASELINE and length > max_materialised:
        return f"materialised above n = {max_materialised} (--max-materialised)"
    return None


def measure_length(length, args):
    """Times every variant at one length; returns the rows."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch_size, length, args.channels))
    x = x.astype("float32")
    y = np.zeros((args.batch_size, length, args.channels // 2), "float32")
    models, skipped = {}, {}
    for variant in args.variants:
        reason = skip_reason(
            variant, length, args.max_dense, args.max_materialised
        )
        if reason:
            skipped[variant] = reason
            continue
        models[variant] = build(variant, length, args.channels, args.causal, 1)
    functions, outputs = {}, {}
    for variant, model in models.items():
        for mode in args.modes:
            if mode == "forward":
                function = (lambda m: lambda: m.predict_on_batch(x))(model)
            else:
                function = (lambda m: lambda: m.train_on_batch(x, y))(model)
            result = function()  # compiles outside the timing
            if mode == "forward":
                outputs[variant] = np.asarray(result)
            functions[(variant, mode)] = function
    agreement = None
    if BASELINE in outputs and "toeplitz fft" in outputs:
        expected = outputs[BASELINE]
        agreement = float(
            np.abs(outputs["toeplitz fft"] - expected).max()
            / np.abs(expected).max()
        )
    times = common.alternate(functions, args.rounds, args.target_seconds)
    rows = []
    for mode in args.modes:
        baseline = times.get((BASELINE, mode))
        for variant in args.variants:
            row = {"tokens": length, "variant": variant, "mode": mode}
            if variant in skipped:
                row["skipped"] = skipped[variant]
            else:
                seconds = common.median(times[(variant, mode)])
                row["median_s"] = seconds
                row["rounds_s"] = times[(variant, mode)]
                if baseline:
                    row["speedup_vs_materialised"] = (
                        common.median(baseline) / seconds
                    )
                if variant == "toeplitz fft" and agreement is not None:
                    row["max_relative_difference"] = agreement
            rows.append(row)
    return rows


def print_row(row):
    prefix = f"n={row['tokens']:6d} {row['mode']:16s} {row['variant']:16s}"
    if "skipped" in row:
        print(f"{prefix} skipped: {row['skipped']}", flush=True)
        return
    line = f"{prefix} {row['median_s'] * 1e3:10.2f} ms"
    if "speedup_vs_materialised" in row:
        line += f"  x{row['speedup_vs_materialised']:7.2f} vs materialised"
    if "max_relative_difference" in row:
        line += f"  |fft - matmul| {row['max_relative_difference']:.1e}"
    print(line, flush=True)


def crossover(rows, mode):
    """The first length from which the FFT is faster at every length."""
    lengths = sorted({row["tokens"] for row in rows})
    faster = {}
    for row in rows:
        if row["mode"] == mode and row["variant"] == "toeplitz fft":
            if "speedup_vs_materialised" in row:
                faster[row["tokens"]] = row["speedup_vs_materialised"] > 1
    found = None
    for length in reversed(lengths):
        if length not in faster:
            continue
        if not faster[length]:
            break
        found = length
    return found


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=[128, 256, 512, 1024, 2048, 4096, 8192, 16384],
    )
    parser.add_argument(
        "--channels",
        type=int,
        default=256,
        help="input channels of the unit (it gates half of them)",
    )
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument(
        "--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS)
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=["forward", "forward+backward"],
        default=["forward", "forward+backward"],
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--target-seconds",
        type=float,
        default=0.3,
        help="rough duration of one measurement (fast calls are repeated)",
    )
    parser.add_argument(
        "--max-dense",
        type=int,
        default=8192,
        help="longest n for the dense weight (n^2 weights, SGD state)",
    )
    parser.add_argument(
        "--max-materialised",
        type=int,
        default=8192,
        help="longest n for the materialised Toeplitz product (its n x n "
        "matrix, offsets and gradient take 12 n^2 bytes)",
    )
    parser.add_argument(
        "--name",
        default="spatial_gating",
        help="results go to benchmarks/results/<name>_<backend>.json",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    run = common.header()
    print(common.describe(run), flush=True)
    print(
        f"batch {args.batch_size}, {args.channels} channels in "
        f"({args.channels // 2} gated), causal={args.causal}, "
        f"{args.rounds} rounds, medians",
        flush=True,
    )
    rows = []
    for length in args.lengths:
        for row in measure_length(length, args):
            print_row(row)
            rows.append(row)
    crossovers = {mode: crossover(rows, mode) for mode in args.modes}
    print(f"FFT faster from n = {crossovers} on", flush=True)
    report = dict(run, arguments=vars(args), rows=rows, crossover=crossovers)
    path = common.write_results(f"{args.name}_{run['backend']}", report)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
