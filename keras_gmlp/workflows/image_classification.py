"""Image classification: flags -> config -> data -> model -> fit -> outputs.

`keras-gmlp train-image-classifier` (and `recipes/image_classification.py`)
run `run(config)`: the dataset (`keras_gmlp.data.image_sources`), its
batches and augmentation (`keras_gmlp.data.images`), a `GMLPImageClassifier`
of the preset and overrides, AdamW with warmup and cosine decay, the
resumable fit (`keras_gmlp.training.fit`), then `model.keras`, a preset
folder (`preset/`, for `GMLPImageClassifier.from_preset`), a SavedModel
taking uint8 images, plots and `results.json` (with each block's spatial
locality). The task's preprocessor (`GMLPImageConverter`: resize, then
[0, 255] -> [-1, 1]) scales the training and held-out batches inside
`fit`, as it does in `predict` and in the SavedModel. `evaluate_run` scores
a finished run again; `predict_image` classifies an image file.
"""

import dataclasses
import os

import keras

from keras_gmlp import models
from keras_gmlp.errors import KerasGMLPError
from keras_gmlp.optimizers.schedules import warmup_cosine
from keras_gmlp.training import files
from keras_gmlp.training.callbacks import EpochEndHook
from keras_gmlp.training.results import write_results
from keras_gmlp.training.run_config import ImageClassificationConfig
from keras_gmlp.workflows import flags
from keras_gmlp.workflows import predictions
from keras_gmlp.workflows import run_folder
from keras_gmlp.workflows import training_job

CONFIG_CLASS = ImageClassificationConfig
JOB = "image_classification"
DESCRIPTION = flags.IMAGE_CLASSIFICATION_DESCRIPTION
MODEL_FILES = ("model.keras", "best.keras", "last.keras")
# The first bytes of the image files `predict_image` decodes (JPEG, PNG,
# GIF, BMP; WebP's RIFF header names WEBP at bytes 8-12).
IMAGE_SIGNATURES = (b"\xff\xd8\xff", b"\x89PNG", b"GIF8", b"BM", b"RIFF")
PRESET_DIR = "preset"


add_arguments = flags.add_image_classification_arguments
build_parser, config_from_argv = training_job.flag_readers(
    DESCRIPTION, CONFIG_CLASS, add_arguments
)


def run(config, callbacks=None):
    """Trains an image classifier; returns the results of `results.json`.

    Args:
        config: `ImageClassificationConfig`. Unset fields take the
            dataset's defaults.
        callbacks: list of `keras.callbacks.Callback` or `None`. Extra
            callbacks for `model.fit`.

    Returns:
        The results dict (`None` on a worker that is not the chief). A
        folder holding this run finished returns its results untrained;
        one holding another run is refused (`training_job.run_in_folder`).
    """
    config = with_default_learning_rate(config)
    print(describe_defaults(config), flush=True)
    config = config.resolved()
    distribution = training_job.start(config)
    return training_job.run_in_folder(
        JOB,
        config,
        distribution,
        lambda: train(config, distribution, callbacks),
    )


