"""A/B: the Toeplitz unit's FFT product with its backward pass by hand
(`keras_gmlp.layers.toeplitz_product`), against the backend's own
gradient of the same FFTs. Under torch and TensorFlow.

Issue 12. A torch profile of `gmlp_tiny` masked-LM training at n = 2048
(`benchmarks/masked_lm_speed.py`, 2 sequences of 2048 tokens, the idle
2-core Xeon with AMX, 198 ms a step) after the complex FFT product
(`benchmarks/fft_product.py`) still spent about 83 ms a step in the
unit's FFT product. Per step:

- 4 complex-to-complex FFTs of the whole padded length (2.4 ms each):
  autograd's backward pass of the padded `rfft`, where a real inverse
  FFT (1.2 ms) does;
- 12 copies that transpose `(2, 2048, 256)` tokens to the FFT's
  `(channels, tokens)` layout (1.2 ms each), and 12 zero fills and 8
  concatenations for the padding and its gradient;
- the gating multiply `u * (W v + b)` at 0.9 ms where 0.4 does: the
  product came back transposed, so the multiply read it strided, forward
  and backward.

A TensorFlow profile of the same step (287 ms) had 32 ms of inverse and
15 ms of forward FFTs, 23 ms of `StridedSliceGrad` and 5 ms of `Conj`
in the FFTs' gradients.

- `own` (the baseline, the previous form): `circular_convolution`
  between two transposes, differentiated by the backend.
- `by_hand` (the candidate): the backward pass is two real FFTs (the
  upstream gradient's, then the inverse of its product with the taps'
  conjugate spectrum for `v` and, summed over the batch and channels,
  with `v`'s for the taps). Under torch, one `torch.autograd.Function`
  that writes the output and the gradient of `v` in `v`'s layout, the
  transposing copies a block of 256 tokens at a time; under TensorFlow a
  `tf.custom_gradient`.

The outputs are the same (the same FFTs); the gradients equal up to
float32 rounding. Each variant's model is built and traced under its own
form. The forms are then alternated, one `train_on_batch` per call, with
the recipe's loss and metrics and 4,096 tokens a batch.

Measured on the idle 2-core Xeon with AMX (model 167: AVX-512,
AVX512-BF16, AMX), 7 rounds, medians of the per-round ratios x `own`,
the range in brackets (`toeplitz_product_xeon_amx_<backend>.json`):

| backend | n = 2048 | n = 4096 |
|---|---|---|
| torch | 1.19 (1.04-1.27) | 1.26 (1.26-1.30) |
| tensorflow | 1.16 (1.13-1.23) | 1.16 (1.09-1.21) |

At n = 1024, torch's new crossover, 5 rounds
(`toeplitz_product_xeon_amx_1024_torch.json`): 1.17x (1.13-1.20); and
there the whole `gmlp_tiny` masked-LM step with the FFT product was
1.35x (1.31-1.37) as fast as with the materialised one that torch took
before (scratch, 5 rounds).

A first torch run (5 rounds, the same code but for the module's name):
1.17x (1.08-1.28) and 1.23x (1.21-1.31); TensorFlow in a scratch A/B,
1.16x (1.12-1.18) at n = 2048. Of torch's gain, the blocked transposing
copy alone gave 1.05x (0.98-1.06) in a scratch A/B.

With it torch's FFT product overtakes the materialised one at 1024
tokens, so `FFT_CROSSOVER["torch"]` is now 1024 (was 2048), the same as
JAX's and TensorFlow's (`benchmarks/spatial_gating.py`, the unit alone,
5 rounds, x the materialised product, forward / forward and backward):

- 1,536 gated channels (gMLP-base's width), batch 1
  (`spatial_gating_xeon_amx_torch_function_wide_torch.json`): 0.74 /
  0.82 at 512, 1.07 / 1.17 at 1024, 2.19 / 2.11 at 2048 (before: 1.09 /
  0.91 at 1024, 1.51 / 1.31 at 2048);
- 256 gated channels (`gmlp_tiny`'s), batch 8
  (`spatial_gating_xeon_amx_torch_function_narrow_torch.json`): 1.04 /
  0.97 at 512, 1.29 / 1.62 at 1024.

Usage:
    KERAS_BACKEND=torch python benchmarks/toeplitz_product.py --suffix _mine
Results: benchmarks/results/toeplitz_product<suffix>_<backend>.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "own"
CANDIDATE = "by_hand"


def own_gradient_product(v, taps, bias, fft_length):
    """The previous form: `circular_convolution` between two transposes,
    the backend's own gradient."""
    from keras import ops

    from keras_gmlp.layers.spatial_gating_unit import circular_convolution

    tokens = v.shape[-2]
    x = ops.swapaxes(ops.cast(v, "float32"), -1, -2)
    y = circular_convolution(x, taps, fft_length)
    y = ops.swapaxes(y[..., :tokens], -1, -2)
    return ops.cast(y + bias[:, None], v.dtype)


def variant(name):
    """A context in which the units take the `name` form."""
    import contextlib

    from keras_gmlp.layers import spatial_gating_unit

    if name == CANDIDATE:
        return contextlib.nullcontext()
    return common.patched(
        spatial_gating_unit, "toeplitz_product", own_gradient_product
    )


def main():
    parser = masked_lm_speed.variant_parser(__doc__, [2048, 4096])
    args = parser.parse_args()
    import keras

    if keras.config.backend() not in ("torch", "tensorflow"):
        parser.error(
            "the FFT product's backward pass is by hand under torch and "
            "TensorFlow; run this with KERAS_BACKEND=torch or tensorflow "
            f"(it is {keras.config.backend()!r})"
        )
    masked_lm_speed.variant_ab(
        variant,
        BASELINE,
        CANDIDATE,
        args,
        f"toeplitz_product{args.suffix}_{{backend}}",
    )


if __name__ == "__main__":
    main()
