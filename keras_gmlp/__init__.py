"""gMLP and aMLP ("Pay Attention to MLPs", Liu et al. 2021) for Keras 3."""

from keras_gmlp import layers
from keras_gmlp import models
from keras_gmlp.models import PRESETS

__version__ = "0.1.0"

__all__ = ["PRESETS", "__version__", "layers", "models"]
