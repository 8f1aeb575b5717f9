"""gMLP and aMLP models: keras-hub backbones, tasks and preprocessors, the
builders (the short form) and the paper's presets.

Importing this package registers every serializable class of the package
with Keras, the pieces a compiled task holds (the learning-rate schedules of
`keras_gmlp.optimizers.schedules`, the text tasks' losses and metrics) and
`BertInputs` (the input layer of the baselines of `keras_gmlp.baselines`)
included: a saved task, preset or checkpoint loads after
`import keras_gmlp.models`.
"""

from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone
from keras_gmlp.models.gmlp_image.gmlp_image_classifier import (
    GMLPImageClassifier,
)
from keras_gmlp.models.gmlp_image.gmlp_image_classifier_preprocessor import (
    GMLPImageClassifierPreprocessor,
)
from keras_gmlp.models.gmlp_image.gmlp_image_converter import GMLPImageConverter
from keras_gmlp.models.gmlp_image.image_classifier import image_classifier
from keras_gmlp.models.gmlp_text.bert_inputs import BertInputs
from keras_gmlp.models.gmlp_text.causal_lm import causal_lm
from keras_gmlp.models.gmlp_text.gmlp_causal_lm import GMLPCausalLM
from keras_gmlp.models.gmlp_text.gmlp_causal_lm_preprocessor import (
    GMLPCausalLMPreprocessor,
)
from keras_gmlp.models.gmlp_text.gmlp_masked_lm import GMLPMaskedLM
from keras_gmlp.models.gmlp_text.gmlp_masked_lm_preprocessor import (
    GMLPMaskedLMPreprocessor,
)
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_text_classifier import GMLPTextClassifier
from keras_gmlp.models.gmlp_text.gmlp_text_classifier_preprocessor import (
    GMLPTextClassifierPreprocessor,
)
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import GMLPTokenizer
from keras_gmlp.models.gmlp_text.last_token_pooling import LastTokenPooling
from keras_gmlp.models.gmlp_text.masked_lm import masked_lm
from keras_gmlp.models.gmlp_text.masked_lm import text_encoder
from keras_gmlp.models.gmlp_text.text_classifier import text_classifier
from keras_gmlp.models.presets import PRESETS
from keras_gmlp.optimizers import schedules as _schedules  # noqa: F401

__all__ = [
    "BertInputs",
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
    "LastTokenPooling",
    "PRESETS",
    "causal_lm",
    "image_classifier",
    "masked_lm",
    "text_classifier",
    "text_encoder",
]
