"""Labelled text for classification: CSV/TSV files or tfds, then batches.

`load_labelled_text(...)` reads a task's training and held-out rows (one
text, or a pair of texts, and a label per row) from CSV/TSV files or a
tensorflow-datasets dataset such as `glue/sst2` or `glue/mnli`;
`text_batches(...)` batches the raw texts for a `GMLPTextClassifier`,
whose preprocessor packs them `[CLS] a [SEP] (b [SEP])`.

Reading tfds and making batches import TensorFlow; reading files does
not.
"""

import csv

import numpy as np

from keras_gmlp.errors import KerasGMLPError
from keras_gmlp.errors import check_skipped

VALIDATION_SPLITS = ("validation", "validation_matched", "test")
PAIR_FEATURES = (
    ("premise", "hypothesis"),
    ("sentence1", "sentence2"),
    ("question", "sentence"),
    ("question1", "question2"),
)


class LabelledRows:
    """Rows of a labelled text task, read from CSV/TSV files or tfds.

    Args:
        texts: list of str. First texts.
        texts_b: list of str or `None`. Second texts of sentence pairs.
        labels: list of int. Label ids.
        skipped: int. Rows dropped (missing or empty fields, unknown
            labels). Defaults to `0`.
        replaced: int. Rows whose bytes that are not UTF-8 were replaced
            by U+FFFD. Defaults to `0`.
    """

    def __init__(self, texts, texts_b, labels, skipped=0, replaced=0):
        self.texts = texts
        self.texts_b = texts_b
        self.labels = np.asarray(labels, "int32")
        self.skipped = skipped
        self.replaced = replaced

    def __len__(self):
        return len(self.labels)


