"""A/B under JAX: the spatial unit's token product, a batched dot of the
broadcast weight vs one dot over the token axis and a transpose.

Issue 12. Found with `jax.profiler` traces of gMLP-Ti/16 steps (batch 8,
an idle 2-core AMD EPYC with AVX-512 and AVX512-BF16, no AMX): in a
float32 inference step of ~190 ms, 30 `wrapped_broadcast` thunks took
28.7 thread-ms (about 1 ms a block, a seventh of the step's kernels):
the unit's `W` `(196, 196)` broadcast to `(8, 196, 196)` for the batched
dot, a copy that XLA:CPU makes slowly; in training 19.6 thread-ms.

The candidate (`keras_gmlp.layers.spatial_gating_unit
._jax_batched_product`): the product as one `dot_general` of `W` with
`v`'s token axis, `(n, batch, c)`, transposed to `(batch, n, c)` (XLA
copies `v` to `(m, batch x c)` for the dot and fuses the result's
transpose into the bias add and the gating), and `v`'s gradient the same
way with `W` transposed. The baseline (`broadcast_product` here): the
batched dot of the broadcast `W`, forward and `v` gradient, as before.
Both take the weight gradient as the sum of per-image dots.

Measures: the product alone, forward and forward plus gradients, at
gMLP-Ti's and gMLP-S's gate widths (384, 768 channels, 196 tokens), and
the gMLP-Ti/16 classifier's `train_on_batch` and `predict_on_batch`
(AdamW, batch 8, 224 px), float32 and mixed_bfloat16.

Measured (the same EPYC, 7 rounds, medians, the rounds' range in
brackets; `jax_token_product_jax.json`), x broadcast:

| measure | float32 | mixed_bfloat16 |
|---|---|---|
| product fwd, 384 / 768 channels | 1.05 / 0.97 | 1.16 / 1.01 |
| product fwd+bwd, 384 / 768 | 0.85 / 0.94 | 0.93 / 0.88 |
| gMLP-Ti train | 1.01 (0.96-1.11) | 1.03 (0.96-1.44) |
| gMLP-Ti infer | 1.17 (1.09-1.79) | 1.14 (1.05-1.30) |

Alone the new product is no faster (its output's transpose is a copy
there, and with the gradients slower); in the model XLA fuses that
transpose into the ops reading it, and the steps gain.
Tried after it and not adopted: the forward keeping `v` in its dot's
`(m, batch x c)` layout as the residual, and the weight gradient as one
dot of `g` and `v` in that layout (no per-image slices): gMLP-Ti
float32 training 0.98x (0.85-1.08, 9 rounds).
Measured before this script (the same EPYC, the two products patched
into one process, interleaved rounds, medians, x broadcast): float32
training 1.02 (7 rounds) and 1.04 (11), inference 1.13 and 1.08;
mixed_bfloat16 (7 rounds) training 1.08, inference 1.12. On a Xeon with
AMX an earlier session had measured the opposite in training (one dot
and a transpose 0.736 / 0.751 s against 0.690 / 0.739 s, separate
processes, two runs; `jax_functions.py`).

Usage:
    KERAS_BACKEND=jax python benchmarks/jax_token_product.py --rounds 7
Results: benchmarks/results/jax_token_product_jax.json
"""

import contextlib
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "broadcast"
CANDIDATE = "transposed"
PRECISIONS = ("float32", "mixed_bfloat16")


@functools.cache
def broadcast_product():
    """The previous product: batched dots of `W` broadcast over the batch
    (forward and `v` gradient), the weight gradient as the package's."""
    import jax
    import jax.numpy as jnp

    from keras_gmlp.layers import spatial_gating_unit as module

    def batched(weight, v, contracting):
        weight = jnp.broadcast_to(weight, (v.shape[0], *weight.shape))
        return jax.lax.dot_general(
            weight, v, (((contracting,), (1,)), ((0,), (0,)))
        )

    @jax.custom_vjp
    def product(weight, v):
        return batched(weight, v, 2)

    def forward(weight, v):
        return product(weight, v), (weight, v)

    def backward(residuals, upstream):
        weight, v = residuals
        weight_gradient = module.jax_weight_gradient(upstream, v, weight.dtype)
        return weight_gradient, batched(weight, upstream, 1)

    product.defvjp(forward, backward)
    return product


def variant(name):
    """A context in which the units traced take the `name` product."""
    from keras_gmlp.layers import spatial_gating_unit as module

    if name != BASELINE:
        return contextlib.nullcontext()
    return common.patched(module, "_jax_batched_product", broadcast_product)


def op_functions(batch_size, precision):
    """name -> warm callable: the product, and with its gradients."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from keras_gmlp.layers import spatial_gating_unit as module

    dtype = jnp.bfloat16 if precision == "mixed_bfloat16" else jnp.float32
    rng = np.random.default_rng(0)
    weight = jnp.asarray(rng.normal(size=(196, 196)) * 0.05, dtype)
    functions = {}
    for channels in (384, 768):
        v = jnp.asarray(rng.normal(size=(batch_size, 196, channels)), dtype)
        upstream = jnp.asarray(rng.normal(size=v.shape), dtype)
        for name in (BASELINE, CANDIDATE):
            with variant(name):
                product = module._jax_batched_product()
            forward = jax.jit(product)
            both = jax.jit(lambda w, v, g, p=product: jax.vjp(p, w, v)[1](g))
            forward(weight, v).block_until_ready()
            jax.block_until_ready(both(weight, v, upstream))
            functions[f"op {channels} fwd {name}"] = lambda f=forward, v=v: f(
                weight, v
            ).block_until_ready()
            functions[f"op {channels} fwd+bwd {name}"] = (
                lambda f=both, v=v, g=upstream: jax.block_until_ready(
                    f(weight, v, g)
                )
            )
    return functions


if __name__ == "__main__":
    common.run_ab(
        __doc__,
        "jax_token_product",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "jax",
        variant,
        op_functions=op_functions,
    )
