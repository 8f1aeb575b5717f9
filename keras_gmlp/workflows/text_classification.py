"""Text classification: flags -> config -> rows -> classifier -> fit.

`keras-gmlp finetune` (and `recipes/text_classification.py`) run
`run(config)`: labelled rows from CSV/TSV files or tfds
(`keras_gmlp.data.labelled_text`), a `GMLPTextClassifier` over the
backbone and tokenizer of a pretraining run's preset (or from scratch,
with a vocabulary given or learnt), AdamW with warmup and linear decay,
the resumable fit; accuracy, and F1 of class 1 for binary tasks. The
task's preprocessor (`GMLPTextClassifierPreprocessor`: WordPiece, then
`[CLS] a [SEP] (b [SEP])`) turns the raw texts into token ids inside
`fit`, `evaluate` and `predict`, as when serving. The run is saved as a
preset folder (`preset/`). `evaluate_run` scores a run again;
`classify_text` classifies a sentence.
"""

import dataclasses
import json
import os

import keras
import numpy as np

from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.gmlp_text.text_metrics import binary_f1
from keras_gmlp.optimizers.schedules import warmup_linear
from keras_gmlp.training import files
from keras_gmlp.training.callbacks import BEST_CHECKPOINT
from keras_gmlp.training.callbacks import LAST_CHECKPOINT
from keras_gmlp.training.results import write_results
from keras_gmlp.training.run_config import TextClassificationConfig
from keras_gmlp.workflows import flags
from keras_gmlp.workflows import predictions
from keras_gmlp.workflows import run_folder
from keras_gmlp.workflows import training_job

CONFIG_CLASS = TextClassificationConfig
JOB = "text_classification"
DESCRIPTION = flags.TEXT_CLASSIFICATION_DESCRIPTION
VOCABULARY_FILE = "vocabulary.txt"
LABELS_FILE = "labels.json"
PRESET_DIR = "preset"
DEFAULT_VOCABULARY_SIZE = flags.DEFAULT_VOCABULARY_SIZE


add_arguments = flags.add_text_classification_arguments
build_parser, config_from_argv = training_job.flag_readers(
    DESCRIPTION, CONFIG_CLASS, add_arguments
)


def pretrained_preset(path):
    """The preset folder of a pretraining run (or `path`, a preset).

    Raises:
        FileNotFoundError: when `path` holds neither.
    """
    for folder in (os.path.join(path, PRESET_DIR), path):
        if os.path.exists(os.path.join(folder, "config.json")):
            return folder
    raise FileNotFoundError(
        f"No preset in {path!r}; expected the --output-dir of a gMLP "
        "pretraining run (with a preset/ folder) or a preset folder. Runs "
        "of earlier versions saved masked_lm.keras instead: train again."
    )


def prepare_tokenizer(config, train):
    """The run's tokenizer: saved, pretrained, given or learnt.

    Its vocabulary is written to the run's folder, so a resumed run reuses
    exactly the same token ids.

    Returns:
        `(tokenizer, config)`: a `GMLPTokenizer`, and the config with the
        casing of a pretrained tokenizer.
    """
    from keras_gmlp.data import vocabulary as vocabularies
    from keras_gmlp.models import GMLPTokenizer

    path = os.path.join(config.output_dir, VOCABULARY_FILE)
    if config.pretrained:
        pretrained = GMLPTokenizer.from_preset(
            pretrained_preset(config.pretrained)
        )
        config = dataclasses.replace(config, cased=not pretrained.lowercase)
        vocabulary = pretrained.get_vocabulary()
    elif os.path.exists(path):
        vocabulary = vocabularies.load_vocabulary(path)
    elif config.vocabulary:
        vocabulary = vocabularies.load_vocabulary(config.vocabulary)
    else:
        size = config.vocabulary_size or DEFAULT_VOCABULARY_SIZE
        texts = list(train.texts) + list(train.texts_b or [])
        vocabulary = vocabularies.train_vocabulary(
            texts, size, lowercase=not config.cased
        )
    os.makedirs(config.output_dir, exist_ok=True)
    vocabularies.save_vocabulary(vocabulary, path)
    tokenizer = vocabularies.make_tokenizer(
        vocabulary, lowercase=not config.cased
    )
    return tokenizer, config


