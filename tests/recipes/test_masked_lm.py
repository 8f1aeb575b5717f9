import json
import math
import os
import random
import signal
import subprocess
import sys

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow_datasets as tfds

from keras_gmlp import cli
from keras_gmlp.models import GMLPCausalLM
from keras_gmlp.workflows import pretraining
from tests.backends import xla_flags

BACKEND = keras.config.backend()
RECIPE = os.path.join(
    os.path.dirname(__file__), "..", "..", "recipes", "masked_lm.py"
)
WORDS = (
    "the cat sat on a mat while dog ran in park big small red blue house "
    "tree bird flew over river under bridge quickly slowly"
).split()


def train(argv, callbacks=None):
    """Runs the job in this process, as the recipe and the CLI do."""
    return pretraining.run(pretraining.config_from_argv(argv), callbacks)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    for name in ("a", "b"):
        with open(folder / f"{name}.txt", "wb") as file:
            for _ in range(400):
                line = " ".join(rng.choices(WORDS, k=rng.randint(4, 14)))
                file.write(line.encode() + b"\n")
            file.write(b"a line with caf\xe9 bytes that are not utf-8\n")
    return str(folder / "*.txt")


def tiny_flags(corpus, output_dir, *extra):
    return [
        "--text-files",
        corpus,
        "--validation-fraction",
        "0.1",
        "--vocabulary-size",
        "100",
        "--sequence-length",
        "16",
        "--num-layers",
        "2",
        "--hidden-dim",
        "16",
        "--ffn-dim",
        "32",
        "--batch-size",
        "8",
        "--epochs",
        "2",
        "--steps-per-epoch",
        "3",
        "--validation-batches",
        "2",
        "--shuffle-buffer",
        "16",
        "--output-dir",
        str(output_dir),
        "--verbose",
        "0",
        "--no-tensorboard",
        *extra,
    ]


@pytest.fixture(scope="module")
def pretrained(corpus, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("mlm_run")
    assert cli.main(["pretrain", *tiny_flags(corpus, output_dir)]) == 0
    with open(output_dir / "results.json") as file:
        return output_dir, json.load(file)


def test_pretraining_writes_results_and_models(pretrained):
    output_dir, results = pretrained
    with open(output_dir / "results.json") as file:
        saved = json.load(file)
    assert saved["backend"] == keras.config.backend()
    metrics = saved["metrics"]
    assert 1 < metrics["val_perplexity"] < 200
    assert math.isclose(
        metrics["val_perplexity"], math.exp(metrics["val_loss"]), rel_tol=1e-3
    )
    assert 0 <= metrics["val_masked_accuracy"] <= 1
    assert metrics["val_unigram_perplexity"] > 1
    assert saved["steps"] == 6 and saved["epochs"] == 2
    assert saved["tokens_per_second"] > 0
    assert saved["counts"]["invalid_utf8"] >= 1
    assert saved["arguments"]["objective"] == "mlm"
    assert len(saved["history"]["val_perplexity"]) == 2
    with open(output_dir / "vocabulary.txt") as file:
        assert file.readline() == "[PAD]\n"
    assert (output_dir / "best.keras").exists()
    assert (output_dir / "last.keras").exists()
    # The preset: keras-hub's generic class finds the gMLP task, with the
    # run's tokenizer and a preprocessor that takes raw strings.
    task = keras_hub.models.MaskedLM.from_preset(str(output_dir / "preset"))
    assert type(task).__name__ == "GMLPMaskedLM"
    vocabulary = (output_dir / "vocabulary.txt").read_text().splitlines()
    assert task.preprocessor.tokenizer.get_vocabulary() == vocabulary
    logits = task.predict(["the cat sat on a mat"], verbose=0)
    assert logits.shape[0] == 1 and logits.shape[-1] == len(vocabulary)
    # Its weights are those of the last epoch's checkpoint.
    last = keras.saving.load_model(output_dir / "last.keras", compile=False)
    for mine, theirs in zip(
        task.backbone.weights, last.backbone.weights, strict=True
    ):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(mine), keras.ops.convert_to_numpy(theirs)
        )


def test_fill_mask_prints_fillers(pretrained, capsys):
    output_dir, _ = pretrained
    capsys.readouterr()
    text = "the [MASK] sat on the [MASK]"
    assert cli.main(["fill-mask", str(output_dir), text, "--top-k", "4"]) == 0
    predictions = json.loads(capsys.readouterr().out)
    assert len(predictions) == 2
    vocabulary = (output_dir / "vocabulary.txt").read_text().split("\n")
    for fillers in predictions:
        probabilities = [entry["probability"] for entry in fillers]
        assert len(fillers) == 4
        assert probabilities == sorted(probabilities, reverse=True)
        assert 0 < sum(probabilities) <= 1 + 1e-6
        assert all(entry["token"] in vocabulary for entry in fillers)
    tokens = pretraining.fill_in_the_blank(str(output_dir), text, top_k=4)
    assert [[t for t, _ in blank] for blank in tokens] == [
        [entry["token"] for entry in blank] for blank in predictions
    ]


