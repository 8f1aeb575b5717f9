"""gMLP and aMLP ("Pay Attention to MLPs", Liu et al. 2021) for Keras 3."""

from keras_gmlp import layers
from keras_gmlp import models
from keras_gmlp.models import PRESETS

# The recipes' serializable pieces (schedules, losses and metrics, training
# layers) register themselves, so their checkpoints load after a plain
# `import keras_gmlp`. This imports neither TensorFlow nor keras-hub.
from keras_gmlp.models import baselines as _baselines  # noqa: F401
from keras_gmlp.training import text_metrics as _text_metrics  # noqa: F401
from keras_gmlp.training import text_models as _text_models  # noqa: F401

__version__ = "0.1.0"

__all__ = ["PRESETS", "__version__", "layers", "models"]
