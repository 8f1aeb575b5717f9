import keras
from keras_hub.models import Backbone

from keras_gmlp.layers.gmlp_block import GMLPBlock
from keras_gmlp.layers.patch_embedding import PatchEmbedding
from keras_gmlp.layers.patch_embedding import pair
from keras_gmlp.models.config import drop_path_rates
from keras_gmlp.models.gmlp_task import PortableExport
from keras_gmlp.models.preset_loader import FromPreset


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPImageBackbone(FromPreset, PortableExport, Backbone):
    """gMLP (or aMLP) image backbone: patch tokens in, token features out.

    The images are cut into non-overlapping patches, each embedded as a
    token (`stem`), then `num_layers` gMLP blocks (`block_{i}`) mix the
    channels and, through their spatial gating units, the tokens; a final
    LayerNorm (`final_norm`, epsilon 1e-6) closes the stack. The output is
    one feature vector per patch, in row-major order of the patch grid,
    before any pooling; with `pooling`, a dict of those token features
    (`"sequence_output"`) and their pooled vector (`"pooled_output"`), for
    feature extraction and heads of one's own. Stochastic depth rises
    linearly from 0 at the first block to `drop_path_rate` at the last.

    The spatial weights are tied to the number of tokens, so the image size
    is fixed at construction. Images are channels-last.

    Args:
        image_size: int or `(height, width)` tuple. Size of the input
            images, divisible by the patch size.
        patch_size: int or `(height, width)` tuple. Size of the patches.
        num_layers: int. Number of gMLP blocks.
        hidden_dim: int. Width of the tokens (`d_model`).
        ffn_dim: int. Width of the channel expansion (`d_ffn`), even.
        num_channels: int. Channels of the input images. Defaults to `3`.
        attention_dim: int. Head size of the tiny attention of aMLP, or
            `None` for gMLP. Defaults to `None`.
        spatial: str. `"dense"` (an `n x n` spatial weight) or
            `"toeplitz"`. Defaults to `"dense"`.
        drop_path_rate: float. Stochastic depth rate of the last block.
            Defaults to `0.0`.
        pooling: `None`, `"avg"` or `"max"`. `None` returns the token
            features `(batch, tokens, hidden_dim)`; `"avg"` (the mean over
            the tokens, as the classifier pools) or `"max"` returns
            `{"sequence_output": tokens, "pooled_output": (batch,
            hidden_dim)}`. Defaults to `None`.
        dtype: str or `keras.DTypePolicy`. Dtype policy of every layer.
            Defaults to `None`, the global policy.
        **kwargs: `keras_hub.models.Backbone` arguments, such as `name`.

    Call arguments:
        images: float tensor `(batch, height, width, num_channels)`, scaled
            as the model was trained (`GMLPImageConverter` gives [-1, 1]).

    Example:

    >>> backbone = keras_gmlp.models.GMLPImageBackbone(
    ...     image_size=32, patch_size=8, num_layers=2, hidden_dim=16,
    ...     ffn_dim=32)
    >>> backbone(np.zeros((2, 32, 32, 3))).shape
    (2, 16, 16)

    Token features and a pooled vector:

    >>> backbone = keras_gmlp.models.GMLPImageBackbone(
    ...     image_size=32, patch_size=8, num_layers=2, hidden_dim=16,
    ...     ffn_dim=32, pooling="avg")
    >>> outputs = backbone(np.zeros((2, 32, 32, 3)))
    >>> outputs["sequence_output"].shape, outputs["pooled_output"].shape
    ((2, 16, 16), (2, 16))

    The paper's configurations by name, with random weights:

    >>> backbone = keras_gmlp.models.GMLPImageBackbone.from_preset(
    ...     "gmlp_micro4_32")
    >>> backbone.output_shape
    (None, 64, 64)

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    def __init__(
        self,
        image_size,
        patch_size,
        num_layers,
        hidden_dim,
        ffn_dim,
        num_channels=3,
        attention_dim=None,
        spatial="dense",
        drop_path_rate=0.0,
        pooling=None,
        dtype=None,
        **kwargs,
    ):
        image_size = pair(image_size, "image_size")
        patch_size = pair(patch_size, "patch_size")
        if keras.config.image_data_format() != "channels_last":
            raise ValueError(
                "GMLPImageBackbone takes channels-last images; received "
                "keras.config.image_data_format()="
                f"{keras.config.image_data_format()!r}. Call "
                "keras.config.set_image_data_format('channels_last')."
            )

        # === Layers ===
        self.stem = PatchEmbedding(
            hidden_dim, patch_size, dtype=dtype, name="stem"
        )
        # Raises for an image size that the patch size does not divide.
        num_tokens = self.stem.compute_output_shape(
            (None,) + image_size + (num_channels,)
        )[1]
        self.blocks = [
            GMLPBlock(
                ffn_dim=ffn_dim,
                sequence_length=num_tokens,
                attention_dim=attention_dim,
                spatial=spatial,
                drop_path_rate=rate,
                dtype=dtype,
                name=f"block_{i}",
            )
            for i, rate in enumerate(
                drop_path_rates(drop_path_rate, num_layers)
            )
        ]
        self.final_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, dtype=dtype, name="final_norm"
        )
        self.pooler = None
        if pooling == "avg":
            self.pooler = keras.layers.GlobalAveragePooling1D(
                dtype=dtype, name="pooled"
            )
        elif pooling == "max":
            self.pooler = keras.layers.GlobalMaxPooling1D(
                dtype=dtype, name="pooled"
            )
        elif pooling is not None:
            raise ValueError(
                f"Received pooling={pooling!r}; expected None (token "
                "features only), 'avg' or 'max'."
            )

        # === Functional Model ===
        images = keras.Input(shape=image_size + (num_channels,), name="images")
        x = self.stem(images)
        for block in self.blocks:
            x = block(x)
        features = self.final_norm(x)
        outputs = features
        if self.pooler is not None:
            outputs = {
                "sequence_output": features,
                "pooled_output": self.pooler(features),
            }
        super().__init__(inputs=images, outputs=outputs, dtype=dtype, **kwargs)

        # === Config ===
        self.image_size = image_size
        self.patch_size = patch_size
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.ffn_dim = ffn_dim
        self.num_channels = num_channels
        self.attention_dim = attention_dim
        self.spatial = spatial
        self.drop_path_rate = drop_path_rate
        self.pooling = pooling
        self.num_tokens = num_tokens

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_size": self.image_size,
                "patch_size": self.patch_size,
                "num_layers": self.num_layers,
                "hidden_dim": self.hidden_dim,
                "ffn_dim": self.ffn_dim,
                "num_channels": self.num_channels,
                "attention_dim": self.attention_dim,
                "spatial": self.spatial,
                "drop_path_rate": self.drop_path_rate,
                "pooling": self.pooling,
            }
        )
        return config
