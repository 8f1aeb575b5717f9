"""gMLP and aMLP ("Pay Attention to MLPs", Liu et al. 2021) for Keras 3.

`import keras_gmlp` imports Keras and the layers (`keras_gmlp.layers`)
only. The rest is imported when first used: `keras_gmlp.models` (and the
`GMLP*` classes and `PRESETS` here, which come from it) builds on
keras-hub, which imports TensorFlow. Importing `keras_gmlp.models`
registers the models, tasks, preprocessors and the recipes' serializable
pieces with Keras: do it before `keras.saving.load_model` of a saved task
or keras-hub's `MaskedLM.from_preset(folder)` and friends.
"""

import importlib

from keras_gmlp import layers

__version__ = "0.1.0"

# Subpackages and modules imported on first use.
SUBMODULES = (
    "cli",
    "convert",
    "data",
    "export",
    "generation",
    "models",
    "plots",
    "training",
    "workflows",
)
# Names of `keras_gmlp.models` exported here too.
MODEL_NAMES = (
    "GMLPCausalLM",
    "GMLPCausalLMPreprocessor",
    "GMLPImageBackbone",
    "GMLPImageClassifier",
    "GMLPImageClassifierPreprocessor",
    "GMLPImageConverter",
    "GMLPMaskedLM",
    "GMLPMaskedLMPreprocessor",
    "GMLPTextBackbone",
    "GMLPTextClassifier",
    "GMLPTextClassifierPreprocessor",
    "GMLPTokenizer",
    "PRESETS",
)

__all__ = [*MODEL_NAMES, "__version__", "layers", "models"]


def __getattr__(name):
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in MODEL_NAMES:
        return getattr(importlib.import_module(f"{__name__}.models"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(SUBMODULES))
