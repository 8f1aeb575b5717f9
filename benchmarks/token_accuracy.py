"""A/B: the language models' accuracy metric without an `argmax`
(`keras_gmlp.training.text_metrics.TokenAccuracy`), against Keras'
`SparseCategoricalAccuracy`, in whole masked-LM training steps.

Issue 12. An XLA:CPU profile of the `gmlp_tiny` masked-LM training step
at n = 512 under JAX (after `row_matmul.py`, 166 ms a step, the idle
2-core Xeon with AMX) had the accuracy's `argmax` over the `(8, 77, 8192)`
masked logits as its largest single fusion, 9.9 ms (`iota_reduce_fusion`:
a reduction of value and index pairs). `token_accuracy` takes the row's
maximum, the label's score and whether an earlier class ties the maximum
instead: on those logits alone (scratch), JAX 1.8 ms against 7.5,
TensorFlow 2.8 against 5.0, torch 5.0 against 3.4. The values are the
same (`tests/training/test_text_metrics.py` checks ties and labels out of
range against numpy).

- `argmax` (the baseline, the previous metric): Keras'
  `SparseCategoricalAccuracy`.
- `maximum` (the candidate): `TokenAccuracy`.

Every model trains with the recipe's loss and weighted metrics
(`language_model_metrics`), 4,096 tokens a batch; each variant's model is
built, compiled and traced in its form, then the forms are alternated.
The metric is shared by every model the recipe trains, keras-hub's BERT
of `masked_lm_speed.py` too.

Measured on the idle 2-core Xeon with AMX (model 167: AVX-512,
AVX512-BF16, AMX), 7 rounds, x `argmax`
(`token_accuracy_xeon_amx_<backend>.json`):

| backend | n = 128 | n = 512 |
|---|---|---|
| jax (`--reuse-freed-memory`) | 1.04 (0.99-1.08) | 1.05 (1.02-1.09) |
| tensorflow | 0.99 (0.95-1.00) | 1.00 (0.95-1.04) |

So only JAX computes it without the `argmax`; TensorFlow (no gain in
its steps) and torch (whose `argmax` is the faster) keep it, and there
the candidate is the baseline's computation.

Usage:
    KERAS_BACKEND=jax python benchmarks/token_accuracy.py --suffix _mine
Results: benchmarks/results/token_accuracy<suffix>_<backend>.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "argmax"
CANDIDATE = "maximum"


def keras_accuracy(name="accuracy"):
    """The previous metric: Keras' `SparseCategoricalAccuracy`."""
    import keras

    return keras.metrics.SparseCategoricalAccuracy(name=name)


def variant(name):
    """A context in which the recipe's metrics take the `name` form."""
    import contextlib

    from keras_gmlp.training import text_metrics

    if name == CANDIDATE:
        return contextlib.nullcontext()
    return common.patched(text_metrics, "TokenAccuracy", keras_accuracy)


def main():
    parser = masked_lm_speed.variant_parser(__doc__, [128, 512])
    common.add_reuse_freed_memory_argument(parser)
    args = parser.parse_args()
    common.start_reusing_freed_memory(args.reuse_freed_memory)
    masked_lm_speed.variant_ab(
        variant,
        BASELINE,
        CANDIDATE,
        args,
        f"token_accuracy{args.suffix}_{{backend}}",
    )


if __name__ == "__main__":
    main()
