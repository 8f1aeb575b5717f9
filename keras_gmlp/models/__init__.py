"""Functional model builders of gMLP and aMLP, and their presets."""

from keras_gmlp.models.causal_lm import causal_lm
from keras_gmlp.models.image_classifier import image_classifier
from keras_gmlp.models.last_token_pooling import LastTokenPooling
from keras_gmlp.models.masked_lm import masked_lm
from keras_gmlp.models.masked_lm import text_encoder
from keras_gmlp.models.presets import PRESETS
from keras_gmlp.models.text_classifier import text_classifier

__all__ = [
    "LastTokenPooling",
    "PRESETS",
    "causal_lm",
    "image_classifier",
    "masked_lm",
    "text_classifier",
    "text_encoder",
]
