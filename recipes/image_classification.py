"""Trains a gMLP image classifier: tf.data in, results, model and plots out.

Quick start (offline, a few minutes on two CPU cores, >= 97 % held-out):

    python recipes/image_classification.py --dataset digits \
        --output-dir runs/digits

CIFAR-10 with the paper's recipe (tfds, or the python/binary batches in
--data-dir), and ImageNet on two GPUs:

    python recipes/image_classification.py --dataset cifar10 \
        --data-dir ~/data/cifar --preset gmlp_s4_32 --output-dir runs/c10
    python recipes/image_classification.py --dataset imagenet2012 \
        --data-dir ~/data/imagenet --preset gmlp_s16_224 --strategy auto

Several processes (hosts) train together through `TF_CONFIG` (TensorFlow)
or `KERAS_DISTRIBUTION_JOB_ADDRESSES`, `KERAS_DISTRIBUTION_NUM_PROCESSES`
and `KERAS_DISTRIBUTION_PROCESS_ID` (JAX): every process runs the same
command; see `keras_gmlp/training/distribution.py`.

Started again with the same command after an interruption (even
`kill -9`), a run continues from its last completed epoch.

results.json records, per block, how local the learned spatial weights are
(`keras_gmlp.plots.spatial_locality`: below 1, each token's filter weighs
nearby patches more; about 1, no preference).

Writes to --output-dir: results.json, history.json, model.keras,
best.keras, last.keras, saved_model/ (uint8 images -> probabilities),
curves.png, spatial_filters.png, tensorboard/.
"""

import argparse
import os

# PyTorch's OpenMP threads spin while they wait; beside tf.data's threads on
# a CPU host that made the torch backend's training steps 30 times slower
# here (2 cores). Passive waiting avoids it; it must be set before torch is
# imported, and the environment's own value wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import keras

from keras_gmlp import models
from keras_gmlp.training import arguments
from keras_gmlp.training.callbacks import EpochEndHook
from keras_gmlp.training.optimizers import adamw
from keras_gmlp.training.results import write_results
from keras_gmlp.training.schedules import warmup_cosine
from keras_gmlp.training.setup import configure_run
from keras_gmlp.training.setup import fit
from keras_gmlp.training.setup import run_distribution

MODEL_FLAGS = (
    "image_size",
    "patch_size",
    "num_layers",
    "hidden_dim",
    "ffn_dim",
    "attention_dim",
    "spatial",
    "drop_path_rate",
    "dropout",
)
# The paper's recipe for the real datasets; a small fast one for digits.
PAPER_AUGMENTATION = {
    "flip": True,
    "randaugment_ops": 2,
    "randaugment_magnitude": 0.5,
    "mixup": 0.8,
    "cutmix": 1.0,
    "switch_probability": 0.5,
    "random_erasing": 0.0,
    "translate": 0.0,
    "label_smoothing": 0.1,
}
DATASET_DEFAULTS = {
    "digits": {
        "model": {
            "image_size": 16,
            "patch_size": 4,
            "num_layers": 4,
            "hidden_dim": 64,
            "ffn_dim": 256,
        },
        "epochs": 20,
        "per_replica_batch_size": 64,
        "learning_rate": 3e-3,
        "learning_rate_batch_size": 64,
        "warmup": 0.05,
        "flip": False,
        "randaugment_ops": 0,
        "mixup": 0.0,
        "cutmix": 0.0,
        "translate": 0.1,
        "crop_padding": 0,
        "label_smoothing": 0.1,
    },
    "cifar": {
        "preset": "gmlp_s4_32",
        "epochs": 300,
        "per_replica_batch_size": 128,
        "learning_rate": 1e-3,
        "learning_rate_batch_size": 512,
        "warmup": 0.05,
        "crop_padding": 4,
        **PAPER_AUGMENTATION,
    },
    "imagenet": {
        "preset": "gmlp_s16_224",
        "epochs": 300,
        "per_replica_batch_size": 128,
        "learning_rate": 1e-3,
        "learning_rate_batch_size": 4096,
        "warmup": 10000,
        "crop_padding": 0,
        "random_resized_crop": True,
        **PAPER_AUGMENTATION,
    },
}


