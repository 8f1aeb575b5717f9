"""Generation with the decoding cache against recomputing the prefix.

Times `GMLPCausalLM.generate()` (greedy, token ids in and out, no
preprocessor) on one prompt of `tokens // --prompt-divisor` tokens
extended to `tokens`, for two variants sharing one backbone of `--preset`
(`gmlp_tiny` or `amlp_tiny`, spatial weights drawn at a trained model's
scale):

- `cached`: `GMLPCausalLM` as it is: the prompt's causal pass fills every
  block's cache (the spatial gating unit's normalised gate inputs, the
  tiny attention's keys and values), then each new token costs one row
  of the spatial weights times that cache, O(tokens) per block;
- `recompute` (the baseline of the ratios): every new token reruns the
  backbone over the whole token buffer, O(tokens^2) per block.

keras-hub compiles the sampling loop (XLA under JAX and TensorFlow; eager
under `torch.no_grad` on torch). The variants are timed in interleaved
rounds after a compiling call; each row gives the median generated
tokens/s, `speedup_vs_recompute` (same run) and whether both variants
generated the same tokens.

Usage:
    KERAS_BACKEND=torch python -m benchmarks.generation --tokens 512 \\
        --rounds 5 --name generation_epyc25
    KERAS_BACKEND=jax python -m benchmarks.generation --tokens 512 \\
        --preset amlp_tiny --name generation_amlp_epyc25
Results: benchmarks/results/<name>_<backend>.json (default name
generation).
"""

import argparse

import keras
import numpy as np
from keras import ops

from benchmarks import common
from keras_gmlp.models.gmlp_text.gmlp_causal_lm import GMLPCausalLM

BASELINE = "recompute"


class RecomputeCausalLM(GMLPCausalLM):
    """Baseline: each new token reruns the backbone on the token buffer."""

    def call_with_cache(self, token_ids, cache, cache_update_index):
        token_ids = ops.cast(token_ids, cache.dtype)
        cache = ops.slice_update(cache, [0, cache_update_index], token_ids)
        hidden = self.backbone(
            {"token_ids": cache, "padding_mask": ops.ones_like(cache)}
        )
        hidden = ops.slice(
            hidden,
            [0, cache_update_index, 0],
            [ops.shape(hidden)[0], 1, self.backbone.hidden_dim],
        )
        logits = self.backbone.token_embedding(hidden, reverse=True)
        return logits, hidden, cache

    def _build_cache(self, token_ids):
        hidden = self.backbone(
            {"token_ids": token_ids, "padding_mask": ops.ones_like(token_ids)}
        )
        return hidden, token_ids


def build(preset, sequence_length, dtype, seed):
    """The cached and the recomputing causal LM over one backbone."""
    cached = GMLPCausalLM.from_preset(
        preset, sequence_length=sequence_length, dtype=dtype
    )
    # Weights of a trained model's scale, so that greedy decoding does not
    # repeat one token (the near-zero initial spatial weights would).
    rng = np.random.default_rng(seed)
    for variable in cached.backbone.weights:
        if variable.path.endswith("spatial_gating_unit/kernel"):
            scale = 1.0 / np.sqrt(sequence_length)
            variable.assign(
                rng.normal(0.0, scale, variable.shape).astype("float32")
            )
    models = {"cached": cached, BASELINE: RecomputeCausalLM(cached.backbone)}
    for model in models.values():
        model.compile(sampler="greedy")
    return models


def measure_length(models, tokens, args):
    """Times both variants on one prompt extended to `tokens`."""
    rng = np.random.default_rng(tokens)
    prompt_length = max(1, tokens // args.prompt_divisor)
    token_ids = np.zeros((args.batch_size, tokens), "int32")
    token_ids[:, :prompt_length] = rng.integers(
        1, models["cached"].backbone.vocabulary_size, (1, prompt_length)
    )
    inputs = {"token_ids": token_ids, "padding_mask": token_ids != 0}
    functions, outputs = {}, {}
    for name, model in models.items():
        function = (lambda m: lambda: m.generate(inputs, stop_token_ids=None))(
            model
        )
        outputs[name] = np.asarray(function()["token_ids"])  # compiles
        functions[name] = function
    same = bool(np.array_equal(outputs["cached"], outputs[BASELINE]))
    times = common.alternate(functions, args.rounds, args.target_seconds)
    generated = args.batch_size * (tokens - prompt_length)
    baseline = common.median(times[BASELINE])
    rows = []
    for name in models:
        seconds = common.median(times[name])
        rows.append(
            {
                "tokens": tokens,
                "prompt_tokens": prompt_length,
                "variant": name,
                "median_s": seconds,
                "rounds_s": times[name],
                "tokens_per_s": generated / seconds,
                "speedup_vs_recompute": baseline / seconds,
                "same_tokens": same,
            }
        )
    return rows


COLUMNS = [
    "tokens",
    "prompt_tokens",
    "variant",
    "tokens_per_s",
    "speedup_vs_recompute",
    "same_tokens",
]


def print_row(row):
    print(
        f"tokens={row['tokens']:5d} (prompt {row['prompt_tokens']:4d}) "
        f"{row['variant']:10s} {row['tokens_per_s']:10.1f} tokens/s "
        f"x{row['speedup_vs_recompute']:7.2f} vs recompute  "
        f"same tokens: {row['same_tokens']}",
        flush=True,
    )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--tokens",
        type=int,
        nargs="+",
        default=[64, 128, 256, 512],
        help="prompt + generated tokens (the buffer of generate())",
    )
    parser.add_argument(
        "--prompt-divisor",
        type=int,
        default=4,
        help="the prompt is tokens // this; the rest is generated",
    )
    parser.add_argument(
        "--preset",
        default="gmlp_tiny",
        choices=["gmlp_tiny", "amlp_tiny"],
        help="widths of the model (a causal text preset)",
    )
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "mixed_bfloat16"]
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--target-seconds",
        type=float,
        default=0.5,
        help="rough duration of one measurement (fast calls are repeated)",
    )
    parser.add_argument(
        "--name",
        default="generation",
        help="results go to benchmarks/results/<name>_<backend>.json",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    run = common.header()
    print(common.describe(run), flush=True)
    print(
        f"{args.preset}, batch {args.batch_size}, {args.dtype}, greedy, "
        f"{args.rounds} rounds, medians",
        flush=True,
    )
    models = build(args.preset, max(args.tokens), args.dtype, seed=0)
    rows = []
    for tokens in args.tokens:
        for row in measure_length(models, tokens, args):
            print_row(row)
            rows.append(row)
    print()
    common.print_table(rows, COLUMNS)
    report = dict(run, arguments=vars(args), rows=rows)
    path = common.write_results(f"{args.name}_{run['backend']}", report)
    print(f"wrote {path}")


if __name__ == "__main__":
    keras.config.disable_interactive_logging()
    main()
