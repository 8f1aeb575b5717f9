"""Weight converters between keras-gmlp and other implementations."""

from keras_gmlp.convert.timm import load_timm_weights
from keras_gmlp.convert.timm import timm_weight_map
from keras_gmlp.convert.timm_checkpoint import from_timm
from keras_gmlp.convert.timm_checkpoint import load_timm_checkpoint
from keras_gmlp.convert.timm_checkpoint import to_timm
from keras_gmlp.models.gmlp_image.resample import resample_spatial_weights
from keras_gmlp.models.gmlp_image.resample import resize_image_model
from keras_gmlp.models.gmlp_image.timm_preprocessing import (
    apply_timm_preprocessing,
)
from keras_gmlp.models.preset_loader import is_timm_checkpoint

__all__ = [
    "apply_timm_preprocessing",
    "from_timm",
    "is_timm_checkpoint",
    "load_timm_checkpoint",
    "load_timm_weights",
    "resample_spatial_weights",
    "resize_image_model",
    "timm_weight_map",
    "to_timm",
]