def build_model(config, tokenizer, num_classes):
    """The classifier task, with its preprocessor for raw texts.

    Over the backbone of `config.pretrained` (its trained weights), or a
    backbone of `config.preset` and the size flags from scratch.
    """
    from keras_gmlp.models import GMLPTextBackbone
    from keras_gmlp.models import GMLPTextClassifier
    from keras_gmlp.models import GMLPTextClassifierPreprocessor
    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import BACKBONE_DEFAULTS
    from keras_gmlp.models.gmlp_text.masked_lm import TEXT_DEFAULTS

    if config.pretrained:
        backbone = run_folder.load_preset(
            GMLPTextBackbone, pretrained_preset(config.pretrained)
        )
        if config.sequence_length > backbone.sequence_length:
            raise ValueError(
                f"--sequence-length {config.sequence_length} is longer than "
                f"the pretrained model's sequence_length "
                f"{backbone.sequence_length}."
            )
    else:
        resolved = resolve_config(
            "text",
            TEXT_DEFAULTS,
            config.preset,
            vocabulary_size=tokenizer.vocabulary_size(),
            sequence_length=config.sequence_length,
            **config.model_overrides(),
        )
        backbone = GMLPTextBackbone(
            **{k: resolved[k] for k in BACKBONE_DEFAULTS if k != "name"}
        )
    preprocessor = GMLPTextClassifierPreprocessor(
        tokenizer, sequence_length=config.sequence_length
    )
    return GMLPTextClassifier(
        backbone,
        num_classes=num_classes,
        preprocessor=preprocessor,
        dropout=config.dropout,
        compile=False,
    )


def run(config, callbacks=None):
    """Trains a text classifier; returns the results of `results.json`.

    Args:
        config: `TextClassificationConfig`.
        callbacks: list of `keras.callbacks.Callback` or `None`. Extra
            callbacks for `model.fit`.

    Returns:
        The results dict (`None` on a worker that is not the chief). A
        folder holding this run finished returns its
        results untrained; one holding another run is refused
        (`training_job.run_in_folder`).
    """
    distribution = training_job.start(config)
    config = with_pretrained_casing(config)
    return training_job.run_in_folder(
        JOB,
        config,
        distribution,
        lambda: train_classifier(config, distribution, callbacks),
    )


def with_pretrained_casing(config):
    """`config`, with the casing of its pretrained run's tokenizer."""
    if not config.pretrained:
        return config
    from keras_gmlp.models import GMLPTokenizer

    tokenizer = GMLPTokenizer.from_preset(pretrained_preset(config.pretrained))
    return dataclasses.replace(config, cased=not tokenizer.lowercase)


