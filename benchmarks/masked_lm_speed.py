"""Masked-LM training tokens/s: gMLP and aMLP against a matched BERT.

Issue 12, benchmark 3. One process per backend (`KERAS_BACKEND`); at each
sequence length every model's training step is timed in interleaved rounds
(`common.alternate`), and each figure is a ratio to keras-hub's BERT timed
in the same rounds:

- `gmlp`, `amlp`: the pretraining recipe's models
  (`workflows.pretraining.build_models`) of `--preset` and `amlp_tiny`
  (the tiny text presets are Toeplitz: 2n - 1 spatial weights per block,
  the FFT product above the crossover); `gmlp_dense`: the same gMLP with
  `--spatial dense` (an n x n spatial weight per block).
- `bert`: keras-hub's `BertMaskedLM` through the same recipe, its depth
  and feed-forward width matched by the recipe to the gMLP's parameters
  at each length (each row records its size); `bert_amlp` the same,
  matched to the aMLP's, the `amlp` rows' baseline when it runs (before
  stop 48 they were against `bert`). Until stop 36 it was
  matched at the first length and kept at the others, on the premise
  that a BERT's count barely depends on n; its position embedding is
  n x hidden, so at n = 512 that BERT (2 layers, feed-forward 440) had
  1.50 M parameters against the gMLP's 1.45 M, where the BERT matched at
  512 has 2 layers and a feed-forward 352 wide. Every figure below
  before that note was measured that way at n = 512; runs of one length
  (all the n = 2048 figures) were matched at it.

Every model takes the same batch of `--batch-tokens` tokens (batch =
batch_tokens / n), 15 % of them masked, and is compiled as the
pretraining job compiles it (`pretraining.compile_model`): the recipe's
AdamW (`FusedAdamW`: torch's fused kernel under torch, one kernel a
variable under TensorFlow; global-norm clipping at 1.0; biases and
normalisation variables exempt from weight decay) on a warm-up schedule,
the recipe's loss (`language_model_loss`: token cross-entropy from
logits) and weighted metrics (`language_model_metrics`: accuracy and
perplexity), `model.train_on_batch` with the job's `jit_compile`
(Keras' default). Until stop 55 every model here trained with Keras'
`AdamW(1e-4)` instead, unclipped: every figure below before the stop-55
note was measured that way.

A correction: until this note the gMLP (a `GMLPMaskedLM`, whose
`compile` adds keras-hub's accuracy by default) trained with an accuracy
metric and the BERT wrapper without one, so every gMLP step also took an
argmax over the `(masked positions, vocabulary)` logits: under JAX one
fusion of 11 of ~290 thread-ms at n = 128 (`jax.profiler`, an AMD EPYC
with AVX-512). Every figure below but the `same_metrics` run's was measured
that way and understates the gMLP by that much
(`tests/test_masked_lm_speed.py` now checks both train alike).

A second correction, at stop 38: until then Keras' `fit()` and
`train_on_batch` ran the gMLP text tasks' blocks in inference mode (their
`call` hid `training`; `tests/models/test_gmlp_task.py`). Every gMLP
figure below before stop 38 was measured that way: under TensorFlow
with TensorFlow's own GELU and its gradient (the fix alone: 1.06-1.07x
faster steps), under JAX without the recomputing gate (the same speed).

Measured, `gmlp` training tokens/s over the matched BERT's (4,096 tokens
per batch, 3 rounds, medians):

| n | jax | tensorflow | torch | FLOP bound |
|---|---|---|---|---|
| 128, Xeon | 0.64 | 0.70 | 1.00 | 0.85 |
| 128, EPYC | 0.60-0.68 | 0.86-0.94 | 0.90 | 0.85 |
| 512, Xeon | 0.78 | 1.19 | 0.82 | 0.72 |
| 512, EPYC | 0.68-0.71 | 0.76-0.91 | 0.79-0.86 | 0.72 |
| 2048, Xeon | 1.95 | 1.15 | 0.98 | |
| 2048, EPYC | 2.06-2.20 | 1.73-1.81 | 1.07-1.17 | |

On an idle 2-core Xeon with AVX-512, AVX512-BF16 and AMX (another
machine than the Xeon rows), TensorFlow, 5 rounds, two runs each: the
gMLP at 0.69-0.70 / 0.72-0.73 x BERT (n = 128 / 512) with TensorFlow's
own GELU and LayerNorm kernels, 0.80-0.81 / 0.79-0.80 with the block's
XLA functions (`benchmarks/xla_functions.py`; keras-hub's BERT keeps
Keras' layers; `masked_lm_speed_xeon_amx_tensorflow.json`, 3 rounds).
JAX on the same machine after the JAX functions (`jax_functions.py`:
the GELU and the token product's gradient), 3 rounds, one run
(`masked_lm_speed_xeon_amx_jax.json`): 0.70 / 0.91 x BERT.
TensorFlow after the `tf.matmul` token product (ff44710), one run
(`masked_lm_speed_xeon_amx_tf_matmul_tensorflow.json`): 0.81 / 0.86.
On an idle 2-core AMD EPYC with AVX-512 and AVX512-BF16 (no AMX), after
TensorFlow's Abramowitz-Stegun GELU (`gelu_formula.py`), 3 rounds, one
run each (`masked_lm_speed_epyc_avx512_<backend>.json`): tensorflow
0.86 / 0.80, jax 0.75 / 0.90 x BERT (n = 128 / 512).
After the correction above (both models with the recipe's loss and
metrics), the same machine, 3 rounds, one run each
(`masked_lm_speed_epyc_avx512_same_metrics_<backend>.json`): tensorflow
0.89 / 0.86, jax 0.75 / 0.86, torch 0.97 / 0.74 x BERT (n = 128 / 512).
JAX again after its token product without the broadcast `W`
(`jax_token_product.py`), two runs, 3 and 5 rounds
(`masked_lm_speed_epyc_avx512_jax_token_product_jax.json` is the
second): 0.85 / 0.84, then 0.78 / 0.95. JAX after the block's first
projection became two products in training, before its recomputing gate
(`split_projection.py`), 5 rounds, one run
(`masked_lm_speed_epyc_avx512_two_products_jax.json`): 0.79 / 0.92.
All three backends on the idle 2-core Xeon with AMX at 716d1c9, 5 rounds,
one run each (`masked_lm_speed_xeon_amx_stop35_<backend>.json`), n = 128 /
512: jax 0.79 / 0.95, tensorflow 0.93 / 0.89, torch 0.92 / 0.81 x BERT.
Torch is the fastest in tokens/s there (28,700 at n = 128 against
tensorflow's 21,500 and jax's 18,300).
At n = 2048 (3 rounds, `masked_lm_speed_xeon_amx_stop35_2048_<backend>.json`):
jax 1.46, tensorflow 0.70, torch 0.54 x BERT. There TensorFlow's and
torch's BERT train faster per token than at 512 (19,100 and 31,600 tokens/s
against 20,400 and 28,100), so their attention runs efficiently at that
length. The gMLP's FFT product does not keep up with it there. JAX's BERT
slows down from 512 to 2048 (16,200 to 9,200).
With the Toeplitz FFT product on complex spectra under TensorFlow and
torch (`fft_product.py`; e965d95, 3 rounds,
`masked_lm_speed_xeon_amx_stop35_2048_complex_fft_<backend>.json`):
tensorflow 0.73, torch 0.65 x BERT at n = 2048.

Stop 36, the same idle Xeon with AMX, each length's BERT matched to
the gMLP at it (`masked_lm_speed_xeon_amx_stop36_<backend>.json`, 5
rounds, n = 128 / 512; at 512 the BERT has 2 layers and a feed-forward
352 wide): jax 0.78 / 0.92, tensorflow 0.91 / 0.87, torch 0.90 / 0.76 x
BERT. At n = 2048, after the FFT product's backward pass by hand
(`toeplitz_product.py`; 5 rounds,
`masked_lm_speed_xeon_amx_stop36_2048_<backend>.json`): tensorflow 0.85,
torch 0.74 (0.73 and 0.65 before it).

Stop 37, JAX after its products of rows (`row_matmul.py`), 5 rounds,
n = 128 / 512: 0.86 / 0.97 x BERT (`masked_lm_speed_xeon_amx_stop37_jax.json`),
and with `--reuse-freed-memory`, as the masked-LM recipe runs JAX (both
models' steps then reuse their temporaries instead of faulting them in;
`_stop37_reuse_jax.json`): 0.93 / 1.03, every round at 512 1.02-1.05x.
Until this flag the benchmark ran JAX without it. Then after the recipe's
accuracy and cross-entropy by hand under JAX (`token_accuracy.py`,
`cross_entropy.py`, shared by both models), the same way
(`_stop37_final_jax.json`): **0.99 / 1.11** (rounds 0.97-1.01 and
1.10-1.11). BERT's step took 124 ms at 128 (130 before them) and
174-178 ms at 512 (174 before): at 512 it did not gain from them.

Stop 38, at aee913a: the text tasks in training mode (above) and
TensorFlow's cross-entropy as XLA functions (`cross_entropy.py`, shared
by both models); 5 rounds at n = 128 / 512
(`masked_lm_speed_xeon_amx_stop38_<backend>.json`), 3 at 2048
(`_stop38_2048_`): jax (`--reuse-freed-memory`) 0.98 / 1.12 / **1.87**,
tensorflow **0.97** / 0.88 / 0.87, torch 0.90 / 0.78 / 0.74 x BERT.

Xeon: the 2-core Xeon, partly overlapped with short test runs, Keras'
`SparseCategoricalCrossentropy` (`masked_lm_speed_<backend>.json`).
EPYC: an idle 2-core AMD EPYC with AVX2 only, after the torch and
TensorFlow changes of `vision.py` (oneDNN on, the fused Dense, the
batched token product); the ranges are two runs, one with Keras' loss
(`masked_lm_speed_amd_avx2_<backend>.json`) and one with the recipe's
(`_amd_avx2_flat_loss_`), so they show the runs' spread more than the
loss, which both models share. The loss itself: under torch Keras'
sparse cross-entropy moves the class axis of the `(batch, positions,
vocabulary)` logits to axis 1, two strided copies of them a step (9 % of
the gMLP step at n = 128 in torch's profiler); `token_cross_entropy`
flattens the logits first: 1.11 / 1.13 x faster steps (gMLP / BERT,
torch, 8 alternated rounds), 1.05 / 1.02 TensorFlow, 1.07 / 1.01 JAX.

Where the time goes at n = 128: per token, the 4 gMLP blocks cost
4 x (128 x 512 + 128 x 256 + 256 x 128) = 524 K multiply-adds and BERT's
2 layers (feed-forward 440 wide, as the recipe matches the parameters)
2 x (4 x 128^2 + 2 x 128 x 128 + 2 x 128 x 440) = 422 K, plus the same
masked head for both (0.15 x 128 x 8192 = 157 K): FLOPs alone put the
gMLP at 0.85 of BERT's rate, the "FLOP bound" column. At 512 the spatial
product grows to 512 x 256 per block and attention to 2 x 512 x 128 per
layer: 918 K against 618 K, a bound of 0.72 (0.68 against the BERT
matched at 512, feed-forward 352: 573 K). The aMLP (`amlp_tiny`) adds
a tiny attention to each block, 4 x (128 x 96 + 2n x 32 + 32 x 256)
multiply-adds a token (115 K at 128, 213 K at 512), and its BERT
(`bert_amlp`) a feed-forward 160 wider (82 K): a bound of 0.83 at 128
and 0.63 at 512 against it. torch and TensorFlow run at
or above the bound on the EPYC; the target (at least BERT's rate at 128,
ahead from 512) asks the gMLP to beat it, which these matched sizes do
not allow unless its kernels are more efficient than BERT's. JAX stays
below it (XLA:CPU, as in `vision.py`). The FFT product is not the way
at 512: for this unit alone (256 gated channels, the MLM batches;
`spatial_gating.py`, `spatial_gating_mlm_tiny_b<batch>_<backend>.json`)
it is 0.53 / 0.55 / 0.77 x the materialised product at 512 (jax / torch /
TensorFlow) and reaches it at 1024 (0.98 / 0.86 / 1.25), which fits
`FFT_CROSSOVER`. (On AMD's family 25, whose matmul runs at half that
rate, it is faster at 512: `fft_crossover.py`, stop 58.) At 2048 tokens
the FFT Toeplitz product (O(n log n))
overtakes attention's O(n^2) on JAX and TensorFlow; the dense `n x n`
unit (`gmlp_dense`, 18 M parameters) does not. aMLP adds a tiny attention
per block and trails at every length but JAX's 2048.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/masked_lm_speed.py
    KERAS_BACKEND=jax python benchmarks/masked_lm_speed.py --lengths 128 512
Results: benchmarks/results/masked_lm_speed_<backend>.json
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
# parameters (the aMLP's tiny attention adds 6 % to the gMLP's). Until
# stop 48 the aMLP's was the BERT matched to the gMLP.
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
    from keras_gmlp.training.schedules import warmup_linear
    from keras_gmlp.workflows import pretraining

    config = recipe_config(preset, length, MODELS[name])
    training_model, _, description = pretraining.build_models(
        config, vocabulary_size
    )
    # Every model compiled as the pretraining job compiles it: the recipe's
    # AdamW (fused, clipped, on a warm-up schedule), loss and weighted
    # metrics (the gMLP task's own `compile` would add keras-hub's accuracy
    # by default). Until stop 55, Keras' AdamW without clipping.
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


def variant_parser(doc, lengths):
    """The flags of an A/B of two forms of the gMLP masked LM's step
    (`variant_ab`)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=lengths)
    parser.add_argument("--preset", default="gmlp_tiny")
    parser.add_argument("--vocabulary-size", type=int, default=8192)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--suffix", default="", help="results file suffix")
    return parser


