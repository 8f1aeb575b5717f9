import keras
from keras_hub.src.models.masked_lm_preprocessor import MaskedLMPreprocessor
from keras_hub.src.utils.tensor_utils import compute_padding_mask

from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import GMLPTokenizer


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPMaskedLMPreprocessor(MaskedLMPreprocessor):
    """Turns raw strings into masked-language-model inputs and labels.

    Tokenizes with a `GMLPTokenizer`, packs `[CLS] a [SEP]` (or
    `[CLS] a [SEP] b [SEP]` for pairs), pads with `[PAD]` to
    `sequence_length`, and masks with keras-hub's `MaskedLMMaskGenerator`:
    of the selected tokens, `mask_token_rate` become `[MASK]`,
    `random_token_rate` a random token and the rest stay. Special tokens
    are never selected.

    Inputs that are already packed token ids (a stream of tokens cut into
    `[CLS] ... [SEP]` sequences, as the pretraining recipe makes them) are
    masked by `mask_packed()`.

    Args:
        tokenizer: `keras_gmlp.GMLPTokenizer`.
        sequence_length: int. Length of the packed sequences. Defaults to
            `512`.
        truncate: str. How pairs are truncated, `"round_robin"` or
            `"waterfall"`. Defaults to `"round_robin"`.
        mask_selection_rate: float. Share of the tokens selected for
            prediction. Defaults to `0.15`.
        mask_selection_length: int. Largest number of selected tokens per
            sequence (the length of `mask_positions`). Defaults to `96`.
        mask_token_rate: float. Share of the selected tokens replaced by
            `[MASK]`. Defaults to `0.8`.
        random_token_rate: float. Share of the selected tokens replaced by
            a random token. Defaults to `0.1`.
        **kwargs: base layer arguments.

    Call arguments:
        x: a string or a batch of strings, or a tuple of two for pairs.
        y: must be `None`; the labels are the masked tokens.
        sample_weight: must be `None`.

    Returns:
        `(x, y, sample_weight)`: `x` a dict of `"token_ids"`,
        `"padding_mask"` and `"mask_positions"`, `y` the original ids at
        the mask positions and `sample_weight` 1 for real predictions and
        0 for the padding of `mask_positions`.

    Example:

    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> vocabulary += ["the", "quick", "brown", "fox", "."]
    >>> preprocessor = keras_gmlp.GMLPMaskedLMPreprocessor(
    ...     keras_gmlp.GMLPTokenizer(vocabulary=vocabulary),
    ...     sequence_length=8,
    ...     mask_selection_length=2,
    ... )
    >>> x, y, sample_weight = preprocessor(["the quick brown fox."])
    >>> sorted(x), tuple(x["token_ids"].shape)
    (['mask_positions', 'padding_mask', 'token_ids'], (1, 8))
    """

    backbone_cls = GMLPTextBackbone
    tokenizer_cls = GMLPTokenizer

    def call(self, x, y=None, sample_weight=None):
        output = super().call(x, y=y, sample_weight=sample_weight)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(output)
        # The gMLP backbones have no segment embedding.
        del x["segment_ids"]
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def mask_packed(self, token_ids):
        """Masks sequences that are already packed into token ids.

        Args:
            token_ids: int array `(batch, tokens)` or `(tokens,)` (a numpy
                array, or a `tf.Tensor` inside a `tf.data` pipeline):
                packed sequences such as `[CLS] ... [SEP] [PAD] ...`.

        Returns:
            `(x, y, sample_weight)` as the call returns them.

        Example:

        >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        >>> vocabulary += ["the", "quick", "brown", "fox", "."]
        >>> preprocessor = keras_gmlp.GMLPMaskedLMPreprocessor(
        ...     keras_gmlp.GMLPTokenizer(vocabulary=vocabulary),
        ...     sequence_length=8,
        ...     mask_selection_length=2,
        ... )
        >>> packed = np.array([[2, 5, 6, 7, 8, 9, 3, 0]], "int32")
        >>> x, y, sample_weight = preprocessor.mask_packed(packed)
        >>> tuple(x["mask_positions"].shape), tuple(y.shape)
        ((1, 2), (1, 2))
        """
        if not self.built:
            self.build(None)
        masked = self.masker(token_ids)
        x = {
            "token_ids": masked["token_ids"],
            "padding_mask": compute_padding_mask(
                token_ids, self.tokenizer.pad_token_id
            ),
            "mask_positions": masked["mask_positions"],
        }
        return keras.utils.pack_x_y_sample_weight(
            x, masked["mask_ids"], masked["mask_weights"]
        )
