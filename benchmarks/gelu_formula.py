"""A/B under TensorFlow: the XLA GELU's normal CDF through `erfc` vs
through Abramowitz and Stegun's erfc with one shared exponential.

Issue 12. Found with TensorFlow's profiler (xplane, per op; gMLP-Ti/16,
batch 8, an idle 2-core AMD EPYC with AVX-512 and AVX512-BF16): the XLA
functions of the block's GELU (`keras_gmlp.layers.gelu`), forward and
backward, were the largest cost after the matmuls, about 100 of the
~900 thread-ms of a `mixed_bfloat16` training step, more than the
`BiasAddGrad`s (47) and the gating's `Mul`s (45). XLA expands `erfc` into
two branches and a select, and the gradient took `exp` once more for the
density. JAX's GELU had moved to Abramowitz and Stegun's formula 7.1.26
for the same reason (`jax_functions.py`; absolute error below 1.5e-7);
TensorFlow's now shares it (`gelu.normal_cdf_and_density`).

The baseline (`erfc`) is the previous code, `Phi(y) = 0.5 erfc(-y /
sqrt(2))` and `phi(y)` from its own `exp`; the candidate (`one_exp`) the
package's. Two measures, each in interleaved rounds (`common.alternate`),
`x erfc` the baseline's seconds over the candidate's (above 1: faster):

- `op`: the GELU of a `(batch, 196, channels)` tensor in a `tf.function`,
  forward (`fwd`) and forward plus the gradient (`fwd+bwd`), at gMLP-Ti's
  768 and gMLP-S's 1536 channels.
- `model`: a gMLP-Ti/16 classifier's `train_on_batch` and
  `predict_on_batch` (AdamW, batch 8, 224 px), one model traced with
  each.

Measured (the same AMD EPYC, idle but for this run, batch 8, 5 rounds,
medians, the rounds' range in brackets; `gelu_formula_tensorflow.json`),
x erfc:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| GELU fwd, 768 / 1536 channels | 1.32 / 1.35 | 1.14 / 1.12 |
| GELU fwd+bwd, 768 / 1536 channels | 1.39 / 1.32 | 1.29 / 1.27 |
| gMLP-Ti train step | 1.12 (1.07-1.23) | 1.07 (1.01-1.25) |
| gMLP-Ti inference step | 1.03 (0.98-1.06) | 1.04 (0.96-1.05) |

The outputs differ from the `erfc` form by float32 rounding (1.5e-7
absolute in `Phi`): the tests that pin outputs pass unchanged. float64
inputs keep the `erfc` form.

Tried after it and dropped: the unit's bias add and gating product,
`u * (W v + b)` (the `Mul`s, `Sum` and `AddV2` of the same profile,
about 80 thread-ms), as one XLA function with its three gradients in
another (float32 inside, the bias gradient summed over the channels
first). A/B in one process as here, 5 rounds, x the TensorFlow ops: the
gate with its gradients 1.00-1.04 (float32) and 0.99-1.11 (bf16) at 768
and 384 channels; gMLP-Ti training 0.96 (float32) and 0.99 (bf16),
inference 0.93 and 1.12 (rounds 0.79-1.36). Each XLA call's launch costs
about what the fused passes save, and TensorFlow's executor overlaps the
separate ops with others.

Then, without a new XLA call: the block's first projection leaving its
bias to the GELU's function (added there in float32, its gradient summed
in the gradient function with `layer_normalization.column_sum`), for
TensorFlow's `BiasAddGrad` (39 of ~1,000 thread-ms of a float32 step, 47
of ~900 in bfloat16) and `BiasAdd`. A/B the same way, 5 rounds: the
projection and GELU with their gradients 0.97-0.98x (float32) and
0.99-1.06x (bf16) at 768 and 1536 outputs; gMLP-Ti training 0.92x and
0.95x, inference 1.09x and 1.03x, every round range spanning 1 (0.80-1.43
at the widest). Not adopted: the sum inside XLA costs what
`BiasAddGrad` did.

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/gelu_formula.py
Results: benchmarks/results/gelu_formula_tensorflow.json
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "erfc"
CANDIDATE = "one_exp"
PRECISIONS = ("float32", "mixed_bfloat16")


def variant(name):
    """A context in which the GELUs traced take the `name` form."""
    from keras_gmlp.layers import gelu as module

    functions = module._tensorflow_gelu
    if name != BASELINE:
        return contextlib.nullcontext()
    return common.patched(
        module,
        "_tensorflow_gelu",
        lambda: functions(module.tensorflow_erfc_cdf_and_density),
    )


def op_functions(batch_size, precision):
    """name -> warm callable: the GELU, and with its gradient, per width,
    in the compute dtype of the `precision` policy."""
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_gmlp.layers.gelu import gelu

    rng = np.random.default_rng(0)
    functions = {}
    for channels in (768, 1536):
        shape = (batch_size, 196, channels)
        dtype = keras.DTypePolicy(precision).compute_dtype
        x = tf.constant(rng.normal(size=shape), dtype)
        upstream = tf.constant(rng.normal(size=shape), x.dtype)
        for name in (BASELINE, CANDIDATE):

            @tf.function
            def forward(x):
                return gelu(x)

            @tf.function
            def both(x, upstream):
                with tf.GradientTape() as tape:
                    tape.watch(x)
                    y = gelu(x)
                return y, tape.gradient(y, x, upstream)

            with variant(name):
                forward(x)
                both(x, upstream)
            functions[f"op {channels} fwd {name}"] = lambda f=forward, x=x: (
                keras.ops.convert_to_numpy(f(x))
            )
            functions[f"op {channels} fwd+bwd {name}"] = (
                lambda f=both, x=x, u=upstream: [
                    keras.ops.convert_to_numpy(t) for t in f(x, u)
                ]
            )
    return functions


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "gelu_formula",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "tensorflow",
        variant,
        op_functions=op_functions,
    )