def variant_step(variant, name, length, args):
    """A warm training step of the gMLP masked LM built, traced and run
    inside `variant(name)` (eager torch runs the form at every call)."""
    import keras

    keras.utils.set_random_seed(0)
    with variant(name):
        model, _ = build("gmlp", args.preset, length, args.vocabulary_size)
        batch_size = max(1, args.batch_tokens // length)
        x, y = batch(model, length, batch_size, args.vocabulary_size)
        model.train_on_batch(x, y)

    def step():
        with variant(name):
            return model.train_on_batch(x, y)

    return step


def variant_ab(variant, baseline, candidate, args, name):
    """Alternates the `baseline` and `candidate` forms' steps at each of
    `args.lengths`, prints the ratios and writes them to
    `benchmarks/results/<name>.json`."""
    run = common.header()
    rows = []
    for length in args.lengths:
        functions = {
            form: variant_step(variant, form, length, args)
            for form in (baseline, candidate)
        }
        times = common.alternate(functions, args.rounds, target_s=1.0)
        row = common.ab_row(
            times[baseline], times[candidate], baseline, candidate
        )
        rows.append(dict(tokens=length, **row))
        print(rows[-1], flush=True)
    columns = ["tokens", f"{baseline}_ms", f"{candidate}_ms"]
    columns += [f"x_{baseline}", "rounds_min", "rounds_max"]
    common.finish_report(
        run, rows, columns, name.format(**run), arguments=vars(args)
    )


MASKED_LM_FLAG = "--masked-lm"


def jax_image_or_masked_lm_ab(
    doc, name, baseline, candidate, variant, precisions, lengths
):
    """The main of a JAX A/B: the gMLP-Ti (or `--model`) steps of
    `common.run_ab` in `precisions`, or with `--masked-lm` the masked LM's
    steps at `lengths` (`variant_ab`), after `reuse_freed_memory()` as the
    `keras-gmlp` command runs JAX. Results:
    `benchmarks/results/<name>[_masked_lm]<suffix>_jax.json`."""
    from keras_gmlp.training import reuse_freed_memory

    reuse_freed_memory()
    if MASKED_LM_FLAG in sys.argv[1:]:
        sys.argv.remove(MASKED_LM_FLAG)
        args = variant_parser(doc, lengths).parse_args()
        results = f"{name}_masked_lm{args.suffix}_{{backend}}"
        variant_ab(variant, baseline, candidate, args, results)
        return
    common.run_ab(doc, name, baseline, candidate, precisions, "jax", variant)


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
    args = parse_args(argv)
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
    path = common.write_results(f"{args.name}_{report['backend']}", report)
    print(f"wrote {path}")
    return report


if __name__ == "__main__":
    main()
