"""The `keras-gmlp` command: train, evaluate, use and inspect gMLP models.

    keras-gmlp train-image-classifier --dataset digits --output-dir runs/d
    keras-gmlp pretrain --text-files "corpus/*.txt" --output-dir runs/lm
    keras-gmlp finetune --pretrained runs/lm --train-file train.csv \\
        --validation-file valid.csv --output-dir runs/clf
    keras-gmlp evaluate runs/d
    keras-gmlp predict runs/d --image seven.png
    keras-gmlp predict runs/clf --text "a sentence to classify"
    keras-gmlp fill-mask runs/lm "the [MASK] sat on the mat"
    keras-gmlp generate runs/causal "the list" --max-new-tokens 20
    keras-gmlp export runs/d runs/d/exported
    keras-gmlp info gmlp_s16_224

Each training sub-command parses its flags into the job's run
configuration (`keras_gmlp.training.run_config`) and calls the job's
workflow (`keras_gmlp.workflows`); `python -m keras_gmlp.cli` is the same
command. The backend is Keras': `KERAS_BACKEND=jax keras-gmlp ...`.

The parser is built without importing a backend (the flags are declared
in `keras_gmlp.workflows.flags` and `keras_gmlp.training.arguments`), so
`--help` answers at once. An error a user can cause (a bad value, a
missing, unreadable or unfit file) is printed as one line,
`keras-gmlp: error: ...`, with exit status 2; `--debug` (or
`KERAS_GMLP_DEBUG=1`) shows its traceback instead. The backend's
start-up log lines are silenced unless `--verbose`.
"""

import argparse
import contextlib
import json
import os
import sys

from keras_gmlp.environment import set_backend_environment
from keras_gmlp.errors import KerasGMLPError
from keras_gmlp.errors import error_line

PROGRAM = "keras-gmlp"
# Training command: its workflow module (`keras_gmlp.workflows`); its flags
# and description are in `keras_gmlp.workflows.flags`.
TRAINING_COMMANDS = {
    "train-image-classifier": "image_classification",
    "pretrain": "pretraining",
    "finetune": "text_classification",
}
TRAINING_HELP = {
    "train-image-classifier": "Train a gMLP image classifier (digits, "
    "CIFAR, ImageNet, image folders).",
    "pretrain": "Pretrain a masked (or causal) gMLP/aMLP language model, or "
    "a matched Transformer.",
    "finetune": "Fine-tune a pretrained gMLP (or train one) to classify text.",
}
# What an unset (`None`) flag of a training command means in its help.
UNSET_DEFAULTS = {
    "train-image-classifier": "the dataset's",
    "pretrain": "the preset's",
    "finetune": "the preset's",
}
DEBUG_VARIABLE = "KERAS_GMLP_DEBUG"
# A run's preset folder (`keras_gmlp.workflows.*.PRESET_DIR`).
RUN_PRESET_DIR = "preset"
# The errors printed as one line: the package's own (`KerasGMLPError` and
# the other `ValueError`s it raises), and files missing, unreadable or
# not what they should be.
USER_ERRORS = (ValueError, OSError)
# TensorFlow's errors (`tf.errors`) about files, printed as one line too.
TENSORFLOW_FILE_ERRORS = ("NotFoundError", "PermissionDeniedError")


