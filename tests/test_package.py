import importlib
import os
import subprocess
import sys

import keras
import pytest

import keras_gmlp
from tests.fresh_python import last_line_of

RECIPE_OBJECTS = (
    "WarmupCosineDecay",  # schedules of the recipes' optimizers
    "WarmupLinearDecay",
    "BertInputs",
    "Perplexity",  # the language models' metric
    "LanguageModelLoss",  # and their loss
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


@pytest.mark.one_backend("torch")
def test_models_are_imported_and_registered_when_first_used():
    # A fresh process: `import keras_gmlp` alone registers no task and
    # leaves keras-hub alone; a name of the models imports them, which
    # registers what `keras.saving.load_model` and keras-hub's
    # `from_preset` need (the tasks and the recipes' objects).
    code = (
        "import sys, keras, keras_gmlp\n"
        "name = 'keras_gmlp>GMLPMaskedLM'\n"
        "print(keras.saving.get_registered_object(name) is None)\n"
        "print('keras_hub' in sys.modules)\n"
        "keras_gmlp.GMLPMaskedLM\n"
        "print('keras_gmlp.models' in sys.modules)\n"
        f"for name in {RECIPE_OBJECTS + TEXT_CLASSES!r}:\n"
        "    assert keras.saving.get_registered_object(f'keras_gmlp>{name}')\n"
        "print('keras_hub' in sys.modules)\n"
    )
    assert run_fresh(code).split() == ["True", "False", "True", "True"]


@pytest.mark.one_backend("torch")
def test_a_saved_task_needs_the_models_imported(tmp_path):
    # Forgetting `import keras_gmlp.models`: Keras' error names the class
    # and its module.
    models = importlib.import_module("keras_gmlp.models")
    task = models.masked_lm(
        vocabulary_size=10,
        sequence_length=4,
        num_layers=1,
        hidden_dim=4,
        ffn_dim=8,
    )
    path = str(tmp_path / "task.keras")
    task.save(path)
    load = f"keras.saving.load_model({path!r})\n"
    result = subprocess.run(
        [sys.executable, "-c", "import keras, keras_gmlp\n" + load],
        env=dict(os.environ),
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "GMLPMaskedLM" in result.stderr
    assert "keras_gmlp.models.gmlp_text.gmlp_masked_lm" in result.stderr
    code = "import keras, keras_gmlp.models\n" + load + "print('loaded')\n"
    assert run_fresh(code).split() == ["loaded"]


@pytest.mark.parametrize("module", ["keras_gmlp", "keras_gmlp.training"])
def test_layers_and_training_need_neither_tensorflow_nor_keras_hub(module):
    # A plain import in a fresh process: the package imports its layers
    # (Keras only) and nothing else; its training pieces (the allocator,
    # the optimizers, the schedules) import keras-hub's models only when
    # a function needs them. (`keras_gmlp.layers` runs the package's
    # `__init__` first: the first case covers it.)
    code = (
        f"import sys, keras, {module}\n"
        "import keras_gmlp.layers\n"
        "x = keras.ops.ones((1, 4, 8))\n"
        "keras_gmlp.layers.GMLPBlock(ffn_dim=16, attention_dim=4)(x)\n"
        "print('tensorflow' in sys.modules, 'keras_hub' in sys.modules)\n"
    )
    loads_tensorflow = keras.config.backend() == "tensorflow"
    assert run_fresh(code).split() == [str(loads_tensorflow), "False"]


def test_public_api():
    assert keras_gmlp.PRESETS is keras_gmlp.models.PRESETS
    assert set(keras_gmlp.__all__) <= set(dir(keras_gmlp))
    assert {"models", "training", "data"} <= set(dir(keras_gmlp))
    with pytest.raises(AttributeError, match="no attribute 'modles'"):
        keras_gmlp.modles  # noqa: B018
    for name in TEXT_CLASSES:
        assert getattr(keras_gmlp, name) is getattr(keras_gmlp.models, name)
        assert name in keras_gmlp.__all__
        assert name in keras_gmlp.models.__all__
    for name in keras_gmlp.layers.__all__:
        layer = getattr(keras_gmlp.layers, name)
        registered = keras.saving.get_registered_name(layer)
        assert registered == f"keras_gmlp>{name}"


def test_import_leaves_the_environment_unchanged():
    code = (
        "import os\n"
        "before = dict(os.environ)\n"
        "import keras_gmlp\n"
        "print(dict(os.environ) == before)\n"
    )
    env = dict(os.environ)
    for name in ("TF_ENABLE_ONEDNN_OPTS", "OMP_WAIT_POLICY"):
        env.pop(name, None)
    assert last_line_of(code, env) == "True"


@pytest.mark.one_backend("tensorflow")
@pytest.mark.parametrize(
    "environment, tensorflow_first, expected",
    [
        (None, False, "1"),  # turned on for TensorFlow's import
        ("0", False, "0"),  # the environment's value wins
        (None, True, None),  # TensorFlow already imported: left alone
    ],
)
def test_set_backend_environment_turns_on_tensorflow_onednn(
    environment, tensorflow_first, expected
):
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.pop("TF_ENABLE_ONEDNN_OPTS", None)
    if environment is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = environment
    code = (
        ("import tensorflow\n" if tensorflow_first else "")
        + "import os, keras_gmlp\n"
        + "keras_gmlp.set_backend_environment()\n"
        + "import keras\n"
        + "from tensorflow.python.util import _pywrap_util_port\n"
        + "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'))\n"
        + "print(_pywrap_util_port.IsMklEnabled())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    flag, onednn_on = result.stdout.split()[-2:]
    assert flag == str(expected)
    if expected is not None:
        # What TensorFlow itself reports it runs.
        assert onednn_on == str(expected == "1")


@pytest.mark.one_backend("torch")
@pytest.mark.parametrize(
    "environment, expected_spin_count",
    [
        (None, "0"),  # passive: the threads sleep as soon as they wait
        ("ACTIVE", "30000000000"),  # the environment's value wins
    ],
)
def test_console_script_makes_openmp_threads_wait_passively(
    environment, expected_spin_count
):
    # `keras-gmlp` runs `from keras_gmlp.cli import main`, then `main`,
    # which sets the policy, then imports torch through Keras; libgomp
    # reads the wait policy once, when torch loads it, and prints what it
    # uses under OMP_DISPLAY_ENV (to the stderr that `--verbose` leaves).
    env = dict(os.environ, KERAS_BACKEND="torch", OMP_DISPLAY_ENV="verbose")
    env.pop("OMP_WAIT_POLICY", None)
    if environment is not None:
        env["OMP_WAIT_POLICY"] = environment
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from keras_gmlp.cli import main\nmain(['--verbose', 'info'])",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    spin_counts = [
        line.split("=")[1].strip().strip("'")
        for line in result.stderr.splitlines()
        if line.strip().startswith("GOMP_SPINCOUNT")
    ]
    assert spin_counts, result.stderr[-3000:]  # torch loaded libgomp
    assert set(spin_counts) == {expected_spin_count}
