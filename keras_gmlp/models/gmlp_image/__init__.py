"""gMLP image models: the backbone, the classifier, its preprocessor and
image converter, the builder, and the spatial-weight resampling.

The image configurations of `keras_gmlp.models.PRESETS` are registered
with keras-hub as `GMLPImageBackbone`'s presets.
"""

from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone
from keras_gmlp.models.preset_loader import register_family_presets

register_family_presets("image", GMLPImageBackbone)
