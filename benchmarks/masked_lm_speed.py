"""Masked-LM training tokens/s: gMLP and aMLP against a matched BERT.

One process per backend (`KERAS_BACKEND`). At each sequence length n
(`--lengths`) every model's training step is timed in interleaved rounds
(`common.alternate`), and each ratio is against keras-hub's BERT timed in
the same rounds:

- `gmlp`, `amlp`: the pretraining recipe's models
  (`workflows.pretraining.build_models`) of `--preset` and `amlp_tiny`;
  `gmlp_dense`: the same gMLP with `--spatial dense` (an n x n weight).
- `bert` (the baseline): keras-hub's `BertMaskedLM` through the same
  recipe, its depth and feed-forward width matched to the gMLP's
  parameters at each length; `bert_amlp` the same matched to the aMLP's,
  the `amlp` rows' baseline when it runs.

Every model takes the same batch of `--batch-tokens` tokens (batch =
batch_tokens // n, 15 % masked) and is compiled as the pretraining job
compiles it (`pretraining.compile_model`: the recipe's `FusedAdamW`,
clipping, warm-up schedule, loss and weighted metrics), stepped with
`train_on_batch`. `x_bert` is the baseline's median step time over the
model's; each row also records its parameters and the BERT's size.

Usage:
    KERAS_BACKEND=jax python benchmarks/masked_lm_speed.py \\
        --lengths 128 512 --models gmlp amlp bert_amlp bert --rounds 5 \\
        --reuse-freed-memory --name masked_lm_speed_epyc25
Results: benchmarks/results/<name>_<backend>.json (default name
masked_lm_speed).
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402

BASELINE = "bert"
MODELS = {
    "gmlp": [],
    "gmlp_dense": ["--spatial", "dense"],
    "amlp": ["--preset", "amlp_tiny"],
    BASELINE: ["--architecture", "bert"],
    "bert_amlp": ["--preset", "amlp_tiny", "--architecture", "bert"],
}
# The BERT each model's ratio is against when both ran: matched to its own
# parameters (the aMLP's tiny attention adds 6 % to the gMLP's).
MATCHED_BASELINES = {"amlp": "bert_amlp"}


def baseline_of(name, measured):
    """The BERT of `name`'s ratio among the `measured` models, or None."""
    if name in (BASELINE, *MATCHED_BASELINES.values()):
        return name
    matched = MATCHED_BASELINES.get(name)
    if matched in measured:
        return matched
    return BASELINE if BASELINE in measured else None


def recipe_config(preset, length, flags):
    """The pretraining recipe's config of one model at one length."""
    from keras_gmlp.workflows import pretraining

    argv = ["--text-files", "unused", "--preset", preset]
    argv += ["--sequence-length", str(length), *flags]
    return pretraining.config_from_argv(argv)


def build(name, preset, length, vocabulary_size):
    """`(training_model, description)` of one model at one length (the
    BERT matched by the recipe to the gMLP at `length`)."""
    from keras_gmlp.optimizers.schedules import warmup_linear
    from keras_gmlp.workflows import pretraining

    config = recipe_config(preset, length, MODELS[name])
    training_model, _, description = pretraining.build_models(
        config, vocabulary_size
    )
    # Every model compiled as the pretraining job compiles it: the recipe's
    # AdamW (fused, clipped, on a warm-up schedule), loss and weighted
    # metrics (the gMLP task's own `compile` would add keras-hub's accuracy
    # by default).
    schedule = warmup_linear(1e-4, total_steps=10_000, warmup_steps=1_000)
    pretraining.compile_model(training_model, config, schedule)
    return training_model, description


