"""A/B: the Toeplitz unit's FFT product with the backend's complex
spectra, against Keras' real and imaginary parts.

Issue 12. A torch profile of `gmlp_tiny` masked-LM training at n = 2048
(`benchmarks/masked_lm_speed.py`, 2 sequences, the idle 2-core Xeon with
AMX) spent about 46 % of a 238 ms step in the spatial unit's FFT product.
Counted per step, it made:

- 240 `mul` calls: the complex product written as four real products,
  forward and backward, on strided real and imaginary views;
- 235 `copy_` calls and 65 `fill_` calls;
- the recombination of the parts before each inverse FFT.

The FFTs themselves took about 26 ms of it. The reason is `keras.ops.rfft`,
which returns the spectrum as separate real and imaginary tensors.

- `split` (the baseline, the previous form): `ops.rfft` of the tokens and
  the taps, and `ops.irfft` of the product's parts. Under TensorFlow and
  torch the product is taken in real parts. Under JAX the parts are
  reassembled into one complex product.
- `complex` (the candidate, `spatial_gating_unit.circular_convolution`):
  `torch.fft`, `tf.signal` and `jnp.fft` on complex tensors, one complex
  product.

The outputs are the same under TensorFlow and torch, where the complex
product does the same four real products. Under JAX they differ by
float32 rounding (1e-6 on logits of about 1). Each variant's model is
built and traced under its own form. The forms are then alternated, one
`train_on_batch` per call, with the recipe's loss and metrics and 4,096
tokens a batch.

Measured on the idle 2-core Xeon with AMX, 7 rounds, at d7f9d4e with this
change (`fft_product_xeon_amx_<backend>.json`). Medians of the per-round
ratios, x split, the range in brackets:

| backend | n = 2048 | n = 4096 |
|---|---|---|
| torch | 1.19 (1.18-1.24) | 1.18 (1.14-1.21) |
| tensorflow | 1.05 (1.03-1.10) | 1.06 (1.00-1.10) |
| jax | 1.03 (1.00-1.06) | 1.02 (1.01-1.06) |

(JAX measured at b32a966 with its own change. In a scratch A/B in one
process with `reuse_freed_memory()`, as the `keras-gmlp` command runs
JAX: 1.045x (1.01-1.05) at n = 2048.)

Scratch A/Bs before the change, in one process, agree: torch 1.22x and
1.24x, TensorFlow 1.075x at n = 2048. Placing the FFT on the token axis
itself (`torch.fft.rfft(..., dim=-2)`, no transposes) was slower under
torch: 0.84x.

The crossover. torch takes the FFT from `FFT_CROSSOVER["torch"]` = 2048
tokens. With the complex form, the FFT product was faster than the
materialised one earlier, but only for narrow units:

- `gmlp_tiny`'s 256 gated channels, whole masked-LM steps alternated in
  one process (7 rounds, scratch): 1.22x at n = 1024 and 2.28x at 2048,
  but 0.92x at 512.
- A 1,536-channel unit alone (gMLP-base's width; `spatial_gating.py
  --channels 3072`, 5 rounds,
  `spatial_gating_xeon_amx_complex_fft_wide_torch.json`): the forward is
  faster from 1024 (1.09x), but forward and backward only from 2048
  (0.91x at 1024, 1.31x at 2048).

The crossover takes the wide figures, so it stays at 2048.

Usage:
    KERAS_BACKEND=torch python benchmarks/fft_product.py --suffix _mine
Results: benchmarks/results/fft_product<suffix>_<backend>.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "split"
CANDIDATE = "complex"


def split_circular_convolution(x, taps, fft_length, static=True):
    """The previous form: Keras' real and imaginary parts, multiplied in
    real products under TensorFlow and torch, reassembled into one complex
    product under JAX (which pads a symbolic length by hand)."""
    import keras
    from keras import ops

    if keras.config.backend() != "jax":
        x_real, x_imag = ops.rfft(x, fft_length=fft_length)
        taps_real, taps_imag = ops.rfft(taps)
        y_real = x_real * taps_real - x_imag * taps_imag
        y_imag = x_real * taps_imag + x_imag * taps_real
        return ops.irfft((y_real, y_imag), fft_length=fft_length)
    if static:
        x_real, x_imag = ops.rfft(x, fft_length=fft_length)
    else:
        zeros = ops.zeros(ops.shape(x)[:-1] + (fft_length,), "float32")
        x = ops.concatenate([x, zeros], axis=-1)[..., :fft_length]
        x_real, x_imag = ops.rfft(x)
    taps_real, taps_imag = ops.rfft(taps)
    product = ops.view_as_complex(
        ops.stack([x_real, x_imag], axis=-1)
    ) * ops.view_as_complex(ops.stack([taps_real, taps_imag], axis=-1))
    return ops.irfft(
        (ops.real(product), ops.imag(product)), fft_length=fft_length
    )


def variant(name):
    """A context in which the units take the `name` form."""
    import contextlib

    from keras_gmlp.layers import spatial_gating_unit

    if name == CANDIDATE:
        return contextlib.nullcontext()
    return common.patched(
        spatial_gating_unit,
        "circular_convolution",
        split_circular_convolution,
    )


def main():
    parser = masked_lm_speed.variant_parser(__doc__, [2048, 4096])
    args = parser.parse_args()
    masked_lm_speed.variant_ab(
        variant,
        BASELINE,
        CANDIDATE,
        args,
        f"fft_product{args.suffix}_{{backend}}",
    )


if __name__ == "__main__":
    main()
