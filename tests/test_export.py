import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_gmlp import models
from keras_gmlp.export import export_saved_model
from keras_gmlp.export import serving_model

# Runs in a plain TensorFlow process: no Keras, no keras_gmlp.
PLAIN_TF_SERVE = """
import sys
import numpy as np
import tensorflow as tf
for export_dir, inputs, outputs in zip(*[iter(sys.argv[1:])] * 3):
    loaded = tf.saved_model.load(export_dir)
    served = loaded.serve(tf.constant(np.load(inputs))).numpy()
    assert "serving_default" in loaded.signatures
    np.save(outputs, served)
assert "keras_gmlp" not in sys.modules
"""


def serve_in_plain_tensorflow(exports, tmp_path):
    """Serves `[(export_dir, inputs)]` in one plain TensorFlow process."""
    argv = []
    for index, (export_dir, inputs) in enumerate(exports):
        np.save(tmp_path / f"inputs{index}.npy", inputs)
        argv += [
            export_dir,
            str(tmp_path / f"inputs{index}.npy"),
            str(tmp_path / f"outputs{index}.npy"),
        ]
    env = dict(os.environ)
    env.pop("KERAS_BACKEND", None)
    process = subprocess.run(
        [sys.executable, "-c", PLAIN_TF_SERVE, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return [np.load(tmp_path / f"outputs{i}.npy") for i in range(len(exports))]


def test_exports_serve_the_keras_models_outputs(tmp_path, rng):
    # Images: uint8 in, preprocessing inside, probabilities out.
    image_model = models.image_classifier(
        num_classes=5,
        image_size=8,
        patch_size=4,
        num_channels=3,
        num_layers=2,
        hidden_dim=8,
        ffn_dim=16,
    )
    # Move W away from its near-zero initial values.
    for layer in image_model.backbone.layers:
        if layer.name.startswith("block_"):
            unit = layer.spatial_gating_unit
            unit.kernel.assign(rng.normal(size=unit.kernel.shape) * 0.3)
    pixels = rng.integers(0, 256, size=(3, 8, 8, 3), dtype=np.uint8)
    image_expected = keras.ops.convert_to_numpy(
        keras.ops.softmax(image_model(pixels.astype("float32") / 127.5 - 1.0))
    )
    image_dir = export_saved_model(
        image_model,
        str(tmp_path / "images"),
        input_dtype="uint8",
        preprocessing=[keras.layers.Rescaling(1 / 127.5, offset=-1.0)],
    )
    # Text: int32 token ids in, probabilities out, a fixed sequence length
    # (the variable one is tested below).
    text_model = models.text_classifier(
        num_classes=3,
        vocabulary_size=20,
        sequence_length=6,
        num_layers=1,
        hidden_dim=8,
        ffn_dim=16,
    )
    tokens = rng.integers(1, 20, size=(2, 6)).astype("int32")
    text_expected = keras.ops.convert_to_numpy(
        keras.ops.softmax(text_model(tokens))
    )
    text_dir = export_saved_model(
        text_model,
        str(tmp_path / "text"),
        input_shape=(6,),
        input_dtype="int32",
    )

    image_served, text_served = serve_in_plain_tensorflow(
        [(image_dir, pixels), (text_dir, tokens)], tmp_path
    )
    assert image_served.shape == (3, 5) and image_served.dtype == np.float32
    np.testing.assert_allclose(image_served.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(image_served, image_expected, atol=2e-5)
    np.testing.assert_allclose(text_served, text_expected, atol=2e-5)


def test_serving_model_defaults_to_the_model_input():
    model = models.image_classifier(
        num_classes=2,
        image_size=4,
        patch_size=2,
        num_layers=1,
        hidden_dim=4,
        ffn_dim=8,
    )
    serving = serving_model(model)
    assert tuple(serving.inputs[0].shape) == (None, 4, 4, 3)
    assert serving.inputs[0].dtype == "float32"
    outputs = serving(np.zeros((2, 4, 4, 3), "float32"))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(outputs).sum(axis=1), 1.0, rtol=1e-6
    )


@pytest.mark.skipif(
    keras.config.backend() != "torch", reason="the torch path only"
)
def test_torch_export_reports_the_subprocess_error(tmp_path, monkeypatch):
    model = models.image_classifier(
        num_classes=2,
        image_size=4,
        patch_size=2,
        num_layers=1,
        hidden_dim=4,
        ffn_dim=8,
    )
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(RuntimeError, match="TensorFlow backend failed"):
        export_saved_model(model, str(tmp_path / "x"))


def test_text_models_export_without_input_shape(tmp_path, rng):
    # No input_shape: the SavedModel serves any length up to the models'
    # sequence_length (under JAX, a symbolic length bounded by it).
    config = dict(
        vocabulary_size=20,
        sequence_length=6,
        num_layers=2,
        hidden_dim=8,
        ffn_dim=16,
        attention_dim=4,
    )
    classifier = models.text_classifier(**config, num_classes=3)
    language_model = models.causal_lm(**config, spatial="dense")
    for model in (classifier, language_model):
        for weight in model.weights:  # away from the near-zero spatial W
            weight.assign(rng.normal(0.0, 0.5, weight.shape))
    exports, expected = [], []
    for name, model, activation in (
        ("classifier", classifier, "softmax"),
        ("lm", language_model, None),
    ):
        export_dir = export_saved_model(
            model, str(tmp_path / name), activation=activation
        )
        for length in (3, 6):
            tokens = rng.integers(1, 20, size=(2, length)).astype("int32")
            tokens[1, length - 1 :] = 0  # a padded row
            outputs = keras.ops.convert_to_numpy(model(tokens))
            if activation:
                outputs = keras.ops.convert_to_numpy(keras.ops.softmax(outputs))
            exports.append((export_dir, tokens))
            expected.append(outputs)
    served = serve_in_plain_tensorflow(exports, tmp_path)
    for got, want in zip(served, expected, strict=True):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=5e-5)
