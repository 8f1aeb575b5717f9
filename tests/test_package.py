import os
import subprocess
import sys

import keras
import pytest

import keras_gmlp


@pytest.mark.skipif(
    keras.config.backend() == "tensorflow",
    reason="the TensorFlow backend imports TensorFlow itself",
)
def test_import_does_not_load_tensorflow():
    code = (
        "import sys, keras_gmlp\n"
        "keras_gmlp.models.masked_lm('gmlp_tiny', num_layers=1)\n"
        "keras_gmlp.models.image_classifier('gmlp_micro4_32', num_layers=1)\n"
        "print('tensorflow' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "False"


def test_public_api():
    assert keras_gmlp.PRESETS is keras_gmlp.models.PRESETS
    for name in keras_gmlp.layers.__all__:
        layer = getattr(keras_gmlp.layers, name)
        registered = keras.saving.get_registered_name(layer)
        assert registered == f"keras_gmlp>{name}"