def build_parser():
    """The recipe's flags: the shared ones plus data, model, augmentation."""
    parser = arguments.common_parser(
        "Train a gMLP image classifier (Liu et al. 2021, arXiv 2105.08050).",
        epochs=None,
        per_replica_batch_size=None,
        learning_rate=None,
        warmup=None,
    )
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset",
        default="digits",
        help="digits | cifar10 | cifar100 | imagenet2012 | folder:PATH",
    )
    data.add_argument(
        "--data-dir",
        default=None,
        help="Local files in their native format, or the tensorflow-"
        "datasets data folder.",
    )
    data.add_argument(
        "--label-offset",
        type=int,
        default=None,
        help="Subtracted from TFRecord labels (default 1 for ImageNet).",
    )
    model = parser.add_argument_group("model (override the preset)")
    model.add_argument("--preset", default=None)
    model.add_argument("--image-size", type=arguments.positive_int)
    model.add_argument("--patch-size", type=arguments.positive_int)
    model.add_argument("--num-layers", type=arguments.positive_int)
    model.add_argument("--hidden-dim", type=arguments.positive_int)
    model.add_argument("--ffn-dim", type=arguments.positive_int)
    model.add_argument("--attention-dim", type=arguments.positive_int)
    model.add_argument("--spatial", choices=("dense", "toeplitz"))
    model.add_argument("--drop-path-rate", type=arguments.probability)
    model.add_argument("--dropout", type=arguments.probability)
    augment = parser.add_argument_group("augmentation and loss")
    augment.add_argument("--label-smoothing", type=arguments.probability)
    augment.add_argument("--flip", action=_BooleanFlag, default=None, nargs=0)
    augment.add_argument("--crop-padding", type=int)
    augment.add_argument("--translate", type=arguments.probability)
    augment.add_argument("--randaugment-ops", type=int)
    augment.add_argument("--randaugment-magnitude", type=arguments.probability)
    augment.add_argument("--mixup", type=arguments.non_negative_float)
    augment.add_argument("--cutmix", type=arguments.non_negative_float)
    augment.add_argument("--switch-probability", type=arguments.probability)
    augment.add_argument("--random-erasing", type=arguments.probability)
    output = parser.add_argument_group("outputs")
    output.add_argument("--no-export", action="store_true")
    output.add_argument("--no-plots", action="store_true")
    return parser


class _BooleanFlag(argparse.Action):
    """`--flip` / `--no-flip`."""

    def __init__(self, option_strings, dest, **kwargs):
        option_strings = option_strings + [
            option.replace("--", "--no-", 1) for option in option_strings
        ]
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, not option_string.startswith("--no-"))


def dataset_family(name):
    if name == "digits":
        return "digits"
    if name.startswith("cifar"):
        return "cifar"
    return "imagenet"


def resolve_arguments(args):
    """Fills the flags left unset from the dataset's defaults."""
    defaults = dict(DATASET_DEFAULTS[dataset_family(args.dataset)])
    model_defaults = defaults.pop("model", {})
    if args.preset is None and "preset" in defaults:
        args.preset = defaults["preset"]
    defaults.pop("preset", None)
    if args.preset is None:
        for key, value in model_defaults.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    base = {
        "epochs": 10,
        "per_replica_batch_size": 64,
        "learning_rate": 1e-3,
        "warmup": 0.05,
        "random_resized_crop": False,
        "randaugment_magnitude": 0.5,
        "switch_probability": 0.5,
        "random_erasing": 0.0,
        "dropout": None,
    }
    for key, value in {**base, **defaults}.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    return args


def model_config(args, data):
    """The builder's keywords: preset, then flags; classes from the data."""
    config = {
        key: getattr(args, key)
        for key in MODEL_FLAGS
        if getattr(args, key) is not None
    }
    config["num_classes"] = data.num_classes
    config["num_channels"] = data.num_channels
    return config


def augment_config(args):
    from keras_gmlp.data.augment import AugmentConfig

    return AugmentConfig(
        flip=args.flip,
        crop_padding=args.crop_padding,
        random_resized_crop=args.random_resized_crop,
        translate=args.translate,
        randaugment_ops=args.randaugment_ops,
        randaugment_magnitude=args.randaugment_magnitude,
        mixup=args.mixup,
        cutmix=args.cutmix,
        switch_probability=args.switch_probability,
        random_erasing=args.random_erasing,
    )


