"""A/B under JAX: the block's GELU and the spatial token product, JAX's own
vs hand-written functions.

Issue 12. Found with `jax.profiler` traces of a gMLP-Ti/16 training step
(batch 8, float32, an idle 2-core Xeon with AVX-512, AVX512-BF16 and AMX;
XLA:CPU's thunks by HLO op name, summed over the step):

- the exact GELU, `jax.nn.gelu(x, approximate=False)`, is `erfc`, which
  XLA expands into two branches and selects between: 95 ms of a 730 ms
  step (forward 1.8 ms, backward 1.3 ms a block, 30 blocks). Standalone
  on `(8, 196, 768)`: 1.3 ms forward; torch's GELU 0.26 ms.
- the token product `W @ v` as the einsum `ij,...jc->...ic`: XLA runs it
  as one 2-D dot over `(tokens, batch x channels)` with `v` and the
  result transposed around it; its dots (forward and gradients) took
  160 ms at 130-150 GFLOP/s (a plain 2-D dot of that size: 270), and the
  transposes around them another 75 ms. The batched product (`W`
  broadcast over the batch) has no transposes, but JAX's gradient of the
  broadcast `W` is a batched dot into `(batch, n, m)` and its reduction,
  which XLA:CPU ran slower than the einsum (training 4-7 % slower,
  `token_product.py`).

The candidate (`keras_gmlp.layers.gelu.gelu`, `token_product(...,
batched=True)`): the GELU as `x Phi(x)` with `Phi` from Abramowitz &
Stegun's erfc (one exponential, shared with the gradient's density;
absolute error below 1.5e-7, as a float32 `erf`), under a `custom_vjp`
with the closed-form gradient; the batched product under a `custom_vjp`
whose weight gradient is the sum over the batch of `g[b] @ v[b]^T`
(one 2-D dot each, float32 accumulation). (XLA's own `erf`, 3 times
faster than `erfc` forward, was the first try; a SavedModel exported
from JAX cannot hold it: it serialises as a StableHLO composite that
TensorFlow's deserialiser does not know.)

The baseline is the previous code: `keras.activations.gelu` and, in
training, the einsum (inference already used the batched product).
Variants: `keras` (the baseline), `gelu` (the GELU only), `product` (the
product only), `both` (the package's code). Each variant's functions are
traced with its pieces in place (module attributes patched), then timed
in interleaved rounds (`common.alternate`); `x keras` is the baseline's
seconds over the variant's (above 1: faster).

Measures: `op` (the GELU on `(batch, 196, channels)`, forward and
forward plus gradient; the token product of gMLP-Ti and gMLP-S widths)
and `model` (a gMLP-Ti/16 classifier's `train_on_batch` and
`predict_on_batch`, AdamW, batch 8, 224 px, float32 and mixed_bfloat16).

Measured (the same Xeon, idle but for this run, 5 rounds, medians, the
rounds' range in brackets; `jax_functions_jax.json`), x keras:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| GELU fwd, 768 / 1536 channels | 1.35 / 1.43 | 1.71 / 1.70 |
| GELU fwd+bwd, 768 / 1536 | 1.15 / 1.14 | 2.63 / 1.20 |
| product fwd, 384 / 768 channels | 1.27 / 1.43 | 1.14 / 1.37 |
| product fwd+bwd, 384 / 768 | 1.13 / 1.37 | 1.35 / 1.48 |
| gMLP-Ti train, GELU only | 0.98 | 1.02 |
| gMLP-Ti train, product only | 1.05 | 1.09 |
| gMLP-Ti train, both | 1.06 (1.03-1.09) | 1.07 (1.03-1.13) |
| gMLP-Ti infer, GELU only | 1.10 | 1.12 |
| gMLP-Ti infer, product only | 0.99 | 1.01 |
| gMLP-Ti infer, both | 1.11 (1.02-1.12) | 1.09 (1.08-1.15) |

(The product in inference was batched before too: the same forward.) In
training the GELU's gain is within the rounds' spread: its backward pass
recomputes the exponential the forward pass had.

Usage:
    KERAS_BACKEND=jax python benchmarks/jax_functions.py --rounds 5
Results: benchmarks/results/jax_functions_jax.json
"""

import argparse
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "keras"
VARIANTS = ("keras", "gelu", "product", "both")
PRECISIONS = ("float32", "mixed_bfloat16")


def keras_gelu(x):
    import keras

    return keras.activations.gelu(x, approximate=False)


def einsum_product(weight, v, bias, batched=False):
    """The previous training form: the einsum whatever `batched` says."""
    from keras import ops

    return ops.einsum("ij,...jc->...ic", weight, v) + bias[:, None]


def broadcast_product(weight, v, bias, batched=False):
    """The previous inference form: `W` broadcast, JAX's own gradient."""
    from keras import ops

    if not batched:
        return einsum_product(weight, v, bias)
    shape = tuple(ops.shape(v)[:-2]) + tuple(ops.shape(weight))
    return ops.matmul(ops.broadcast_to(weight, shape), v) + bias[:, None]


