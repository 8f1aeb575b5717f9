"""Fine-tunes a pretrained gMLP (or trains one from scratch) to classify text.

Data: a tensorflow-datasets dataset (`--tfds-name glue/sst2`,
`imdb_reviews`, `glue/mnli` ...) or CSV/TSV files with a text column, an
optional second text column (sentence pairs, packed
`[CLS] a [SEP] b [SEP]`) and a label column. The classifier predicts from
the first (`[CLS]`) token, as in the paper. Reports accuracy, and F1 of
class 1 for binary tasks, on the validation split.

Usage:

```
python recipes/text_classification.py --pretrained runs/gmlp_tiny \\
    --train-file train.csv --validation-file valid.csv \\
    --text-column text --label-column label --output-dir runs/clf
python recipes/text_classification.py --tfds-name glue/sst2 \\
    --preset gmlp_tiny --vocabulary vocabulary.txt --output-dir runs/sst2
```
"""

import csv
import json
import os
import sys

import keras
import numpy as np

from keras_gmlp.generation import model_sequence_length
from keras_gmlp.models import text_classifier
from keras_gmlp.training import adamw
from keras_gmlp.training import common_parser
from keras_gmlp.training import configure_run
from keras_gmlp.training import fit
from keras_gmlp.training import global_batch_size
from keras_gmlp.training import jit_compile
from keras_gmlp.training import run_distribution
from keras_gmlp.training import scaled_learning_rate
from keras_gmlp.training import warmup_linear
from keras_gmlp.training import warmup_steps
from keras_gmlp.training import write_results
from keras_gmlp.training.arguments import positive_int
from keras_gmlp.training.arguments import probability

VOCABULARY_FILE = "vocabulary.txt"
LABELS_FILE = "labels.json"
VALIDATION_SPLITS = ("validation", "validation_matched", "test")
PAIR_FEATURES = (
    ("premise", "hypothesis"),
    ("sentence1", "sentence2"),
    ("question", "sentence"),
    ("question1", "question2"),
)


def build_parser():
    """The recipe's flags: the shared ones and the classification ones."""
    parser = common_parser(
        "Fine-tunes a pretrained gMLP, or trains one, to classify text.",
        epochs=3,
        per_replica_batch_size=32,
        learning_rate=1e-4,
        weight_decay=0.01,
        warmup=0.1,
        output_dir="runs/text_classification",
    )
    data = parser.add_argument_group("data")
    data.add_argument("--tfds-name", help="e.g. glue/sst2, imdb_reviews.")
    data.add_argument("--data-dir", help="tensorflow-datasets data folder.")
    data.add_argument("--train-split", default="train")
    data.add_argument(
        "--validation-split",
        help=f"tfds split to evaluate (default: the first of "
        f"{VALIDATION_SPLITS} the dataset has).",
    )
    data.add_argument("--train-file", help="CSV/TSV file of training rows.")
    data.add_argument("--validation-file", help="CSV/TSV file to evaluate.")
    data.add_argument(
        "--text-column", help="Text column or tfds feature (found if unset)."
    )
    data.add_argument(
        "--text-b-column", help="Second text of sentence pairs (optional)."
    )
    data.add_argument("--label-column", default="label")
    data.add_argument("--shuffle-buffer", type=int, default=10_000)
    model = parser.add_argument_group("model")
    model.add_argument(
        "--pretrained",
        help="Folder of a masked-LM run (recipes/masked_lm.py): its "
        "vocabulary and encoder weights are used.",
    )
    model.add_argument("--preset", default="gmlp_tiny")
    model.add_argument("--vocabulary", help="Vocabulary file (from scratch).")
    model.add_argument("--vocabulary-size", type=positive_int)
    model.add_argument("--sequence-length", type=positive_int, default=128)
    model.add_argument("--num-layers", type=positive_int)
    model.add_argument("--hidden-dim", type=positive_int)
    model.add_argument("--ffn-dim", type=positive_int)
    model.add_argument("--attention-dim", type=positive_int)
    model.add_argument("--dropout", type=probability, default=0.1)
    model.add_argument("--cased", action="store_true")
    return parser