def train(config, distribution, callbacks=None):
    """Trains the classifier of a resolved config in its claimed folder.

    Args:
        config: `ImageClassificationConfig`, resolved.
        distribution: `keras_gmlp.training.Distribution`.
        callbacks: list of `keras.callbacks.Callback` or `None`.

    Returns:
        The results dict (`None` on a worker that is not the chief).
    """
    from keras_gmlp.data import images
    from keras_gmlp.data.image_sources import load_images

    data = load_images(config.dataset, config.data_dir, config.label_offset)
    model_config = dict(
        config.model_overrides(),
        num_classes=data.num_classes,
        num_channels=data.num_channels,
    )
    batch_size = config.global_batch_size(distribution.num_replicas)
    learning_rate = config.peak_learning_rate(batch_size)
    with distribution.scope(), config.remat_scope():
        model, description = build_model(
            config.preset,
            model_config,
            config.mixed_precision,
            config.architecture,
        )
    image_size = tuple(model.inputs[0].shape[1:3])
    # Pixels in [0, 255]: the task's preprocessor scales them in `fit`.
    train = images.batches(
        data,
        "train",
        batch_size,
        image_size,
        True,
        config.augment_config(),
        seed=config.seed,
        normalize=False,
    )
    # One replica scores every held-out image in batches of one shape
    # (one compiled test step); replicas take whole global batches.
    validation = images.batches(
        data,
        "validation",
        batch_size
        if distribution.num_replicas > 1
        else images.even_batch_size(data.num_validation, batch_size),
        image_size,
        False,
        drop_remainder=distribution.num_replicas > 1,
        normalize=False,
    )
    # The training data repeats and an epoch is a number of steps: the
    # schedule's length is exact even when corrupt images are skipped, and
    # the shuffle buffer is filled once, not every epoch.
    steps_per_epoch = config.steps_per_epoch or data.num_train // batch_size
    train = train.repeat()
    total_steps = steps_per_epoch * config.epochs
    schedule = warmup_cosine(
        learning_rate, total_steps, config.warmup_steps(total_steps)
    )
    with distribution.scope():
        training_job.compile_task(
            model,
            config,
            schedule,
            keras.losses.CategoricalCrossentropy(
                from_logits=True, label_smoothing=config.label_smoothing
            ),
            metrics=classification_metrics(data.num_classes),
        )
    if distribution.is_chief:
        run_folder.write_run_config(
            config.output_dir,
            JOB,
            config,
            class_names=data.class_names,
            model_config={"preset": config.preset, **model_config},
            model=description,
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
    # More than half of them skipped stops the run (unless
    # --allow-skipped) after the first epoch, when the counts are known.
    skipped = {}

    def check_skips(epoch, logs):
        if not skipped:
            skipped.update(data.skipped())
            data.check_skipped(config.allow_skipped)

    count_skips = EpochEndHook(check_skips)
    history, wall_time = training_job.fit_task(
        model,
        train,
        validation,
        config,
        distribution,
        steps_per_epoch,
        [count_skips] + (callbacks or []),
    )
    if not distribution.is_chief:
        return None
    outputs = save_outputs(config, model, data.name, image_size)
    from keras_gmlp import plots

    locality = None
    if config.architecture == "gmlp":
        # Figure 3 as a number: below 1, W's rows weigh tokens near their
        # own.
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
        config.output_dir,
        config,
        history,
        metrics,
        wall_time,
        distribution=distribution,
        counts=counts,
        extra={
            "dataset": {"name": data.name, "source": data.source},
            "model_config": {"preset": config.preset, **model_config},
            "model": description,
            "peak_learning_rate": learning_rate,
            "outputs": outputs,
            "spatial_locality": locality,
        },
    )
    print(
        f"val_accuracy {metrics['val_accuracy']:.4f}, val_top5_accuracy "
        f"{metrics['val_top5_accuracy']:.4f}, {wall_time:.0f} s, skipped "
        f"records {counts['skipped_records']}; outputs in "
        f"{config.output_dir}",
        flush=True,
    )
    return results


def describe_defaults(config):
    """One line: the recipe's defaults that `config.resolved()` takes, as
    the flags that would set them.

    Args:
        config: `ImageClassificationConfig`, before `resolved()`.

    Returns:
        A str.
    """
    flags = []
    for name, value in config.defaults_taken().items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else f"--no-{flag[2:]}")
        elif value is not None:
            flags.append(
                f"{flag} {value:g}"
                if isinstance(value, float)
                else f"{flag} {value}"
            )
    return (
        f"The {config.dataset_family()} recipe's defaults for the flags not "
        f"given: {' '.join(flags)} (docs/training.md, Datasets)."
    )


def with_default_learning_rate(config):
    """`config`, with its architecture's default learning rate if unset.

    The gMLP keeps the dataset's (`resolved()`); another architecture
    takes its own from `keras_gmlp.baselines.LEARNING_RATES`, for
    the dataset's `learning_rate_batch_size`.
    """
    from keras_gmlp.baselines import default_learning_rate

    if config.learning_rate is not None:
        return config
    rate = default_learning_rate(
        "image", config.architecture, config.dataset_family()
    )
    return dataclasses.replace(config, learning_rate=rate)


def build_model(
    preset, model_config, mixed_precision="none", architecture="gmlp"
):
    """The classifier task, with its preprocessor for raw images.

    `models.image_classifier(preset, **model_config)`'s backbone and head,
    with a `GMLPImageClassifierPreprocessor` whose `GMLPImageConverter`
    resizes raw images to the model's size and scales them to [-1, 1].
    Under mixed precision the head computes in float32 (Keras' advice, for
    a stable loss; TensorFlow's top-k metric needs float32 logits). With
    `architecture="vit"`, keras-hub's ViT classifier of that gMLP's
    trainable parameters (depth and MLP size searched at its width, image
    and patch size) takes the same preprocessor.

    Returns:
        `(task, description)`: the task and a dict describing it.
    """
    from keras_gmlp.baselines import canonical_architecture
    from keras_gmlp.baselines import trainable_parameters
    from keras_gmlp.models import GMLPImageClassifierPreprocessor
    from keras_gmlp.models.gmlp_image.gmlp_image_converter import (
        GMLPImageConverter,
    )

    bare = models.image_classifier(preset, **model_config)
    converter = GMLPImageConverter(image_size=bare.backbone.image_size)
    preprocessor = GMLPImageClassifierPreprocessor(converter)
    head_dtype = "float32" if mixed_precision != "none" else None
    if canonical_architecture("image", architecture) == "vit":
        return vit_like(bare, preprocessor, head_dtype)
    task = type(bare)(
        backbone=bare.backbone,
        num_classes=bare.num_classes,
        preprocessor=preprocessor,
        dropout=bare.dropout,
        head_dtype=head_dtype,
        name=bare.name,
    )
    return task, {
        "architecture": "gmlp",
        "trainable_parameters": trainable_parameters(task),
    }


