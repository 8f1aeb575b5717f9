import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_gmlp import models
from tests.backends import loading_backends

SCRIPT = pathlib.Path(__file__).with_name("predict_saved.py")


def randomize(model, seed=0):
    """Random weights everywhere, so a weight lost in saving shows."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32") * 0.2)


def saved_models():
    """One model of each builder, covering every layer and option."""
    rng = np.random.default_rng(0)
    text = dict(
        vocabulary_size=40,
        sequence_length=10,
        num_layers=2,
        hidden_dim=8,
        ffn_dim=16,
    )
    ids = rng.integers(1, 40, size=(2, 10)).astype("int32")
    return {
        "image": (
            models.image_classifier(
                num_classes=4,
                image_size=(8, 12),
                patch_size=4,
                num_layers=2,
                hidden_dim=8,
                ffn_dim=16,
                attention_dim=4,
                drop_path_rate=0.1,
                dropout=0.1,
            ),
            rng.normal(size=(2, 8, 12, 3)).astype("float32"),
        ),
        "masked_lm": (models.masked_lm(**text, attention_dim=4), ids),
        "causal_lm": (
            models.causal_lm(**text, attention_dim=4, spatial="dense"),
            ids,
        ),
        "classifier": (
            models.text_classifier(**text, gating="additive", num_classes=3),
            ids,
        ),
    }


@pytest.fixture(scope="module")
def saved_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved")
    for name, (model, inputs) in saved_models().items():
        randomize(model)
        model.save(folder / f"{name}.keras")
        np.save(folder / f"{name}.inputs.npy", inputs)
        outputs = keras.ops.convert_to_numpy(model(inputs, training=False))
        np.save(folder / f"{name}.original.npy", outputs)
    return folder


def test_reload_in_process_gives_identical_outputs(saved_folder):
    for path in sorted(saved_folder.glob("*.keras")):
        name = path.name[: -len(".keras")]
        model = keras.saving.load_model(path)
        inputs = np.load(saved_folder / f"{name}.inputs.npy")
        outputs = keras.ops.convert_to_numpy(model(inputs, training=False))
        expected = np.load(saved_folder / f"{name}.original.npy")
        np.testing.assert_array_equal(outputs, expected, err_msg=name)


@pytest.mark.parametrize("backend", loading_backends())
def test_loads_in_a_fresh_process_on_every_backend(saved_folder, backend):
    """A file saved here loads after `import keras_gmlp.models` there."""
    env = dict(os.environ, KERAS_BACKEND=backend)
    subprocess.run(
        [sys.executable, str(SCRIPT), str(saved_folder)],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    for name in saved_models():
        expected = np.load(saved_folder / f"{name}.original.npy")
        outputs = np.load(saved_folder / f"{name}.{backend}.npy")
        np.testing.assert_allclose(
            outputs, expected, rtol=1e-5, atol=1e-5, err_msg=name
        )
