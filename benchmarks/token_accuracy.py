"""The language models' token accuracy: this package's formula against
`argmax`'s.

`keras_gmlp.models.gmlp_text.text_metrics.token_accuracy` finds the first
class of the highest score without `argmax` (the label's score is the
row's maximum and no earlier class reaches it). This times it against the
`argmax` form (the baseline, Keras' `sparse_categorical_accuracy`) on a
masked-LM batch's scores, compiled as Keras compiles a step by default
(`jax.jit`, `tf.function`, eager torch), in interleaved rounds; both give
the same values (checked).

Usage:
    KERAS_BACKEND=jax python -m benchmarks.token_accuracy \\
        --name token_accuracy_xeon
Results: benchmarks/results/<name>_<backend>.json (default name
token_accuracy).
"""

import argparse

import keras
import numpy as np
from keras import ops

from benchmarks import common
from keras_gmlp.models.gmlp_text.text_metrics import token_accuracy


def argmax_accuracy(labels, scores):
    """1 where `labels` is `argmax(scores)`, else 0: the baseline."""
    predicted = ops.cast(ops.argmax(scores, axis=-1), "int32")
    return ops.cast(ops.equal(predicted, labels), "float32")


def compiled(function):
    """`function` compiled as Keras compiles a step by default."""
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        return jax.jit(function)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function)
    return function


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--masks", type=int, default=20, help="per sequence")
    parser.add_argument("--vocabulary-size", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--target-seconds", type=float, default=0.5)
    parser.add_argument(
        "--name",
        default="token_accuracy",
        help="results go to benchmarks/results/<name>_<backend>.json",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    run = common.header()
    print(common.describe(run), flush=True)
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.masks)
    scores = ops.convert_to_tensor(
        rng.normal(size=(*shape, args.vocabulary_size)).astype("float32")
    )
    labels = ops.convert_to_tensor(
        rng.integers(0, args.vocabulary_size, size=shape).astype("int32")
    )
    variants = {
        "argmax": compiled(argmax_accuracy),
        "token_accuracy": compiled(token_accuracy),
    }
    values = {
        name: ops.convert_to_numpy(function(labels, scores))
        for name, function in variants.items()
    }
    np.testing.assert_array_equal(values["token_accuracy"], values["argmax"])
    times = common.alternate(
        {
            name: (lambda f=function: f(labels, scores))
            for name, function in variants.items()
        },
        args.rounds,
        args.target_seconds,
    )
    baseline = common.median(times["argmax"])
    rows = [
        {
            "variant": name,
            "ms": common.median(seconds) * 1e3,
            "x_argmax": baseline / common.median(seconds),
            "rounds_s": seconds,
        }
        for name, seconds in times.items()
    ]
    common.print_table(rows, ["variant", "ms", "x_argmax"])
    report = dict(run, arguments=vars(args), rows=rows)
    path = common.write_results(f"{args.name}_{run['backend']}", report)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