@contextlib.contextmanager
def variant(name, training):
    """Patches the block's GELU and the unit's token product to `name`'s."""
    from keras_gmlp.layers import gmlp_block
    from keras_gmlp.layers import spatial_gating_unit as unit

    saved = gmlp_block.gelu, unit.token_product
    if name in ("keras", "product"):
        gmlp_block.gelu = keras_gelu
    if name in ("keras", "gelu"):
        unit.token_product = einsum_product if training else broadcast_product
    try:
        yield
    finally:
        gmlp_block.gelu, unit.token_product = saved


def op_functions(batch_size, precision):
    """name -> warm callable: the GELU and the token product of each
    variant, forward and forward + gradients."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from keras_gmlp.layers import gelu as gelu_module
    from keras_gmlp.layers import spatial_gating_unit as unit

    dtype = jnp.float32 if precision == "float32" else jnp.bfloat16
    rng = np.random.default_rng(0)

    def array(*shape, scale=1.0):
        return jnp.asarray(rng.normal(scale=scale, size=shape), dtype)

    cases = {}
    for channels in (768, 1536):
        x = array(batch_size, 196, channels, scale=2.0)
        gelus = {"keras": keras_gelu, "candidate": gelu_module.gelu}
        for form, function in gelus.items():
            cases[f"gelu {channels} {form}"] = (function, (x,))
    for channels in (384, 768):
        v = array(batch_size, 196, channels)
        weight, bias = array(196, 196, scale=0.05), array(196)
        products = {
            "keras": lambda w, v, b: einsum_product(w, v, b),
            "candidate": lambda w, v, b: unit.token_product(w, v, b, True),
        }
        for form, function in products.items():
            cases[f"product {channels} {form}"] = (function, (weight, v, bias))
    functions = {}
    for name, (function, arguments) in cases.items():
        measure, form = name.rsplit(" ", 1)
        forward = jax.jit(function)

        def both(*arguments, function=function):
            outputs, pullback = jax.vjp(function, *arguments)
            return outputs, pullback(outputs)

        both = jax.jit(both)
        functions[f"{measure} fwd {form}"] = lambda f=forward, a=arguments: f(
            *a
        )
        functions[f"{measure} fwd+bwd {form}"] = lambda f=both, a=arguments: (
            jax.block_until_ready(f(*a))
        )
    for function in functions.values():
        common.block(function())
    return functions


def model_functions(batch_size, precision, variants):
    """name -> warm callable: gMLP-Ti steps traced in each variant."""
    import keras

    images, labels = common.random_image_batch(batch_size, 224)
    functions = {}
    for name in variants:
        keras.utils.set_random_seed(0)
        model = common.build_image_classifier(
            "gmlp_ti16_224", 224, "auto", precision
        )
        with variant(name, training=True):
            model.train_on_batch(images, labels)
        with variant(name, training=False):
            model.predict_on_batch(images)
        functions[f"train {name}"] = lambda m=model: m.train_on_batch(
            images, labels
        )
        functions[f"infer {name}"] = lambda m=model: m.predict_on_batch(images)
    return functions


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS
    )
    parser.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS
    )
    parser.add_argument(
        "--no-model", action="store_true", help="the op measures only"
    )
    parser.add_argument(
        "--no-ops", action="store_true", help="the model measures only"
    )
    args = parser.parse_args()
    import keras

    if keras.config.backend() != "jax":
        raise SystemExit(
            f"Received KERAS_BACKEND={keras.config.backend()!r}; expected "
            "'jax': these functions are the JAX backend's."
        )
    variants = [BASELINE] + [v for v in args.variants if v != BASELINE]
    run = common.header()
    rows = []
    for precision in args.precisions:
        if not args.no_ops:
            functions = op_functions(args.batch_size, precision)
            times = common.alternate(functions, args.rounds)
            measures = dict.fromkeys(n.rsplit(" ", 1)[0] for n in functions)
            for measure in measures:
                row = common.ab_row(
                    times[f"{measure} keras"],
                    times[f"{measure} candidate"],
                    "keras",
                    "candidate",
                )
                rows.append(
                    dict(row, measure=measure, precision=precision, shape="op")
                )
        if not args.no_model:
            functions = model_functions(args.batch_size, precision, variants)
            times = common.alternate(functions, args.rounds)
            for step in ("train", "infer"):
                for name in variants[1:]:
                    row = common.ab_row(
                        times[f"{step} {BASELINE}"],
                        times[f"{step} {name}"],
                        "keras",
                        "candidate",
                    )
                    rows.append(
                        dict(
                            row,
                            measure=f"{step} {name}",
                            precision=precision,
                            shape="gmlp_ti16",
                        )
                    )
    columns = [
        "shape",
        "measure",
        "precision",
        "keras_ms",
        "candidate_ms",
        "x_keras",
        "rounds_min",
        "rounds_max",
    ]
    common.finish_report(
        run,
        rows,
        columns,
        f"jax_functions_{run['backend']}",
        rounds=args.rounds,
        batch_size=args.batch_size,
    )


if __name__ == "__main__":
    main()
