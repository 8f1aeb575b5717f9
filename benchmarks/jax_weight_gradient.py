"""A/B under JAX: the spatial weight's gradient as one dot per image vs one
dot contracting the batch and the channels.

Issue 12. Found timing the test suite (the idle 2-core Xeon with AMX): a
2-block gMLP image classifier's first `fit()` step at batch 512 took 17 s,
of which XLA compiled `train_step` for 16 s. Its HLO held 1,026 dots and
2,048 slices and squeezes: `W`'s gradient, `sum_b g[b] @ v[b]^T`, written
as one 2-D dot per image (`jax_weight_gradient`), unrolls the batch into
the program, so the compile time grows with batch x blocks. Scratch
runs, first step (compile and one step) and the warm step of gMLP-Ti/16,
float32, per-image dots vs one dot:
- batch 32: 17.2-17.5 s vs 11.8-11.9 s; step 2.40-2.45 vs 2.48-2.61 s;
- batch 128: 49.9 s vs 22.9 s; step 12.17 vs 11.56 s.

Measures, per variant: the gMLP-Ti/16 (`--model`) training step
(`train_on_batch`, AdamW, 224 px; inference has no such gradient) and the
compile: a fresh training
function traced, compiled and run once (`op compile`).

Measured (the same Xeon, medians, the rounds' range in brackets), x
per-image dots; `_xeon_amx_batch32_jax.json` (5 rounds),
`_xeon_amx_batch64_jax.json` (3 rounds):

| batch | measure | float32 | mixed_bfloat16 |
|---|---|---|---|
| 32 | compile | 1.45 (1.43-1.52) | 1.41 (1.29-1.50) |
| 32 | train | 0.98 (0.97-1.00) | 0.95 (0.92-0.98) |
| 64 | compile | 1.73 (1.68-1.86) | 1.83 (1.75-1.94) |
| 64 | train | 0.98 (0.97-0.98) | 1.00 (1.00-1.01) |

And the digits quick-start's model (4 blocks, 16 tokens, batch 64),
scratch, two processes each: first step 2.1-2.2 s against 3.8 s, the
step 12.2-13.2 ms against 12.9-13.6. So `jax_weight_gradient` keeps the
per-example dots up to 32 examples (`PER_EXAMPLE_DOTS_UP_TO`) and takes
one dot above.
Tried, not adopted: the per-image dots in a `lax.fori_loop` (one dot in
the program, any batch, also with a symbolic one): compile as one dot's,
training 0.99 (0.97-1.00) float32 and 0.93 (0.92-0.95) bfloat16 at batch
32 (`_loop32_jax.json`), 1.00 (0.98-1.04) float32 at 64
(`_loop64_jax.json`; in those files "loop" stands where "one_dot" is).

Usage:
    KERAS_BACKEND=jax python benchmarks/jax_weight_gradient.py \
        --batch-size 32 --rounds 5
Results: benchmarks/results/jax_weight_gradient<suffix>_jax.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "per_image"
CANDIDATE = "one_dot"
PRECISIONS = ("float32", "mixed_bfloat16")


def variant(name):
    """A context in which the units traced take `W`'s gradient as one dot
    per image (`per_image`) or as one dot (`one_dot`), at any batch size:
    the package's `jax_weight_gradient` with its bound moved."""
    from keras_gmlp.layers import spatial_gating_unit as module

    bound = sys.maxsize if name == BASELINE else 0
    return common.patched(module, "PER_EXAMPLE_DOTS_UP_TO", bound)


def compile_functions(batch_size, precision, model_name):
    """name -> callable: one variant's training function traced and
    compiled afresh, then run once (`op compile <variant>`)."""
    import keras

    images, labels = common.random_image_batch(batch_size, 224)
    functions = {}
    for name in (BASELINE, CANDIDATE):
        keras.utils.set_random_seed(0)
        model = common.build_image_classifier(
            model_name, 224, "auto", precision
        )

        def compile_and_step(model=model, name=name):
            model.make_train_function(force=True)
            with variant(name):
                model.train_on_batch(images, labels)

        functions[f"op compile {name}"] = compile_and_step
    return functions


if __name__ == "__main__":
    model_name = "gmlp_ti16_224"
    if "--model" in sys.argv:
        model_name = sys.argv[sys.argv.index("--model") + 1]
    common.run_ab(
        __doc__,
        "jax_weight_gradient",
        BASELINE,
        CANDIDATE,
        PRECISIONS,
        "jax",
        variant,
        op_functions=lambda batch_size, precision: compile_functions(
            batch_size, precision, model_name
        ),
        infer=False,
    )
