import keras
from keras_hub.src.models.backbone import Backbone

from keras_gmlp.layers.gmlp_block import GMLPBlock
from keras_gmlp.layers.tied_embedding import TiedEmbedding
from keras_gmlp.models.config import drop_path_rates
from keras_gmlp.models.gmlp_task import PortableExport
from keras_gmlp.models.preset_loader import FromPreset

BACKBONE_DEFAULTS = {
    "vocabulary_size": 32000,
    "sequence_length": 512,
    "num_layers": 48,
    "hidden_dim": 512,
    "ffn_dim": 3072,
    "attention_dim": None,
    "spatial": "toeplitz",
    "causal": False,
    "gating": "split",
    "drop_path_rate": 0.0,
    "dtype": None,
    "name": None,
}


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPTextBackbone(FromPreset, PortableExport, Backbone):
    """The gMLP (or aMLP) text encoder of "Pay Attention to MLPs".

    A token embedding, `num_layers` gMLP blocks and a final layer
    normalisation. There are no position embeddings: the spatial weights
    carry position. With `attention_dim`, each block adds a single-head
    tiny attention (aMLP); with `causal=True`, the spatial weights and the
    attention see no later token, for autoregressive language models.

    The token embedding is a `keras_gmlp.layers.TiedEmbedding`, whose
    transpose gives the vocabulary logits of the masked and causal
    language models, so the paper's parameter counts hold exactly.

    `GMLPTextBackbone.from_preset()` takes a preset folder or a keras-hub
    handle (`"hf://..."`, `"kaggle://..."`), or the name of one of the
    paper's configurations in `keras_gmlp.PRESETS` (`"gmlp_base"`,
    `"amlp_tiny"` ...), which builds it with random weights.

    Args:
        vocabulary_size: int. Number of token ids.
        sequence_length: int. Largest number of tokens; shorter inputs use
            the leading block of the spatial weights.
        num_layers: int. Number of gMLP blocks.
        hidden_dim: int. Width of the tokens (`d_model`).
        ffn_dim: int. Width of the channel expansion (`d_ffn`).
        attention_dim: int. Head size of the tiny attention (aMLP), or
            `None` for gMLP. Defaults to `None`.
        spatial: str. `"toeplitz"` (shift-invariant spatial weights, the
            paper's language models) or `"dense"`. Defaults to
            `"toeplitz"`.
        causal: bool. Whether token `i` sees tokens `j <= i` only.
            Defaults to `False`.
        gating: str. `"split"` (the spatial gating unit) or an ablation of
            the paper's Table 3: `"multiplicative"`, `"additive"`,
            `"linear"`. Defaults to `"split"`.
        drop_path_rate: float. Stochastic depth rate of the last block,
            rising linearly from 0 at the first. Defaults to `0.0`.
        dtype: str or `keras.DTypePolicy`. Dtype policy of every layer.
            Defaults to `None`, the global policy.
        **kwargs: arguments of `keras.Model`, such as `name`.

    Call arguments:
        inputs: dict with `"token_ids"`, int `(batch, tokens)`, and
            `"padding_mask"`, `(batch, tokens)`, 1 for real tokens (used by
            the tiny attention).

    Returns:
        The final normalised hidden states `(batch, tokens, hidden_dim)`.

    Example:

    >>> backbone = keras_gmlp.GMLPTextBackbone(
    ...     vocabulary_size=100,
    ...     sequence_length=16,
    ...     num_layers=2,
    ...     hidden_dim=8,
    ...     ffn_dim=16,
    ... )
    >>> inputs = {
    ...     "token_ids": np.ones((2, 12), "int32"),
    ...     "padding_mask": np.ones((2, 12), "int32"),
    ... }
    >>> tuple(backbone(inputs).shape)
    (2, 12, 8)
    >>> keras_gmlp.GMLPTextBackbone.from_preset("gmlp_tiny").count_params()
    1449212

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        num_layers,
        hidden_dim,
        ffn_dim,
        attention_dim=None,
        spatial="toeplitz",
        causal=False,
        gating="split",
        drop_path_rate=0.0,
        dtype=None,
        **kwargs,
    ):
        # === Layers ===
        self.token_embedding = TiedEmbedding(
            vocabulary_size,
            hidden_dim,
            dtype=dtype,
            name="token_embedding",
        )
        rates = drop_path_rates(drop_path_rate, num_layers)
        self.blocks = []
        for i, rate in enumerate(rates):
            self.blocks.append(
                GMLPBlock(
                    ffn_dim=ffn_dim,
                    sequence_length=sequence_length,
                    attention_dim=attention_dim,
                    spatial=spatial,
                    causal=causal,
                    gating=gating,
                    drop_path_rate=rate,
                    dtype=dtype,
                    name=f"block_{i}",
                )
            )
        self.final_norm = keras.layers.LayerNormalization(
            epsilon=1e-6, dtype=dtype, name="final_norm"
        )

        # === Functional Model ===
        token_id_input = keras.Input(
            shape=(None,), dtype="int32", name="token_ids"
        )
        padding_mask_input = keras.Input(
            shape=(None,), dtype="int32", name="padding_mask"
        )
        x = self.token_embedding(token_id_input)
        for block in self.blocks:
            x = block(x, padding_mask=padding_mask_input)
        sequence_output = self.final_norm(x)
        super().__init__(
            inputs={
                "token_ids": token_id_input,
                "padding_mask": padding_mask_input,
            },
            outputs=sequence_output,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.sequence_length = sequence_length
        self.num_layers = num_layers
        self.hidden_dim = hidden_dim
        self.ffn_dim = ffn_dim
        self.attention_dim = attention_dim
        self.spatial = spatial
        self.causal = causal
        self.gating = gating
        self.drop_path_rate = drop_path_rate

    def empty_cache(self, batch_size, max_length):
        """A zero decoding cache: a tuple of one dict per block.

        Args:
            batch_size: int or scalar tensor.
            max_length: int. Tokens the cache holds, at most
                `sequence_length`.
        """
        return tuple(
            block.empty_cache(batch_size, max_length) for block in self.blocks
        )

    def call_with_cache(
        self, token_ids, cache, cache_update_index, padding_mask=None
    ):
        """Final hidden states of positions `[start, start + k)`, with a
        cache: incremental decoding for a causal backbone, see
        `keras_gmlp.layers.GMLPBlock.call_with_cache`.

        Args:
            token_ids: int tensor `(batch, k)`, the tokens of positions
                `[cache_update_index, cache_update_index + k)`.
            cache: tuple of one dict per block, as `empty_cache` makes it
                or this method returns it.
            cache_update_index: int or int scalar tensor.
            padding_mask: optional tensor `(batch, max_length)`, `False`
                (0) for padding positions; used by the tiny attention.
                Defaults to `None`, every position real.

        Returns:
            `(hidden, cache)`: hidden states `(batch, k, hidden_dim)` and
            the updated cache.
        """
        x = self.token_embedding(token_ids)
        caches = []
        for block, block_cache in zip(self.blocks, cache, strict=True):
            x, block_cache = block.call_with_cache(
                x, block_cache, cache_update_index, padding_mask=padding_mask
            )
            caches.append(block_cache)
        return self.final_norm(x), tuple(caches)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "sequence_length": self.sequence_length,
                "num_layers": self.num_layers,
                "hidden_dim": self.hidden_dim,
                "ffn_dim": self.ffn_dim,
                "attention_dim": self.attention_dim,
                "spatial": self.spatial,
                "causal": self.causal,
                "gating": self.gating,
                "drop_path_rate": self.drop_path_rate,
            }
        )
        return config
