"""The spatial gating unit's token product: dense vs Toeplitz, matmul vs FFT.

For each sequence length n, times one `SpatialGatingUnit` as a one-layer
Keras model, forward (`predict_on_batch`) and forward + backward (a
`train_on_batch` step, SGD and MSE), compiled as Keras compiles by default
(`jit_compile="auto"`), in three variants:

- `dense`: an n x n weight (the vision models);
- `toeplitz matmul` (the baseline of the ratios): the Toeplitz weight's
  2n - 1 taps materialised as an n x n matrix, then multiplied;
- `toeplitz fft`: the same product as a linear convolution by real FFT.

The variants are timed in interleaved rounds (`common.alternate`); each
row gives the median time and `speedup_vs_materialised`, the baseline's
median over the variant's, same run. The FFT's output is checked against
the materialised product's (`max_relative_difference`), and the run
prints the length from which the FFT is faster (what the layer's
`FFT_CROSSOVER` rests on). The dense and materialised variants
stop at `--max-dense` / `--max-materialised` (O(n^2) memory).

Usage:
    KERAS_BACKEND=jax python -m benchmarks.spatial_gating \\
        --lengths 2048 8192 --name spatial_gating_epyc25
Results: benchmarks/results/<name>_<backend>.json (default name
spatial_gating).
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


COLUMNS = [
    "tokens",
    "mode",
    "variant",
    "median_s",
    "speedup_vs_materialised",
    "max_relative_difference",
    "skipped",
]


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
    print()
    common.print_table(rows, COLUMNS)
    print(f"FFT faster from n = {crossovers} on", flush=True)
    report = dict(run, arguments=vars(args), rows=rows, crossover=crossovers)
    path = common.write_results(f"{args.name}_{run['backend']}", report)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
