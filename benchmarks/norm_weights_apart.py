"""A/B: JAX backward passes that read the LayerNorms' weights apart from the
forward pass (`keras_gmlp.layers.jax_backward.after_upstream`), against
reading the same arrays.

Issue 12. A `jax.profiler` trace of the `gmlp_tiny` masked-LM training
step at n = 128 under JAX (the idle 2-core Xeon with AMX, about 130 ms a
step) had 12-14 ms of its ~185 ms of op time in 20 `wrapped_broadcast`
ops. The optimised HLO (`XLA_FLAGS=--xla_dump_to=...`) shows what they
are: each gMLP block's LayerNorm scale, and its spatial gating unit's
norm scale and center, broadcast to the activations' shape
(`(32, 128, 128)` and `(32, 128, 256)` f32, 2-4 MiB each), written out
as arrays and read by a YNNPACK fusion of the forward pass and one of the
backward pass. XLA:CPU (jaxlib 0.10) shares the broadcast between the
two passes (common subexpression elimination): the norm's gradient
multiplies by the same scale, and the recomputing gate
(`jax_spatial_gate`) normalises again with the same weights. A broadcast
read by one fusion stays inside it. The gMLP-Ti/16 `mixed_bfloat16` step
had 97 of them at batch 32, `(32, 196, 384)` and `(32, 196, 128)` f32.

- `shared` (the baseline, the previous form): the norm's scale as a
  product that JAX differentiates, and the gate's recomputation reading
  its input apart but the norm's weights as they are.
- `apart` (the candidate): the scale a `jax.custom_vjp` whose gradient
  multiplies by `after_upstream(gamma, g)`, and the gate's recomputation
  reading the norm's weights that way too.

The same products and sums: outputs and gradients agree to float32
rounding.
Each variant's model is built and traced in its form, then the forms are
alternated (`common.alternate`), medians of the per-round ratios.
Inference does not change (no backward pass).

Measured on the idle 2-core Xeon with AMX (model 167: AVX-512,
AVX512-BF16, AMX), x `shared`, medians (rounds' range):

- `--masked-lm`, `gmlp_tiny` (the recipe's loss and metrics, 4,096
  tokens a batch, 9 rounds, `norm_weights_apart_masked_lm_xeon_amx_jax.json`):
  1.03x (1.01-1.05) at n = 128, 1.02x (0.98-1.03) at 512. The 20
  written-out broadcasts of the step at n = 128 became 8: constants,
  and the final norm's scale, which XLA still writes out.
- gMLP-Ti/16 at batch 32, 5 rounds
  (`norm_weights_apart_xeon_amx_batch32_jax.json`): training 1.01x
  (0.98-1.03) in float32, 1.03x (1.02-1.07) in `mixed_bfloat16`;
  inference 1.01x and 0.98x (no backward pass: the same program). The
  bfloat16 step's 97 written-out broadcasts became 7.
- gMLP-S/16 at batch 32, 3 rounds
  (`norm_weights_apart_xeon_amx_batch32_s16_jax.json`): training 1.02x
  (1.01-1.03) in float32, **1.11x** (1.09-1.12) in `mixed_bfloat16`;
  inference 1.00x and 1.02x.

Usage:
    KERAS_BACKEND=jax python benchmarks/norm_weights_apart.py --batch-size 32
    KERAS_BACKEND=jax python benchmarks/norm_weights_apart.py --masked-lm
Results: benchmarks/results/norm_weights_apart<suffix>_jax.json, and with
`--masked-lm` norm_weights_apart_masked_lm<suffix>_jax.json.
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "shared"
CANDIDATE = "apart"


def plain_scale():
    """The previous scale: a product JAX differentiates."""
    return lambda x, gamma: x * gamma


def hidden_apart(tree, upstream):
    """The gate's previous backward pass: of `(hidden, norm weights)`, only
    `hidden` read apart."""
    from keras_gmlp.layers.jax_backward import after_upstream

    hidden, norm_weights = tree
    return after_upstream(hidden, upstream), norm_weights


def variant(name):
    """A context in which the package's JAX norms and recomputing gate take
    the `name` form."""
    from keras_gmlp.layers import jax_spatial_gate
    from keras_gmlp.layers import layer_normalization

    if name == CANDIDATE:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(
        common.patched(layer_normalization, "_jax_scale", plain_scale)
    )
    stack.enter_context(
        common.patched(jax_spatial_gate, "after_upstream", hidden_apart)
    )
    return stack


def main():
    common.require_backend("jax", "the backward passes are JAX's.")
    masked_lm_speed.jax_image_or_masked_lm_ab(
        __doc__,
        "norm_weights_apart",
        BASELINE,
        CANDIDATE,
        variant,
        ("float32", "mixed_bfloat16"),
        [128, 512],
    )


if __name__ == "__main__":
    main()