def build_parser():
    """The `keras-gmlp` parser with one sub-parser per command.

    Building it imports no backend: `keras-gmlp --help` answers at once.
    """
    from keras_gmlp import __version__
    from keras_gmlp.training.arguments import positive_int
    from keras_gmlp.workflows import flags

    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="gMLP and aMLP (Pay Attention to MLPs, arXiv "
        "2105.08050) for Keras 3: train, evaluate, use and inspect models. "
        "The backend is Keras' (KERAS_BACKEND=tensorflow|jax|torch).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"keras-gmlp {__version__}"
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="Show the traceback of an error instead of one line (also "
        f"{DEBUG_VARIABLE}=1; default: off).",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        dest="backend_logs",
        help="Show the backend's start-up log lines (TensorFlow, XLA, "
        "CUDA; default: off, they are silenced).",
    )
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True
    )
    formatter = argparse.ArgumentDefaultsHelpFormatter
    for name, module in TRAINING_COMMANDS.items():
        sub = _add_command(
            commands,
            name,
            _train,
            TRAINING_HELP[name],
            getattr(flags, f"{module.upper()}_DESCRIPTION"),
        )
        getattr(flags, f"add_{module}_arguments")(sub)
        sub.set_defaults(module=module)

    sub = _add_command(
        commands,
        "evaluate",
        _evaluate,
        "Score a finished run's model on its held-out data again.",
        "Scores a training run's model on its held-out data again: an image "
        "run's model.keras, a pretraining run's last.keras (the same seeded "
        "masks as in training), a text classification run's best.keras. "
        "Prints the metrics as JSON.",
        run_dir="training",
    )

    sub = _add_command(
        commands,
        "predict",
        _predict,
        "Classify an image file or a sentence with a run's model.",
        "Classifies an image file (image classification run) or a text "
        "(text classification run) with the run's preset (its task and "
        "preprocessor). Prints the top classes and their probabilities as "
        "JSON.",
        run_dir="training",
    )
    inputs = sub.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--image", help="An image file (JPEG, PNG, ...).")
    inputs.add_argument("--text", help="A text to classify.")
    sub.add_argument("--text-b", help="The second text of a sentence pair.")
    _add_top_k(sub, 5)

    sub = _add_command(
        commands,
        "fill-mask",
        _fill_mask,
        "Fill in the [MASK] blanks of a sentence (masked-LM run).",
        "Prints the most likely tokens for each [MASK] of a sentence, with "
        "their probabilities, from the preset of a masked-LM pretraining "
        "run.",
        run_dir="pretrain",
    )
    sub.add_argument("text", help='e.g. "the [MASK] sat on the mat".')
    _add_top_k(sub, 5)

    sub = _add_command(
        commands,
        "generate",
        _generate,
        "Continue a prompt with a causal gMLP run.",
        "Continues a prompt with the preset of a causal pretraining run "
        "(pretrain --objective causal): GMLPCausalLM.generate with "
        "keras-hub's greedy or top-k sampler, up to [SEP] or "
        "--max-new-tokens.",
        run_dir="causal",
    )
    sub.add_argument("prompt", help="The start of the text.")
    sub.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=20,
        help="Tokens generated at most.",
    )
    sub.add_argument(
        "--strategy",
        choices=("greedy", "top_k"),
        default="greedy",
        help="The sampler.",
    )
    _add_top_k(sub, 10)
    sub.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="Of the top_k sampler.",
    )
    sub.add_argument(
        "--seed",
        type=int,
        default=None,
        help="Of the top_k sampler (default: none, a fresh draw).",
    )

    sub = commands.add_parser(
        "export",
        help="Export a model as a SavedModel, ONNX or LiteRT file.",
        description="Writes the model with the preprocessing inside: "
        "images as uint8 pixels, token ids of any length up to the "
        "sequence length, a dynamic batch. A run's --output-dir is "
        "exported as a SavedModel of probabilities from any backend; a "
        ".keras file or a preset folder (keras-hub's or timm's, or a "
        "run's preset/ folder) in any --format from the backends Keras "
        "can make it from (keras_gmlp.export.export).",
        formatter_class=formatter,
    )
    sub.add_argument(
        "model", help="A run's --output-dir, a .keras file or a preset folder."
    )
    sub.add_argument("export_dir", help="The folder or file to write.")
    sub.add_argument(
        "--format",
        choices=("saved_model", "onnx", "litert"),
        default="saved_model",
        help="saved_model (tf.saved_model.load), onnx (onnxruntime) or "
        "litert (the LiteRT interpreter).",
    )
    sub.add_argument(
        "--activation",
        choices=("softmax", "none"),
        default="softmax",
        help="Output activation.",
    )
    sub.add_argument(
        "--gelu",
        choices=("exact", "tanh"),
        default="exact",
        help="Keep the exact (erf) GELU, or export its tanh approximation "
        "(the measured difference is printed).",
    )
    sub.set_defaults(handler=_export)

    sub = _add_command(
        commands,
        "info",
        _info,
        "A preset's or a saved model's configuration and size.",
        "Prints, as JSON, the configuration and parameter count of a preset "
        "(a name of keras_gmlp.PRESETS or a saved preset folder), a run or "
        "a .keras file, and the backend. Without an argument, lists the "
        "named presets.",
    )
    sub.add_argument(
        "name",
        nargs="?",
        help="A preset name or folder, a run's --output-dir or a .keras file "
        "(default: none, list the named presets).",
    )
    show_defaults(parser)
    for name, sub in commands.choices.items():
        # --debug after the command too; unset there, it keeps the top
        # level's value.
        sub.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="Show the traceback of an error instead of one line "
            f"(default: off; also {DEBUG_VARIABLE}=1).",
        )
        show_defaults(sub, UNSET_DEFAULTS.get(name, "none"))
    return parser


