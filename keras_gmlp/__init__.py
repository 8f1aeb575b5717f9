"""gMLP and aMLP ("Pay Attention to MLPs", Liu et al. 2021) for Keras 3.

`import keras_gmlp` imports nothing but the standard library, after
setting two defaults that must be set before a backend is
imported (the environment's own values win): `TF_ENABLE_ONEDNN_OPTS=1`
unless TensorFlow is already imported (TensorFlow's faster CPU kernels,
which it enables by itself on Intel CPUs only) and `OMP_WAIT_POLICY=PASSIVE`
unless torch is (PyTorch's OpenMP threads then sleep while they wait
instead of spinning against tf.data's threads). Each subpackage is imported
when first used: `keras_gmlp.layers` imports Keras (and its backend) and
registers the layers; `keras_gmlp.models` (and the `GMLP*` classes and `PRESETS`
here, which come from it) builds on keras-hub, which imports TensorFlow.
Importing `keras_gmlp.models` registers the models, tasks, preprocessors
and the recipes' serializable pieces with Keras: do it before
`keras.saving.load_model` of a saved task or keras-hub's
`MaskedLM.from_preset(folder)` and friends.
"""

import importlib
import os
import sys

# TensorFlow turns its oneDNN kernels on by default on Intel CPUs only; on
# an AMD CPU they make a gMLP training step 1.2-1.3x faster
# (`benchmarks/vision.py`). The
# flag is read when TensorFlow is imported, so it is set here, before
# Keras imports it, unless TensorFlow is already imported or the
# environment says otherwise (`TF_ENABLE_ONEDNN_OPTS=0` wins).
if "tensorflow" not in sys.modules:
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
# PyTorch's OpenMP threads spin while they wait; beside tf.data's threads
# (the recipes' and the tasks' input pipelines) that makes the torch
# backend's training steps 30 times slower on a 2-core host. libgomp reads
# the policy once, when torch loads it, and Keras imports torch below, so
# it is set here; this also covers the `keras-gmlp` console script, which
# imports this package before its `main` runs.
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

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

__all__ = [*MODEL_NAMES, "__version__", "layers", "models"]


def __getattr__(name):
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in MODEL_NAMES:
        return getattr(importlib.import_module(f"{__name__}.models"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(SUBMODULES))
