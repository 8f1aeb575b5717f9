import keras

from keras_gmlp.layers.gmlp_block import GMLPBlock
from keras_gmlp.layers.patch_embedding import PatchEmbedding
from keras_gmlp.layers.patch_embedding import pair
from keras_gmlp.models.config import drop_path_rates
from keras_gmlp.models.config import resolve_config

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


def image_classifier(preset=None, **config):
    """Builds a gMLP image classifier that returns logits.

    Patch embedding (Conv2D with kernel = stride = patch), `num_layers`
    gMLP blocks over the tokens, a final LayerNorm, the mean over tokens
    and a Dense head. Without a preset the defaults are gMLP-S on
    224 x 224 images.

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
        A functional `keras.Model` from images `(batch, height, width,
        channels)` to logits `(batch, num_classes)`.

    Example:

    >>> model = keras_gmlp.models.image_classifier(
    ...     "gmlp_micro4_32", num_classes=100)
    >>> model(keras.ops.zeros((1, 32, 32, 3))).shape
    (1, 100)
    """
    config = resolve_config("image", IMAGE_DEFAULTS, preset, **config)
    image_size = pair(config["image_size"], "image_size")
    patch_size = pair(config["patch_size"], "patch_size")
    dtype = config["dtype"]

    # === Layers ===
    stem = PatchEmbedding(
        config["hidden_dim"], patch_size, dtype=dtype, name="stem"
    )
    # Raises for an image size that the patch size does not divide.
    num_tokens = stem.compute_output_shape((None,) + image_size + (None,))[1]
    rates = drop_path_rates(config["drop_path_rate"], config["num_layers"])
    blocks = [
        GMLPBlock(
            ffn_dim=config["ffn_dim"],
            sequence_length=num_tokens,
            attention_dim=config["attention_dim"],
            spatial=config["spatial"],
            drop_path_rate=rate,
            dtype=dtype,
            name=f"block_{i}",
        )
        for i, rate in enumerate(rates)
    ]
    norm = keras.layers.LayerNormalization(
        epsilon=1e-6, dtype=dtype, name="final_norm"
    )
    pool = keras.layers.GlobalAveragePooling1D(dtype=dtype, name="pool")
    head = keras.layers.Dense(config["num_classes"], dtype=dtype, name="head")

    # === Functional Model ===
    images = keras.Input(
        shape=image_size + (config["num_channels"],), name="images"
    )
    x = stem(images)
    for block in blocks:
        x = block(x)
    x = pool(norm(x))
    if config["dropout"]:
        x = keras.layers.Dropout(
            config["dropout"], dtype=dtype, name="head_dropout"
        )(x)
    logits = head(x)
    return keras.Model(images, logits, name=config["name"] or "gmlp_image")
