"""Command-line flags: the shared training flags, and flags to configs.

Each job's flags have the names of its run configuration's fields
(`keras_gmlp.training.run_config`): `--per-replica-batch-size` sets
`per_replica_batch_size`. `common_parser` (or `add_training_arguments` on a
sub-command's parser) adds the flags every job shares; the job adds its
own; `set_config_defaults` makes the config class's field defaults the
flags' defaults, and `config_from_args` turns the parsed flags into the
config. Nothing past `config_from_args` sees the argparse namespace.
"""

import argparse
import dataclasses

from keras_gmlp.training.run_config import STRATEGIES


def common_parser(description, config_class=None):
    """Returns an `ArgumentParser` with the flags every job shares.

    Args:
        description: str. The job's one-line description.
        config_class: a `TrainingConfig` subclass or `None`. Its field
            defaults become the flags' defaults; call `set_config_defaults`
            again after adding the job's own flags.

    Returns:
        An `argparse.ArgumentParser`; add the job's own flags to it.

    Example:

    >>> from keras_gmlp.training.arguments import common_parser
    >>> from keras_gmlp.training.arguments import config_from_args
    >>> from keras_gmlp.training.run_config import TrainingConfig
    >>> parser = common_parser("Train gMLP.", TrainingConfig)
    >>> args = parser.parse_args(["--epochs", "2"])
    >>> config_from_args(TrainingConfig, args).epochs
    2
    """
    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_training_arguments(parser)
    if config_class is not None:
        set_config_defaults(parser, config_class)
    return parser


def add_training_arguments(parser):
    """Adds the shared training flags to `parser`, in a "training" group.

    Flags: `--epochs`, `--batch-size` (global), `--per-replica-batch-size`,
    `--learning-rate`, `--learning-rate-batch-size`, `--weight-decay`,
    `--clipnorm`, `--warmup` (a fraction of the run when < 1, else steps),
    `--seed`, `--mixed-precision`, `--jit-compile`, `--strategy`,
    `--split-cpu`, `--output-dir`, `--overwrite`, `--steps-per-epoch`,
    `--tensorboard/--no-tensorboard`, `--verbose`, `--allow-skipped`.

    Args:
        parser: `argparse.ArgumentParser`.
    """
    group = parser.add_argument_group("training")
    group.add_argument(
        "--epochs", type=positive_int, default=10, help="Epochs of the run."
    )
    group.add_argument(
        "--batch-size",
        type=positive_int,
        default=None,
        help="Global batch size over all replicas (default: "
        "--per-replica-batch-size times the replica count).",
    )
    group.add_argument(
        "--per-replica-batch-size",
        type=positive_int,
        default=64,
        help="Examples per replica and step.",
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
    group.add_argument(
        "--steps-per-epoch",
        type=positive_int,
        default=None,
        help="Steps of an epoch (default: a pass over the training data).",
    )
    group.add_argument(
        "--seed", type=int, default=0, help="Seed of every random draw."
    )
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
    group.add_argument(
        "--remat",
        choices=("none", "activations"),
        default="none",
        help="keras.RematScope mode of the models: 'activations' makes the "
        "spatial gating units recompute their GELU and norm in the backward "
        "pass under TensorFlow too (less memory, slower steps there; JAX "
        "and torch always do).",
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
    group.add_argument(
        "--output-dir",
        default="runs/latest",
        help="The run's folder. The same command again resumes the run "
        "there, or reports it complete; another configuration is refused.",
    )
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="Move a run already in --output-dir aside (to "
        "<output-dir>.replaced-<time>) and start a new one.",
    )
    group.add_argument(
        "--tensorboard",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Write TensorBoard logs.",
    )
    group.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=1,
        help="Keras' progress output: 0 silent, 1 a progress bar, 2 a line "
        "an epoch.",
    )
    group.add_argument(
        "--allow-skipped",
        action="store_true",
        help="Train on data of which more than half of the records are "
        "skipped (not decodable, empty, unknown labels); else the run "
        "stops with the counts.",
    )
    return parser


def set_config_defaults(parser, config_class):
    """Makes the fields' defaults of `config_class` the flags' defaults.

    Args:
        parser: `argparse.ArgumentParser` whose flags are named after the
            fields.
        config_class: a dataclass, such as `ImageClassificationConfig`.
    """
    parser.set_defaults(
        **{
            field.name: field.default
            for field in dataclasses.fields(config_class)
        }
    )


def config_from_args(config_class, args):
    """Builds a run configuration from parsed flags.

    Args:
        config_class: a dataclass, such as `ImageClassificationConfig`.
        args: `argparse.Namespace` with a value for every field.

    Returns:
        A `config_class` instance.

    Raises:
        ValueError: when a field has no flag (a bug in the job's parser).
    """
    values = vars(args)
    missing = [
        field.name
        for field in dataclasses.fields(config_class)
        if field.name not in values
    ]
    if missing:
        raise ValueError(
            f"The flags give no value for the {config_class.__name__} "
            f"fields {missing}; expected a flag per field."
        )
    return config_class(
        **{
            field.name: values[field.name]
            for field in dataclasses.fields(config_class)
        }
    )


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
