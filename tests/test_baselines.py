"""The keras-hub baselines: matched in size, trained on the gMLP batches."""

import math

import keras
import keras_hub  # noqa: F401 (registers keras-hub's classes for loading)
import numpy as np
import pytest

from keras_gmlp import baselines
from keras_gmlp.models.gmlp_text.text_metrics import language_model_loss
from keras_gmlp.workflows import image_classification
from keras_gmlp.workflows import pretraining

VOCABULARY = 40
# Tiny, and a gMLP whose parameters a one- or two-layer baseline can match.
TEXT_FLAGS = [
    "--sequence-length", "8",
    "--num-layers", "2",
    "--hidden-dim", "8",
    "--ffn-dim", "32",
]  # fmt: skip


def count_weights(model):
    """Trainable parameters counted from the weights' shapes (shared ones
    once): independent of `baselines.trainable_parameters`."""
    seen, total = set(), 0
    for weight in model.trainable_weights:
        if id(weight) not in seen:
            seen.add(id(weight))
            total += int(np.prod(weight.shape))
    return total


def masked_batch(rng, batch=2, length=8, predictions=2):
    token_ids = rng.integers(5, VOCABULARY, (batch, length)).astype("int32")
    token_ids[1, length - 2 :] = 0  # right padding
    inputs = {
        "token_ids": token_ids,
        "mask_positions": np.array([[1, 3], [0, 2]], "int32"),
    }
    labels = rng.integers(5, VOCABULARY, (batch, predictions))
    return inputs, labels, np.ones((batch, predictions), "float32")


# keras-hub's models on every backend are keras-hub's tests; the matching
# and the batches are backend independent (and the recipe's tests train
# BERT on every backend), so each baseline runs under one backend here.
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.one_backend(backend))
        for name, backend in [
            ("bert", "torch"),
            ("roformer_v2", "tensorflow"),
            ("deberta_v3", "tensorflow"),
            ("fnet", "torch"),
        ]
    ],
)
def test_masked_lm_baseline_matches_trains_and_reloads(name, tmp_path):
    config = pretraining.config_from_argv(
        ["--architecture", name, "--transformer-heads", "2", *TEXT_FLAGS]
    )
    training_model, _, description = pretraining.build_models(
        config, VOCABULARY
    )
    gmlp, _, _ = pretraining.build_models(
        pretraining.config_from_argv(TEXT_FLAGS), VOCABULARY
    )
    assert description["baseline"] == name
    # Matched within a few per cent of the gMLP's trainable parameters.
    target = count_weights(gmlp)
    assert description["gmlp_trainable_parameters"] == target
    assert count_weights(training_model) == pytest.approx(target, rel=0.03)
    # It takes the gMLP's masked batches; the loss starts near log(V).
    rng = np.random.default_rng(0)
    inputs, labels, weights = masked_batch(rng)
    training_model.compile(optimizer="adam", loss=language_model_loss())
    logits = training_model.predict_on_batch(inputs)
    assert logits.shape == (2, 2, VOCABULARY)
    loss = float(training_model.train_on_batch(inputs, labels, weights))
    assert 0.5 * math.log(VOCABULARY) < loss < 2 * math.log(VOCABULARY)
    path = str(tmp_path / f"{name}.keras")
    training_model.save(path)
    reloaded = keras.saving.load_model(path, compile=False)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(reloaded(inputs)),
        keras.ops.convert_to_numpy(training_model(inputs)),
        atol=1e-6,
    )


def test_causal_baseline_is_matched_too():
    flags = ["--objective", "causal", "--architecture", "transformer"]
    config = pretraining.config_from_argv(flags + TEXT_FLAGS)
    model, _, description = pretraining.build_models(config, VOCABULARY)
    gmlp, _, _ = pretraining.build_models(
        pretraining.config_from_argv(["--objective", "causal", *TEXT_FLAGS]),
        VOCABULARY,
    )
    assert description["baseline"] == "gpt2"
    assert count_weights(model) == pytest.approx(count_weights(gmlp), rel=0.03)


@pytest.mark.one_backend("torch")
def test_vit_matches_the_gmlp_and_trains(tmp_path):
    model_config = {
        "num_layers": 2,
        "hidden_dim": 16,
        "ffn_dim": 64,
        "image_size": 8,
        "patch_size": 4,
        "num_classes": 3,
        "num_channels": 3,
    }
    gmlp, _ = image_classification.build_model(None, model_config)
    vit, description = image_classification.build_model(
        None, model_config, architecture="vit"
    )
    assert isinstance(vit, keras_hub.models.ViTImageClassifier)
    assert description["gmlp_trainable_parameters"] == count_weights(gmlp)
    assert count_weights(vit) == pytest.approx(count_weights(gmlp), rel=0.03)
    # Raw pixels in [0, 255]: the gMLP's preprocessor scales them in `fit`.
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (4, 8, 8, 3)).astype("float32")
    labels = keras.utils.to_categorical([0, 1, 2, 0], 3)
    vit.compile(
        optimizer="adam",
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
        metrics=image_classification.classification_metrics(3),
    )
    history = vit.fit(images, labels, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    path = str(tmp_path / "vit.keras")
    vit.save(path)
    reloaded = keras.saving.load_model(path, compile=False)
    np.testing.assert_allclose(
        reloaded.predict(images, verbose=0),
        vit.predict(images, verbose=0),
        atol=1e-5,
    )


def test_matched_size_searches_depth_and_feed_forward_size():
    # A Transformer-shaped count: 1000 shared, 4 d^2 + 2 d f per layer.
    def count(layers, width, ffn):
        return 1000 + layers * (4 * width * width + 2 * width * ffn)

    size = baselines.matched_size(count, 50_000, [16])
    assert abs(count(16, 16, 64) - 50_000) / 50_000 < 0.02
    assert size == {
        "num_layers": 16,
        "hidden_dim": 16,
        "ffn_dim": 64,
        "parameters": count(16, 16, 64),
        "target": 50_000,
    }
    # A fixed depth: the feed-forward size alone matches.
    size = baselines.matched_size(count, 50_000, [16], num_layers=4)
    assert size["num_layers"] == 4
    assert abs(size["parameters"] - 50_000) / 50_000 < 0.02
    with pytest.raises(ValueError, match="No size within 2% of 500"):
        baselines.matched_size(count, 500, [16])


def test_every_architecture_has_a_default_learning_rate():
    for job, names in baselines.ARCHITECTURES.items():
        for name in names:
            if job == "image":
                for family in ("digits", "cifar", "imagenet"):
                    rate = baselines.default_learning_rate(job, name, family)
                    assert rate is None if name == "gmlp" else rate > 0
            else:
                assert baselines.default_learning_rate(job, name) > 0
    assert baselines.canonical_architecture("mlm", "transformer") == "bert"
    assert baselines.canonical_architecture("causal", "transformer") == "gpt2"
    assert baselines.canonical_architecture("image", "deit") == "vit"
    assert baselines.default_learning_rate(
        "image", "deit", "cifar"
    ) == baselines.default_learning_rate("image", "vit", "cifar")
    with pytest.raises(ValueError, match="'fnet' for 'causal'"):
        baselines.canonical_architecture("causal", "fnet")
