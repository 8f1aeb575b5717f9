"""gMLP and aMLP ("Pay Attention to MLPs", Liu et al. 2021) for Keras 3."""

from keras_gmlp import layers
from keras_gmlp import models
from keras_gmlp.models import PRESETS
from keras_gmlp.models import GMLPCausalLM
from keras_gmlp.models import GMLPCausalLMPreprocessor
from keras_gmlp.models import GMLPImageBackbone
from keras_gmlp.models import GMLPImageClassifier
from keras_gmlp.models import GMLPImageClassifierPreprocessor
from keras_gmlp.models import GMLPImageConverter
from keras_gmlp.models import GMLPMaskedLM
from keras_gmlp.models import GMLPMaskedLMPreprocessor
from keras_gmlp.models import GMLPTextBackbone
from keras_gmlp.models import GMLPTextClassifier
from keras_gmlp.models import GMLPTextClassifierPreprocessor
from keras_gmlp.models import GMLPTokenizer

# The recipes' serializable pieces (schedules, losses and metrics, training
# layers) register themselves, so their checkpoints load after a plain
# `import keras_gmlp`.
from keras_gmlp.models import baselines as _baselines  # noqa: F401
from keras_gmlp.training import text_metrics as _text_metrics  # noqa: F401
from keras_gmlp.training import text_models as _text_models  # noqa: F401

__version__ = "0.1.0"

__all__ = [
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
    "__version__",
    "layers",
    "models",
]
