import json

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_gmlp import cli
from keras_gmlp.data.labelled_text import read_table
from keras_gmlp.workflows import text_classification
from tests.data.corpus_helpers import write_task


def train(argv):
    """Runs the job in this process, as the recipe and the CLI do."""
    config = text_classification.config_from_argv(argv)
    return text_classification.run(config)


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


@pytest.mark.one_backend("torch")
def test_csv_from_scratch_reports_accuracy_and_f1(task, tmp_path, capsys):
    status = cli.main(
        [
            "finetune",
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
    assert status == 0
    with open(tmp_path / "results.json") as file:
        results = json.load(file)
    metrics = results["metrics"]
    assert 0 <= metrics["val_accuracy"] <= 1
    assert 0 <= metrics["val_f1"] <= 1
    assert results["labels"] == ["cat", "dog"]
    assert results["counts"]["validation_examples"] == 32
    assert results["counts"]["skipped_rows"] == 2
    assert len(results["history"]["val_accuracy"]) == 2
    assert (tmp_path / "vocabulary.txt").exists()

    # The run through the other commands. evaluate scores best.keras, the
    # checkpoint of the best epoch.
    capsys.readouterr()
    assert cli.main(["evaluate", str(tmp_path)]) == 0
    scores = json.loads(capsys.readouterr().out)
    best = max(results["history"]["val_accuracy"])
    assert scores["val_accuracy"] == pytest.approx(best, abs=1e-6)
    sentence = "the cat sat on a mat"
    assert cli.main(["predict", str(tmp_path), "--text", sentence]) == 0
    labels = json.loads(capsys.readouterr().out)
    assert sorted(entry["label"] for entry in labels) == ["cat", "dog"]
    # The same by hand: the preset's task on `[CLS] tokens [SEP] [PAD]...`.
    model = keras_hub.models.TextClassifier.from_preset(
        str(tmp_path / "preset")
    )
    assert type(model).__name__ == "GMLPTextClassifier"
    tokenizer = model.preprocessor.tokenizer
    tokens = np.asarray(tokenizer.tokenize(sentence)).tolist()
    token_ids = np.zeros((1, 16), "int32")
    token_ids[0, : len(tokens) + 2] = [2, *tokens, 3]
    inputs = {"token_ids": token_ids, "padding_mask": token_ids != 0}
    logits = keras.ops.convert_to_numpy(model(inputs))[0]
    probabilities = np.exp(logits) / np.exp(logits).sum()
    by_label = {entry["label"]: entry["probability"] for entry in labels}
    np.testing.assert_allclose(
        [by_label["cat"], by_label["dog"]], probabilities, atol=1e-5
    )
    assert (
        cli.main(["export", str(tmp_path), str(tmp_path / "saved_model")]) == 0
    )
    import tensorflow as tf

    # Keep the loaded object: its variables go with it.
    exported = tf.saved_model.load(str(tmp_path / "saved_model"))
    np.testing.assert_allclose(
        exported.serve(tf.constant(token_ids)).numpy()[0],
        probabilities,
        atol=1e-5,
    )


@pytest.fixture(scope="module")
def pretrained_run(task, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("pretrained")
    status = cli.main(
        [
            "pretrain",
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
    assert status == 0
    return output_dir


@pytest.mark.one_backend("torch")
def test_pretrained_encoder_weights_and_vocabulary_are_reused(
    task, pretrained_run, tmp_path
):
    config = text_classification.config_from_argv(
        ["--pretrained", str(pretrained_run), "--sequence-length", "16"]
        + ["--output-dir", str(tmp_path / "built")]
    )
    tokenizer, config = text_classification.prepare_tokenizer(config, None)
    model = text_classification.build_model(config, tokenizer, num_classes=3)
    masked = keras_hub.models.MaskedLM.from_preset(
        str(pretrained_run / "preset")
    )
    for mine, theirs in zip(
        model.backbone.weights, masked.backbone.weights, strict=True
    ):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(mine),
            keras.ops.convert_to_numpy(theirs),
        )
    results = train(
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
    pretrained_run, tmp_path
):
    config = text_classification.config_from_argv(
        ["--pretrained", str(pretrained_run), "--sequence-length", "64"]
        + ["--output-dir", str(tmp_path)]
    )
    with pytest.raises(ValueError, match="--sequence-length 64 .* 16"):
        tokenizer, config = text_classification.prepare_tokenizer(config, None)
        text_classification.build_model(config, tokenizer, num_classes=2)


@pytest.mark.large
def test_tfds_glue_sst2_with_mock_data(tmp_path):
    with tfds.testing.mock_data(num_examples=24):
        results = train(
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


def test_bad_input_fails_clearly(task, tmp_path):
    flags = ["--output-dir", str(tmp_path), *SMALL_MODEL]
    with pytest.raises(ValueError, match="no column \\['sentence'\\]"):
        train(
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
        train(flags)
    single = tmp_path / "single.csv"
    single.write_text("text,label\nsome text,a\nmore text,a\n")
    with pytest.raises(ValueError, match=r"one class \(\['a'\] in 'label'\)"):
        train(
            ["--train-file", str(single), "--validation-file", str(single)]
            + flags
        )
    empty = tmp_path / "empty.csv"
    empty.write_text("text,label\n,a\n")
    with pytest.raises(ValueError, match="no usable row \\(1 skipped\\)"):
        read_table(str(empty), "text", None, "label", None)
