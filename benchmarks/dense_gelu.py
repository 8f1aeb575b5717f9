"""A/B under TensorFlow: the block's first projection and GELU in
inference, Keras' Dense then the XLA GELU vs one oneDNN kernel.

Issue 12. Found with TensorFlow's profiler (xplane) of gMLP-Ti/16
inference steps (batch 8, `mixed_bfloat16`, an idle 2-core AMD EPYC with
AVX-512 and AVX512-BF16): of a 137 ms step, the XLA functions' converts
and fusions (the GELUs and LayerNorms) took about 75 of ~190 thread-ms of
kernels, the `_MklMatMul`s 46, the separate `BiasAdd`s 12. TensorFlow's
graph optimiser (its oneDNN remapper) fuses a 2-D `MatMul`, `BiasAdd` and
exact `tf.nn.gelu` into one `_MklNativeFusedMatMul`, the GELU applied to
the accumulator; Keras' Dense of a 3-D input (a `Tensordot`, reshapes
around its `MatMul`) followed by the XLA GELU does not match that pattern.

The candidate (`keras_gmlp.layers.gelu.dense_gelu`): outside training, in
a TensorFlow graph that XLA does not compile and with oneDNN on, the rows'
`MatMul`, `BiasAdd` and `tf.nn.gelu(approximate=False)`. The baseline:
`gelu(Dense(x))` everywhere, as in training (`_onednn_fuses_dense_gelu`
patched to refuse). Training steps do not take the fusion (the GELU's
input is kept for its gradient): their rows check that nothing else
moved.

Measures: `op` (the projection and GELU of gMLP-Ti (128 -> 768) and
gMLP-S (256 -> 1536) on `(batch, 196, channels)`, in a `tf.function`,
inference) and the gMLP-Ti/16 classifier's `train_on_batch` and
`predict_on_batch` (AdamW, batch 8, 224 px), float32 and mixed_bfloat16.

Measured (an idle 2-core AMD EPYC with AVX-512 and AVX512-BF16, no AMX;
medians of per-round ratios, the rounds' range in brackets), x separate:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| op 128 -> 768, 15 / 11 rounds | 1.25 / 1.29 | 1.29 / 1.33 |
| op 256 -> 1536, 15 / 11 rounds | 1.16 / 1.00 | 1.17 / 1.20 |
| gMLP-Ti infer, 15 rounds | 1.11 (0.95-1.31) | 1.22 (0.58-1.34) |
| gMLP-Ti infer, 11 rounds | 1.11 (0.96-1.27) | 1.23 (0.77-1.45) |
| gMLP-Ti infer, 5 rounds | 1.08 (0.97-1.18) | 0.91 (0.80-1.09) |
| gMLP-Ti train, 15 rounds | 1.00 (0.96-1.18) | 1.00 (0.93-1.10) |

(`dense_gelu_tensorflow.json` is the 15-round run; the machine was
noisy, as the ranges show.) The profile of the bfloat16 inference step
agrees with the larger figure: per step, the GELU's XLA fusion (18.5
thread-ms) and the expanded bias adds (8) are gone, the fused products
take 12.7 ms more than the plain ones (oneDNN's `gelu_erf` is applied in
the product's epilogue), and the XLA launches are half as many; the
executor's time per step fell from 139 to 117 ms. Against timm
(`vision.py`, 5 rounds, `vision_gmlp_ti16_224_epyc_avx512_fair_dense_
gelu.json`), TensorFlow's gMLP-Ti inference went to 1.12x (float32)
and 0.96x (bf16), from 0.97-1.08 and 0.70-0.79 in the two runs before.
The outputs differ by rounding: in float32 4e-7 at most on gMLP-Ti's
logits; in bf16 the fused kernel rounds once where the separate ops
round the product, the biased sum and the GELU.

On an idle 2-core Xeon with AMX, where the products are 5-6x faster in
bfloat16, the fusion still wins (batch 32, 5 rounds, bf16,
`dense_gelu_xeon_amx_batch32_tensorflow.json`): op 1.28 (1.23-1.34) and
1.27 (1.14-1.36), gMLP-Ti inference 1.16 (1.07-1.21), training 0.99.
On that Xeon, oneDNN runs the fused kernel as an `inner_product` without
AMX in bfloat16, at about half the plain product's speed. The unfused
alternatives still cost more, because the exact GELU after an AMX product
is slower than the fused kernel's epilogue (`benchmarks/dense_gelu_kernels.py`).

Tried with it and not adopted: the LayerNorm as the op pattern that
TensorFlow's remapper fuses into oneDNN's `_MklLayerNorm` (the
"custom layer-norm" pattern of `remapper.cc`): Grappler left it unfused
here (TensorFlow 2.21), and those separate kernels took 0.79-0.94 ms on
`(8, 196, 384)` against the XLA function's 0.57-0.60. Under torch, the
GELU applied in place to the Dense's output outside autograd
(`torch.ops.aten.gelu_`, no second `(8, 196, 768)` buffer): alone 3x
faster than `linear` then `gelu` in a loop (1.9-2.1 ms against 5.8-6.8),
in the gMLP-Ti inference step 1.00x (float32) and 0.98x (bf16), 9
rounds, outputs equal to the bit; not adopted.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/dense_gelu.py --rounds 5
Results: benchmarks/results/dense_gelu_tensorflow.json
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "separate"
CANDIDATE = "fused"
PRECISIONS = ("float32", "mixed_bfloat16")


def variant(name):
    """A context in which the blocks traced take the `name` form."""
    from keras_gmlp.layers import gelu as module

    if name != BASELINE:
        return contextlib.nullcontext()
    return common.patched(
        module, "_onednn_fuses_dense_gelu", lambda dense, inputs: False
    )


def op_functions(batch_size, precision):
    """name -> warm callable: the projection and GELU per width."""
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_gmlp.layers import Dense
    from keras_gmlp.layers.gelu import dense_gelu

    rng = np.random.default_rng(0)
    functions = {}
    for channels, expanded in ((128, 768), (256, 1536)):
        dense = Dense(expanded, dtype=precision)
        dense.build((None, 196, channels))
        x = tf.constant(
            rng.normal(size=(batch_size, 196, channels)), dense.compute_dtype
        )
        for name in (BASELINE, CANDIDATE):

            @tf.function
            def forward(x, dense=dense):
                return dense_gelu(dense, x, training=False)

            with variant(name):
                forward(x)
            functions[f"op {channels}->{expanded} {name}"] = (
                lambda f=forward, x=x: keras.ops.convert_to_numpy(f(x))
            )
    return functions


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "dense_gelu",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "tensorflow",
        variant,
        op_functions=op_functions,
    )