def vit_like(gmlp, preprocessor, head_dtype):
    """`(task, description)`: keras-hub's ViT classifier with the trainable
    parameters of the gMLP classifier `gmlp`."""
    from keras_gmlp import baselines

    backbone = gmlp.backbone
    shape = {
        "image_size": backbone.image_size,
        "patch_size": backbone.patch_size,
        "num_channels": backbone.num_channels,
        "num_classes": gmlp.num_classes,
    }
    target = baselines.trainable_parameters(gmlp)
    size = baselines.matched_size(
        lambda layers, width, ffn: baselines.image_classifier_parameters(
            num_layers=layers, hidden_dim=width, ffn_dim=ffn, **shape
        ),
        target,
        [backbone.hidden_dim],
    )
    task = baselines.vit_image_classifier(
        num_layers=size["num_layers"],
        hidden_dim=size["hidden_dim"],
        ffn_dim=size["ffn_dim"],
        dropout=gmlp.dropout,
        preprocessor=preprocessor,
        head_dtype=head_dtype,
        **shape,
    )
    return task, {
        "architecture": "vit",
        "transformer_layers": size["num_layers"],
        "hidden_dim": size["hidden_dim"],
        "ffn_dim": size["ffn_dim"],
        "trainable_parameters": baselines.trainable_parameters(task),
        "gmlp_trainable_parameters": target,
    }


def classification_metrics(num_classes):
    """Accuracy and top-5 accuracy (top-k for fewer than 5 classes)."""
    return [
        keras.metrics.CategoricalAccuracy(name="accuracy"),
        keras.metrics.TopKCategoricalAccuracy(
            k=min(5, num_classes), name="top5_accuracy"
        ),
    ]


