import math
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_gmlp.data import text

WORDS = (
    "the cat sat on a mat while dog ran in park big small red blue house "
    "tree bird flew over river under bridge quickly slowly"
).split()


def write_lines(path, count, seed=0, words_per_line=(4, 16)):
    rng = random.Random(seed)
    lines = [
        " ".join(rng.choices(WORDS, k=rng.randint(*words_per_line)))
        for _ in range(count)
    ]
    with open(path, "w") as file:
        file.write("\n".join(lines) + "\n")
    return lines


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_lines(folder / "a.txt", 600, seed=1)
    write_lines(folder / "b.txt", 600, seed=2)
    return folder


@pytest.fixture(scope="module")
def vocabulary(corpus_dir):
    corpus = text.TextCorpus(files=str(corpus_dir / "*.txt"))
    return text.train_vocabulary(corpus.records("train"), 120)


@pytest.fixture(scope="module")
def tokenizer(vocabulary):
    return text.make_tokenizer(vocabulary)


def test_lines_and_paragraphs_are_streamed_and_stripped(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("  first line \n\nsecond\nline two\n\n\nthird\n")
    lines = list(text.read_text_records([str(path)], record="line"))
    assert lines == ["first line", "second", "line two", "third"]
    paragraphs = list(text.read_text_records([str(path)], record="paragraph"))
    assert paragraphs == ["first line", "second line two", "third"]


def test_non_utf8_bytes_are_replaced_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\ncaf\xe9 \xff\xfe bad\nanother good\n")
    stats = text.CorpusStats()
    records = list(text.read_text_records([str(path)], stats=stats))
    assert records[0] == "good line"
    assert records[1] == "caf\ufffd \ufffd\ufffd bad"
    assert records[2] == "another good"
    assert stats.invalid_utf8 == 1 and stats.skipped == 0
    assert stats.records == 3


def test_non_utf8_records_can_be_skipped_and_counted(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"good line\n\x80\x81 broken\nanother good\n")
    stats = text.CorpusStats()
    records = list(
        text.read_text_records([str(path)], decode_errors="skip", stats=stats)
    )
    assert records == ["good line", "another good"]
    assert stats.invalid_utf8 == 1 and stats.skipped == 1


def test_long_paragraphs_are_cut(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("word " * 100 + "\n" + "more " * 10 + "\n")
    stats = text.CorpusStats()
    records = list(
        text.read_text_records(
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
    stats = text.CorpusStats()
    records = list(
        text.read_text_records([str(path)], max_record_chars=101, stats=stats)
    )
    assert stats.invalid_utf8 == 0 and stats.truncated == 6
    assert "".join(records[:-1]) == "\u00e9" * 301
    assert records[-1] == "short"


def test_bad_arguments_name_the_value(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        text.expand_patterns(str(tmp_path / "nothing-here*.txt"))
    with pytest.raises(ValueError, match="'sentence'"):
        list(text.read_text_records([], record="sentence"))
    with pytest.raises(ValueError, match="validation_fraction=1.5"):
        text.TextCorpus(files=str(tmp_path), validation_fraction=1.5)
    with pytest.raises(ValueError, match="exactly one"):
        text.TextCorpus()


def test_empty_corpus_fails_clearly(tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n   \n")
    corpus = text.TextCorpus(files=str(tmp_path / "*.txt"))
    with pytest.raises(ValueError, match="no training text record"):
        corpus.check()
    with pytest.raises(ValueError, match="empty corpus"):
        text.train_vocabulary(corpus.records("train"), 100)


def test_no_validation_record_fails_clearly(tmp_path):
    (tmp_path / "one.txt").write_text("only one line\n")
    corpus = text.TextCorpus(
        files=str(tmp_path / "*.txt"), validation_fraction=1e-6
    )
    with pytest.raises(ValueError, match="no validation record"):
        corpus.check()


def test_splits_never_share_a_record(tmp_path):
    lines = write_lines(tmp_path / "a.txt", 2000, seed=3, words_per_line=(2, 4))
    # Duplicates, in another file: each copy must fall on the same side.
    with open(tmp_path / "b.txt", "w") as file:
        file.write("\n".join(lines[:500]) + "\n")
    corpus = text.TextCorpus(
        files=str(tmp_path / "*.txt"), validation_fraction=0.2
    )
    train = list(corpus.records("train"))
    validation = list(corpus.records("validation"))
    assert not set(train) & set(validation)
    assert len(train) + len(validation) == 2500
    assert set(train) | set(validation) == set(lines)
    share = len(set(validation)) / len(set(lines))
    assert 0.12 < share < 0.28
    again = text.TextCorpus(
        files=str(tmp_path / "*.txt"), validation_fraction=0.2
    )
    assert list(again.records("validation")) == validation


def test_split_tokens_never_leak_into_training(corpus_dir, tokenizer):
    corpus = text.TextCorpus(
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
    corpus = text.TextCorpus(
        files=str(tmp_path / "train.txt"),
        validation_files=str(tmp_path / "valid.txt"),
    )
    assert list(corpus.records("validation")) == held_out
    assert len(list(corpus.records("train"))) == 30


def test_tfds_text_dataset_with_mock_data():
    with tfds.testing.mock_data(num_examples=40):
        corpus = text.TextCorpus(
            tfds_name="imdb_reviews", validation_fraction=0.25
        )
        train = list(corpus.records("train"))
        validation = list(corpus.records("validation"))
        dataset = list(corpus.dataset("validation").as_numpy_iterator())
    assert train and validation
    assert not set(train) & set(validation)
    assert len(train) + len(validation) <= 40
    assert [record.decode() for record in dataset] == validation


def test_vocabulary_puts_pad_first_and_round_trips(vocabulary, tmp_path):
    assert vocabulary[: len(text.SPECIAL_TOKENS)] == list(text.SPECIAL_TOKENS)
    assert vocabulary[0] == "[PAD]"
    assert 20 < len(vocabulary) <= 120
    assert "cat" in vocabulary
    path = str(tmp_path / "vocabulary.txt")
    text.save_vocabulary(vocabulary, path)
    assert text.load_vocabulary(path) == vocabulary
    tokenizer = text.make_tokenizer(path, special_tokens_in_strings=True)
    ids = np.asarray(tokenizer.tokenize("the [MASK] sat")).tolist()
    assert ids == [
        vocabulary.index("the"),
        vocabulary.index("[MASK]"),
        vocabulary.index("sat"),
    ]


@pytest.mark.parametrize(
    "tokens, message",
    [
        (["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"], "starts with"),
        (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], "lacks"),
        (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"], "repeats"),
    ],
)
def test_bad_vocabulary_files_fail_clearly(tmp_path, tokens, message):
    path = tmp_path / "bad_vocabulary.txt"
    path.write_text("\n".join(tokens) + "\n")
    with pytest.raises(ValueError, match=message):
        text.load_vocabulary(str(path))


def test_tiny_vocabulary_size_fails_clearly():
    with pytest.raises(ValueError, match="vocabulary_size=4"):
        text.train_vocabulary(["some text"], 4)


def test_packing_keeps_every_token_in_order(tokenizer):
    ids = text.special_ids(tokenizer)
    records = ["the cat sat", "a dog ran in the park", "bird", "red house"]
    stream = text.tokenize_records(
        tf.data.Dataset.from_tensor_slices(records),
        tokenizer,
        ids["[SEP]"],
        batch_size=3,
    )
    expected = []
    for record in records:
        expected += np.asarray(tokenizer.tokenize(record)).tolist()
        expected.append(ids["[SEP]"])
    sequences = list(
        text.pack_sequences(
            stream, 6, ids["[CLS]"], ids["[SEP]"]
        ).as_numpy_iterator()
    )
    assert all(s.shape == (6,) for s in sequences)
    assert all(s[0] == ids["[CLS]"] for s in sequences)
    bodies = []
    for sequence in sequences[:-1]:
        assert sequence[-1] == ids["[SEP]"]
        bodies += sequence[1:-1].tolist()
    last = sequences[-1]
    real = last[last != 0]
    assert real[-1] == ids["[SEP]"] and (last[len(real) :] == 0).all()
    bodies += real[1:-1].tolist()
    assert bodies == expected
    assert len(sequences) == math.ceil(len(expected) / 4)


def test_packing_rejects_tiny_lengths(tokenizer):
    empty = tf.data.Dataset.from_tensor_slices(tf.zeros((0, 1), tf.int32))
    with pytest.raises(ValueError, match="sequence_length=2"):
        text.pack_sequences(empty, 2, 2, 3)


def test_masking_statistics(corpus_dir, tokenizer):
    corpus = text.TextCorpus(files=str(corpus_dir / "*.txt"))
    ids = text.special_ids(tokenizer)
    length = 64
    max_predictions = text.default_max_predictions(length)
    dataset = text.masked_lm_dataset(
        corpus.dataset("train"), tokenizer, length, batch_size=64
    )
    originals = text.pack_sequences(
        text.tokenize_records(corpus.dataset("train"), tokenizer, 3),
        length,
        ids["[CLS]"],
        ids["[SEP]"],
    ).batch(64)
    selected = selectable = as_mask = unchanged = 0
    for (inputs, labels, weights), original in zip(
        dataset.take(4), originals.take(4), strict=True
    ):
        token_ids = inputs["token_ids"].numpy()
        positions = inputs["mask_positions"].numpy()
        labels, weights = labels.numpy(), weights.numpy()
        original = original.numpy()
        assert positions.shape[1] == max_predictions
        special = np.isin(original, [0, ids["[CLS]"], ids["[SEP]"]])
        selectable += (~special).sum()
        for row in range(len(token_ids)):
            real = weights[row] > 0
            chosen = positions[row][real]
            assert not special[row, chosen].any()
            np.testing.assert_array_equal(
                labels[row][real], original[row, chosen]
            )
            now = token_ids[row, chosen]
            selected += real.sum()
            as_mask += (now == ids["[MASK]"]).sum()
            unchanged += (now == original[row, chosen]).sum()
            untouched = np.ones(length, bool)
            untouched[chosen] = False
            np.testing.assert_array_equal(
                token_ids[row, untouched], original[row, untouched]
            )
    assert selected > 1500
    assert abs(selected / selectable - 0.15) < 0.015
    assert abs(as_mask / selected - 0.8) < 0.04
    assert abs(unchanged / selected - 0.1) < 0.03
    random_share = 1 - (as_mask + unchanged) / selected
    assert abs(random_share - 0.1) < 0.03


def test_causal_batches_shift_by_one(corpus_dir, tokenizer):
    corpus = text.TextCorpus(
        files=str(corpus_dir / "a.txt"), validation_fraction=0.1
    )
    batches = list(
        text.causal_lm_dataset(
            corpus.dataset("validation"), tokenizer, 16, 4
        ).as_numpy_iterator()
    )
    for inputs, labels, weights in batches:
        assert inputs.shape[1] == labels.shape[1] == 16
        np.testing.assert_array_equal(inputs[:, 1:], labels[:, :-1])
        np.testing.assert_array_equal(weights, (labels != 0).astype("f"))
    assert batches[-1][2].min() == 0  # The last sequence is padded.


def test_fixed_batches_are_cached_and_counted(corpus_dir, tokenizer):
    corpus = text.TextCorpus(
        files=str(corpus_dir / "*.txt"), validation_fraction=0.1
    )
    batches = text.fixed_batches(
        text.masked_lm_dataset(corpus.dataset("validation"), tokenizer, 32, 8),
        max_batches=3,
    )
    assert int(batches.cardinality()) == 3
    first = [b[0]["token_ids"].numpy() for b in batches]
    second = [b[0]["token_ids"].numpy() for b in batches]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    empty = tf.data.Dataset.from_tensor_slices(tf.zeros((0, 2)))
    with pytest.raises(ValueError, match="no batch"):
        text.fixed_batches(empty, 3)


def test_unigram_perplexity_against_hand_computation():
    counts = np.array([0.0, 3.0, 1.0, 0.0])
    labels = np.array([[1, 2, 0]])
    weights = np.array([[1.0, 1.0, 0.0]])
    value = text.unigram_perplexity(counts, [(None, labels, weights)])
    # Add-one over the possible ids 1 and 2: p = 4/6 and 2/6.
    expected = math.exp(-(math.log(4 / 6) + math.log(2 / 6)) / 2)
    assert value == pytest.approx(expected)


def test_token_counts_stop_and_exclude():
    stream = tf.data.Dataset.from_tensor_slices(
        tf.constant([[1, 1, 2], [3, 3, 3], [4, 4, 4]], tf.int32)
    )
    counts = text.token_counts(stream, 5, max_tokens=6, exclude=[2])
    np.testing.assert_array_equal(counts, [0, 2, 0, 3, 0])


def test_split_hash_is_stable():
    # A pinned value: a change of hash would silently move records across
    # the splits of existing runs (and it must not depend on PYTHONHASHSEED).
    assert text.record_bucket("hello world") == 216775
    buckets = [text.record_bucket(f"line {i}") for i in range(1000)]
    assert len(set(buckets)) > 990


def test_heldout_masks_repeat_with_the_seed(corpus_dir, tokenizer):
    corpus = text.TextCorpus(
        files=str(corpus_dir / "*.txt"), validation_fraction=0.2
    )

    def heldout(seed):
        batches = text.masked_lm_heldout_batches(
            corpus.dataset("validation"), tokenizer, 32, 8, 6, seed=seed
        )
        return [
            (x["token_ids"], x["mask_positions"], y, w)
            for x, y, w in batches.as_numpy_iterator()
        ]

    first = heldout(seed=3)
    # Random draws in between (as a model's initialisation) do not matter.
    tf.random.uniform((100,))
    keras_random_draw = tf.random.shuffle(tf.range(10))
    assert keras_random_draw.shape == (10,)
    second = heldout(seed=3)
    other_seed = heldout(seed=4)
    assert len(first) == 6
    for a, b in zip(first, second, strict=True):
        for part_a, part_b in zip(a, b, strict=True):
            np.testing.assert_array_equal(part_a, part_b)
    # The same sequences, other masks.
    np.testing.assert_array_equal(first[0][2].shape, other_seed[0][2].shape)
    assert any(
        not np.array_equal(a[1], b[1])
        for a, b in zip(first, other_seed, strict=True)
    )
    # 15 % of the maskable tokens (not [CLS] or [SEP]) are predicted, and
    # 80 % of those are shown as [MASK].
    weights = sum(batch[3].sum() for batch in first)
    tokens = sum(batch[0].size - 2 * len(batch[0]) for batch in first)
    assert 0.14 < weights / tokens < 0.2
    mask_id = tokenizer.token_to_id("[MASK]")
    shown = np.concatenate(
        [
            np.take_along_axis(ids, positions, axis=1)[weights_ > 0]
            for ids, positions, _, weights_ in first
        ]
    )
    assert 0.7 < np.mean(shown == mask_id) < 0.9
    with pytest.raises(ValueError, match="no batch"):
        text.masked_lm_heldout_batches(
            corpus.dataset("validation").take(0), tokenizer, 32, 8, 6
        )
