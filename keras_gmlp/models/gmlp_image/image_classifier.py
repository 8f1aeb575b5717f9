from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone
from keras_gmlp.models.gmlp_image.gmlp_image_classifier import (
    GMLPImageClassifier,
)

IMAGE_DEFAULTS = {
    "num_classes": 1000,
    "image_size": 224,
    "patch_size": 16,
    "num_channels": 3,
    "num_layers": 30,
    "hidden_dim": 256,
    "ffn_dim": 1536,
    "attention_dim": None,
    "spatial": "dense",
    "drop_path_rate": 0.0,
    "dropout": 0.0,
    "dtype": None,
    "name": None,
}
BACKBONE_KEYS = (
    "image_size",
    "patch_size",
    "num_channels",
    "num_layers",
    "hidden_dim",
    "ffn_dim",
    "attention_dim",
    "spatial",
    "drop_path_rate",
    "dtype",
)


def image_classifier(preset=None, **config):
    """Builds a gMLP image classifier that returns logits.

    The short form of `GMLPImageClassifier(GMLPImageBackbone(...))`: patch
    embedding (Conv2D with kernel = stride = patch), `num_layers` gMLP
    blocks over the tokens, a final LayerNorm, the mean over tokens and a
    Dense head. Without a preset the defaults are gMLP-S on 224 x 224
    images. The classifier has no preprocessor: it takes images of its
    size scaled to [-1, 1]; attach a `GMLPImageClassifierPreprocessor` for
    raw images.

    Args:
        preset: str. A name of an image preset of `keras_gmlp.PRESETS`,
            such as `"gmlp_s16_224"`. Defaults to `None`.
        num_classes: int. Number of output logits.
        image_size: int or `(height, width)`. Input image size, divisible
            by the patch size.
        patch_size: int or `(height, width)`. Patch size.
        num_channels: int. Channels of the input images.
        num_layers: int. Number of gMLP blocks.
        hidden_dim: int. Width of the tokens (`d_model`).
        ffn_dim: int. Width of the channel expansion (`d_ffn`), even.
        attention_dim: int. Tiny attention head size (aMLP), or `None`.
        spatial: str. `"dense"` or `"toeplitz"` spatial weights.
        drop_path_rate: float. Stochastic depth rate of the last block,
            rising linearly from 0 at the first.
        dropout: float. Dropout before the head.
        dtype: str or `keras.DTypePolicy`. Dtype policy of every layer.
        name: str. Name of the model.

    Returns:
        A `GMLPImageClassifier` from images `(batch, height, width,
        channels)` to logits `(batch, num_classes)`, compiled with its
        defaults.

    Example:

    >>> model = keras_gmlp.models.image_classifier(
    ...     "gmlp_micro4_32", num_classes=100)
    >>> model(keras.ops.zeros((1, 32, 32, 3))).shape
    (1, 100)
    """
    config = resolve_config("image", IMAGE_DEFAULTS, preset, **config)
    backbone = GMLPImageBackbone(**{key: config[key] for key in BACKBONE_KEYS})
    return GMLPImageClassifier(
        backbone=backbone,
        num_classes=config["num_classes"],
        dropout=config["dropout"],
        name=config["name"],
    )