def test_checkpoint_restores_its_optimizer(pretrained):
    output_dir, _ = pretrained
    model = keras.saving.load_model(output_dir / "last.keras")
    # The run's warmup-and-decay schedule and its optimizer state.
    schedule = model.optimizer._learning_rate
    assert isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule)
    assert model.optimizer.built


def test_evaluate_scores_the_same_heldout_targets(pretrained, capsys):
    output_dir, results = pretrained
    capsys.readouterr()
    assert cli.main(["evaluate", str(output_dir)]) == 0
    scores = json.loads(capsys.readouterr().out)
    # last.keras is the model of the last epoch, scored in training on the
    # same seeded masks.
    assert scores["perplexity"] == pytest.approx(
        results["history"]["val_perplexity"][-1], rel=1e-4
    )


@pytest.mark.skipif(BACKEND != "jax", reason="the entry is backend-blind")
def test_recipe_predict_flag_prints_fillers(pretrained):
    output_dir, _ = pretrained
    flags = ["--output-dir", str(output_dir), "--predict", "the [MASK] sat"]
    process = run_recipe([*flags, "--top-k", "3"], dict(os.environ))
    assert process.stdout.count("[MASK] 1:") == 1
    assert process.stdout.count("(0.") == 3


def test_predict_rejects_bad_text(pretrained):
    output_dir = str(pretrained[0])
    with pytest.raises(ValueError, match="at least one \\[MASK\\]"):
        pretraining.fill_in_the_blank(output_dir, "no blank here")
    with pytest.raises(ValueError, match="takes at most 16"):
        pretraining.fill_in_the_blank(output_dir, "the [MASK] " + "cat " * 20)


