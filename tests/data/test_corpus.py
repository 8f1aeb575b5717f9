import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_gmlp.data.corpus import CorpusStats
from keras_gmlp.data.corpus import TextCorpus
from keras_gmlp.data.corpus import expand_patterns
from keras_gmlp.data.corpus import read_text_records
from keras_gmlp.data.corpus import record_bucket
from keras_gmlp.data.vocabulary import train_vocabulary
from tests.data.corpus_helpers import write_lines

# tf.data and numpy only: the Keras backend plays no part, so the
# default suite runs these under one backend (`-m large`: every one).
pytestmark = pytest.mark.one_backend("torch")


def test_lines_and_paragraphs_are_streamed_and_stripped(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("  first line \n\nsecond\nline two\n\n\nthird\n")
    lines = list(read_text_records([str(path)], record="line"))
    assert lines == ["first line", "second", "line two", "third"]
    paragraphs = list(read_text_records([str(path)], record="paragraph"))
    assert paragraphs == ["first line", "second line two", "third"]


def test_non_utf8_bytes_are_replaced_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\ncaf\xe9 \xff\xfe bad\nanother good\n")
    stats = CorpusStats()
    records = list(read_text_records([str(path)], stats=stats))
    assert records[0] == "good line"
    assert records[1] == "caf\ufffd \ufffd\ufffd bad"
    assert records[2] == "another good"
    assert stats.invalid_utf8 == 1 and stats.skipped == 0
    assert stats.records == 3


def test_non_utf8_records_can_be_skipped_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\n\x80\x81 broken\nanother good\n")
    stats = CorpusStats()
    records = list(
        read_text_records([str(path)], decode_errors="skip", stats=stats)
    )
    assert records == ["good line", "another good"]
    assert stats.invalid_utf8 == 1 and stats.skipped == 1


def test_long_paragraphs_are_cut(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("word " * 100 + "\n" + "more " * 10 + "\n")
    stats = CorpusStats()
    records = list(
        read_text_records(
            [str(path)], record="paragraph", max_record_chars=200, stats=stats
        )
    )
    assert stats.truncated >= 2
    assert all(len(record) <= 200 for record in records)
    assert sum(r.count("word") for r in records) == 100
    assert sum(r.count("more") for r in records) == 10


def test_cuts_of_long_lines_keep_utf8_characters(tmp_path):
    path = tmp_path / "accents.txt"
    path.write_text("\u00e9" * 301 + "\nshort\n", encoding="utf-8")
    stats = CorpusStats()
    records = list(
        read_text_records([str(path)], max_record_chars=101, stats=stats)
    )
    assert stats.invalid_utf8 == 0 and stats.truncated == 6
    assert "".join(records[:-1]) == "\u00e9" * 301
    assert records[-1] == "short"


def test_bad_arguments_name_the_value(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        expand_patterns(str(tmp_path / "nothing-here*.txt"))
    with pytest.raises(ValueError, match="'sentence'"):
        list(read_text_records([], record="sentence"))
    with pytest.raises(ValueError, match="validation_fraction=1.5"):
        TextCorpus(files=str(tmp_path), validation_fraction=1.5)
    with pytest.raises(ValueError, match="exactly one"):
        TextCorpus()


def test_empty_corpus_fails_clearly(tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n   \n")
    corpus = TextCorpus(files=str(tmp_path / "*.txt"))
    with pytest.raises(ValueError, match="no training text record"):
        corpus.check()
    with pytest.raises(ValueError, match="empty corpus"):
        train_vocabulary(corpus.records("train"), 100)


def test_no_validation_record_fails_clearly(tmp_path):
    (tmp_path / "one.txt").write_text("only one line\n")
    corpus = TextCorpus(files=str(tmp_path / "*.txt"), validation_fraction=1e-6)
    with pytest.raises(ValueError, match="no validation record"):
        corpus.check()


def test_a_corpus_of_mostly_invalid_utf8_stops_with_the_counts(tmp_path):
    # A binary file: most of its lines are not UTF-8.
    path = tmp_path / "corpus.bin"
    rng = np.random.default_rng(0)
    lines = [
        bytes(rng.integers(128, 256, 40, dtype=np.uint8)) for _ in range(90)
    ]
    lines += [b"a good line of text %d" % i for i in range(10)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    corpus = TextCorpus(files=str(path), validation_fraction=0.5)
    with pytest.raises(ValueError) as error:
        corpus.check()
    message = str(error.value)
    assert message.startswith(f"{path}: 90 of 100 records skipped")
    assert "invalid UTF-8" in message and "--allow-skipped" in message
    corpus.check(allow_skipped=True)
    assert corpus.stats.records == 0  # reset after the check
    # Half of them is not more than half: accepted.
    path.write_bytes(b"\n".join(lines[80:]) + b"\n")
    TextCorpus(files=str(path), validation_fraction=0.5).check()


def test_a_corpus_of_one_long_line_names_the_record_limit(tmp_path):
    path = tmp_path / "one_line.txt"
    # About 200,000 bytes without a line break: two or three records.
    path.write_text(" ".join(f"word{i}" for i in range(20_000)))
    corpus = TextCorpus(files=str(path), validation_fraction=0.02)
    with pytest.raises(ValueError, match="no validation record") as error:
        corpus.check()
    assert "at most 100,000 bytes" in str(error.value)


def test_splits_never_share_a_record(tmp_path):
    lines = write_lines(tmp_path / "a.txt", 2000, seed=3, words_per_line=(2, 4))
    # Duplicates, in another file: each copy must fall on the same side.
    with open(tmp_path / "b.txt", "w") as file:
        file.write("\n".join(lines[:500]) + "\n")
    corpus = TextCorpus(files=str(tmp_path / "*.txt"), validation_fraction=0.2)
    train = list(corpus.records("train"))
    validation = list(corpus.records("validation"))
    assert not set(train) & set(validation)
    assert len(train) + len(validation) == 2500
    assert set(train) | set(validation) == set(lines)
    share = len(set(validation)) / len(set(lines))
    assert 0.12 < share < 0.28
    again = TextCorpus(files=str(tmp_path / "*.txt"), validation_fraction=0.2)
    assert list(again.records("validation")) == validation


def test_split_tokens_never_leak_into_training(corpus_dir, tokenizer):
    corpus = TextCorpus(
        files=str(corpus_dir / "*.txt"), validation_fraction=0.1
    )
    held_out = set(corpus.records("validation"))
    training = {
        np.asarray(tokenizer.tokenize(record)).tobytes()
        for record in corpus.records("train")
    }
    leaked = [
        record
        for record in held_out
        if np.asarray(tokenizer.tokenize(record)).tobytes() in training
    ]
    assert not leaked


def test_separate_validation_files(tmp_path):
    write_lines(tmp_path / "train.txt", 30, seed=4)
    held_out = write_lines(tmp_path / "valid.txt", 10, seed=5)
    corpus = TextCorpus(
        files=str(tmp_path / "train.txt"),
        validation_files=str(tmp_path / "valid.txt"),
    )
    assert list(corpus.records("validation")) == held_out
    assert len(list(corpus.records("train"))) == 30


def test_tfds_text_dataset_with_mock_data():
    with tfds.testing.mock_data(num_examples=40):
        corpus = TextCorpus(tfds_name="imdb_reviews", validation_fraction=0.25)
        train = list(corpus.records("train"))
        validation = list(corpus.records("validation"))
        dataset = list(corpus.dataset("validation").as_numpy_iterator())
    assert train and validation
    assert not set(train) & set(validation)
    assert len(train) + len(validation) <= 40
    assert [record.decode() for record in dataset] == validation


def test_split_hash_is_stable():
    # A pinned value: a change of hash would silently move records across
    # the splits of existing runs (and it must not depend on PYTHONHASHSEED).
    assert record_bucket("hello world") == 216775
    buckets = [record_bucket(f"line {i}") for i in range(1000)]
    assert len(set(buckets)) > 990
