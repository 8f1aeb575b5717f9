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


TEXT_CLASSES = (
    "GMLPTextBackbone",
    "GMLPMaskedLM",
    "GMLPMaskedLMPreprocessor",
    "GMLPTextClassifier",
    "GMLPTextClassifierPreprocessor",
    "GMLPCausalLM",
    "GMLPCausalLMPreprocessor",
    "GMLPTokenizer",
)


def run_fresh(code):
    """Runs `code` in a fresh process of this backend; returns stdout."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_import_registers_models_and_recipe_objects():
    # A fresh process: what `import keras_gmlp` alone registers. The
    # models build on keras-hub, so it is imported.
    code = (
        "import sys, keras, keras_gmlp\n"
        "keras_gmlp.models.masked_lm('gmlp_tiny', num_layers=1)\n"
        "keras_gmlp.models.image_classifier('gmlp_micro4_32', num_layers=1)\n"
        f"for name in {RECIPE_OBJECTS + TEXT_CLASSES!r}:\n"
        "    assert keras.saving.get_registered_object(f'keras_gmlp>{name}')\n"
        "print('keras_hub' in sys.modules)\n"
    )
    assert run_fresh(code).split() == ["True"]


def test_layers_code_needs_neither_tensorflow_nor_keras_hub():
    # The layers' modules, run without the package's __init__ (which loads
    # the keras-hub models), import keras only.
    package = os.path.dirname(keras_gmlp.__file__)
    code = (
        "import sys, types, keras\n"
        "package = types.ModuleType('keras_gmlp')\n"
        f"package.__path__ = [{package!r}]\n"
        "sys.modules['keras_gmlp'] = package\n"
        "import keras_gmlp.layers\n"
        "x = keras.ops.ones((1, 4, 8))\n"
        "keras_gmlp.layers.GMLPBlock(ffn_dim=16, attention_dim=4)(x)\n"
        "print('tensorflow' in sys.modules, 'keras_hub' in sys.modules)\n"
    )
    loads_tensorflow = keras.config.backend() == "tensorflow"
    assert run_fresh(code).split() == [str(loads_tensorflow), "False"]


def test_public_api():
    assert keras_gmlp.PRESETS is keras_gmlp.models.PRESETS
    for name in TEXT_CLASSES:
        assert getattr(keras_gmlp, name) is getattr(keras_gmlp.models, name)
        assert name in keras_gmlp.__all__
        assert name in keras_gmlp.models.__all__
    for name in keras_gmlp.layers.__all__:
        layer = getattr(keras_gmlp.layers, name)
        registered = keras.saving.get_registered_name(layer)
        assert registered == f"keras_gmlp>{name}"
