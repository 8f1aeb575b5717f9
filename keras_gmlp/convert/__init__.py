"""Weight converters between keras-gmlp and other implementations."""

from keras_gmlp.convert.timm import load_timm_weights
from keras_gmlp.convert.timm import timm_weight_map

__all__ = ["load_timm_weights", "timm_weight_map"]
