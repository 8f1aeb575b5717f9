import os
import subprocess
import sys

import keras

import keras_gmlp

RECIPE_OBJECTS = (
    "WarmupLinearDecay",  # schedules of the recipes' optimizers
    "GatherPositions",  # the masked-LM training model
    "BertInputs",
    "Perplexity",  # the language models' metric
)


def test_import_registers_recipe_objects_without_tensorflow():
    # A fresh process: what `import keras_gmlp` alone registers and loads.
    code = (
        "import sys, keras, keras_gmlp\n"
        "keras_gmlp.models.masked_lm('gmlp_tiny', num_layers=1)\n"
        "keras_gmlp.models.image_classifier('gmlp_micro4_32', num_layers=1)\n"
        f"for name in {RECIPE_OBJECTS!r}:\n"
        "    assert keras.saving.get_registered_object(f'keras_gmlp>{name}')\n"
        "print('tensorflow' in sys.modules, 'keras_hub' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loads_tensorflow = keras.config.backend() == "tensorflow"
    assert result.stdout.split() == [str(loads_tensorflow), "False"]


def test_public_api():
    assert keras_gmlp.PRESETS is keras_gmlp.models.PRESETS
    for name in keras_gmlp.layers.__all__:
        layer = getattr(keras_gmlp.layers, name)
        registered = keras.saving.get_registered_name(layer)
        assert registered == f"keras_gmlp>{name}"
