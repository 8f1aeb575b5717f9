"""A/B: the Toeplitz unit's materialised `n x n` weight as a gather of its
taps (`gather`, the previous form) vs `keras_gmlp.layers.toeplitz_matrix`
(`toeplitz_matrix`: XLA functions under TensorFlow, the tiled taps under
torch; under JAX, which keeps the gather, the tiled taps). On every
backend.

Issue 12. A TensorFlow profile of `gmlp_tiny` masked-LM training at
n = 512 (`benchmarks/masked_lm_speed.py`, 8 sequences, an idle 2-core AMD
EPYC with AVX-512, 109 ms a step) found, besides the products at the
CPU's matmul rate, per step: 7 ms of `UnsortedSegmentSum` in the
optimizer (Keras' AdamW summing the duplicate rows of the gather's
`IndexedSlices` gradient, `n^2` rows for `2 n - 1` taps, for each
moment), 3 ms of `GatherV2` building the four blocks' weights and 1 ms
of the gather's gradient. JAX and torch write the gather's gradient as a
scatter-add.

Two measures, both forms alternated in one process (`common.alternate`),
medians of the per-round ratios x `gather` (above 1: faster):

- `matrix`: the weight of a unit of `n` tokens and its taps' gradient
  for a given upstream gradient (under TensorFlow in a `tf.function`,
  made dense as the optimizer's update is; JAX jitted; torch eager);
- `masked_lm`: the gMLP masked LM's training step (`gmlp_tiny`, 4,096
  tokens a batch, the recipe's loss and metrics; JAX after
  `reuse_freed_memory()` as the `keras-gmlp` command runs it).

The weights are the same; the gradients equal up to float32 rounding.
Measured on that EPYC (`toeplitz_matrix_epyc26_stop48_<backend>.json`,
7 rounds): the masked-LM step at n = 128 / 512 / 1000 1.00 / 1.02 /
1.16x under TensorFlow, 1.02 / 1.08 / 1.05x under torch; under JAX the
tiled taps 1.01 / 0.98 / 0.96x, so JAX keeps the gather (the table:
`keras_gmlp/layers/toeplitz_matrix.py`, the log: `benchmarks/README.md`,
stop 48).

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/toeplitz_matrix.py
Results: benchmarks/results/toeplitz_matrix<suffix>_<backend>.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "gather"
CANDIDATE = "toeplitz_matrix"


def forms():
    """`{form: (taps, length) -> matrix}`: the gather, and the package's
    form (under JAX, which keeps the gather, the tiled taps it measured)."""
    import keras

    from keras_gmlp.layers import toeplitz_matrix

    candidate = toeplitz_matrix.toeplitz_matrix
    if keras.config.backend() == "jax":
        candidate = toeplitz_matrix.tiled_matrix
    return {BASELINE: toeplitz_matrix.gathered_matrix, CANDIDATE: candidate}


def variant(name):
    """A context in which the units build their weight the `name` way."""
    from keras_gmlp.layers import spatial_gating_unit

    return common.patched(spatial_gating_unit, "toeplitz_matrix", forms()[name])


def matrix_step(build, length):
    """A function that builds the weight of `length` tokens and its taps'
    gradient, dense, with the backend's differentiation (both returned, so
    neither is pruned)."""
    import keras

    rng = np.random.default_rng(0)
    taps = rng.standard_normal(2 * length - 1).astype("float32")
    upstream = rng.standard_normal((length, length)).astype("float32")
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        taps, upstream = tf.constant(taps), tf.constant(upstream)

        @tf.function
        def gradient():
            with tf.GradientTape() as tape:
                tape.watch(taps)
                weight = build(taps, length)
            by_taps = tape.gradient(weight, taps, output_gradients=upstream)
            return weight, tf.convert_to_tensor(by_taps)

        return lambda: [x.numpy() for x in gradient()]
    if backend == "jax":
        import jax

        taps, upstream = jax.numpy.asarray(taps), jax.numpy.asarray(upstream)

        @jax.jit
        def gradient(taps, upstream):
            weight, pullback = jax.vjp(lambda t: build(t, length), taps)
            return weight, pullback(upstream)

        return lambda: jax.block_until_ready(gradient(taps, upstream))
    import torch

    taps = torch.tensor(taps, requires_grad=True)
    upstream = torch.tensor(upstream)

    def gradient():
        taps.grad = None
        weight = build(taps, length)
        weight.backward(upstream)
        return weight, taps.grad

    return gradient


def ab_row(functions, rounds, target_s, **labels):
    """The alternated A/B of `functions` (`{form: step}`) as a row."""
    return common.alternated_ab_row(
        functions, BASELINE, CANDIDATE, rounds, target_s, **labels
    )


def main():
    parser = masked_lm_speed.variant_parser(__doc__, [128, 512])
    args = parser.parse_args()
    import keras

    if keras.config.backend() == "jax":
        from keras_gmlp.training import reuse_freed_memory

        reuse_freed_memory()
    run = common.header()
    rows = []
    for length in args.lengths:
        functions = {
            form: matrix_step(build, length) for form, build in forms().items()
        }
        rows.append(
            ab_row(functions, args.rounds, 0.5, measure="matrix", tokens=length)
        )
    for length in args.lengths:
        functions = {
            form: masked_lm_speed.variant_step(variant, form, length, args)
            for form in (BASELINE, CANDIDATE)
        }
        rows.append(
            ab_row(
                functions, args.rounds, 1.0, measure="masked_lm", tokens=length
            )
        )
    columns = ["measure", "tokens", f"{BASELINE}_ms", f"{CANDIDATE}_ms"]
    columns += [f"x_{BASELINE}", "rounds_min", "rounds_max"]
    name = f"toeplitz_matrix{args.suffix}_{run['backend']}"
    common.finish_report(run, rows, columns, name, arguments=vars(args))


if __name__ == "__main__":
    main()
