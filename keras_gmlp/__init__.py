"""gMLP and aMLP ("Pay Attention to MLPs", Liu et al. 2021) for Keras 3.

`import keras_gmlp` imports nothing but the standard library and changes
nothing in the process. `set_backend_environment()` (`environment`) sets
the two variables the backends read when imported, `TF_ENABLE_ONEDNN_OPTS`
and `OMP_WAIT_POLICY`: call it before the backend is imported, as the
`keras-gmlp` command and the recipes do. Each subpackage is imported when
first used: `keras_gmlp.layers` imports Keras (and its backend) and
registers the layers; `keras_gmlp.models` (and the `GMLP*` classes and
`PRESETS` here, which come from it) builds on keras-hub, which imports
TensorFlow. Importing `keras_gmlp.models` registers the models, tasks,
preprocessors and the recipes' serializable pieces with Keras: do it
before `keras.saving.load_model` of a saved task or keras-hub's
`MaskedLM.from_preset(folder)` and friends.
"""

import importlib

from keras_gmlp.environment import set_backend_environment

__version__ = "0.1.0"

# Subpackages and modules imported on first use.
SUBMODULES = (
    "baselines",
    "cli",
    "convert",
    "data",
    "export",
    "errors",
    "generation",
    "layers",
    "kernels",
    "models",
    "optimizers",
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

__all__ = [
    *MODEL_NAMES,
    "__version__",
    "layers",
    "models",
    "set_backend_environment",
]


def __getattr__(name):
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in MODEL_NAMES:
        return getattr(importlib.import_module(f"{__name__}.models"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(SUBMODULES))
