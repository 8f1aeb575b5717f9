"""A/B of the spatial gating unit's token product: matmul forms vs einsum.

Issue 12. `SpatialGatingUnit` computes `W @ v` over the token axis with
`spatial_gating_unit.token_product`, the einsum `ij,...jc->...ic`. XLA
lowers the einsum to one 2-D dot over `(batch x channels, tokens)`, with
`v` transposed into that layout and the result transposed back: in the
optimised HLO of a gMLP-Ti training step about 6 copies of
`8 x 196 x 384` per block, 43 % of the step's XLA time in copy fusions
(see `vision.py`). A batched matmul is a dot in the tensors' own layout.

Forms: `einsum` (the baseline), `broadcast` (`W` broadcast to
`(batch, n, m)`, then a batched matmul) and `matmul` (`ops.matmul` of the
2-D `W` and the 3-D `v`, the backend broadcasting as it likes), and under
torch `linear`, timm's form: `torch.nn.functional.linear` of `v`
transposed to tokens-last, the bias fused into the product.

One process per backend (`KERAS_BACKEND`). For each case one copy of the
same model (same seed, so the same weights) is built per form, and their
steps are timed in interleaved rounds (`common.alternate`); the form is
switched before every call (torch runs eagerly; JAX and TensorFlow keep
the function compiled with the form active at its first call). `x einsum`
is the einsum's seconds per step over the form's in the same rounds
(above 1: the form is faster).

Cases: `image`: the gMLP-Ti/16 image classifier at 224 x 224
(`train_on_batch` with AdamW, `predict_on_batch`); `mlm`: the pretraining
recipe's tiny masked LM (`masked_lm_speed.build`) at `--mlm-length`
tokens, below the FFT crossover (so a materialised Toeplitz weight).

Measured (2-core Xeon, idle but for this run, gMLP-Ti/16 at batch 8,
tiny masked LM at 32 x 128; medians of 5 rounds, `x einsum`, above 1 the
form is faster; the spread of the rounds' ratios in brackets):

| backend | case | broadcast | matmul |
|---|---|---|---|
| jax | image train | 0.93 (0.86-1.03) | 0.96 (0.87-1.20) |
| jax | image infer | 1.20 (1.06-1.23) | 1.21 (0.93-1.30) |
| jax | mlm train | 0.93 (0.93-1.00) | 0.96 (0.88-1.07) |
| tensorflow | image train | 0.99 (0.96-1.07) | 1.05 (0.95-1.18) |
| tensorflow | image infer | 0.95 (0.94-1.00) | 1.00 (0.90-1.11) |
| tensorflow | mlm train | 0.98 (0.97-1.04) | 1.01 (0.99-1.07) |
| torch | image train | 1.14 (0.98-1.21) | 1.01 (0.88-1.17) |
| torch | image infer | 1.10 (0.94-1.18) | 0.97 (0.90-1.07) |
| torch | mlm train | 0.88 (0.75-1.25) | 0.89 (0.83-1.12) |

Only JAX inference gains clearly (1.2x); JAX training loses 4-7 % with
either form (the copies move into the weight gradient's batch
reduction), and the other rows are within their spread.

torch's broadcast form again on an idle 2-core AMD EPYC with AVX2 only
(`--forms broadcast --rounds 6`, `token_product_broadcast_amd_avx2_torch.json`):
image train 1.05 (0.99-1.15), image infer 1.07 (0.97-1.14), mlm train
1.04 (1.01-1.07). torch's einsum also copies `v` twice per block into a
permuted layout (`(n, batch, c)`; torch's profiler, `profile_memory`),
which the batched matmul reads in place. So the unit uses the broadcast
form under torch, train and inference, and in JAX inference
(`training` false), and the einsum under TensorFlow and in JAX training.

timm's form under torch (`--forms linear`, an idle 2-core AMD EPYC with
AVX2 only, same cases, 5 rounds; `token_product_linear_torch.json`):
image train 0.95 (0.69-1.08), image infer 0.92 (0.80-1.55), mlm train
1.10 (0.86-1.54): within the spread, not adopted.

Usage:
    KERAS_BACKEND=jax python benchmarks/token_product.py --rounds 5
Results: benchmarks/results/token_product_<backend>.json
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "einsum"


def einsum_product(weight, v, bias, batched=False):
    from keras import ops

    return ops.einsum("ij,...jc->...ic", weight, v) + bias[:, None]


def broadcast_product(weight, v, bias, batched=False):
    from keras import ops

    batch_size = ops.shape(v)[0]
    weight = ops.broadcast_to(weight[None], (batch_size, *ops.shape(weight)))
    return ops.matmul(weight, v) + bias[:, None]


def matmul_product(weight, v, bias, batched=False):
    from keras import ops

    return ops.matmul(weight, v) + bias[:, None]


def linear_product(weight, v, bias, batched=False):
    """timm's form (torch only): `F.linear` over the tokens-last view."""
    import torch

    product = torch.nn.functional.linear(
        torch.transpose(v, -1, -2), weight, bias
    )
    return torch.transpose(product, -1, -2)