class LabelledRows:
    """Rows of a labelled text task, read from CSV/TSV files or tfds.

    Attributes:
        texts: list of str. First texts.
        texts_b: list of str or `None`. Second texts of sentence pairs.
        labels: int array.
        skipped: int. Rows dropped (missing or empty fields, unknown
            labels, bytes that are not UTF-8 are replaced and counted in
            `replaced`).
    """

    def __init__(self, texts, texts_b, labels, skipped=0, replaced=0):
        self.texts = texts
        self.texts_b = texts_b
        self.labels = np.asarray(labels, "int32")
        self.skipped = skipped
        self.replaced = replaced

    def __len__(self):
        return len(self.labels)


def read_table(path, text_column, text_b_column, label_column, label_ids):
    """Reads a CSV (or, for `.tsv`, tab-separated) file of labelled rows.

    Args:
        path: str. The file, with a header row.
        text_column: str. Column of the text.
        text_b_column: str or `None`. Column of the second text.
        label_column: str. Column of the label.
        label_ids: dict from label to id, or `None` to make it from this
            file (labels sorted, numerically when they are all integers).

    Returns:
        `(LabelledRows, label_ids)`.
    """
    delimiter = "\t" if path.lower().endswith((".tsv", ".tab")) else ","
    raw_rows, skipped, replaced = [], 0, 0
    with open(path, newline="", encoding="utf-8", errors="replace") as file:
        reader = csv.DictReader(file, delimiter=delimiter)
        columns = [text_column, text_b_column, label_column]
        missing = [
            c for c in columns if c and c not in (reader.fieldnames or [])
        ]
        if missing:
            raise ValueError(
                f"{path!r} has no column {missing}; its columns are "
                f"{reader.fieldnames}."
            )
        for row in reader:
            values = [(row.get(c) or "").strip() if c else "" for c in columns]
            if (
                not values[0]
                or not values[2]
                or (text_b_column and not values[1])
            ):
                skipped += 1
                continue
            if any("\ufffd" in value for value in values):
                replaced += 1
            raw_rows.append(values)
    if label_ids is None:
        names = sorted({row[2] for row in raw_rows})
        if all(name.lstrip("-").isdigit() for name in names):
            names = sorted(names, key=int)
        label_ids = {name: index for index, name in enumerate(names)}
    texts, texts_b, labels = [], [], []
    for text_a, text_b, label in raw_rows:
        if label not in label_ids:
            skipped += 1
            continue
        texts.append(text_a)
        texts_b.append(text_b)
        labels.append(label_ids[label])
    if not labels:
        raise ValueError(
            f"{path!r} has no usable row ({skipped} skipped); expected rows "
            f"with {text_column!r} and {label_column!r}."
        )
    rows = LabelledRows(
        texts, texts_b if text_b_column else None, labels, skipped, replaced
    )
    return rows, label_ids


