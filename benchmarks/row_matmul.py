"""A/B: JAX products of 3-D activations as products of their rows
(`keras_gmlp.layers.matmul.jax_rows_matmul`), against `keras.ops.matmul`
of the 3-D array.

Issue 12. An XLA:CPU profile of the `gmlp_tiny` masked-LM training step at
n = 512 under JAX (`jax.profiler`, the idle 2-core Xeon with AMX, 185 ms a
step, about 270 thread-ms) had 27 thread-ms in 21 `copy_bitcast_fusion`s.
The optimised HLO (`XLA_FLAGS=--xla_dump_to=...`) shows what they are:
the gradient of a kernel `(k, m)` multiplied by a 3-D `x` contracts the
batch and token axes of the upstream gradient, and XLA:CPU copies that
gradient transposed, to `(m, batch x tokens)`, before handing the dot to
YNNPACK. The largest is the tied embedding's: the logits' gradient
`(616, 8192)` copied to `(8192, 616)`, 6.6 ms, beside an 8.2 ms dot; then
the blocks' projections, `(256, 4096)` and `(128, 4096)`, about 2 ms
each. keras-hub's BERT pays the same for its head (a 7.7 ms copy). With
the rows `(-1, k)` multiplied instead, the kernel gradient is one dot that
contracts the rows' axis of both operands, which XLA:CPU runs in place,
without the copy.

- `batched` (the baseline, the previous form): `keras.ops.matmul` of the
  3-D array.
- `rows` (the candidate): `jax_rows_matmul`, the product of the rows,
  reshaped back.

The same sums: the outputs and gradients agree to float32 rounding. Each
variant's model is built and traced in its form, then the forms are
alternated (`common.alternate`), medians of the per-round ratios.

Measured on the idle 2-core Xeon with AMX (model 167: AVX-512,
AVX512-BF16, AMX), x `batched`:

- `--masked-lm`, `gmlp_tiny` (the recipe's loss and metrics, 4,096
  tokens a batch, 7 rounds, `row_matmul_masked_lm_xeon_amx_jax.json`):
  1.07x (1.06-1.09) at n = 128, 1.07x (0.91-1.18) at 512, 1.04x
  (1.02-1.05) at 2048. A first run, overlapped at its start with a short
  test run: 1.04x, 1.08x and 1.03x.
- gMLP-Ti/16 at batch 32, float32, 5 rounds
  (`row_matmul_xeon_amx_batch32_jax.json`): training 1.10x (1.07-1.11),
  inference 1.00x (0.98-1.02). At batch 8 (scratch): 1.04x (1.01-1.05)
  in training.

Not for bfloat16: the package's bfloat16 product (`matmul`'s
`jax.custom_vjp`, bfloat16 operands into float32) of the rows made a
`mixed_bfloat16` gMLP-Ti training step at batch 8 0.85x as fast (scratch,
5 rounds), so it keeps the 3-D form.

Usage:
    KERAS_BACKEND=jax python benchmarks/row_matmul.py --batch-size 32
    KERAS_BACKEND=jax python benchmarks/row_matmul.py --masked-lm
Results: benchmarks/results/row_matmul<suffix>_jax.json, and with
`--masked-lm` row_matmul_masked_lm<suffix>_jax.json.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "batched"
CANDIDATE = "rows"


def batched_matmul(x, y):
    """The previous form: `keras.ops.matmul` of the 3-D array."""
    from keras import ops

    return ops.matmul(x, y)


def variant(name):
    """A context in which the package's JAX products take the `name`
    form."""
    import contextlib

    from keras_gmlp.layers import matmul

    if name == CANDIDATE:
        return contextlib.nullcontext()
    return common.patched(matmul, "jax_rows_matmul", batched_matmul)


def main():
    common.require_backend("jax", "the product of the rows is JAX's.")
    masked_lm_speed.jax_image_or_masked_lm_ab(
        __doc__,
        "row_matmul",
        BASELINE,
        CANDIDATE,
        variant,
        ("float32",),
        [128, 512, 2048],
    )


if __name__ == "__main__":
    main()
