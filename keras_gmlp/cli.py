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
"""

import argparse
import json
import os
import sys

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


def build_parser():
    """The `keras-gmlp` parser with one sub-parser per command."""
    from keras_gmlp import __version__
    from keras_gmlp import workflows
    from keras_gmlp.training.arguments import positive_int

    parser = argparse.ArgumentParser(
        prog="keras-gmlp",
        description="gMLP and aMLP (Pay Attention to MLPs, arXiv "
        "2105.08050) for Keras 3: train, evaluate, use and inspect models. "
        "The backend is Keras' (KERAS_BACKEND=tensorflow|jax|torch).",
    )
    parser.add_argument(
        "--version", action="version", version=f"keras-gmlp {__version__}"
    )
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True
    )
    formatter = argparse.ArgumentDefaultsHelpFormatter
    for name, module in TRAINING_COMMANDS.items():
        workflow = getattr(workflows, module)
        sub = _add_command(
            commands, name, _train, TRAINING_HELP[name], workflow.DESCRIPTION
        )
        workflow.add_arguments(sub)
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
    sub.add_argument("--max-new-tokens", type=positive_int, default=20)
    sub.add_argument(
        "--strategy", choices=("greedy", "top_k"), default="greedy"
    )
    _add_top_k(sub, 10)
    sub.add_argument("--temperature", type=float, default=1.0)
    sub.add_argument("--seed", type=int, default=None)

    sub = commands.add_parser(
        "export",
        help="Export a model as a SavedModel, ONNX or LiteRT file.",
        description="Writes the model with the preprocessing inside: "
        "images as uint8 pixels, token ids of any length up to the "
        "sequence length, a dynamic batch. A run's --output-dir is "
        "exported as a SavedModel of probabilities from any backend; a "
        ".keras file or a preset folder (keras-hub's or timm's) in any "
        "--format from the backends Keras can make it from "
        "(keras_gmlp.export.export).",
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
        help="A preset name or folder, a run's --output-dir or a .keras file.",
    )
    return parser


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
    """Runs `keras-gmlp`; returns the exit status (0).

    Run as the program (`argv` `None`), a training command first calls
    `keras_gmlp.kernels.configure_training_process()`: under JAX each
    step then reuses the memory the last one freed; under TensorFlow the
    XLA functions are compiled with the jobs' flags (512-bit vectors on a
    CPU with AVX-512, no YNNPACK fusions) and each op runs on its share of
    the cores, for the backbones' two chains. Every other command first
    calls `keras_gmlp.kernels.compile_jax_draws_once()` (part of those
    settings): under JAX, building a model then compiles its initializers'
    draws once per distribution, not once per shape.

    Args:
        argv: list of str or `None`. The arguments after the program
            name. Defaults to `sys.argv[1:]`.
    """
    args = build_parser().parse_args(argv)
    if argv is None:
        from keras_gmlp import kernels

        if args.handler is _train:
            kernels.configure_training_process()
        else:
            kernels.compile_jax_draws_once()
    args.handler(args)
    return 0


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
        raise SystemExit(
            f"keras-gmlp predict: {args.run_dir!r} holds a {job} run; "
            f"{flag} needs an {expected} run."
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

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            path = export.export(
                args.model,
                args.export_dir,
                format=args.format,
                gelu=args.gelu,
                activation=activation,
            )
        for warning in caught:
            if "tanh" in str(warning.message):
                print(warning.message, file=sys.stderr)
    print(path)


def _info(args):
    from keras_gmlp.workflows import inspection

    _print_json(inspection.info(args.name))


def _print_json(value):
    print(json.dumps(value, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
