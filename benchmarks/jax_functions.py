"""A/B under JAX: the block's GELU, the spatial token product and the bias
adds, JAX's own vs hand-written functions.

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

A later trace, of a `mixed_bfloat16` step: 91 `reduce-window` thunks,
170-220 ms of an 800 ms step. They are the bias gradients (fc1's, fc2's
and the unit's per-token bias in each block, and the head's): JAX's
transpose of the broadcast bias add is a bfloat16 `reduce_sum`, which
XLA:CPU upcasts and splits into a reduce-window it runs slowly: 2.7 ms
for `(8, 196, 768)` against 0.16 ms for `jnp.sum(..., dtype=float32)`.
`keras_gmlp.layers.bias_add.bias_add` (the unit's bias, and
`keras_gmlp.layers.Dense`'s under JAX) sums that gradient in float32
under a `custom_vjp` when the compute dtype is bfloat16 or float16 (one
rounding, as before; float32 takes the plain add).

The baseline is the code before these functions: `keras.activations.gelu`,
in training the einsum (inference already used the batched product), and
the plain bias add. Variants (`VARIANT_PIECES`): `keras` (the baseline),
`gelu` (the GELU only), `product` (the product only), `both` (GELU and
product), `biased` (both and the bias add), `all` (the package's code:
`biased` and the matmul); `biased vs both` rows take `both` as their
baseline, the bias add alone, and `all vs biased` rows `biased`, the
matmul alone. Each
variant's functions are traced with its pieces in place (module
attributes patched), then timed in interleaved rounds
(`common.alternate`); `x keras` is the baseline's seconds over the
variant's (above 1: faster).

Measures: `op` (the GELU on `(batch, 196, channels)`, forward and
forward plus gradient; the token product of gMLP-Ti and gMLP-S widths;
the bias add of gMLP-Ti's fc2 and fc1 widths) and `model` (a gMLP-Ti/16
classifier's `train_on_batch` and `predict_on_batch`, AdamW, batch 8,
224 px, float32 and mixed_bfloat16).

Measured (the same Xeon, idle but for this run, 5 rounds, medians, the
rounds' range in brackets; `jax_functions_jax.json`, `--variants keras
both all`, before the matmul: its `all` is today's `biased`), x keras:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| GELU fwd, 768 / 1536 channels | 1.28 / 1.32 | 1.68 / 1.74 |
| GELU fwd+bwd, 768 / 1536 | 1.08 / 1.05 | 2.76 / 3.08 |
| product fwd, 384 / 768 channels | 1.21 / 1.10 | 1.14 / 1.47 |
| product fwd+bwd, 384 / 768 | 1.18 / 1.30 | 1.57 / 2.06 |
| bias add fwd, 128 / 768 channels | 1.05 / 0.94 | 1.02 / 1.02 |
| bias add fwd+bwd, 128 / 768 | 1.00 / 1.02 | 2.82 / 3.75 |
| gMLP-Ti train, both | 1.08 (1.01-1.16) | 1.06 (1.03-1.09) |
| gMLP-Ti train, all | 1.06 (1.03-1.19) | 1.27 (1.21-1.34) |
| gMLP-Ti train, all vs both | 1.01 (0.95-1.02) | 1.19 (1.16-1.24) |
| gMLP-Ti infer, both | 1.10 (1.08-1.13) | 1.10 (1.06-1.13) |
| gMLP-Ti infer, all vs both | 1.00 (0.95-1.00) | 0.99 (0.94-1.03) |

An earlier run with every variant (before the bias add): gMLP-Ti train,
GELU only 0.98 / 1.02, product only 1.05 / 1.09; infer, GELU only 1.10
/ 1.12, product only 0.99 / 1.01 (float32 / mixed_bfloat16). (The
product in inference was batched before too: the same forward.) In
training the GELU's gain is within the rounds' spread: its backward pass
recomputes the exponential the forward pass had.

Re-measured and kept (a float32 gMLP-Ti training step, patched code in
separate processes, two runs each, median of 5 steps): the weight
gradient as the per-image dots' sum, 0.684 / 0.687 s, against a batched
dot into `(batch, n, m)` and its float32 sum, 0.744 / 0.781 s, and the
einsum `bic,bjc->ij`, 0.737 / 0.768 s; the forward product and the `v`
gradient as the batched dot of the broadcast `W`, 0.690 / 0.739 s,
against one unbatched dot and a transpose, 0.736 / 0.751 s. (On an AMD
EPYC with AVX-512, A/B in one process, the unbatched dot and transpose
won: inference 1.14-1.17x, training 1.01-1.08x; it is the package's
product now, `jax_token_product.py`.)

Tried and not adopted: XLA:CPU's experimental oneDNN path for bfloat16
dots. By default XLA:CPU converts a bfloat16 dot to float32 around it
(the `float-normalization-bf16` pass): a 2048^3 bfloat16 matmul runs at
230-250 GFLOP/s, torch's at 2,100 (AMX). With `XLA_FLAGS=
--xla_cpu_experimental_ynn_fusion_type=-dot
--xla_cpu_experimental_onednn_fusion_type=dot --xla_cpu_use_onednn=true
--xla_disable_hlo_passes=float-normalization-bf16` the dot is a oneDNN
fusion in bfloat16: 1,400 GFLOP/s, and a `mixed_bfloat16` gMLP-Ti step
(with the bias add above, the patch embedding written as a matmul)
trained in 0.47-0.52 s against 0.67-0.70 s and predicted in 0.10 s
against 0.18 s (separate single runs). But under those flags a
bfloat16 convolution does not compile ("unsupported operand type BF16
in op convolution"), and a float32 gMLP-Ti training step kills the
process: oneDNN prints "partition compile failed", then an illegal
instruction (XLA had fused a weight gradient's eight dots and their sum
into one oneDNN graph). Process-wide flags that crash other programs'
float32 steps are not something the package can set or offer.

On an idle 2-core AMD EPYC with AVX-512 and AVX512-BF16 (no AMX), three
more XLA:CPU settings, each a gMLP-Ti step (batch 8) in separate
processes, alternated, median of 6-10 steps:
- `--xla_disable_hlo_passes=float-normalization-bf16` alone (bfloat16
  dots left to YNNPACK): no `mixed_bfloat16` step compiles, the
  convolution ("unsupported operand type BF16") nor, with the patch
  embedding written as a matmul, the dots (a RET_CHECK in
  `dot_op_emitter.cc`).
- `--xla_cpu_prefer_vector_width=512` (XLA emits 256-bit vectors by
  default): float32 training 1.03x (three rounds: 1.035, 1.029, 0.94),
  inference 1.04-1.49x, `mixed_bfloat16` training 0.90x (0.89-0.96):
  not set.
- `--xla_cpu_experimental_ynn_fusion_type=+eltwise` and `+reduce`
  (elementwise ops and reductions to YNNPACK too): float32 training 0.88x
  and 0.86x (one step time each, 0.92 and 0.94 s against 0.81 s).
- `--xla_cpu_enable_concurrency_optimized_scheduler=false` (the default
  is on): float32 training 0.702, 0.702 and 0.737 s against the
  default's 0.716, 0.721 and 0.837 s (three rounds of processes, 8
  steps each); within this machine's spread, and a process-wide flag:
  not set.

Also tried on that EPYC, in one process (7 rounds): the GELU's forward
pass keeping its derivative `Phi(x) + x phi(x)` for the backward pass
instead of its input (the same memory in float32; the backward pass a
product, no exponential): training 1.00x in float32 (0.97-1.07) and
bfloat16 (0.69-1.44). Not adopted.

A `jax.profiler` trace of the float32 step there: of ~840 thread-ms of
kernels, the dots (`ynn_fusion`, `dot`) take ~500 and XLA's loop
fusions ~340 (the GELU, the LayerNorms, the gating and their
gradients); 480 `slice_bitcast_fusion` copies (44 thread-ms) are the
per-image slices of the token product's weight gradient above, and 31
broadcasts of `W` over the batch 25 thread-ms. Keras' own work between
steps (`train_on_batch`'s `jax_state_sync`, which assigns the ~960
variables and optimizer slots back, and the metrics) is 35-55 ms of a
~800 ms step (cProfile).

bfloat16 dots without the float32 round trip, again on the EPYC with
AVX512-BF16 (a 2048^3 bfloat16 `jnp.matmul`, this jaxlib 0.10.2): the
default 151 GFLOP/s; XNNPACK for dots instead of YNNPACK
(`--xla_cpu_experimental_xnn_fusion_type=dot
--xla_cpu_experimental_ynn_fusion_type=-dot`) 157, still converted;
with `float-normalization-bf16` disabled, alone, with
`--xla_cpu_use_xnnpack=true` or with XNNPACK's dot fusion, the dot does
not compile (the same `dot_op_emitter.cc` RET_CHECK). So XLA:CPU keeps
bfloat16 dots at float32's rate plus the conversions here.

What those flags missed: XLA:CPU converts a dot with a bfloat16 *result*
to float32, but hands one with bfloat16 operands and a float32 result
(`preferred_element_type=float32`) to YNNPACK as it is, which runs it on
the CPU's bfloat16 units. On an idle 2-core Xeon with AMX (`amx_bf16`,
`avx512_bf16`), a 2048^3 bfloat16 product took 62.9 ms with a bfloat16
result and 10.7 ms into float32 and rounded (273 and 1,606 GFLOP/s;
float32: 54 ms; `jax_functions_xeon_amx_batch32_matmul_ops_jax.json`;
timm's torch measured 2,480-2,750 in `vision.py`'s runs there).
`keras_gmlp.layers.matmul.matmul` is that dot, rounded once to
bfloat16, for the product and both gradients (JAX's own gradient of a
dot with `preferred_element_type` is a float32-by-bfloat16 dot, as slow
as before); the unit's token product uses the same dots
(`matmul.jax_dot`). Variants `biased` (the `all` before it: GELU,
product and bias add) and `all` (with it); `matmul` op rows: gMLP-Ti's
fc1 and fc2 products, `keras.ops.matmul` against it. Measured there
(batch 32, 5 rounds, medians and range;
`jax_functions_xeon_amx_batch32_matmul_jax.json`), x keras:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| matmul fwd, 128x768 / 384x128 | 1.00 / 0.99 | 1.96 / 4.84 |
| matmul fwd+bwd, 128x768 / 384x128 | 0.87 / 1.01 | 3.06 / 2.56 |
| matmul 2048^3 fwd / fwd+bwd (`_matmul_ops`) | 0.98 / 1.01 | 5.90 / 2.20 |
| product fwd+bwd, 384 / 768 (dots into float32) | 1.47 / 1.42 | 3.24 / 5.02 |
| gMLP-Ti train, all vs biased | 0.99 (0.99-1.04) | 1.39 (1.38-1.41) |
| gMLP-Ti infer, all vs biased | 1.02 (1.00-1.05) | 1.69 (1.58-1.78) |
| gMLP-Ti train, all | 1.12 (1.10-1.29) | 2.40 (2.29-2.52) |
| gMLP-Ti infer, all | 1.44 (1.36-1.48) | 2.68 (2.56-2.81) |

(float32 takes `keras.ops.matmul` itself: its rows are noise.)
One form of that dot fails at run time instead of being converted (a
square `a` contracting its first axis with the middle axis of a 3-D
`b`: "Unsupported element type for DotThunk::Execute: BF16 x BF16 =
F32"); the token product's gradient is written around it, and
`tests/layers/test_matmul.py` runs every dot of a bfloat16 block.

Usage:
    KERAS_BACKEND=jax python benchmarks/jax_functions.py --rounds 5 \
        --variants keras both all
Results: benchmarks/results/jax_functions_jax.json
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "keras"
PRECISIONS = ("float32", "mixed_bfloat16")
# `biased` against `both`: the bias adds alone, the rest in place; `all`
# against `biased`: the matmul alone.
STEPWISE = {"biased": "both", "all": "biased"}


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


# Each variant's hand-written pieces; the others are JAX's own.
VARIANT_PIECES = {
    "keras": (),
    "gelu": ("gelu",),
    "product": ("product",),
    "both": ("gelu", "product"),
    "biased": ("gelu", "product", "bias_add"),
    "all": ("gelu", "product", "bias_add", "matmul"),
}


def keras_matmul(x, kernel):
    """The previous product: `keras.ops.matmul`, a bfloat16 result."""
    from keras import ops

    return ops.matmul(x, kernel)


def plain_bias_add(x, bias, axis=-1):
    """The previous bias add: JAX's own gradient of the broadcast."""
    from keras import ops

    return x + ops.reshape(bias, (-1,) + (1,) * (-axis - 1))


