"""gMLP and aMLP text models: the backbone, the masked LM, causal LM and
text classifier with their preprocessors, the tokenizer, the builders, and
the language-model losses and metrics.

The text configurations of `keras_gmlp.models.PRESETS` are registered
with keras-hub as `GMLPTextBackbone`'s presets.
"""

from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.preset_loader import register_family_presets

register_family_presets("text", GMLPTextBackbone)
