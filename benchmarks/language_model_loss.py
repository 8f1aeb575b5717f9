"""Training steps of the language models with Keras' loss and with ours.

A language model's logits are `(batch, positions, vocabulary)`: every
position for the causal LM, the masked positions for the masked LM. Keras'
`sparse_categorical_crossentropy` under torch moves their class axis to
axis 1 for `F.cross_entropy`, which copies them to a strided layout, and
the gradient back (in torch's profiler of a tiny masked-LM step at 128
tokens, `aten::copy_` of `[32, 8192, 19]` and `[32, 19, 8192]` tensors:
9 % of the step). `keras_gmlp.training.text_metrics.token_cross_entropy`
flattens the logits to `(tokens, vocabulary)` first, where the class axis
is already axis 1; `LanguageModelLoss` is it as a Keras loss, the tasks'
`compile()` default (`sum_over_batch_size`, keras-hub's figure) and the
recipe's loss (`mean_with_sample_weight`).

For each task, one process alternates `train_on_batch` of two copies of
the same model, one compiled with `keras.losses.SparseCategoricalCrossentropy
(from_logits=True)` (the baseline) and one with the task's default loss,
over several rounds; the row is the median step time and the speed-up
over the baseline of the same rounds.

Measured (an idle 2-core AMD EPYC with AVX2; 4 gMLP blocks, 128 wide,
feed-forward 512, vocabulary 8192, 128 tokens, batch 32; 6 rounds;
`benchmarks/results/language_model_loss_<backend>.json`), the step with
the task's default loss over the step with Keras':

| task | jax | tensorflow | torch |
|---|---|---|---|
| causal LM (128 positions) | 0.98 | 1.01 | 1.49 |
| masked LM (19 positions) | 1.04 | 1.05 | 1.14 |

Only torch had the copies; JAX and TensorFlow are level within the
rounds' spread. With it the torch causal-LM step (984 ms) is the fastest
of the three backends' (JAX 1146, TensorFlow 1146 ms, same rounds' medians
in separate runs).

Usage:
    KERAS_BACKEND=torch python benchmarks/language_model_loss.py
Results: benchmarks/results/language_model_loss_<backend>.json
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402

TASKS = ("causal_lm", "masked_lm")
LOSSES = ("keras", "keras_gmlp")


def build(task_name, loss_name, args):
    """A compiled task and a training batch `(x, y, sample_weight)`."""
    import keras

    from keras_gmlp import models

    task = getattr(models, task_name)(
        vocabulary_size=args.vocabulary_size,
        sequence_length=args.length,
        num_layers=args.num_layers,
        hidden_dim=args.hidden_dim,
        ffn_dim=args.ffn_dim,
    )
    if loss_name == "keras":
        task.compile(
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )
    else:
        task.compile()  # the task's default: LanguageModelLoss
    if task_name == "causal_lm":
        rng = np.random.default_rng(0)
        shape = (args.batch_size, args.length)
        token_ids = rng.integers(1, args.vocabulary_size, shape)
        token_ids = token_ids.astype("int32")
        x = {"token_ids": token_ids, "padding_mask": np.ones(shape, bool)}
        return task, x, token_ids, np.ones(shape, "float32")
    # The masked-LM benchmark's batch: 15 % of the positions masked.
    x, labels = masked_lm_speed.batch(
        task, args.length, args.batch_size, args.vocabulary_size
    )
    return task, x, labels, np.ones(labels.shape, "float32")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--vocabulary-size", type=int, default=8192)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--ffn-dim", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--target-seconds", type=float, default=1.0)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    report = common.header()
    report["arguments"] = vars(args)
    functions = {}
    for task_name in args.tasks:
        for loss_name in LOSSES:
            task, x, y, weights = build(task_name, loss_name, args)
            step = functools.partial(task.train_on_batch, x, y, weights)
            step()  # builds and compiles outside the timing
            functions[(task_name, loss_name)] = step
    times = common.alternate(functions, args.rounds, args.target_seconds)
    rows = []
    for task_name in args.tasks:
        baseline = common.median(times[(task_name, "keras")])
        for loss_name in LOSSES:
            seconds = common.median(times[(task_name, loss_name)])
            row = {
                "task": task_name,
                "loss": loss_name,
                "median_s": seconds,
                "rounds_s": times[(task_name, loss_name)],
                "x_keras_loss": baseline / seconds,
            }
            rows.append(row)
            print(
                f"{task_name:10s} {loss_name:11s} {seconds * 1000:8.1f} ms"
                f"  x{row['x_keras_loss']:5.2f} vs Keras' loss",
                flush=True,
            )
    report["rows"] = rows
    name = f"language_model_loss_{report['backend']}"
    print(f"wrote {common.write_results(name, report)}")
    return report


if __name__ == "__main__":
    main()