@contextlib.contextmanager
def variant(name, training):
    """Patches the block's GELU, the unit's token product, the bias adds
    and the matmuls (the Dense layers' and the unit's) to `name`'s."""
    from keras_gmlp.layers import dense
    from keras_gmlp.layers import gelu as gelu_module
    from keras_gmlp.layers import spatial_gating_unit as unit

    pieces = VARIANT_PIECES[name]
    patched = [
        (gelu_module, "gelu", keras_gelu, "gelu"),
        (unit, "gelu", keras_gelu, "gelu"),
        (
            unit,
            "token_product",
            einsum_product if training else broadcast_product,
            "product",
        ),
        (unit, "bias_add", plain_bias_add, "bias_add"),
        (dense, "bias_add", plain_bias_add, "bias_add"),
        (gelu_module, "bias_add", plain_bias_add, "bias_add"),
        (unit, "matmul", keras_matmul, "matmul"),
        (dense, "matmul", keras_matmul, "matmul"),
        (gelu_module, "matmul", keras_matmul, "matmul"),
    ]
    saved = [
        (module, attribute, getattr(module, attribute))
        for module, attribute, *_ in patched
    ]
    for module, attribute, baseline, piece in patched:
        if piece not in pieces:
            setattr(module, attribute, baseline)
    try:
        yield
    finally:
        for module, attribute, value in saved:
            setattr(module, attribute, value)