def read_tfds(name, split, data_dir, text_column, text_b_column, label_column):
    """Reads a labelled tfds split; returns `(LabelledRows, label_ids)`."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    dataset, info = tfds.load(
        name, split=split, data_dir=data_dir, with_info=True
    )
    if label_column not in info.features:
        raise ValueError(
            f"{name!r} has no feature {label_column!r}; its features are "
            f"{sorted(info.features)}."
        )
    strings = [
        key
        for key, feature in info.features.items()
        if getattr(feature, "dtype", None) == tf.string
    ]
    if text_column is None:
        pairs = [p for p in PAIR_FEATURES if set(p) <= set(strings)]
        text_column, text_b_column = pairs[0] if pairs else (strings[0], None)
    texts, texts_b, labels, skipped = [], [], [], 0
    for example in dataset.as_numpy_iterator():
        label = int(example[label_column])
        if label < 0:  # GLUE test splits have no labels.
            skipped += 1
            continue
        texts.append(example[text_column].decode("utf-8", "replace"))
        if text_b_column:
            texts_b.append(example[text_b_column].decode("utf-8", "replace"))
        labels.append(label)
    if not labels:
        raise ValueError(
            f"The {split!r} split of {name!r} has no labelled example."
        )
    names = info.features[label_column].names
    rows = LabelledRows(texts, texts_b if text_b_column else None, labels)
    rows.skipped = skipped
    return rows, {name: index for index, name in enumerate(names)}


def load_data(args):
    """`(train_rows, validation_rows, label_names)` for the flags."""
    if args.tfds_name:
        import tensorflow_datasets as tfds

        split = args.validation_split
        if split is None:
            # The splits are known once the dataset is prepared (or its
            # metadata is); before that, "validation" is tried.
            builder = tfds.builder(args.tfds_name, data_dir=args.data_dir)
            known = list(builder.info.splits) or list(VALIDATION_SPLITS)
            available = [s for s in VALIDATION_SPLITS if s in known]
            if not available:
                raise ValueError(
                    f"{args.tfds_name!r} has none of the splits "
                    f"{VALIDATION_SPLITS} (it has {known}); pass "
                    "--validation-split."
                )
            split = available[0]
        columns = (args.text_column, args.text_b_column, args.label_column)
        train, label_ids = read_tfds(
            args.tfds_name, args.train_split, args.data_dir, *columns
        )
        validation, _ = read_tfds(
            args.tfds_name, split, args.data_dir, *columns
        )
    elif args.train_file and args.validation_file:
        columns = (
            args.text_column or "text",
            args.text_b_column,
            args.label_column,
        )
        train, label_ids = read_table(args.train_file, *columns, None)
        validation, _ = read_table(args.validation_file, *columns, label_ids)
    else:
        raise ValueError(
            "Expected data: --tfds-name NAME, or --train-file and "
            "--validation-file."
        )
    names = sorted(label_ids, key=label_ids.get)
    return train, validation, names


def make_dataset(rows, tokenizer, sequence_length, batch_size, shuffle, seed):
    """Packs `[CLS] a [SEP] (b [SEP])` token ids; batches of `(ids, label)`."""
    import keras_hub
    import tensorflow as tf

    from keras_gmlp.data import text

    ids = text.special_ids(tokenizer)
    packer = keras_hub.layers.MultiSegmentPacker(
        sequence_length=sequence_length,
        start_value=ids[text.CLS],
        end_value=ids[text.SEP],
        pad_value=ids[text.PAD],
    )
    columns = (
        (rows.texts,)
        if rows.texts_b is None
        else (
            rows.texts,
            rows.texts_b,
        )
    )
    dataset = tf.data.Dataset.from_tensor_slices((columns, rows.labels))
    if shuffle:
        dataset = dataset.shuffle(len(rows), seed=seed)

    def pack(texts, labels):
        segments = tuple(tokenizer.tokenize(t) for t in texts)
        token_ids, _ = packer(segments)
        return token_ids, labels

    dataset = dataset.batch(batch_size)
    dataset = dataset.map(pack, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def prepare_vocabulary(args, train):
    """The run's vocabulary: saved, pretrained, given or learnt."""
    from keras_gmlp.data import text

    path = os.path.join(args.output_dir, VOCABULARY_FILE)
    if os.path.exists(path):
        return text.load_vocabulary(path)
    if args.pretrained:
        vocabulary = text.load_vocabulary(
            os.path.join(args.pretrained, VOCABULARY_FILE)
        )
    elif args.vocabulary:
        vocabulary = text.load_vocabulary(args.vocabulary)
    else:
        size = args.vocabulary_size or 8192
        texts = list(train.texts) + list(train.texts_b or [])
        vocabulary = text.train_vocabulary(
            texts, size, lowercase=not args.cased
        )
    os.makedirs(args.output_dir, exist_ok=True)
    text.save_vocabulary(vocabulary, path)
    return vocabulary


