"""Kernels A/B: each row with every kernel on against the reference path.

One process per backend (`KERAS_BACKEND`). For each row (gMLP-Ti/16 and
gMLP-S/16 image classifiers, training and inference, the masked LM of the
pretraining recipe at 128 and 512 tokens, training, and, asked for with
`--rows generate`, the causal LM's `generate` as `versions.py` times it;
`generate_amlp`, the same of `amlp_tiny`; `mlm128_amlp_train`, the masked
LM of `amlp_tiny` at 128 tokens) one model is built per variant, with the
same weights:

- `reference`: `keras_gmlp.kernels.configure("off")`, the layers' plain
  Keras ops;
- `kernels`: `configure("on")`, every kernel of the backend;
- `no_<operation>`: every kernel but that operation's (`--operations`),
  to show what each operation's kernel brings by itself.

Each variant is traced (JAX, TensorFlow) or run (torch) under its own
mode; the steps are timed in interleaved rounds (`common.alternate`), in
a process set up as the `keras-gmlp` command sets up a training job
(`--process training`, the default) or, as a program that only generates
would run, without the training job's process settings (`--process
plain`).
`x_reference` is the reference's median step time over the variant's.

Usage:
    KERAS_BACKEND=jax python benchmarks/kernels.py --rounds 3 \\
        --name kernels_xeon
Results: benchmarks/results/<name>_<backend>.json (default name kernels).
"""

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import masked_lm_speed  # noqa: E402
from benchmarks import versions  # noqa: E402

ROWS = {
    "ti16_train": ("image", "gmlp_ti16_224", True),
    "ti16_infer": ("image", "gmlp_ti16_224", False),
    "s16_train": ("image", "gmlp_s16_224", True),
    "s16_infer": ("image", "gmlp_s16_224", False),
    "mlm128_train": ("text", ("gmlp_tiny", 128), True),
    "mlm512_train": ("text", ("gmlp_tiny", 512), True),
}
# Asked for by name: the masked LM of `amlp_tiny` at 128 tokens, and
# `generate` of `gmlp_tiny` (and of `amlp_tiny`) with the decoding cache.
EXTRA_ROWS = {
    "mlm128_amlp_train": ("text", ("amlp_tiny", 128), True),
    "generate": ("generate", "gmlp_tiny", False),
    "generate_amlp": ("generate", "amlp_tiny", False),
}


def variants(operations):
    """`{name: (mode, operations)}` of the variants timed."""
    from keras_gmlp.kernels import registry

    found = {"reference": ("off", None), "kernels": ("on", None)}
    for operation in operations:
        others = set(registry.KERNELS) - {operation}
        found[f"no_{operation}"] = ("on", others)
    return found


def image_step(model_name, training, batch_size, precision):
    # Keras' default: XLA under JAX, TensorFlow's graph of kernels on a
    # CPU, eager torch.
    model = common.build_image_classifier(
        model_name, 224, jit_compile="auto", precision=precision
    )
    images, labels = common.random_image_batch(batch_size, 224)
    if training:
        return model, functools.partial(model.train_on_batch, images, labels)
    return model, functools.partial(model.predict_on_batch, images)


def text_step(preset, length, batch_tokens, vocabulary_size):
    model, _ = masked_lm_speed.build("gmlp", preset, length, vocabulary_size)
    batch_size = max(1, batch_tokens // length)
    x, y = masked_lm_speed.batch(model, length, batch_size, vocabulary_size)
    return model, functools.partial(model.train_on_batch, x, y)


def measure_row(row, args):
    import keras

    from keras_gmlp import kernels

    kind, size, training = {**ROWS, **EXTRA_ROWS}[row]
    functions, weights = {}, None
    for name, (mode, operations) in variants(args.operations).items():
        kernels.configure(mode, operations)
        keras.utils.set_random_seed(0)
        if kind == "image":
            model, step = image_step(
                size, training, args.batch_size, args.precision
            )
        elif kind == "text":
            model, step = text_step(
                *size, args.batch_tokens, args.vocabulary_size
            )
        else:
            model, step = versions.generation_step(size)
        if weights is None:
            weights = model.get_weights()
        model.set_weights(weights)
        step()  # traces under this variant's mode

        def run(step=step, mode=mode, operations=operations):
            kernels.configure(mode, operations)
            return step()

        functions[name] = run
    times = common.alternate(functions, args.rounds, args.target_seconds)
    kernels.configure("auto")
    reference = common.median(times["reference"])
    return [
        {
            "row": row,
            "variant": name,
            "median_s": common.median(seconds),
            "rounds_s": seconds,
            "x_reference": reference / common.median(seconds),
        }
        for name, seconds in times.items()
    ]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--rows",
        nargs="+",
        default=list(ROWS),
        choices=[*ROWS, *EXTRA_ROWS],
    )
    parser.add_argument(
        "--operations",
        nargs="*",
        default=[],
        help="operations timed each with its kernel alone off",
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--vocabulary-size", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target-seconds", type=float, default=1.0)
    parser.add_argument(
        "--process",
        choices=["training", "plain"],
        default="training",
        help="with or without configure_training_process()",
    )
    parser.add_argument("--name", default="kernels")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    # Set up as the `keras-gmlp` command sets up a training job.
    import keras_gmlp

    keras_gmlp.set_backend_environment()
    if args.process == "training":
        from keras_gmlp.kernels import configure_training_process

        configure_training_process()
    report = {**common.header(), "arguments": vars(args), "rows": []}
    print(common.describe(report), flush=True)
    for row in args.rows:
        for result in measure_row(row, args):
            report["rows"].append(result)
            print(
                f"{result['row']:13s} {result['variant']:20s} "
                f"{result['median_s'] * 1000:9.1f} ms  "
                f"x{result['x_reference']:.2f} vs reference",
                flush=True,
            )
    path = common.write_results(f"{args.name}_{report['backend']}", report)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
