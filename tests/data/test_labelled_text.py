import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_gmlp.data.labelled_text import load_labelled_text
from keras_gmlp.data.labelled_text import read_table
from keras_gmlp.data.labelled_text import read_tfds
from keras_gmlp.data.labelled_text import text_batches
from keras_gmlp.data.vocabulary import SPECIAL_TOKENS
from keras_gmlp.data.vocabulary import make_tokenizer
from keras_gmlp.data.vocabulary import special_ids
from keras_gmlp.data.vocabulary import train_vocabulary
from keras_gmlp.models import GMLPTextClassifierPreprocessor
from tests.data.corpus_helpers import write_task

# tf.data and numpy only: the Keras backend plays no part, so the
# default suite runs these under one backend (`-m large`: every one).
pytestmark = pytest.mark.one_backend("torch")


def test_sentence_pairs_are_packed_with_sep(tmp_path):
    path = str(tmp_path / "pairs.tsv")
    write_task(path, 4, seed=2, delimiter="\t", pairs=True)
    rows, labels = read_table(path, "text", "text_b", "label", None)
    assert labels == {"cat": 0, "dog": 1}
    vocabulary = train_vocabulary(rows.texts + rows.texts_b, 60)
    tokenizer = make_tokenizer(vocabulary)
    ids = special_ids(tokenizer)
    # Raw text pairs, packed by the classifier's own preprocessor.
    (texts, batch_labels) = next(iter(text_batches(rows, 4)))
    assert isinstance(texts, tuple) and len(texts) == 2
    np.testing.assert_array_equal(batch_labels, rows.labels)
    preprocessor = GMLPTextClassifierPreprocessor(tokenizer, sequence_length=64)
    token_ids = np.asarray(preprocessor(x=texts)["token_ids"])
    for row, (a, b) in enumerate(zip(rows.texts, rows.texts_b, strict=True)):
        expected = [
            ids["[CLS]"],
            *np.asarray(tokenizer.tokenize(a)).tolist(),
            ids["[SEP]"],
            *np.asarray(tokenizer.tokenize(b)).tolist(),
            ids["[SEP]"],
        ]
        assert len(expected) <= 64
        padded = expected + [0] * (64 - len(expected))
        assert token_ids[row].tolist() == padded


def test_tfds_sentence_pairs_with_mock_data():
    with tfds.testing.mock_data(num_examples=12):
        rows, labels = read_tfds(
            "glue/mnli", "validation_matched", None, None, None, "label"
        )
    assert len(rows) == 12 and rows.texts_b is not None
    with tfds.testing.mock_data(num_examples=12):
        dataset = tfds.load("glue/mnli", split="validation_matched")
        premises = [e["premise"].decode() for e in dataset.as_numpy_iterator()]
    assert rows.texts == premises
    assert labels == {"entailment": 0, "neutral": 1, "contradiction": 2}
    tokenizer = make_tokenizer(list(SPECIAL_TOKENS) + list("abcdefghij"))
    texts, batch_labels = next(iter(text_batches(rows, 12)))
    preprocessor = GMLPTextClassifierPreprocessor(tokenizer, sequence_length=32)
    token_ids = np.asarray(preprocessor(x=texts)["token_ids"])
    assert (token_ids[:, 0] == 2).all()
    assert ((token_ids == 3).sum(axis=1) == 2).all()  # two [SEP]
    np.testing.assert_array_equal(batch_labels, rows.labels)


def test_non_utf8_rows_are_replaced_and_counted(tmp_path):
    path = tmp_path / "bytes.csv"
    path.write_bytes(b"text,label\ncaf\xe9 ok,a\nfine,b\n")
    rows, _ = read_table(str(path), "text", None, "label", None)
    assert rows.texts == ["caf\ufffd ok", "fine"]
    assert rows.replaced == 1


def test_files_give_label_ids_of_the_training_file(tmp_path):
    write_task(tmp_path / "train.csv", 12, seed=3)
    (tmp_path / "valid.csv").write_text("text,label\na dog ran,dog\nx,bird\n")
    train, validation, names = load_labelled_text(
        train_file=str(tmp_path / "train.csv"),
        validation_file=str(tmp_path / "valid.csv"),
    )
    assert names == ["cat", "dog"]
    assert validation.texts == ["a dog ran"]
    assert validation.labels.tolist() == [1]
    assert validation.skipped == 1
    assert len(train) == 12
    with pytest.raises(ValueError, match="Expected data"):
        load_labelled_text(train_file=str(tmp_path / "train.csv"))


def test_a_single_class_is_refused(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("text,label\nsome text,a\nmore text,a\n")
    with pytest.raises(ValueError) as error:
        load_labelled_text(train_file=str(path), validation_file=str(path))
    assert str(error.value).startswith(f"{path}: one class (['a'] in")


def test_unknown_validation_labels_are_named(tmp_path):
    write_task(tmp_path / "train.csv", 12, seed=3)  # labels cat and dog
    (tmp_path / "valid.csv").write_text("text,label\na,0\nb,1\nc,1\n")
    with pytest.raises(ValueError, match="no usable row") as error:
        load_labelled_text(
            train_file=str(tmp_path / "train.csv"),
            validation_file=str(tmp_path / "valid.csv"),
        )
    message = str(error.value)
    assert "its labels ['0', '1'] are not among the training labels" in message
    assert "['cat', 'dog']" in message


def test_mostly_skipped_rows_stop_unless_allowed(tmp_path):
    write_task(tmp_path / "train.csv", 12, seed=3)
    valid = tmp_path / "valid.csv"
    valid.write_text("text,label\na dog,dog\nb,bird\nc,bird\n,cat\n")
    files = {
        "train_file": str(tmp_path / "train.csv"),
        "validation_file": str(valid),
    }
    with pytest.raises(ValueError) as error:
        load_labelled_text(**files)
    message = str(error.value)
    assert message.startswith(f"{valid}: 3 of 4 records skipped")
    assert "['bird']" in message and "--allow-skipped" in message
    _, validation, _ = load_labelled_text(**files, allow_skipped=True)
    assert validation.texts == ["a dog"] and validation.skipped == 3


def test_shuffled_batches_keep_every_row_once(tmp_path):
    write_task(tmp_path / "rows.csv", 20, seed=4)
    rows, _ = read_table(
        str(tmp_path / "rows.csv"), "text", None, "label", None
    )
    batches = text_batches(rows, 6, shuffle=True, seed=0, shuffle_buffer=4)
    seen = [
        (text.decode(), int(label))
        for texts, labels in batches.as_numpy_iterator()
        for text, label in zip(texts, labels, strict=True)
    ]
    expected = list(zip(rows.texts, rows.labels.tolist(), strict=True))
    assert sorted(seen) == sorted(expected) and seen != expected
    assert [len(x) for x, _ in batches] == [6, 6, 6, 2]
