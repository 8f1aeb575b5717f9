"""Speed of gMLP token mixing against self-attention, on this backend.

For each sequence length, times a forward and backward pass of one block
(batch x tokens x width) for: a gMLP block with dense spatial weights, one
with Toeplitz weights, an aMLP block, and keras-hub's TransformerEncoder
(the baseline) of the same width and feed-forward size. The timings are
interleaved and repeated, and reported as ratios to the baseline measured in
the same run, since these machines are noisy.

Usage:
    KERAS_BACKEND=jax python benchmarks/token_mixing.py [--lengths 128 512]
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import time

import keras
import keras_hub
import numpy as np

from keras_gmlp.layers import GMLPBlock


def candidates(width, ffn_dim, length):
    return {
        "transformer (baseline)": keras_hub.layers.TransformerEncoder(
            intermediate_dim=ffn_dim, num_heads=max(1, width // 64)
        ),
        "gmlp dense": GMLPBlock(ffn_dim, sequence_length=length),
        "gmlp toeplitz": GMLPBlock(
            ffn_dim, sequence_length=length, spatial="toeplitz"
        ),
        "amlp dense": GMLPBlock(
            ffn_dim, sequence_length=length, attention_dim=64
        ),
    }


def train_step_function(layer, x):
    """A compiled forward + backward pass as a one-layer model's fit step."""
    inputs = keras.Input(x.shape[1:])
    model = keras.Model(inputs, layer(inputs))
    model.compile(optimizer="sgd", loss="mse", jit_compile="auto")
    y = np.zeros_like(x)
    model.train_on_batch(x, y)  # compile outside the timing

    def step():
        model.train_on_batch(x, y)

    return step, model.count_params()


def measure(step, repeats):
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--output", default="benchmarks/results/token_mixing.json"
    )
    args = parser.parse_args()
    ffn_dim = 6 * args.width
    rows = []
    for length in args.lengths:
        x = np.random.default_rng(0).normal(
            size=(args.batch_size, length, args.width)
        )
        x = x.astype("float32")
        steps, params = {}, {}
        for name, layer in candidates(args.width, ffn_dim, length).items():
            steps[name], params[name] = train_step_function(layer, x)
        times = {name: [] for name in steps}
        for _ in range(args.rounds):  # interleaved, so drift hits all alike
            for name, step in steps.items():
                times[name].append(measure(step, args.repeats))
        baseline = statistics.median(times["transformer (baseline)"])
        for name in steps:
            median = statistics.median(times[name])
            rows.append(
                {
                    "tokens": length,
                    "block": name,
                    "parameters": params[name],
                    "median_step_s": median,
                    "time_vs_transformer": median / baseline,
                    "tokens_per_s": args.batch_size * length / median,
                }
            )
            print(
                f"n={length:4d} {name:24s} params={params[name]:9d} "
                f"step={median * 1e3:8.2f} ms  "
                f"time vs transformer={median / baseline:5.2f}"
            )
    report = {
        "backend": keras.config.backend(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "arguments": vars(args),
        "rows": rows,
    }
    path = pathlib.Path(args.output)
    path = path.with_name(f"{path.stem}_{keras.config.backend()}{path.suffix}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
