"""A/B: the language models' token cross-entropy with its gradient by hand
(`keras_gmlp.training.text_metrics.jax_cross_entropy` under JAX,
`tensorflow_cross_entropy` under TensorFlow), against Keras'
`sparse_categorical_crossentropy`, in whole masked-LM training steps.

Issue 12. Found:
- JAX. In the XLA:CPU profile of the `gmlp_tiny` masked-LM step at
  n = 512 (after `row_matmul.py`, 166 ms a step, the idle 2-core Xeon
  with AMX), Keras' JAX cross-entropy, a log-softmax times a one-hot of
  the labels, left a 4.7 ms fusion that writes the one-hot times the
  upstream gradient as a `(616, 8192)` array (`broadcast_select_fusion`)
  beside the softmax's own passes.
- TensorFlow. In the TensorFlow profile of the same step at n = 128
  (174 ms a step), TensorFlow's `SparseSoftmaxCrossEntropyWithLogits`
  kernel, Keras' TensorFlow cross-entropy, took 60 thread-ms a step: it
  runs twice, for the loss and for the perplexity metric, and computes
  the gradient both times. On the `(608, 8192)` logits alone, with the
  gradient: 15-16 ms, the two XLA-compiled functions by hand 3.8 ms.

The loss by hand is `log(sum(exp(logits))) - logits[label]`, and its
gradient `softmax - one_hot` times the upstream gradient in one
elementwise pass.

- `keras` (the baseline, the previous loss): Keras'
  `sparse_categorical_crossentropy` of the flattened logits.
- `by_hand` (the candidate): the backend's cross-entropy by hand.

The same values to float32 rounding (`tests/training/test_text_metrics.py`
checks the loss and gradient against numpy). Every model trains with the
recipe's loss and weighted metrics, 4,096 tokens a batch, with
`reuse_freed_memory()` under JAX as the recipe runs it; each variant's
model is built and traced in its form, then the forms are alternated.
The loss is shared by every model the recipes train, keras-hub's BERT of
`masked_lm_speed.py` too.

Measured on the idle 2-core Xeon with AMX (model 167: AVX-512,
AVX512-BF16, AMX), x `keras`:
- JAX, 7 rounds (`jax_cross_entropy_xeon_amx_jax.json`, this script's
  earlier name): 1.05x (1.04-1.07) at n = 128, 1.04x (1.02-1.05) at 512.
  A first scratch A/B, 5 rounds: 1.05x (1.02-1.05) and 1.04x (1.03-1.06).
- TensorFlow, 7 rounds (`cross_entropy_xeon_amx_tensorflow.json`):
  **1.17x** (1.11-1.24) at n = 128, **1.12x** (1.11-1.13) at 512.
- torch keeps Keras' (`log_softmax` and `nll_loss`): on the logits alone
  its forward pass takes 1.4 ms, and a loss and gradient by hand 5.8-6.3
  ms against 7.1-7.9, too little to change a step.

Usage:
    KERAS_BACKEND=jax python benchmarks/cross_entropy.py --suffix _mine
Results: benchmarks/results/cross_entropy<suffix>_<backend>.json
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

BASELINE = "keras"
CANDIDATE = "by_hand"
BY_HAND = {
    "jax": "jax_cross_entropy",
    "tensorflow": "tensorflow_cross_entropy",
}


def keras_cross_entropy():
    """The previous loss: Keras' cross-entropy of `(logits, labels)`."""
    import keras

    def cross_entropy(logits, labels):
        return keras.losses.sparse_categorical_crossentropy(
            labels, logits, from_logits=True
        )

    return cross_entropy


def variant(name):
    """A context in which the recipe's loss and perplexity take the
    `name` form."""
    import contextlib

    import keras

    from keras_gmlp.training import text_metrics

    if name == CANDIDATE:
        return contextlib.nullcontext()
    return common.patched(
        text_metrics,
        BY_HAND[keras.config.backend()],
        keras_cross_entropy,
    )


def main():
    import keras

    backend = keras.config.backend()
    if backend not in BY_HAND:
        raise SystemExit(
            "The cross-entropy by hand is JAX's and TensorFlow's; "
            f"KERAS_BACKEND is {backend!r}."
        )
    if backend == "jax":
        from keras_gmlp.training import reuse_freed_memory

        # As the masked-LM recipe runs JAX.
        reuse_freed_memory()
    args = masked_lm_speed.variant_parser(__doc__, [128, 512]).parse_args()
    masked_lm_speed.variant_ab(
        variant,
        BASELINE,
        CANDIDATE,
        args,
        f"cross_entropy{args.suffix}_{{backend}}",
    )


if __name__ == "__main__":
    main()
