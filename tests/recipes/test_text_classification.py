import csv
import importlib.util
import os
import random

import keras
import numpy as np
import pytest
import tensorflow_datasets as tfds
from sklearn.metrics import f1_score

RECIPES = os.path.join(os.path.dirname(__file__), "..", "..", "recipes")
WORDS = (
    "the sat on a mat while ran in park big small red blue house tree "
    "flew over river under bridge quickly slowly"
).split()


def load(name):
    spec = importlib.util.spec_from_file_location(
        f"{name}_recipe", os.path.join(RECIPES, f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recipe():
    return load("text_classification")


def write_task(path, count, seed, delimiter=",", pairs=False):
    """A task a model can learn: label 'cat' rows contain the word cat."""
    rng = random.Random(seed)
    with open(path, "w", newline="") as file:
        writer = csv.writer(file, delimiter=delimiter)
        writer.writerow(
            ["text", "text_b", "label"] if pairs else ["text", "label"]
        )
        for _ in range(count):
            label = rng.choice(["cat", "dog"])
            words = rng.choices(WORDS, k=6) + [label]
            rng.shuffle(words)
            row = [" ".join(words)]
            if pairs:
                row.append(" ".join(rng.choices(WORDS, k=3)))
            writer.writerow([*row, label])


SMALL_MODEL = [
    "--num-layers",
    "1",
    "--hidden-dim",
    "16",
    "--ffn-dim",
    "32",
    "--sequence-length",
    "16",
    "--vocabulary-size",
    "80",
    "--batch-size",
    "16",
    "--verbose",
    "0",
    "--no-tensorboard",
]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    folder = tmp_path_factory.mktemp("task")
    write_task(folder / "train.csv", 96, seed=0)
    write_task(folder / "valid.csv", 32, seed=1)
    with open(folder / "valid.csv", "a") as file:
        file.write(",cat\n")  # no text: skipped
        file.write("a bird flew,bird\n")  # unknown label: skipped
    return folder


def test_csv_from_scratch_reports_accuracy_and_f1(recipe, task, tmp_path):
    results = recipe.main(
        [
            "--train-file",
            str(task / "train.csv"),
            "--validation-file",
            str(task / "valid.csv"),
            "--epochs",
            "2",
            "--output-dir",
            str(tmp_path),
            *SMALL_MODEL,
        ]
    )
    metrics = results["metrics"]
    assert 0 <= metrics["val_accuracy"] <= 1
    assert 0 <= metrics["val_f1"] <= 1
    assert results["labels"] == ["cat", "dog"]
    assert results["counts"]["validation_examples"] == 32
    assert results["counts"]["skipped_rows"] == 2
    assert len(results["history"]["val_accuracy"]) == 2
    assert (tmp_path / "vocabulary.txt").exists()


@pytest.fixture(scope="module")
def pretrained_run(task, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("pretrained")
    load("masked_lm").main(
        [
            "--text-files",
            str(task / "train.csv"),
            "--validation-fraction",
            "0.2",
            "--vocabulary-size",
            "80",
            "--sequence-length",
            "16",
            "--num-layers",
            "1",
            "--hidden-dim",
            "16",
            "--ffn-dim",
            "32",
            "--batch-size",
            "8",
            "--epochs",
            "1",
            "--steps-per-epoch",
            "2",
            "--validation-batches",
            "1",
            "--unigram-tokens",
            "0",
            "--output-dir",
            str(output_dir),
            "--verbose",
            "0",
            "--no-tensorboard",
        ]
    )
    return output_dir


def test_pretrained_encoder_weights_and_vocabulary_are_reused(
    recipe, task, pretrained_run, tmp_path
):
    args = recipe.build_parser().parse_args(
        ["--pretrained", str(pretrained_run), "--sequence-length", "16"]
    )
    model = recipe.build_model(args, None, num_classes=3)
    masked = keras.saving.load_model(pretrained_run / "masked_lm.keras")
    encoder = model.get_layer("encoder")
    for name in ("token_embedding", "block_0", "final_norm"):
        for mine, theirs in zip(
            encoder.get_layer(name).weights,
            masked.get_layer(name).weights,
            strict=True,
        ):
            np.testing.assert_array_equal(
                keras.ops.convert_to_numpy(mine),
                keras.ops.convert_to_numpy(theirs),
            )
    results = recipe.main(
        [
            "--pretrained",
            str(pretrained_run),
            "--train-file",
            str(task / "train.csv"),
            "--validation-file",
            str(task / "valid.csv"),
            "--epochs",
            "1",
            "--sequence-length",
            "16",
            "--batch-size",
            "16",
            "--output-dir",
            str(tmp_path),
            "--verbose",
            "0",
            "--no-tensorboard",
        ]
    )
    assert results["pretrained"] == str(pretrained_run)
    assert (tmp_path / "vocabulary.txt").read_text() == (
        pretrained_run / "vocabulary.txt"
    ).read_text()


def test_sequence_longer_than_the_pretrained_model_fails(
    recipe, pretrained_run
):
    args = recipe.build_parser().parse_args(
        ["--pretrained", str(pretrained_run), "--sequence-length", "64"]
    )
    with pytest.raises(ValueError, match="--sequence-length 64 .* 16"):
        recipe.build_model(args, None, num_classes=2)


def test_sentence_pairs_are_packed_with_sep(recipe, tmp_path):
    from keras_gmlp.data import text

    path = str(tmp_path / "pairs.tsv")
    write_task(path, 4, seed=2, delimiter="\t", pairs=True)
    rows, labels = recipe.read_table(path, "text", "text_b", "label", None)
    assert labels == {"cat": 0, "dog": 1}
    vocabulary = text.train_vocabulary(rows.texts + rows.texts_b, 60)
    tokenizer = text.make_tokenizer(vocabulary)
    ids = text.special_ids(tokenizer)
    (token_ids, batch_labels) = next(
        iter(recipe.make_dataset(rows, tokenizer, 64, 4, False, None))
    )
    token_ids = token_ids.numpy()
    np.testing.assert_array_equal(batch_labels, rows.labels)
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


def test_tfds_sentence_pairs_with_mock_data(recipe):
    from keras_gmlp.data import text

    with tfds.testing.mock_data(num_examples=12):
        rows, labels = recipe.read_tfds(
            "glue/mnli", "validation_matched", None, None, None, "label"
        )
    assert len(rows) == 12 and rows.texts_b is not None
    with tfds.testing.mock_data(num_examples=12):
        dataset = tfds.load("glue/mnli", split="validation_matched")
        premises = [e["premise"].decode() for e in dataset.as_numpy_iterator()]
    assert rows.texts == premises
    assert labels == {"entailment": 0, "neutral": 1, "contradiction": 2}
    tokenizer = text.make_tokenizer(
        list(text.SPECIAL_TOKENS) + list("abcdefghij")
    )
    token_ids, batch_labels = next(
        iter(recipe.make_dataset(rows, tokenizer, 32, 12, False, None))
    )
    token_ids = token_ids.numpy()
    assert (token_ids[:, 0] == 2).all()
    assert ((token_ids == 3).sum(axis=1) == 2).all()  # two [SEP]
    np.testing.assert_array_equal(batch_labels, rows.labels)


@pytest.mark.large
def test_tfds_glue_sst2_with_mock_data(recipe, tmp_path):
    with tfds.testing.mock_data(num_examples=24):
        results = recipe.main(
            [
                "--tfds-name",
                "glue/sst2",
                "--epochs",
                "1",
                "--steps-per-epoch",
                "2",
                "--output-dir",
                str(tmp_path),
                *SMALL_MODEL,
            ]
        )
    assert results["arguments"]["tfds_name"] == "glue/sst2"
    assert results["labels"] == ["negative", "positive"]
    assert "val_f1" in results["metrics"]


def test_bad_input_fails_clearly(recipe, task, tmp_path):
    flags = ["--output-dir", str(tmp_path), *SMALL_MODEL]
    with pytest.raises(ValueError, match="no column \\['sentence'\\]"):
        recipe.main(
            [
                "--train-file",
                str(task / "train.csv"),
                "--validation-file",
                str(task / "valid.csv"),
                "--text-column",
                "sentence",
                *flags,
            ]
        )
    with pytest.raises(ValueError, match="Expected data"):
        recipe.main(flags)
    single = tmp_path / "single.csv"
    single.write_text("text,label\nsome text,a\nmore text,a\n")
    with pytest.raises(ValueError, match="single label"):
        recipe.main(
            ["--train-file", str(single), "--validation-file", str(single)]
            + flags
        )
    empty = tmp_path / "empty.csv"
    empty.write_text("text,label\n,a\n")
    with pytest.raises(ValueError, match="no usable row \\(1 skipped\\)"):
        recipe.read_table(str(empty), "text", None, "label", None)


def test_non_utf8_rows_are_replaced_and_counted(recipe, tmp_path):
    path = tmp_path / "bytes.csv"
    path.write_bytes(b"text,label\ncaf\xe9 ok,a\nfine,b\n")
    rows, _ = recipe.read_table(str(path), "text", None, "label", None)
    assert rows.texts == ["caf\ufffd ok", "fine"]
    assert rows.replaced == 1


def test_binary_f1_matches_scikit_learn(recipe, rng):
    labels = rng.integers(0, 2, 200)
    predictions = rng.integers(0, 2, 200)
    assert recipe.binary_f1(labels, predictions) == pytest.approx(
        f1_score(labels, predictions)
    )
    assert recipe.binary_f1(np.array([1, 0]), np.array([0, 0])) == 0.0