def run_recipe(argv, env):
    """Runs the recipe in a fresh process; fails the test if it fails."""
    process = subprocess.run(
        [sys.executable, RECIPE, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return process


def killed_at_epoch_end(argv, epoch, env):
    """Runs the recipe in a process that SIGKILLs itself after `epoch`."""
    killer = (
        "import os, signal, sys, keras\n"
        f"sys.argv[0] = {RECIPE!r}\n"
        "from keras_gmlp.workflows import pretraining as job\n"
        "class Kill(keras.callbacks.Callback):\n"
        "    def on_epoch_end(self, epoch, logs=None):\n"
        f"        if epoch == {epoch}:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        f"job.run(job.config_from_argv({argv!r}), callbacks=[Kill()])\n"
    )
    return subprocess.run(
        [sys.executable, "-c", killer],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.one_backend("torch")
def test_killed_run_resumes_and_continues_the_stream(corpus, tmp_path):
    env = dict(os.environ)
    argv = tiny_flags(corpus, tmp_path, "--epochs", "3")
    process = killed_at_epoch_end(argv, 0, env)
    assert process.returncode == -signal.SIGKILL, process.stderr[-3000:]
    assert not (tmp_path / "results.json").exists()
    first_epoch = json.load(open(tmp_path / "history.json"))
    assert [record["epoch"] for record in first_epoch] == [0]
    vocabulary = (tmp_path / "vocabulary.txt").read_text()

    # The same command again: epochs 2 and 3 on the batches after the
    # three (steps per epoch) that epoch 1 trained on.
    process = run_recipe(argv, env)
    assert "Reusing the run's vocabulary" in process.stdout
    assert "Resuming: skipping the 3 batches trained on." in process.stdout
    assert (tmp_path / "vocabulary.txt").read_text() == vocabulary
    results = json.load(open(tmp_path / "results.json"))
    assert results["epochs"] == 3
    assert results["history"]["loss"][0] == first_epoch[0]["loss"]
    assert not (tmp_path / "backup").exists()
    # The training checkpoint loads after `import keras_gmlp.models`
    # (tests/test_package.py checks what it registers).
    model = keras.saving.load_model(tmp_path / "best.keras")
    assert model.compiled


@pytest.mark.one_backend("tensorflow")
@pytest.mark.skipif(BACKEND == "torch", reason="one device on torch")
def test_two_device_strategy(corpus, tmp_path):
    env = dict(os.environ)
    if BACKEND == "tensorflow":
        strategy = "mirrored"
    else:
        strategy = "data_parallel"
        env["XLA_FLAGS"] = xla_flags(cpu_devices=2)
    argv = tiny_flags(corpus, tmp_path, "--epochs", "1")
    argv[argv.index("--batch-size") : argv.index("--batch-size") + 2] = []
    argv += ["--strategy", strategy, "--split-cpu", "2"]
    argv += ["--per-replica-batch-size", "4", "--unigram-tokens", "0"]
    run_recipe(argv, env)
    results = json.load(open(tmp_path / "results.json"))
    assert results["distribution"]["strategy"] == strategy
    assert results["distribution"]["num_replicas"] == 2
    # Four sequences per replica: a global batch of 8, and the learning
    # rate (given for a batch of 4) doubles.
    assert results["global_batch_size"] == 8
    assert results["training_tokens"] == 3 * 8 * 16
    from keras_gmlp.baselines import LEARNING_RATES

    assert results["peak_learning_rate"] == pytest.approx(
        2 * LEARNING_RATES["mlm"]["gmlp"]
    )
    assert np.isfinite(results["metrics"]["val_perplexity"])


@pytest.mark.one_backend("torch")
def test_causal_objective_trains_a_generator(corpus, tmp_path, capsys):
    flags = ["--objective", "causal", "--epochs", "1"]
    flags += ["--mixed-precision", "mixed_bfloat16"]
    results = train(tiny_flags(corpus, tmp_path, *flags))
    metrics = results["metrics"]
    assert 0 <= metrics["val_next_token_accuracy"] <= 1
    assert 1 < metrics["val_perplexity"] < 1e3
    # keras-hub 0.32 needs a saved mixed policy passed back explicitly.
    task = GMLPCausalLM.from_preset(
        str(tmp_path / "preset"), dtype="mixed_bfloat16"
    )
    block = task.backbone.get_layer("block_0")
    assert block.compute_dtype == "bfloat16"
    assert block.variable_dtype == "float32"
    with pytest.raises(ValueError, match="trained a 'causal' model"):
        pretraining.fill_in_the_blank(str(tmp_path), "the [MASK] sat")
    # keras-gmlp generate: greedy, the prompt's tokens then the tokens of
    # a step-by-step greedy reference up to [SEP] (id 3).
    capsys.readouterr()
    assert (
        cli.main(
            ["generate", str(tmp_path), "the cat", "--max-new-tokens", "3"]
        )
        == 0
    )
    text = capsys.readouterr().out.strip()
    tokenizer = task.preprocessor.tokenizer
    tokens = [2, *np.asarray(tokenizer("the cat")).tolist()]
    for _ in range(3):
        ids = np.array([tokens], "int32")
        inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids, bool)}
        logits = keras.ops.convert_to_numpy(task(inputs))[0, -1]
        tokens.append(int(np.argmax(logits)))
        if tokens[-1] == 3:
            break
    kept = np.array([i for i in tokens if i > 4], "int32")
    assert text == tokenizer.detokenize(kept)
    assert text.startswith("the cat")


@pytest.mark.one_backend("tensorflow")
def test_causal_transformer_baseline(corpus, tmp_path):
    flags = ["--objective", "causal", "--architecture", "transformer"]
    results = train(tiny_flags(corpus, tmp_path, *flags, "--epochs", "1"))
    assert results["model"]["architecture"] == "transformer"
    assert results["model"]["transformer_layers"] >= 1
    assert 1 < results["metrics"]["val_perplexity"] < 1e3
    model = keras.saving.load_model(tmp_path / "last.keras", compile=False)
    # No future leak: changing the last token leaves earlier logits alone.
    tokens = np.array([[2, 5, 6, 7, 8, 9]], "int32")
    changed = tokens.copy()
    changed[0, -1] = 10
    before = keras.ops.convert_to_numpy(model(tokens))
    after = keras.ops.convert_to_numpy(model(changed))
    np.testing.assert_allclose(before[:, :-1], after[:, :-1], atol=1e-5)
    assert np.abs(before[:, -1] - after[:, -1]).max() > 1e-4


@pytest.mark.one_backend("torch")
def test_tfds_corpus_pretrains(tmp_path):
    flags = tiny_flags("unused", tmp_path, "--epochs", "1")
    flags[flags.index("--text-files") : flags.index("--text-files") + 2] = []
    flags += ["--tfds-name", "imdb_reviews", "--validation-fraction", "0.3"]
    with tfds.testing.mock_data(num_examples=60):
        results = train(flags)
    assert results["arguments"]["tfds_name"] == "imdb_reviews"
    assert results["counts"]["records"] > 0
    assert np.isfinite(results["metrics"]["val_perplexity"])


@pytest.mark.one_backend("torch")
def test_transformer_takes_the_gmlp_batches(corpus, rng):
    from keras_gmlp.baselines import masked_lm_baseline
    from keras_gmlp.data.corpus import TextCorpus
    from keras_gmlp.data.corpus import expand_patterns
    from keras_gmlp.data.corpus import read_text_records
    from keras_gmlp.data.lm_batches import masked_lm_dataset
    from keras_gmlp.data.vocabulary import make_tokenizer
    from keras_gmlp.data.vocabulary import train_vocabulary
    from keras_gmlp.models.gmlp_text.text_metrics import language_model_loss

    vocabulary = train_vocabulary(
        read_text_records(expand_patterns(corpus)), 60
    )
    batches = masked_lm_dataset(
        TextCorpus(files=corpus).dataset("train"),
        make_tokenizer(vocabulary),
        16,
        4,
    )
    inputs, labels, weights = next(batches.as_numpy_iterator())
    # The baseline makes its padding mask from the token ids.
    del inputs["padding_mask"]
    model, _ = masked_lm_baseline(
        "bert",
        vocabulary_size=len(vocabulary),
        sequence_length=16,
        num_layers=1,
        hidden_dim=16,
        ffn_dim=32,
    )
    model.compile(optimizer="adam", loss=language_model_loss())
    logits = model.predict_on_batch(inputs)
    assert logits.shape == tuple(labels.shape) + (len(vocabulary),)
    loss = model.train_on_batch(inputs, labels, sample_weight=weights)
    # Near log(vocabulary) at the start: every position is predicted.
    assert 0.5 * np.log(len(vocabulary)) < float(loss) < 2 * np.log(60)


@pytest.mark.large
def test_transformer_trains_through_the_same_pipeline(corpus, tmp_path):
    results = train(
        tiny_flags(corpus, tmp_path, "--architecture", "transformer")
    )
    assert results["model"]["architecture"] == "transformer"
    assert results["model"]["transformer_layers"] >= 1
    assert np.isfinite(results["metrics"]["val_perplexity"])
    predictions = pretraining.fill_in_the_blank(str(tmp_path), "the [MASK] sat")
    assert len(predictions[0]) == 5


@pytest.mark.parametrize("unit", ["split", "multiplicative", "additive"])
def test_model_flags_reach_the_layers(unit):
    config = pretraining.config_from_argv(
        [
            "--spatial-unit",
            unit,
            "--attention-dim",
            "8",
            "--spatial",
            "dense",
            "--num-layers",
            "1",
            "--hidden-dim",
            "8",
            "--ffn-dim",
            "16",
            "--sequence-length",
            "12",
        ]
    )
    _, model, description = pretraining.build_models(config, 50)
    block = model.backbone.get_layer("block_0")
    assert block.gating == unit
    assert block.attention_dim == 8
    assert block.spatial == "dense"
    assert block.sequence_length == 12
    assert description["config"]["vocabulary_size"] == 50


def test_bad_input_fails_clearly(tmp_path):
    (tmp_path / "empty.txt").write_text("\n \n")
    flags = ["--output-dir", str(tmp_path / "run")]
    with pytest.raises(ValueError, match="no training text record"):
        train(["--text-files", str(tmp_path / "empty.txt"), *flags])
    with pytest.raises(ValueError, match="Expected a corpus"):
        train(flags)
    with pytest.raises(FileNotFoundError, match="missing"):
        train(["--text-files", str(tmp_path / "missing*.txt"), *flags])
    config = pretraining.config_from_argv(
        ["--architecture", "transformer", "--objective", "causal"]
        + ["--hidden-dim", "16", "--transformer-heads", "3"]
    )
    with pytest.raises(ValueError, match="16 is not divisible by num_heads 3"):
        pretraining.build_models(config, 50)


@pytest.mark.parametrize(
    "architecture",
    [
        pytest.param("deberta_v3", marks=pytest.mark.one_backend("torch")),
        pytest.param("roformer_v2", marks=pytest.mark.one_backend("torch")),
        pytest.param("fnet", marks=pytest.mark.one_backend("tensorflow")),
    ],
)
def test_baselines_train_on_the_same_batches_and_targets(
    architecture, corpus, tmp_path
):
    from keras_gmlp.baselines import LEARNING_RATES

    # A gMLP large enough for one DeBERTa layer with its relative
    # position embeddings.
    flags = ["--architecture", architecture, "--epochs", "1"]
    flags += ["--ffn-dim", "128"]
    results = train(tiny_flags(corpus, tmp_path, *flags))
    assert results["model"]["baseline"] == architecture
    # No --learning-rate: the architecture's default, for a batch of 8
    # where it is given for the per-replica batch (32).
    assert results["peak_learning_rate"] == pytest.approx(
        LEARNING_RATES["mlm"][architecture] * 8 / 32
    )
    metrics = results["metrics"]
    assert 1 < metrics["val_perplexity"] < 1e3
    # Scored again on the seeded held-out batches: the same targets.
    again = pretraining.evaluate_run(str(tmp_path))
    assert again["perplexity"] == pytest.approx(
        metrics["val_perplexity"], rel=1e-4
    )