def train_classifier(config, distribution, callbacks=None):
    """Trains the classifier of a config in its claimed folder.

    Args:
        config: `TextClassificationConfig`, with its pretrained casing.
        distribution: `keras_gmlp.training.Distribution`.
        callbacks: list of `keras.callbacks.Callback` or `None`.

    Returns:
        The results dict (`None` on a worker that is not the chief).
    """
    from keras_gmlp.data.labelled_text import load_labelled_text
    from keras_gmlp.data.labelled_text import text_batches

    train, validation, label_names = load_labelled_text(
        tfds_name=config.tfds_name,
        data_dir=config.data_dir,
        train_split=config.train_split,
        validation_split=config.validation_split,
        train_file=config.train_file,
        validation_file=config.validation_file,
        text_column=config.text_column,
        text_b_column=config.text_b_column,
        label_column=config.label_column,
        allow_skipped=config.allow_skipped,
    )
    tokenizer, config = prepare_tokenizer(config, train)
    if distribution.is_chief:
        files.write_json(
            os.path.join(config.output_dir, LABELS_FILE), label_names
        )
        run_folder.write_run_config(
            config.output_dir, JOB, config, labels=label_names
        )
    batch_size = config.global_batch_size(distribution.num_replicas)
    steps_per_epoch = config.steps_per_epoch or -(-len(train) // batch_size)
    total_steps = config.epochs * steps_per_epoch
    with distribution.scope():
        with config.remat_scope():
            model = build_model(config, tokenizer, len(label_names))
        schedule = warmup_linear(
            config.peak_learning_rate(batch_size),
            total_steps,
            config.warmup_steps(total_steps),
        )
        training_job.compile_task(
            model,
            config,
            schedule,
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )
    start = (
        f"pretrained {config.pretrained}" if config.pretrained else "scratch"
    )
    print(
        f"{len(train)} training and {len(validation)} validation examples, "
        f"{len(label_names)} classes; {model.count_params():,} parameters; "
        f"from {start}."
    )
    # Raw texts: the task's preprocessor tokenizes them inside `fit`.
    train_data = text_batches(
        train,
        batch_size,
        shuffle=True,
        seed=config.seed,
        shuffle_buffer=config.shuffle_buffer,
    )
    if config.steps_per_epoch:
        train_data = train_data.repeat()
    validation_data = text_batches(validation, batch_size)
    history, wall_time = training_job.fit_task(
        model,
        train_data,
        validation_data,
        config,
        distribution,
        config.steps_per_epoch,
        callbacks,
        monitor="val_accuracy",
        mode="max",
    )
    metrics = scores(
        model, validation_data, validation.labels, len(label_names)
    )
    metrics["val_loss"] = history["val_loss"][-1]
    if not distribution.is_chief:
        return None
    files.save_to_preset(model, os.path.join(config.output_dir, PRESET_DIR))
    results = write_results(
        config.output_dir,
        config,
        history,
        metrics,
        wall_time,
        distribution=distribution,
        counts={
            "train_examples": len(train),
            "validation_examples": len(validation),
            "skipped_rows": train.skipped + validation.skipped,
            "rows_with_replaced_bytes": train.replaced + validation.replaced,
        },
        extra={
            "labels": label_names,
            "pretrained": config.pretrained,
            "steps": total_steps,
        },
    )
    print(json.dumps(metrics, indent=1))
    return results


def scores(model, batches, labels, num_classes):
    """`val_accuracy` (and `val_f1` of class 1 for two classes)."""
    logits = model.predict(batches, verbose=0)
    predicted = np.argmax(logits, axis=-1)
    metrics = {"val_accuracy": float(np.mean(predicted == labels))}
    if num_classes == 2:
        metrics["val_f1"] = binary_f1(labels, predicted)
    return metrics


def _run_settings(run_dir):
    """`(config, labels)` of a text classification run."""
    record = run_folder.read_run_config(run_dir)
    if record["job"] != JOB:
        raise ValueError(
            f"{run_dir!r} holds a {record['job']} run; expected a text "
            "classification run (keras-gmlp finetune)."
        )
    config = TextClassificationConfig.from_dict(record["config"])
    with open(os.path.join(run_dir, LABELS_FILE)) as file:
        labels = json.load(file)
    return config, labels


def load_task(run_dir):
    """A run's classifier: its preset, else its best (or last) checkpoint."""
    from keras_gmlp.models import GMLPTextClassifier

    preset = os.path.join(run_dir, PRESET_DIR)
    if os.path.isdir(preset):
        return run_folder.load_preset(GMLPTextClassifier, preset)
    return run_folder.load_checkpoint(
        run_dir, (BEST_CHECKPOINT, LAST_CHECKPOINT)
    )


def evaluate_run(run_dir):
    """Scores a run's best checkpoint on its held-out rows again.

    A `best.keras` that cannot be read (truncated by a crash) is passed
    over for `last.keras`, with a printed line.

    Returns:
        A dict of `val_accuracy` (and `val_f1` for two classes).
    """
    from keras_gmlp.data.labelled_text import load_labelled_text
    from keras_gmlp.data.labelled_text import text_batches

    config, labels = _run_settings(run_dir)
    model = run_folder.load_checkpoint(
        run_dir, (BEST_CHECKPOINT, LAST_CHECKPOINT)
    )
    _, validation, _ = load_labelled_text(
        tfds_name=config.tfds_name,
        data_dir=config.data_dir,
        train_split=config.train_split,
        validation_split=config.validation_split,
        train_file=config.train_file,
        validation_file=config.validation_file,
        text_column=config.text_column,
        text_b_column=config.text_b_column,
        label_column=config.label_column,
        allow_skipped=config.allow_skipped,
    )
    batches = text_batches(validation, config.global_batch_size(1))
    return scores(model, batches, validation.labels, len(labels))


def classify_text(run_dir, text, text_b=None, top_k=5):
    """Classifies a text (or a pair of texts) with a run's task.

    Args:
        run_dir: str. The run's `output_dir`.
        text: str. The text.
        text_b: str or `None`. The second text of a sentence pair.
        top_k: int. Labels returned. Defaults to `5`.

    Returns:
        A list of `(label, probability)`, most likely first.
    """
    _, labels = _run_settings(run_dir)
    task = load_task(run_dir)
    texts = [text] if text_b is None else ([text], [text_b])
    # By keyword: a positional pair would read as (texts, labels).
    inputs = task.preprocessor(x=texts)
    logits = keras.ops.convert_to_numpy(task(inputs, training=False))[0]
    return predictions.top_k(logits, labels, top_k)


def export_classifier(task, export_dir, sequence_length):
    """Exports a SavedModel: token ids `(batch, sequence_length)` ->
    class probabilities.

    The padding mask is made inside (token id 0 is `[PAD]`), so the
    SavedModel takes the token ids that the task's preprocessor makes.
    """
    from keras_gmlp.export import export_saved_model
    from keras_gmlp.models import BertInputs

    token_ids = keras.Input((sequence_length,), dtype="int32", name="ids")
    padding_mask, _ = BertInputs(name="padding_mask")(token_ids)
    logits = task({"token_ids": token_ids, "padding_mask": padding_mask})
    model = keras.Model(token_ids, logits, name=f"{task.name}_token_ids")
    return export_saved_model(model, export_dir)