def read_table(
    path,
    text_column,
    text_b_column,
    label_column,
    label_ids,
    allow_skipped=False,
):
    """Reads a CSV (or, for `.tsv`, tab-separated) file of labelled rows.

    Args:
        path: str. The file, with a header row.
        text_column: str. Column of the text.
        text_b_column: str or `None`. Column of the second text.
        label_column: str. Column of the label.
        label_ids: dict from label to id, or `None` to make it from this
            file (labels sorted, numerically when they are all integers).
        allow_skipped: bool. Whether to accept a file of which more than
            half of the rows are skipped (empty fields, unknown labels).
            Defaults to `False`.

    Returns:
        `(LabelledRows, label_ids)`.

    Raises:
        ValueError: for a missing column, a file without a usable row (its
            unknown labels named), or mostly skipped rows.
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
    texts, texts_b, labels, unknown = [], [], [], set()
    for text_a, text_b, label in raw_rows:
        if label not in label_ids:
            unknown.add(label)
            skipped += 1
            continue
        texts.append(text_a)
        texts_b.append(text_b)
        labels.append(label_ids[label])
    unknown_text = (
        f"; its labels {_first(unknown)} are not among the training "
        f"labels {_first(label_ids)}"
        if unknown
        else ""
    )
    if not labels:
        raise KerasGMLPError(
            f"{path!r} has no usable row ({skipped} skipped){unknown_text}; "
            f"expected rows with {text_column!r} and {label_column!r}."
        )
    check_skipped(
        path,
        skipped,
        skipped + len(labels),
        "empty fields" + (", unknown labels" if unknown else ""),
        f"rows with {text_column!r} and {label_column!r}{unknown_text}",
        allow_skipped,
    )
    rows = LabelledRows(
        texts, texts_b if text_b_column else None, labels, skipped, replaced
    )
    return rows, label_ids


def read_tfds(name, split, data_dir, text_column, text_b_column, label_column):
    """Reads a labelled tfds split.

    Args:
        name: str. The tensorflow-datasets name, e.g. `"glue/sst2"`.
        split: str. The split, e.g. `"validation"`.
        data_dir: str or `None`. The tensorflow-datasets data folder.
        text_column: str or `None`. The text feature; when `None`, a known
            pair of features (`PAIR_FEATURES`) or the first string feature.
        text_b_column: str or `None`. The second text feature.
        label_column: str. The label feature.

    Returns:
        `(LabelledRows, label_ids)`. Rows with a negative label (GLUE test
        splits) are skipped and counted.
    """
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


def default_validation_split(name, data_dir=None):
    """The first of `VALIDATION_SPLITS` that a tfds dataset has.

    Raises:
        ValueError: when the dataset has none of them.
    """
    import tensorflow_datasets as tfds

    # The splits are known once the dataset is prepared (or its metadata
    # is); before that, "validation" is tried.
    builder = tfds.builder(name, data_dir=data_dir)
    known = list(builder.info.splits) or list(VALIDATION_SPLITS)
    available = [s for s in VALIDATION_SPLITS if s in known]
    if not available:
        raise ValueError(
            f"{name!r} has none of the splits {VALIDATION_SPLITS} (it has "
            f"{known}); pass --validation-split."
        )
    return available[0]


def load_labelled_text(
    tfds_name=None,
    data_dir=None,
    train_split="train",
    validation_split=None,
    train_file=None,
    validation_file=None,
    text_column=None,
    text_b_column=None,
    label_column="label",
    allow_skipped=False,
):
    """Reads a classification task's training and held-out rows.

    Either a tensorflow-datasets dataset (`tfds_name`) or a pair of CSV/TSV
    files (`train_file`, `validation_file`). The label ids come from the
    training data (the tfds label names, or the sorted labels of the
    training file); held-out rows with another label are skipped.

    Args:
        tfds_name: str or `None`. E.g. `"glue/sst2"`, `"imdb_reviews"`.
        data_dir: str or `None`. The tensorflow-datasets data folder.
        train_split: str. The tfds training split. Defaults to `"train"`.
        validation_split: str or `None`. The tfds held-out split; defaults
            to the first of `VALIDATION_SPLITS` the dataset has.
        train_file: str or `None`. CSV/TSV file of training rows.
        validation_file: str or `None`. CSV/TSV file of held-out rows.
        text_column: str or `None`. Column or feature of the text (files:
            `"text"`; tfds: found).
        text_b_column: str or `None`. Second text of sentence pairs.
        label_column: str. Defaults to `"label"`.
        allow_skipped: bool. Whether to accept a file of which more than
            half of the rows are skipped. Defaults to `False`.

    Returns:
        `(train_rows, validation_rows, label_names)`: two `LabelledRows`
        and the label names in id order.

    Raises:
        ValueError: when neither data source is given, or the data is
            unusable: no usable row, mostly skipped rows, fewer than two
            classes.
    """
    if tfds_name:
        split = validation_split or default_validation_split(
            tfds_name, data_dir
        )
        columns = (text_column, text_b_column, label_column)
        train, label_ids = read_tfds(tfds_name, train_split, data_dir, *columns)
        validation, _ = read_tfds(tfds_name, split, data_dir, *columns)
    elif train_file and validation_file:
        columns = (text_column or "text", text_b_column, label_column)
        train, label_ids = read_table(train_file, *columns, None, allow_skipped)
        validation, _ = read_table(
            validation_file, *columns, label_ids, allow_skipped
        )
    else:
        raise ValueError(
            "Expected data: --tfds-name NAME, or --train-file and "
            "--validation-file."
        )
    if len(label_ids) < 2:
        raise KerasGMLPError(
            f"{train_file or tfds_name}: one class ({_first(label_ids)} in "
            f"{label_column!r}); expected at least two classes to tell apart."
        )
    names = sorted(label_ids, key=label_ids.get)
    return train, validation, names


def _first(labels, count=10):
    """The first `count` of `labels`, sorted, as a short list's text."""
    names = sorted(map(str, labels))
    more = f" and {len(names) - count} more" if len(names) > count else ""
    return f"{names[:count]}{more}"


def text_batches(
    rows, batch_size, shuffle=False, seed=None, shuffle_buffer=None
):
    """Batches of raw texts and labels, for a task with a preprocessor.

    The task's preprocessor (`GMLPTextClassifierPreprocessor`) tokenizes
    and packs them inside `fit`, `evaluate` and `predict`, as it does
    when serving.

    Args:
        rows: `LabelledRows`.
        batch_size: int. Rows per batch (the last may be smaller).
        shuffle: bool. Whether to shuffle the rows (each pass anew).
            Defaults to `False`.
        seed: int or `None`. Shuffle seed.
        shuffle_buffer: int or `None`. Rows shuffled together; `None` for
            all of them.

    Returns:
        A `tf.data.Dataset` of `(texts, labels)`, `texts` a batch of
        strings or, for sentence pairs, a tuple of two.
    """
    import tensorflow as tf

    texts = rows.texts if rows.texts_b is None else (rows.texts, rows.texts_b)
    dataset = tf.data.Dataset.from_tensor_slices((texts, rows.labels))
    if shuffle:
        buffer = min(len(rows), shuffle_buffer or len(rows))
        dataset = dataset.shuffle(buffer, seed=seed)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
