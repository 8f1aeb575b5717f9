"""Command-line flags shared by the recipes; each recipe adds its own."""

import argparse

from keras_gmlp.training.distribution import STRATEGIES


def common_parser(description, **defaults):
    """Returns an `ArgumentParser` with the flags every recipe shares.

    Flags: `--epochs`, `--batch-size` (global), `--per-replica-batch-size`,
    `--learning-rate`, `--learning-rate-batch-size`, `--weight-decay`,
    `--clipnorm`, `--warmup` (a fraction of the run when < 1, else steps),
    `--seed`, `--mixed-precision`, `--jit-compile`, `--strategy`,
    `--split-cpu`, `--output-dir`, `--steps-per-epoch`, `--no-tensorboard`,
    `--verbose`.

    Args:
        description: str. The recipe's one-line description.
        **defaults: overrides of the flags' defaults, by destination name
            (e.g. `learning_rate=1e-3`).

    Returns:
        An `argparse.ArgumentParser`; add the recipe's own flags to it.

    Example:

    >>> from keras_gmlp.training.arguments import common_parser
    >>> parser = common_parser("Train gMLP.", epochs=300)
    >>> _ = parser.add_argument("--preset")
    >>> args = parser.parse_args(["--preset", "gmlp_tiny"])
    >>> args.epochs, args.preset
    (300, 'gmlp_tiny')
    """
    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    group = parser.add_argument_group("training")
    group.add_argument("--epochs", type=positive_int, default=10)
    group.add_argument(
        "--batch-size",
        type=positive_int,
        default=None,
        help="Global batch size over all replicas (default: "
        "--per-replica-batch-size times the replica count).",
    )
    group.add_argument(
        "--per-replica-batch-size", type=positive_int, default=64
    )
    group.add_argument(
        "--learning-rate",
        type=positive_float,
        default=1e-3,
        help="Peak learning rate for a global batch of "
        "--learning-rate-batch-size; scaled linearly to the actual global "
        "batch (so by the replica count).",
    )
    group.add_argument(
        "--learning-rate-batch-size",
        type=positive_int,
        default=None,
        help="Global batch that --learning-rate is given for (default: "
        "--per-replica-batch-size).",
    )
    group.add_argument("--weight-decay", type=non_negative_float, default=0.05)
    group.add_argument(
        "--clipnorm",
        type=non_negative_float,
        default=1.0,
        help=(
            "Clip the global norm of all gradients together to this value "
            "(not each gradient on its own); 0 disables it."
        ),
    )
    group.add_argument(
        "--warmup",
        type=non_negative_float,
        default=0.05,
        help="Warmup: a fraction of all steps when < 1, else a step count.",
    )
    group.add_argument("--steps-per-epoch", type=positive_int, default=None)
    group.add_argument("--seed", type=int, default=0)
    group.add_argument(
        "--mixed-precision",
        choices=("none", "mixed_float16", "mixed_bfloat16"),
        default="none",
    )
    group.add_argument(
        "--jit-compile",
        choices=("auto", "true", "false"),
        default="auto",
        help="XLA compilation of the train step (Keras' jit_compile).",
    )
    group.add_argument("--strategy", choices=STRATEGIES, default="auto")
    group.add_argument(
        "--split-cpu",
        type=positive_int,
        default=None,
        help="Split the host CPU into N devices (TensorFlow logical devices; "
        "JAX needs XLA_FLAGS=--xla_force_host_platform_device_count=N): "
        "for trying strategies without accelerators.",
    )
    group.add_argument("--output-dir", default="runs/latest")
    group.add_argument("--no-tensorboard", action="store_true")
    group.add_argument("--verbose", type=int, choices=(0, 1, 2), default=1)
    parser.set_defaults(**defaults)
    return parser


def global_batch_size(args, num_replicas):
    """The global batch: `--batch-size`, else per-replica times replicas.

    Raises:
        ValueError: when `--batch-size` is not divisible by the replicas.
    """
    if args.batch_size is None:
        return args.per_replica_batch_size * num_replicas
    if args.batch_size % num_replicas:
        raise ValueError(
            f"--batch-size {args.batch_size} is not divisible by the "
            f"{num_replicas} replicas."
        )
    return args.batch_size


def scaled_learning_rate(args, batch_size):
    """`--learning-rate` scaled linearly from its reference batch size."""
    reference = args.learning_rate_batch_size or args.per_replica_batch_size
    return args.learning_rate * batch_size / reference


def warmup_steps(args, total_steps):
    """`--warmup` as a step count (fractions are of `total_steps`)."""
    if args.warmup < 1:
        return int(round(args.warmup * total_steps))
    return min(int(args.warmup), total_steps)


def jit_compile(args):
    """`--jit-compile` as the value `model.compile` takes."""
    return {"auto": "auto", "true": True, "false": False}[args.jit_compile]


def positive_int(text):
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"expected an integer >= 1, got {text}"
        )
    return value


def positive_float(text):
    """argparse type: a number > 0."""
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


def non_negative_float(text):
    """argparse type: a number >= 0."""
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def probability(text):
    """argparse type: a number in [0, 1]."""
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(
            f"expected a probability in [0, 1], got {text}"
        )
    return value
