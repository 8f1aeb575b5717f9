"""A/B under TensorFlow and JAX: the LayerNorm's means over the channels
as reductions vs as products with a column
(`layer_normalization.row_mean`, `jax_row_mean`).

Issue 12 (MFU and the masked-LM targets). A TensorFlow profiler trace of
a float32 gMLP-S/16 training step (batch 32, an idle 2-core AMD EPYC with
AVX-512, read back with `jax.profiler.ProfileData`) put 139 thread-ms a
step in 480 `wrapped_reduce-window` kernels of the XLA functions, 16 a
block: XLA:CPU's tree-reduction rewrite splits every reduction over more
than 32 values into a reduce-window kernel and a reduce, each a pass of
its own, neither fused with the element-wise work around it. The
LayerNormalization's functions reduce over the channels four times (the
mean and the variance forward; the two means of the input gradient,
after the normalisation recomputed under TensorFlow), besides the gamma
and beta gradients' sums over the rows (`column_sum`,
`benchmarks/layer_norm_column_sum.py`). A product of the rows with a
column of `1 / channels` is one dot on YNNPACK instead. JAX's
normalisation (`_jax_normalize`) has the same four means.

The baseline (`reduce_mean`) is a reduction over the last axis (the
previous code under TensorFlow, the package's under JAX); the candidate
(`row_mean`) is the product (the package's under TensorFlow, in the
norm's functions and the training gate's, `jax_row_mean` here under
JAX). Each measure is timed
in interleaved rounds (`common.alternate`), `x reduce_mean` the
baseline's seconds over the candidate's (above 1: faster):

- `op <channels>`: a float32 `LayerNormalization` of `(32, 196,
  channels)` with its input gradient, at gMLP-Ti's (128, 384) and
  gMLP-S's (256, 768) widths;
- `masked_lm <n>`: the gMLP masked LM's training step (`gmlp_tiny`,
  4,096 tokens, `benchmarks/masked_lm_speed.py`'s recipe);
- `image <model>`: an image classifier's `train_on_batch` (AdamW, batch
  32, 224 px, `--precision`, float32 by default).

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/layer_norm_row_mean.py
    KERAS_BACKEND=jax python benchmarks/layer_norm_row_mean.py
Results: benchmarks/results/layer_norm_row_mean_<backend>.json
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "reduce_mean"
CANDIDATE = "row_mean"
BACKENDS = ("tensorflow", "jax")


def reduce_mean(x):
    """The previous mean under TensorFlow: one reduction over the last
    axis, kept."""
    import tensorflow as tf

    return tf.reduce_mean(x, axis=-1, keepdims=True)


def jax_row_mean(x):
    """`row_mean`'s form under JAX: the product of the rows with a column
    of `1 / channels` (not the package's: see the module's docstring)."""
    import jax.numpy as jnp

    channels = x.shape[-1]
    return jnp.dot(x, jnp.full((channels, 1), 1 / channels, x.dtype))


@contextlib.contextmanager
def variant(name):
    """A context in which the LayerNorms traced average over the channels
    the `name` way."""
    import keras

    from keras_gmlp.layers import layer_normalization as module

    if keras.config.backend() == "jax":
        normalize = module._jax_normalize
        mean_rows = module.jax_mean if name == BASELINE else jax_row_mean
        with common.patched(
            module, "_jax_normalize", lambda: normalize(mean_rows)
        ):
            yield
        return
    if name == CANDIDATE:
        yield
        return
    from keras_gmlp.layers import tensorflow_spatial_gate as gate_module

    layer_norm = module._tensorflow_layer_norm
    gate_functions = gate_module._gate_functions
    with (
        common.patched(
            module,
            "_tensorflow_layer_norm",
            lambda: layer_norm(module.column_sum, reduce_mean),
        ),
        common.patched(
            gate_module, "_gate_functions", lambda: gate_functions(reduce_mean)
        ),
    ):
        yield


def op_step(channels, name):
    """A warm callable: a LayerNormalization of `(32, 196, channels)` and
    its input gradient, traced inside `variant(name)`."""
    import keras
    import numpy as np

    from keras_gmlp.layers import LayerNormalization

    rng = np.random.default_rng(0)
    shape = (32, 196, channels)
    x = rng.normal(size=shape).astype("float32")
    upstream = rng.normal(size=shape).astype("float32")
    layer = LayerNormalization(epsilon=1e-6)
    layer.build(shape)
    if keras.config.backend() == "jax":
        import jax

        with variant(name):

            @jax.jit
            def gradient(x, upstream):
                return jax.vjp(layer, x)[1](upstream)[0]

            gradient(x, upstream).block_until_ready()
        return lambda: gradient(x, upstream).block_until_ready()
    import tensorflow as tf

    x, upstream = tf.constant(x), tf.constant(upstream)

    @tf.function
    def gradient(x, upstream):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        return tape.gradient(y, x, upstream)

    with variant(name):
        gradient(x, upstream)
    return lambda: gradient(x, upstream).numpy()


def ab_row(functions, rounds, target_s, **labels):
    """The alternated A/B of `functions` (`{form: step}`) as a row."""
    return common.alternated_ab_row(
        functions, BASELINE, CANDIDATE, rounds, target_s, **labels
    )


def main():
    parser = masked_lm_speed.variant_parser(__doc__, [128, 512])
    parser.add_argument("--channels", type=int, nargs="*", default=[128, 768])
    parser.add_argument(
        "--precision", default="float32", help="the image models' policy"
    )
    parser.add_argument(
        "--models",
        nargs="*",
        default=["gmlp_ti16_224"],
        choices=list(common.IMAGE_MODELS),
    )
    args = parser.parse_args()
    import keras

    backend = keras.config.backend()
    if backend not in BACKENDS:
        raise SystemExit(
            f"Received KERAS_BACKEND={backend!r}; expected one of "
            f"{BACKENDS}: the means it measures are TensorFlow's and JAX's."
        )
    if backend == "jax":
        from keras_gmlp.training import reuse_freed_memory

        reuse_freed_memory()
    run = common.header()
    forms = (BASELINE, CANDIDATE)
    rows = []
    for channels in args.channels:
        functions = {form: op_step(channels, form) for form in forms}
        rows.append(
            ab_row(functions, args.rounds, 0.5, measure=f"op {channels}")
        )
    for length in args.lengths:
        functions = {
            form: masked_lm_speed.variant_step(variant, form, length, args)
            for form in forms
        }
        rows.append(
            ab_row(functions, args.rounds, 1.0, measure=f"masked_lm {length}")
        )
    for model in args.models:
        steps = common.variant_model_functions(
            32, variant, forms, args.precision, infer=False, model_name=model
        )
        functions = {form: steps[f"train {form}"] for form in forms}
        rows.append(
            ab_row(functions, args.rounds, 2.0, measure=f"image {model}")
        )
    columns = ["measure", f"{BASELINE}_ms", f"{CANDIDATE}_ms"]
    columns += [f"x_{BASELINE}", "rounds_min", "rounds_max"]
    name = f"layer_norm_row_mean{args.suffix}_{run['backend']}"
    common.finish_report(run, rows, columns, name, arguments=vars(args))


if __name__ == "__main__":
    main()