def save_outputs(config, model, title, image_size):
    """Writes model.keras, the preset, the SavedModel and the plots.

    Each file and folder is written under a temporary name and renamed
    into place when complete (`keras_gmlp.training.files`).

    Returns:
        A dict of the paths written.
    """
    output_dir = config.output_dir
    outputs = {"model": os.path.join(output_dir, "model.keras")}
    files.save_model(model, outputs["model"])
    outputs["preset"] = os.path.join(output_dir, PRESET_DIR)
    files.save_to_preset(model, outputs["preset"])
    if config.export:
        outputs["saved_model"] = files.write_folder(
            os.path.join(output_dir, "saved_model"),
            lambda folder: export_classifier(model, folder),
        )
    if config.plots and config.architecture == "gmlp":
        from keras_gmlp import plots
        from keras_gmlp.training.callbacks import HISTORY_FILE
        from keras_gmlp.training.callbacks import read_history_records
        from keras_gmlp.training.callbacks import records_to_history

        history = records_to_history(
            read_history_records(os.path.join(output_dir, HISTORY_FILE))
        )
        outputs["curves"] = os.path.join(output_dir, "curves.png")
        files.write_file(
            outputs["curves"],
            lambda path: plots.plot_history(history, path, title=title),
        )
        patch = model.get_layer("stem").patch_size
        grid = (image_size[0] // patch[0], image_size[1] // patch[1])
        outputs["spatial_filters"] = os.path.join(
            output_dir, "spatial_filters.png"
        )
        files.write_file(
            outputs["spatial_filters"],
            lambda path: plots.plot_spatial_filters(model, grid, path),
        )
    return outputs


def export_classifier(model, export_dir):
    """Exports a SavedModel: uint8 images -> class probabilities.

    The serving model scales the pixels with the task's image converter's
    `scale` and `offset` ([0, 255] -> [-1, 1]) in a `Rescaling` layer: the
    converter itself runs TensorFlow code that JAX cannot trace, and its
    resize is the identity on images of the model's size, which the
    SavedModel takes.
    """
    from keras_gmlp.export import export_saved_model

    converter = image_converter(model)
    scaling = keras.layers.Rescaling(
        converter.scale, offset=converter.offset, name="pixel_scaling"
    )
    return export_saved_model(
        model, export_dir, input_dtype="uint8", preprocessing=[scaling]
    )


def image_converter(model):
    """The model's `GMLPImageConverter`, or one for its input size."""
    from keras_gmlp.models.gmlp_image.gmlp_image_converter import (
        GMLPImageConverter,
    )

    preprocessor = getattr(model, "preprocessor", None)
    converter = getattr(preprocessor, "image_converter", None)
    if converter is not None:
        return converter
    return GMLPImageConverter(image_size=tuple(model.inputs[0].shape[1:3]))


def load_run_model(run_dir):
    """The trained task of a run (its preset, else its `.keras` file).

    Runs of earlier versions saved a bare model without preprocessor; a
    baseline's run (ViT) is read from its `.keras` file.
    """
    from keras_gmlp.models.gmlp_image import gmlp_image_classifier

    record = run_folder.read_run_config(run_dir)
    architecture = record["config"].get("architecture", "gmlp")
    if architecture != "gmlp":
        import keras_hub  # noqa: F401 (registers keras-hub's classes)
    preset = os.path.join(run_dir, PRESET_DIR)
    if architecture == "gmlp" and os.path.isdir(preset):
        task = gmlp_image_classifier.GMLPImageClassifier
        return run_folder.load_preset(task, preset)
    return run_folder.load_checkpoint(run_dir, MODEL_FILES)


def evaluate_run(run_dir, batch_size=None):
    """Scores a finished run's model on its held-out split again.

    Args:
        run_dir: str. The run's `output_dir`.
        batch_size: int or `None`. Defaults to the run's batch.

    Returns:
        A dict of `loss`, `accuracy` and `top5_accuracy`.
    """
    from keras_gmlp.data import images
    from keras_gmlp.data.image_sources import load_images

    config = ImageClassificationConfig.from_dict(
        run_folder.read_run_config(run_dir)["config"]
    ).resolved()
    data = load_images(config.dataset, config.data_dir, config.label_offset)
    model = load_run_model(run_dir)
    batch_size = batch_size or config.global_batch_size(1)
    validation = images.batches(
        data,
        "validation",
        images.even_batch_size(data.num_validation, batch_size),
        tuple(model.inputs[0].shape[1:3]),
        False,
        normalize=getattr(model, "preprocessor", None) is None,
    )
    model.compile(
        loss=keras.losses.CategoricalCrossentropy(
            from_logits=True, label_smoothing=config.label_smoothing
        ),
        metrics=classification_metrics(data.num_classes),
    )
    return model.evaluate(validation, return_dict=True, verbose=0)


def predict_image(run_dir, image_path, top_k=5):
    """Classifies an image file with a run's task.

    The image goes through the task's preprocessor (its image converter:
    the largest centred crop of the model's aspect ratio, resized and
    scaled to [-1, 1]), as raw images do in `task.predict`.

    Args:
        run_dir: str. The run's `output_dir`.
        image_path: str. A JPEG, PNG, BMP, GIF or WebP file.
        top_k: int. Classes returned. Defaults to `5`.

    Returns:
        A list of `(class name, probability)`, most likely first.

    Raises:
        FileNotFoundError: when `image_path` is no file.
        KerasGMLPError: when it holds no image (or a damaged one).
    """
    import tensorflow as tf

    record = run_folder.read_run_config(run_dir)
    if not os.path.isfile(image_path):
        raise FileNotFoundError(
            f"No image file {image_path!r}; expected a JPEG, PNG, BMP or "
            "GIF file."
        )
    with open(image_path, "rb") as file:
        data = file.read()
    if not data.startswith(IMAGE_SIGNATURES) or (
        data.startswith(b"RIFF") and data[8:12] != b"WEBP"
    ):
        raise KerasGMLPError(
            f"{image_path}: not an image; expected a JPEG, PNG, BMP, GIF or "
            "WebP file."
        )
    model = load_run_model(run_dir)
    channels = model.inputs[0].shape[-1]
    try:
        image = tf.io.decode_image(
            data, channels=channels, expand_animations=False
        ).numpy()[None]
    except tf.errors.InvalidArgumentError as error:
        raise KerasGMLPError(
            f"{image_path}: a damaged image TensorFlow cannot decode; "
            "expected a JPEG, PNG, BMP, GIF or WebP file."
        ) from error
    if getattr(model, "preprocessor", None) is None:
        image = image_converter(model)(image)
    logits = model.predict(image, verbose=0)[0]
    return predictions.top_k(logits, record.get("class_names"), top_k)