def show_defaults(parser, unset="none"):
    """Makes the help of every option of `parser` show its default.

    argparse's `ArgumentDefaultsHelpFormatter` shows the default of the
    options that have a help text only; this gives each option one, and
    says `unset` for an option whose default is `None` (unless its help
    already says what its default is).

    Args:
        parser: `argparse.ArgumentParser`. Its help formatter becomes
            argparse's plain one (the defaults are in the help texts).
        unset: str. What a `None` default means. Defaults to `"none"`.
    """
    parser.formatter_class = argparse.HelpFormatter
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        if action.default == argparse.SUPPRESS:
            continue
        text = action.help or ""
        if "default" in text:
            continue
        if action.default is None:
            text = f"{text} (default: {unset})"
        else:
            text = f"{text} (default: %(default)s)"
        action.help = text.strip()


def _add_command(commands, name, handler, summary, description, run_dir=None):
    """Adds the sub-command `name`, run by `handler(args)`; returns its
    parser (with a `run_dir` argument, the --output-dir of a `run_dir`
    run, when given)."""
    sub = commands.add_parser(
        name,
        help=summary,
        description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sub.set_defaults(handler=handler)
    if run_dir is not None:
        sub.add_argument(
            "run_dir", help=f"The --output-dir of a {run_dir} run."
        )
    return sub


def _add_top_k(parser, default):
    from keras_gmlp.training.arguments import positive_int

    parser.add_argument("--top-k", type=positive_int, default=default)


def main(argv=None):
    """Runs `keras-gmlp`; returns the exit status.

    It first calls `keras_gmlp.set_backend_environment()`, before the
    backend is imported (TensorFlow's oneDNN kernels on, PyTorch's OpenMP
    threads waiting passively). Run as the program (`argv` `None`), a
    training command then calls
    `keras_gmlp.kernels.configure_training_process()`: under JAX each
    step then reuses the memory the last one freed; under TensorFlow the
    XLA functions are compiled with the jobs' flags (512-bit vectors on a
    CPU with AVX-512, no YNNPACK fusions) and each op runs on its share of
    the cores, for the blocks' two chains. Every other command first
    calls `keras_gmlp.kernels.compile_jax_draws_once()` (part of those
    settings): under JAX, building a model then compiles its initializers'
    draws once per distribution, not once per shape.

    Unless `--verbose`, the backend is imported with its start-up log
    lines silenced. An error a user can cause (`USER_ERRORS`: a bad value
    or flag, a file missing, unreadable or not what it should be) is
    printed as one line, `keras-gmlp: error: ...`, and the status is 2
    (130 after Ctrl-C); with `--debug` or `KERAS_GMLP_DEBUG=1` it is
    raised instead, with its traceback. Any other error is raised: a bug
    to report.

    Args:
        argv: list of str or `None`. The arguments after the program
            name. Defaults to `sys.argv[1:]`.

    Returns:
        0, 2 after an error, 130 when interrupted.
    """
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
    set_backend_environment()  # before the backend is imported
    try:
        if not args.backend_logs:
            import_backend_quietly()
        if argv is None:
            from keras_gmlp import kernels

            if args.handler is _train:
                kernels.configure_training_process()
            else:
                kernels.compile_jax_draws_once()
        args.handler(args)
    except BrokenPipeError:
        # The reader of stdout (`| head`) went away: nothing to report.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{PROGRAM}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if debug or not is_user_error(error):
            raise
        print(f"{PROGRAM}: error: {error_line(error)}", file=sys.stderr)
        return 2
    return 0


def is_user_error(error):
    """Whether the command prints `error` as one line (`USER_ERRORS`, and
    TensorFlow's errors about a file missing or not readable)."""
    if isinstance(error, USER_ERRORS):
        return True
    return (
        type(error).__module__.startswith("tensorflow")
        and type(error).__name__ in TENSORFLOW_FILE_ERRORS
    )


def import_backend_quietly():
    """Imports Keras, its backend and TensorFlow without their start-up
    log lines.

    TensorFlow's and XLA's C++ start-up lines (oneDNN, CUDA drivers, CPU
    instructions, the CUDA platform's start) are written to the process's
    stderr before any setting of theirs is read: the file descriptor is
    pointed at the null device while they load. `TF_CPP_MIN_LOG_LEVEL=3`
    (unless set) keeps their later C++ log lines out too where TensorFlow
    reads it, and absl's Python logging shows errors only. A Python
    exception raised while importing propagates as usual.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with _stderr_to_null():
        import keras  # noqa: F401

        try:
            import tensorflow as tf
        except ImportError:
            pass
        else:
            # Finding the devices loads the CUDA platform ("failed call to
            # cuInit" on a machine without a GPU); no device is set up.
            tf.config.list_physical_devices()
    with contextlib.suppress(ImportError):
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.ERROR)


@contextlib.contextmanager
def _stderr_to_null():
    """Points file descriptor 2 at the null device for the block."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # No stderr to silence.
        yield
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _train(args):
    from keras_gmlp import workflows
    from keras_gmlp.training.arguments import config_from_args

    workflow = getattr(workflows, args.module)
    config = config_from_args(workflow.CONFIG_CLASS, args)
    workflow.run(config)


def _evaluate(args):
    from keras_gmlp import workflows
    from keras_gmlp.workflows import run_folder

    job = run_folder.read_run_config(args.run_dir)["job"]
    metrics = getattr(workflows, job).evaluate_run(args.run_dir)
    _print_json(metrics)


def _predict(args):
    from keras_gmlp.workflows import image_classification
    from keras_gmlp.workflows import run_folder
    from keras_gmlp.workflows import text_classification

    job = run_folder.read_run_config(args.run_dir)["job"]
    expected = "image_classification" if args.image else "text_classification"
    if job != expected:
        flag = "--image" if args.image else "--text"
        raise KerasGMLPError(
            f"{args.run_dir}: holds a {job} run; predict {flag} needs an "
            f"{expected} run."
        )
    if args.image:
        result = image_classification.predict_image(
            args.run_dir, args.image, args.top_k
        )
    else:
        result = text_classification.classify_text(
            args.run_dir, args.text, args.text_b, args.top_k
        )
    _print_json([{"label": k, "probability": p} for k, p in result])


def _fill_mask(args):
    from keras_gmlp.workflows import pretraining

    fillers = pretraining.fill_in_the_blank(args.run_dir, args.text, args.top_k)
    _print_json(
        [
            [{"token": t, "probability": p} for t, p in blank]
            for blank in fillers
        ]
    )


def _generate(args):
    from keras_gmlp.workflows import pretraining

    print(
        pretraining.generate_text(
            args.run_dir,
            args.prompt,
            max_new_tokens=args.max_new_tokens,
            strategy=args.strategy,
            top_k=args.top_k,
            temperature=args.temperature,
            seed=args.seed,
        )
    )


def _export(args):
    from keras_gmlp.workflows import inspection
    from keras_gmlp.workflows import run_folder

    if not os.path.exists(args.model):
        raise FileNotFoundError(
            f"No model {args.model!r}; expected a run's --output-dir, a "
            ".keras file or a preset folder."
        )
    check_writable(args.export_dir)
    activation = None if args.activation == "none" else args.activation
    is_run = os.path.isdir(args.model) and any(
        os.path.exists(os.path.join(args.model, name))
        for name in (run_folder.RUN_CONFIG_FILE, "results.json")
    )
    if is_run and args.format == "saved_model" and args.gelu == "exact":
        path = inspection.export(args.model, args.export_dir, activation)
    else:
        import warnings

        from keras_gmlp import export

        model = args.model
        preset = os.path.join(args.model, RUN_PRESET_DIR)
        if is_run and os.path.isdir(preset):
            model = preset
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            path = export.export(
                model,
                args.export_dir,
                format=args.format,
                gelu=args.gelu,
                activation=activation,
            )
        for warning in caught:
            if "tanh" in str(warning.message):
                print(warning.message, file=sys.stderr)
    print(path)


def check_writable(path):
    """Checks that `path` (a file or folder to write) can be written.

    Its folder is made when missing, then a file is made and removed in
    it, before anything slower runs.

    Args:
        path: str. The file or folder to write.

    Raises:
        KerasGMLPError: naming the folder and why it takes no new file.
    """
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise KerasGMLPError(
            f"Cannot write {path!r}: the folder {folder} is not writable "
            f"({reason}); expected a folder you may write to."
        ) from error


def _info(args):
    from keras_gmlp.workflows import inspection

    _print_json(inspection.info(args.name))


def _print_json(value):
    print(json.dumps(value, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
