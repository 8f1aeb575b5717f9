"""Keras layers of gMLP and aMLP."""

from keras_gmlp.layers.drop_path import DropPath
from keras_gmlp.layers.gmlp_block import GMLPBlock
from keras_gmlp.layers.patch_embedding import PatchEmbedding
from keras_gmlp.layers.spatial_gating_unit import SpatialGatingUnit
from keras_gmlp.layers.tied_embedding import TiedEmbedding
from keras_gmlp.layers.tiny_attention import TinyAttention

__all__ = [
    "DropPath",
    "GMLPBlock",
    "PatchEmbedding",
    "SpatialGatingUnit",
    "TiedEmbedding",
    "TinyAttention",
]
