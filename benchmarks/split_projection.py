"""A/B: the gMLP block's first projection as one product split in two,
or as two products, one per half (`split_dense_gelu`; before the GELU in
JAX training, `split_dense`).

Issue 12. Found with a `jax.profiler` trace of gMLP-Ti/16 inference
(batch 8, float32, an idle 2-core AMD EPYC with AVX-512 and AVX512-BF16):
the block's ops after the first projection form one chain, and in the
profiled steps the kernels covered 177 ms of wall time a step, the
threads' traced busy time 102 and 68 ms (the step unprofiled: 168 ms).
With each half its own product, its own bias and GELU, the gated half
`u` and the gate's half `v` (its norm, the token product) are
independent until the gating, and XLA's thunk executor can run them side
by side: the traced busy time barely moved (170 to 184 thread-ms), the
kernels' wall time fell to 142 ms (the step unprofiled: 142 ms). The
slices of the expanded activations (forward) and their concatenation
(the gradient) are gone too.

A correction to how this was first written up: the trace does not show
that "XLA:CPU runs a loop fusion on one thread". The trace records a
fusion once, on the thread that launched it, but XLA:CPU's parallel task
assigner splits every large loop fusion of this step into two work
groups (`"outer_dimension_partitions":["2"]` on every `(8, 196, c)`
fusion of the optimised HLO of both steps, 2,287 of the training step's
2,999 fusions; left whole: the `(8, 196)` normalisation statistics, the
kernel's slices in inference and the optimizer's updates of 1-D
variables in training), and the second runs, untraced, on the other
thread. Checked since: a jitted
chain of elementwise ops over a `(8, 196, 1536)` array took 48.7 ms a
call using 1.97 cores, and 96.1 ms under `taskset -c 0`. So the traced
busy times above undercount both variants alike; the measured speed-ups
below stand, and what the two products save is the slicing, the
concatenation and the waits of one chain.

The baseline is the previous code: `gelu(Dense(x))` over all
`ffn_dim` columns, then split (`split_dense_gelu` patched to do that);
the candidate the package's. Measures: a gMLP-Ti/16 classifier's
`train_on_batch` and `predict_on_batch` (AdamW, batch 8, 224 px), float32
and mixed_bfloat16, under the backend of `KERAS_BACKEND`; `x baseline`
is the baseline's seconds over the candidate's.

Measured (the EPYC above, idle, 7 rounds, medians; two runs, the first
with the kernel's halves as slices, the second, in the results files,
with the package's `split`; `split_projection_<backend>.json`), x
one_product:

| backend | f32 train | f32 infer | bf16 train | bf16 infer |
|---|---|---|---|---|
| jax | 1.11, 1.04 | 1.37, 1.29 | 1.04, 0.94 | 1.02, 1.06 |
| tensorflow | 1.04, 1.06 | 1.09, 1.08 | 1.08, 1.10 | 1.08, 1.04 |
| torch | 0.98 | 0.97 | 0.97 | 1.01 |

Rounds' ranges, second run: jax 0.95-1.23, 1.24-1.41, 0.89-1.07,
0.95-1.59; tensorflow 1.05-1.10, 1.04-1.09, 1.03-1.66, 1.02-1.06. JAX's
bf16 training again, 11 rounds: 1.03 (1.00-1.63), inference 1.03. The
torch row (one run, 0.94-1.01, 0.96-1.05, 0.95-1.03, 0.90-1.13) measured
two products under torch too, before torch was given one (below); its
file is that run's. JAX's training rows measured two products in
training too, under JAX's own differentiation, which the package then
kept at one, for memory (see `split_dense_gelu`: XLA's temporaries for
the float32 step, 962 MB against 807 MB; in bfloat16 755 against 792
MB); the recomputing gate has two again (below). The halves as slices
against `split` (the gradient a concatenation instead of two zero-filled
kernels summed), float32 training, 7 rounds: tensorflow 1.005x, jax
1.006x.

JAX training since the spatial gating unit's recomputing gate
(`keras_gmlp.layers.jax_spatial_gate`): the block takes the two halves'
products before their GELU (`keras_gmlp.layers.gelu.split_dense`) and
the gate keeps both for the backward pass, as it kept the whole
projection, so the memory cost above is gone. Measured on the same
EPYC: the steady training step's peak RSS 323 MiB either way, the first
steps 772 against 812 MiB (`memory.py`, one run each, the baseline
patched in: `memory_gmlp_ti16_224_jax_{two_products,one_product}.json`);
XLA's
temporaries for the gradient of a stack of blocks 1.01-1.02x (4-6
blocks, scratch). Speed, x one product then split (the baseline patches
`split_dense` as well), float32 / bfloat16 training: this script, 7 and
9 rounds (`split_projection_recomputed_gate{,_run2}_jax.json`), 1.05 /
1.26 and 1.03 / 0.97, the rounds 0.65-1.5; training alone, 15 rounds,
two runs each (scratch), 1.03, 1.03 / 0.99, 1.00. Two 7-round scratch
runs before those measured 1.25 and 1.13 float32, 1.05 bfloat16: the
float32 gain is a few per cent, bfloat16 none.

A scratch A/B before it (JAX, plain `ops.matmul` and add for each half,
7 rounds): float32 train 1.02x, inference 1.26x; bf16 train 0.93x with
the halves' bias gradients summed in bfloat16 (why the package's halves
take `bias_add`). Eager torch runs one op at a time: two smaller products
gain nothing there, so under torch the package keeps one product and
splits it into two views (`split_dense_gelu`). Splitting the batch in two
instead (two independent halves of every block, JAX, 5 rounds): float32
train 1.01x, inference 1.05x.

Three more A/Bs (the same EPYC, one process, 7 rounds unless said, x
the package's code), none adopted:
- JAX training, the projection as one batched dot into `(2, batch, n,
  f / 2)` (the kernel reshaped to `(2, d, f / 2)`), so that `u` and `v`
  are contiguous halves of one buffer and neither slice nor
  concatenation is needed: float32 0.955x (0.78-1.16).
- TensorFlow, each half's bias as `tf.nn.bias_add` of the rows'
  `MatMul` (the `BiasAdd` Grappler can fuse, its gradient `BiasAddGrad`)
  instead of an add broadcast over `(batch, n, f / 2)` and its gradient's
  `Sum`: float32 training 0.985x, inference 1.02x; bf16 0.99x and 1.03x.
- TensorFlow, each half's bias added inside the GELU's XLA function and
  its gradient summed inside the gradient's (one XLA function each way
  instead of the `AddV2` and the `Sum` beside the GELU's; a bf16 training
  profile had the blocks' bias adds at 19.6 and their `Sum`s at 17.6
  thread-ms a step; a script written for it, then removed), 9 rounds:
  float32 training 0.95x (0.85-1.12), inference 0.99x; bf16 1.00x and
  1.05x. A bf16 `Sum` over `(8, 196, 384)` alone took 0.37 ms, the same
  accumulated in float32 0.52 ms, `BiasAddGrad` 0.59 and a ones-vector
  `MatMul` 0.40-0.50 ms: TensorFlow's own sum is not the slow part it was
  under JAX (`bias_add`).

Usage:
    KERAS_BACKEND=jax python benchmarks/split_projection.py --rounds 7
Results: benchmarks/results/split_projection_<backend>.json
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "one_product"
CANDIDATE = "two_products"
PRECISIONS = ("float32", "mixed_bfloat16")


def one_product(dense, inputs, training=None):
    """The previous form: the whole projection and GELU, then split."""
    from keras import ops

    from keras_gmlp.layers.gelu import dense_gelu

    hidden = dense_gelu(dense, inputs, training=training)
    return tuple(ops.split(hidden, 2, axis=-1))


def one_product_before_gelu(dense, inputs):
    """The previous form of the JAX training path: the whole projection,
    then split."""
    from keras import ops

    from keras_gmlp.layers.direct_call import direct_call

    return tuple(ops.split(direct_call(dense, inputs), 2, axis=-1))


@contextlib.contextmanager
def variant(name):
    """A context in which the blocks traced take the `name` form."""
    from keras_gmlp.layers import gmlp_block

    if name != BASELINE:
        yield
        return
    with common.patched(gmlp_block, "split_dense_gelu", one_product):
        with common.patched(gmlp_block, "split_dense", one_product_before_gelu):
            yield


if __name__ == "__main__":
    import keras

    common.run_ab(
        __doc__,
        "split_projection",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        keras.config.backend(),
        variant,
    )