FORMS = {
    BASELINE: einsum_product,
    "broadcast": broadcast_product,
    "matmul": matmul_product,
    "linear": linear_product,
}


def use_form(form):
    """Makes every SpatialGatingUnit use `form` from its next trace/call."""
    from keras_gmlp.layers import spatial_gating_unit as unit

    unit.token_product = FORMS[form]


def in_form(form, function):
    def call():
        use_form(form)
        return function()

    return call


def image_steps(form, batch_size, image_size):
    import keras

    use_form(form)
    keras.utils.set_random_seed(0)
    model = common.build_image_classifier(
        "gmlp_ti16_224", image_size, "auto", "float32"
    )
    x, y = common.random_image_batch(batch_size, image_size)
    train = functools.partial(model.train_on_batch, x, y)
    infer = functools.partial(model.predict_on_batch, x)
    return {"image train": train, "image infer": infer}


def mlm_steps(form, length, batch_size):
    import keras

    from benchmarks import masked_lm_speed

    use_form(form)
    keras.utils.set_random_seed(0)
    model, _ = masked_lm_speed.build("gmlp", "gmlp_tiny", length, 8192)
    x, y = masked_lm_speed.batch(model, length, batch_size, 8192)
    return {"mlm train": functools.partial(model.train_on_batch, x, y)}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--cases", nargs="+", default=["image", "mlm"], choices=["image", "mlm"]
    )
    parser.add_argument(
        "--forms",
        nargs="+",
        choices=list(FORMS),
        help="default: all, `linear` under torch only",
    )
    parser.add_argument("--image-batch", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--mlm-length", type=int, default=128)
    parser.add_argument("--mlm-batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target-seconds", type=float, default=1.0)
    parser.add_argument(
        "--name",
        default="token_product",
        help="results go to benchmarks/results/<name>_<backend>.json",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    report = common.header()
    report["arguments"] = vars(args)
    print(common.describe(report), flush=True)
    forms = args.forms or [
        form
        for form in FORMS
        if form != "linear" or os.environ["KERAS_BACKEND"] == "torch"
    ]
    forms = [BASELINE] + [form for form in forms if form != BASELINE]
    functions = {}
    for form in forms:
        steps = {}
        if "image" in args.cases:
            steps.update(image_steps(form, args.image_batch, args.image_size))
        if "mlm" in args.cases:
            steps.update(mlm_steps(form, args.mlm_length, args.mlm_batch))
        for case, step in steps.items():
            function = in_form(form, step)
            function()  # compiles outside the timing
            functions[(case, form)] = function
    keys = list(functions)
    times = common.alternate(
        {f"{case}/{form}": functions[case, form] for case, form in keys},
        args.rounds,
        args.target_seconds,
    )
    rows = []
    for case in dict.fromkeys(case for case, _ in keys):
        baseline = times[f"{case}/{BASELINE}"]
        for form in forms:
            seconds = times[f"{case}/{form}"]
            ratios = [b / s for b, s in zip(baseline, seconds, strict=True)]
            rows.append(
                {
                    "case": case,
                    "form": form,
                    "median_s": common.median(seconds),
                    "rounds_s": seconds,
                    "x_einsum": common.median(baseline)
                    / common.median(seconds),
                    "round_ratios": ratios,
                }
            )
            print(
                f"{case:12s} {form:10s} {1e3 * common.median(seconds):8.1f} ms"
                f"  x{rows[-1]['x_einsum']:5.2f} vs einsum "
                f"(rounds {min(ratios):.2f}-{max(ratios):.2f})",
                flush=True,
            )
    report["rows"] = rows
    print(
        "wrote",
        common.write_results(f"{args.name}_{report['backend']}", report),
    )


if __name__ == "__main__":
    main()
