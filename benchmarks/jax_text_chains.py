"""A/B under JAX: the text backbone's blocks as one chain of operations
over the batch (`one_chain`, the previous form) vs two chains, one per
half of the batch (`two_chains`, `keras_gmlp.models.batch_chains
.runs_jax_chains`), in the masked LM's training step.

Issue 12 (the masked-LM target). XLA:CPU runs the ready operations of a
compiled step side by side on its thread pool, and the gMLP block is a
chain of small operations at the masked LM's sizes (`gmlp_tiny`: 128
channels, 4,096 tokens a batch), each waiting for the one before. Each
half of the batch is an independent chain: a block mixes tokens within a
sequence, never across sequences. TensorFlow's text backbone has run
that way since stop 50 where its ops share the cores
(`benchmarks/chain_threads.py`).

A scratch A/B of the image backbone the same way (gMLP-Ti/16, batch 32,
`reuse_freed_memory`, 5 alternated rounds, an idle 2-core AMD EPYC with
AVX-512 and AVX512-BF16): float32 training 1.05x, `mixed_bfloat16`
0.99x, gMLP-S/16 `mixed_bfloat16` 0.97x; the image backbone keeps one
chain under JAX.

Measured: see `benchmarks/README.md`, "Stop 51"
(`jax_text_chains_epyc26_stop51_jax.json`, `--preset amlp_tiny`:
`jax_text_chains_amlp_epyc26_stop51_jax.json`).

Usage:
    KERAS_BACKEND=jax python benchmarks/jax_text_chains.py \\
        [--preset amlp_tiny]
Results: benchmarks/results/jax_text_chains<suffix>_jax.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "one_chain"
CANDIDATE = "two_chains"


def variant(name):
    """A context in which the text backbones traced take the `name`
    form."""
    import contextlib

    from keras_gmlp.models import batch_chains

    if name == CANDIDATE:
        return contextlib.nullcontext()
    return common.patched(batch_chains, "runs_jax_chains", lambda x: False)


def main():
    parser = masked_lm_speed.variant_parser(__doc__, [128, 512])
    args = parser.parse_args()
    common.require_backend("jax", "the chains measured are JAX's")
    # As the `keras-gmlp` command runs JAX.
    from keras_gmlp.training import reuse_freed_memory

    reuse_freed_memory()
    masked_lm_speed.variant_ab(
        variant,
        BASELINE,
        CANDIDATE,
        args,
        f"jax_text_chains{args.suffix}_{{backend}}",
    )


if __name__ == "__main__":
    main()