def build_model(args, vocabulary_size, num_classes):
    """The classifier: over the pretrained encoder, or from scratch."""
    if args.pretrained:
        path = os.path.join(args.pretrained, "masked_lm.keras")
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"No masked_lm.keras in {args.pretrained!r}; expected the "
                "--output-dir of a gMLP run of recipes/masked_lm.py."
            )
        pretrained = keras.saving.load_model(path, compile=False)
        length = model_sequence_length(pretrained)
        if length is not None and args.sequence_length > length:
            raise ValueError(
                f"--sequence-length {args.sequence_length} is longer than "
                f"the pretrained model's sequence_length {length}."
            )
        return text_classifier(
            encoder=pretrained, num_classes=num_classes, dropout=args.dropout
        )
    sizes = {
        "num_layers": args.num_layers,
        "hidden_dim": args.hidden_dim,
        "ffn_dim": args.ffn_dim,
        "attention_dim": args.attention_dim,
    }
    return text_classifier(
        args.preset,
        vocabulary_size=vocabulary_size,
        sequence_length=args.sequence_length,
        num_classes=num_classes,
        dropout=args.dropout,
        **{k: v for k, v in sizes.items() if v is not None},
    )


def binary_f1(labels, predictions):
    """F1 of class 1."""
    true_positive = np.sum((predictions == 1) & (labels == 1))
    predicted = np.sum(predictions == 1)
    actual = np.sum(labels == 1)
    if true_positive == 0:
        return 0.0
    precision = true_positive / predicted
    recall = true_positive / actual
    return float(2 * precision * recall / (precision + recall))


def main(argv=None):
    """Runs the recipe; returns the results dict."""
    args = build_parser().parse_args(argv)
    from keras_gmlp.data import text

    # The strategy comes first: TensorFlow's multi-worker set-up and
    # logical devices must precede anything TensorFlow runs.
    distribution = run_distribution(args)
    configure_run(args)
    if args.pretrained:
        config_path = os.path.join(args.pretrained, "run_config.json")
        if os.path.exists(config_path):
            with open(config_path) as file:
                args.cased = json.load(file).get("cased", args.cased)
    train, validation, label_names = load_data(args)
    if len(label_names) < 2:
        raise ValueError(
            f"The training data has the single label {label_names}; "
            "expected at least two classes."
        )
    vocabulary = prepare_vocabulary(args, train)
    tokenizer = text.make_tokenizer(vocabulary, lowercase=not args.cased)
    with open(os.path.join(args.output_dir, LABELS_FILE), "w") as file:
        json.dump(label_names, file)
    batch_size = global_batch_size(args, distribution.num_replicas)
    steps_per_epoch = args.steps_per_epoch or -(-len(train) // batch_size)
    total_steps = args.epochs * steps_per_epoch
    with distribution.scope():
        model = build_model(args, len(vocabulary), len(label_names))
        schedule = warmup_linear(
            scaled_learning_rate(args, batch_size),
            total_steps,
            warmup_steps(args, total_steps),
        )
        model.compile(
            optimizer=adamw(
                schedule,
                weight_decay=args.weight_decay,
                global_clipnorm=args.clipnorm,
                model=model,
            ),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            jit_compile=jit_compile(args),
        )
    start = f"pretrained {args.pretrained}" if args.pretrained else "scratch"
    print(
        f"{len(train)} training and {len(validation)} validation examples, "
        f"{len(label_names)} classes; {model.count_params():,} parameters; "
        f"from {start}."
    )
    train_data = make_dataset(
        train, tokenizer, args.sequence_length, batch_size, True, args.seed
    )
    if args.steps_per_epoch:
        train_data = train_data.repeat()
    validation_data = make_dataset(
        validation, tokenizer, args.sequence_length, batch_size, False, None
    )
    history, wall_time = fit(
        model,
        train_data,
        validation_data,
        epochs=args.epochs,
        output_dir=args.output_dir,
        distribution=distribution,
        steps_per_epoch=args.steps_per_epoch,
        monitor="val_accuracy",
        mode="max",
        tensorboard=not args.no_tensorboard,
        verbose=args.verbose,
    )
    logits = model.predict(validation_data, verbose=0)
    predictions = np.argmax(logits, axis=-1)
    metrics = {
        "val_accuracy": float(np.mean(predictions == validation.labels)),
        "val_loss": history["val_loss"][-1],
    }
    if len(label_names) == 2:
        metrics["val_f1"] = binary_f1(validation.labels, predictions)
    results = write_results(
        args.output_dir,
        args,
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
            "pretrained": args.pretrained,
            "steps": total_steps,
        },
    )
    print(json.dumps(metrics, indent=1))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