def main(argv=None, callbacks=None):
    """Runs the recipe; returns the results written to results.json.

    Args:
        argv: list of str or `None`. Command-line arguments. Defaults to
            `sys.argv[1:]`.
        callbacks: list of `keras.callbacks.Callback` or `None`. Extra
            callbacks for `model.fit`.
    """
    args = resolve_arguments(build_parser().parse_args(argv))
    # Devices and the strategy come first: TensorFlow's multi-worker and
    # logical devices must be set before it runs anything.
    distribution = run_distribution(args)
    configure_run(args)
    from keras_gmlp.data import images

    data = images.load_images(args.dataset, args.data_dir, args.label_offset)
    config = model_config(args, data)
    batch_size = arguments.global_batch_size(args, distribution.num_replicas)
    learning_rate = arguments.scaled_learning_rate(args, batch_size)

    with distribution.scope():
        model = models.image_classifier(args.preset, **config)
        if args.mixed_precision != "none":
            # Keras' advice for mixed precision: float32 outputs, for a
            # stable loss (and TensorFlow's top-k metric needs them): the
            # same task with a float32 head.
            model = type(model)(
                backbone=model.backbone,
                num_classes=model.num_classes,
                dropout=model.dropout,
                head_dtype="float32",
                name=model.name,
            )
    image_size = tuple(model.inputs[0].shape[1:3])
    augment = augment_config(args)
    train = images.batches(
        data, "train", batch_size, image_size, True, augment, seed=args.seed
    )
    validation = images.batches(
        data,
        "validation",
        batch_size,
        image_size,
        False,
        drop_remainder=distribution.num_replicas > 1,
    )
    # The training data repeats and an epoch is a number of steps: the
    # schedule's length is exact even when corrupt images are skipped, and
    # the shuffle buffer is filled once, not every epoch.
    steps_per_epoch = args.steps_per_epoch or data.num_train // batch_size
    train = train.repeat()
    total_steps = steps_per_epoch * args.epochs
    schedule = warmup_cosine(
        learning_rate, total_steps, arguments.warmup_steps(args, total_steps)
    )
    with distribution.scope():
        model.compile(
            optimizer=adamw(
                schedule, args.weight_decay, args.clipnorm, model=model
            ),
            loss=keras.losses.CategoricalCrossentropy(
                from_logits=True, label_smoothing=args.label_smoothing
            ),
            metrics=[
                keras.metrics.CategoricalAccuracy(name="accuracy"),
                keras.metrics.TopKCategoricalAccuracy(
                    k=min(5, data.num_classes), name="top5_accuracy"
                ),
            ],
            jit_compile=arguments.jit_compile(args),
        )
    print(
        f"{data.name} from {data.source}: {data.num_train} training and "
        f"{data.num_validation} held-out images, {data.num_classes} classes; "
        f"{model.count_params():,} parameters; {distribution}; global batch "
        f"{batch_size}, peak learning rate {learning_rate:g}, "
        f"{total_steps} steps.",
        flush=True,
    )
    # Corrupt records skipped in one full pass over each split (the
    # counters keep counting on later passes of uncached splits).
    skipped = {}
    count_skips = EpochEndHook(
        lambda epoch, logs: skipped or skipped.update(data.skipped())
    )
    history, wall_time = fit(
        model,
        train,
        validation,
        epochs=args.epochs,
        output_dir=args.output_dir,
        distribution=distribution,
        steps_per_epoch=steps_per_epoch,
        tensorboard=not args.no_tensorboard,
        callbacks=[count_skips] + (callbacks or []),
        verbose=args.verbose,
    )
    if not distribution.is_chief:
        return None
    outputs = save_outputs(args, model, data, image_size)
    from keras_gmlp import plots

    # Figure 3 as a number: below 1, W's rows weigh tokens near their own.
    locality = plots.block_locality(model, plots.patch_grid(model))
    metrics = {
        "val_accuracy": history["val_accuracy"][-1],
        "val_top5_accuracy": history["val_top5_accuracy"][-1],
        "val_loss": history["val_loss"][-1],
        "best_val_accuracy": max(history["val_accuracy"]),
        "parameters": model.count_params(),
    }
    counts = {
        "train_examples": data.num_train,
        "validation_examples": data.num_validation,
        "skipped_records": skipped or data.skipped(),
        "validation_examples_evaluated": (
            data.num_validation // batch_size * batch_size
            if distribution.num_replicas > 1
            else data.num_validation
        ),
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps,
        "global_batch_size": batch_size,
    }
    results = write_results(
        args.output_dir,
        args,
        history,
        metrics,
        wall_time,
        distribution=distribution,
        counts=counts,
        extra={
            "dataset": {"name": data.name, "source": data.source},
            "model_config": {"preset": args.preset, **config},
            "peak_learning_rate": learning_rate,
            "outputs": outputs,
            "spatial_locality": locality,
        },
    )
    print(
        f"val_accuracy {metrics['val_accuracy']:.4f}, val_top5_accuracy "
        f"{metrics['val_top5_accuracy']:.4f}, {wall_time:.0f} s, skipped "
        f"records {counts['skipped_records']}; outputs in {args.output_dir}",
        flush=True,
    )
    return results


def save_outputs(args, model, data, image_size):
    """Writes model.keras, the SavedModel and the plots; returns paths."""
    from keras_gmlp.data import images

    outputs = {"model": os.path.join(args.output_dir, "model.keras")}
    model.save(outputs["model"])
    if not args.no_export:
        from keras_gmlp.export import export_saved_model

        outputs["saved_model"] = export_saved_model(
            model,
            os.path.join(args.output_dir, "saved_model"),
            input_dtype="uint8",
            preprocessing=[
                keras.layers.Rescaling(
                    images.PIXEL_SCALE, offset=images.PIXEL_OFFSET
                )
            ],
        )
    if not args.no_plots:
        from keras_gmlp import plots
        from keras_gmlp.training.callbacks import HISTORY_FILE
        from keras_gmlp.training.callbacks import read_history_records
        from keras_gmlp.training.callbacks import records_to_history

        history = records_to_history(
            read_history_records(os.path.join(args.output_dir, HISTORY_FILE))
        )
        outputs["curves"] = os.path.join(args.output_dir, "curves.png")
        plots.plot_history(history, outputs["curves"], title=data.name)
        patch = model.get_layer("stem").patch_size
        grid = (image_size[0] // patch[0], image_size[1] // patch[1])
        outputs["spatial_filters"] = os.path.join(
            args.output_dir, "spatial_filters.png"
        )
        plots.plot_spatial_filters(model, grid, outputs["spatial_filters"])
    return outputs


if __name__ == "__main__":
    main()