def batch(model, length, batch_size, vocabulary_size, seed=0):
    """A masked batch in the form `model` takes, and its labels."""
    rng = np.random.default_rng(seed)
    predictions = max(1, round(0.15 * length))
    token_ids = rng.integers(1, vocabulary_size, (batch_size, length))
    positions = np.sort(
        np.stack(
            [rng.permutation(length)[:predictions] for _ in range(batch_size)]
        ),
        axis=1,
    )
    labels = np.take_along_axis(token_ids, positions, axis=1)
    available = {
        "token_ids": token_ids.astype("int32"),
        "padding_mask": np.ones((batch_size, length), bool),
        "mask_positions": positions.astype("int32"),
    }
    inputs = {key: available[key] for key in model.input}
    return inputs, labels.astype("int32")


def measure_length(length, args):
    """The rows of one length, each BERT matched to its model at it."""
    batch_size = max(1, args.batch_tokens // length)
    functions, descriptions = {}, {}
    for name in args.models:
        model, descriptions[name] = build(
            name, args.preset, length, args.vocabulary_size
        )
        x, y = batch(model, length, batch_size, args.vocabulary_size)
        function = functools.partial(model.train_on_batch, x, y)
        function()  # compiles outside the timing
        functions[name] = function
    times = common.alternate(functions, args.rounds, args.target_seconds)
    rows = []
    for name in args.models:
        seconds = common.median(times[name])
        row = {
            "tokens": length,
            "batch_size": batch_size,
            "model": name,
            "parameters": descriptions[name].get("trainable_parameters"),
            "median_s": seconds,
            "rounds_s": times[name],
            "tokens_per_s": batch_size * length / seconds,
        }
        baseline = baseline_of(name, times)
        if baseline is not None:
            row["baseline"] = baseline
            row["x_bert"] = common.median(times[baseline]) / seconds
        if name.startswith(BASELINE):
            row["size"] = {
                key: descriptions[name][key]
                for key in ("transformer_layers", "hidden_dim", "ffn_dim")
            }
        rows.append(row)
    return rows


COLUMNS = [
    "tokens",
    "batch_size",
    "model",
    "parameters",
    "tokens_per_s",
    "baseline",
    "x_bert",
]


def print_row(row):
    line = (
        f"n={row['tokens']:5d} batch={row['batch_size']:3d} "
        f"{row['model']:14s} {row['parameters']:>10,} params "
        f"{row['tokens_per_s']:9.0f} tokens/s"
    )
    if "x_bert" in row:
        line += f"  x{row['x_bert']:5.2f} vs {row['baseline']}"
    print(line, flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=[128, 512, 2048]
    )
    parser.add_argument(
        "--models", nargs="+", default=list(MODELS), choices=list(MODELS)
    )
    parser.add_argument("--preset", default="gmlp_tiny")
    parser.add_argument("--vocabulary-size", type=int, default=8192)
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=4096,
        help="tokens per batch at every length (batch = this // n)",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--target-seconds",
        type=float,
        default=1.0,
        help="rough duration of one measurement (fast steps are repeated)",
    )
    parser.add_argument(
        "--name",
        default="masked_lm_speed",
        help="results go to benchmarks/results/<name>_<backend>.json",
    )
    common.add_reuse_freed_memory_argument(parser)
    return parser.parse_args(argv)


def main(argv=None):
    import keras_gmlp

    args = parse_args(argv)
    # As the masked-LM recipe does: first, before the backend loads.
    keras_gmlp.set_backend_environment()
    # As the masked-LM recipe does (under JAX), when asked.
    common.start_reusing_freed_memory(args.reuse_freed_memory)
    report = common.header()
    report["arguments"] = vars(args)
    rows = []
    for length in args.lengths:
        for row in measure_length(length, args):
            print_row(row)
            rows.append(row)
    report["rows"] = rows
    print()
    print(common.describe(report))
    print(f"{args.rounds} rounds, medians; x_bert: over the baseline's rate")
    common.print_table(rows, COLUMNS)
    path = common.write_results(f"{args.name}_{report['backend']}", report)
    print(f"wrote {path}")
    return report


if __name__ == "__main__":
    main()