def op_functions(batch_size, precision):
    """name -> warm callable: the GELU and the token product of each
    variant, forward and forward + gradients."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from keras_gmlp.layers import bias_add
    from keras_gmlp.layers import gelu as gelu_module
    from keras_gmlp.layers import matmul
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
    for channels in (128, 768):
        x, bias = array(batch_size, 196, channels), array(channels)
        adds = {"keras": plain_bias_add, "candidate": bias_add.bias_add}
        for form, function in adds.items():
            cases[f"bias_add {channels} {form}"] = (function, (x, bias))
    # gMLP-Ti's fc1 and fc2, (batch, 196, 128) x (128, 768) and back, and
    # a 2048^3 product.
    for rows, columns in ((128, 768), (384, 128), (2048, 2048)):
        x = array(*((2048,) if rows == 2048 else (batch_size, 196)), rows)
        kernel = array(rows, columns, scale=rows**-0.5)
        products = {"keras": keras_matmul, "candidate": matmul.matmul}
        for form, function in products.items():
            cases[f"matmul {rows}x{columns} {form}"] = (function, (x, kernel))
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
    parser = common.ab_benchmark_parser(__doc__, PRECISIONS, threads=False)
    parser.add_argument(
        "--variants",
        nargs="+",
        default=list(VARIANT_PIECES),
        choices=list(VARIANT_PIECES),
    )
    parser.add_argument(
        "--no-model", action="store_true", help="the op measures only"
    )
    parser.add_argument(
        "--no-ops", action="store_true", help="the model measures only"
    )
    args = parser.parse_args()
    common.require_backend("jax", "these functions are the JAX backend's.")
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
            # Each variant against the baseline, then the stepwise pairs.
            pairs = [(BASELINE, name, name) for name in variants[1:]]
            pairs += [
                (before, name, f"{name} vs {before}")
                for name, before in STEPWISE.items()
                if name in variants and before in variants
            ]
            for step in ("train", "infer"):
                for before, name, label in pairs:
                    row = common.ab_row(
                        times[f"{step} {before}"],
                        times[f"{step} {name}"],
                        "keras",
                        "candidate",
                    )
                    rows.append(
                        dict(
                            row,
                            measure=f"{step} {label}",
                            precision=precision,
                            shape="gmlp_ti16",
                        )
                    )
    columns = common.ab_columns("keras", "candidate")
    common.finish_report(
        run,
        rows,
        columns,
        f"jax_functions{args.suffix}_{run['backend']}",
        rounds=args.rounds,
        batch_size=args.batch_size,
    )


if __name__ == "__main__":
    main()
