"""Speed of generation: decoding with the blocks' caches vs recomputing.

Times `GMLPCausalLM.generate()` (greedy, token ids in and out, no
preprocessor) on one prompt of `tokens // 4` tokens extended to `tokens`,
for two variants sharing one backbone:

- `cached`: `GMLPCausalLM` as it is: the prompt's causal pass fills every
  block's cache (the normalised gate inputs of the spatial gating unit, the
  tiny attention's keys and values), then each new token is one row of the
  spatial weights times that cache, `O(tokens)` per block;
- `recompute` (the baseline of the ratios): every new token reruns the
  backbone over the whole token buffer, `O(tokens^2)` per block (the
  decoding before the cache).

keras-hub compiles the whole sampling loop (XLA under JAX and TensorFlow;
eager under `torch.no_grad` on torch). The variants are timed in
interleaved rounds after a compiling call; each row gives the median
generated tokens per second and the speed-up over recomputation in the
same run, and checks that both variants generated the same tokens.

Where the time goes (`gmlp_tiny` widths: 4 blocks, 128 channels, 512
expanded, Toeplitz, vocabulary 8192; one prompt; 2-core Xeon shared with
other jobs, so only ratios; see `benchmarks/results/generation_*.json`):

- Recomputing: a new token at position t costs the backbone over the
  whole buffer of `tokens` positions (the buffer's shape is fixed so that
  the loop compiles once): `tokens x` the channel projections and a
  `tokens x tokens` spatial product per block, about 0.94 GFLOP at 512
  tokens for these widths, while the one position read from it needs
  1 / 512 of the channel work.
- Cached: per token and block, the channel projections of one position
  (0.2 MFLOP), one row of `W` (a slice of the dense kernel or of the
  Toeplitz taps) times the `(tokens, 256)` cache (0.26 MFLOP
  at 512), and the cache update; the tied output projection to 8192
  logits (2.1 MFLOP) is then the largest single product. At these sizes a
  cached step is bound by per-op overhead, not FLOPs: its time hardly
  grows from 128 to 512 tokens, so the speed-up grows with the length.
  Under torch each op is an eager dispatch through Keras' layer calls
  (roughly 60 small ops per block step), which caps its tokens/s; under
  JAX and TensorFlow the step runs inside the compiled while loop.
- Measured before the change below (load average 10-12 on the 2 cores),
  speed-up at 512 tokens: JAX 43x (cached 870 tokens/s), TensorFlow 24x
  (690 tokens/s), torch 2.7x on two threads and 3.6x with
  `OMP_NUM_THREADS=1` (cached 140 tokens/s, the same at 128 and 512
  tokens: about 7 ms of eager dispatch per token). A profile of torch's
  cached `generate()` (cProfile, 384 new tokens) showed 19
  `Layer.__call__` per token (the embedding, 4 x (norm, two Dense, the
  unit's norm), the final norm, the tied logits) taking most of the
  step, and a micro-benchmark on a `(1, 1, 128)` input gave about
  200 us for `Dense.__call__` / `LayerNormalization.__call__` against
  50-70 us for their `call`.
- So the decoding paths call their sublayers through
  `keras_gmlp.layers.direct_call.direct_call` (the layer's `call` under
  the dtype conversion and autocast scope `__call__` would apply, same
  outputs: `tests/layers/test_direct_call.py`), and a causal Toeplitz
  unit takes one token's row of `W` as one slice of its reversed,
  zero-padded taps instead of a gather and a mask. Measured after, on
  the idle 2-core Xeon, 7 rounds, torch, 512 tokens: 5.4x with
  `OMP_NUM_THREADS=1` (per-round ratios 4.3-6.2; cached 129 tokens/s
  against 24 recomputing) and 3.9x on two threads (the recomputation
  uses both threads, a one-token step cannot; those results files were
  replaced by the run below; git has them at deaf3c4). The rest of a
  torch step is Keras op dispatch (about 170 `convert_to_tensor` per
  token) and the cache update's copy (`slice_update` clones the cache).
- On an idle 2-core AMD EPYC with AVX-512 (2026-11-26), the code above
  measured 4.71x and 3.87x on two threads (two runs, 5 and 7 rounds, 512
  tokens; cached 226 and 244 tokens/s against 48 and 63). A profile
  (cProfile) showed the rest: each block step rebuilt the causal
  Toeplitz row from the zero-padded reversed taps (flip, zeros,
  concatenate, slice) and multiplied all `max_length` cached positions,
  and wrote the cache at a tensor position, which Keras' torch
  `slice_update` does through `arange` / `meshgrid` index grids and
  `index_put_` (5,380 `arange` and 2,304 `stack` calls in 384 tokens).
  Now, under eager torch only (the compiled loops of JAX and TensorFlow
  need fixed shapes): the row is the `i + 1` taps (or kernel entries)
  position `i` sees times the first `i + 1` cached positions
  (`SpatialGatingUnit._torch_decoded_row`), and the position is read as
  an int (`cache_index`), so the write is a slice assignment. A/Bs in
  one process, `gmlp_tiny`, 512 tokens: the row 1.22-1.39x faster per
  token (3 rounds), then the int position 1.20x (5 rounds, 1.09-1.27),
  same tokens. The benchmark after both, 7 rounds
  (`generation_torch.json`, `generation_1thread_torch.json`): 6.75x on
  two threads (cached 346 tokens/s against 51; a second run 6.87x, 326
  against 48), 7.99x on one (352 against 44); at 128 tokens 2.51x and
  2.93x. Then `generate_step` reads the previous token at that int
  position too (`ops.slice` of the token buffer): 1.05x per token (5
  rounds in one process, 1.03-1.13), not in the figures above.
- aMLP (`--preset amlp_tiny`, the same EPYC, 5 rounds,
  `generation_amlp_torch.json`): 5.57x on two threads (cached 182
  tokens/s against 33). The tiny attention reading only the `start + 1`
  keys a token sees, like the spatial row: 1.00x (5 rounds in one
  process, 0.99-1.03), so it still attends over all `max_length` keys,
  the later ones masked.
- JAX and TensorFlow on the same EPYC after these changes (their
  compiled loops keep the masked rows), 5 rounds, 512 tokens
  (`generation_epyc_<backend>.json`): jax 18.4x (cached 3,270 tokens/s
  against 178), tensorflow 9.3x (853 against 92). Recomputing runs
  faster on this EPYC than on the Xeon, hence the smaller ratios.
- On an idle 2-core AMD EPYC of family 25 (stop 55), torch: 4.21x at
  512 tokens (cached 273 tokens/s against 65;
  `generation_epyc25_stop55_torch.json`). A torch profile of one
  `generate()` (384 new tokens, 1.46 s): the tied logits, `(1, 128) x
  (128, 8192)` on MKL, 0.72 ms a token (the 4 MiB weight read from
  memory on one thread: 0.76 ms with it out of the CPU's caches, 0.12 ms
  in them, in scratch), and a `(1, 512, 256)` copy a block a token, 0.53
  ms: Keras' torch `slice_update` clones the cache it writes. Now the
  causal LM's decoding loops write their caches in place
  (`keras_gmlp.layers.decoding_cache`; 1.13x per `generate()` for
  `gmlp_tiny`, 0.99-1.20, 1.24x for `amlp_tiny`, 0.96-1.52, 7
  interleaved rounds in one process, same tokens), and a product of a
  few rows by a weight of at least 2^18 elements takes oneDNN, which
  reads it on both cores (`torch_linear.MIN_WEIGHT_ELEMENTS`; 1.20x,
  0.75-1.35, same tokens). After both, 5 rounds
  (`generation_epyc25_cache_in_place_stop55_torch.json`): **6.31x**
  (cached 374 tokens/s against 59); aMLP **5.75x** (313 against 55,
  `generation_amlp_epyc25_cache_in_place_stop55_torch.json`). JAX and
  TensorFlow there (their steps compiled whole, unchanged): 18.3x and
  6.47x (`generation_epyc25_stop55_<backend>.json`).
- The prompt's prefill is the same full causal pass in both variants
  (by FFT for long Toeplitz prompts), paid once per `generate()` call.

Usage:
    KERAS_BACKEND=jax python -m benchmarks.generation --tokens 128 512
"""

import argparse

import keras
import numpy as np
from keras import ops

from benchmarks import common
from keras_gmlp.models.gmlp_causal_lm import GMLPCausalLM

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
    report = dict(run, arguments=vars(args), rows=rows)
    path = common.write_results(f"{args.name}_{run['backend']}", report)
    print(f"wrote {path}")


if __name__ == "__main__":
    keras.config.disable_interactive_logging()
    main()
