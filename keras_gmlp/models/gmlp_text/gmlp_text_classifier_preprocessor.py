import keras
from keras_hub.src.models.text_classifier_preprocessor import (
    TextClassifierPreprocessor,
)

from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import GMLPTokenizer


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPTextClassifierPreprocessor(TextClassifierPreprocessor):
    """Turns raw strings (or pairs) into gMLP text classifier inputs.

    Tokenizes with a `GMLPTokenizer` and packs `[CLS] a [SEP]`, or
    `[CLS] a [SEP] b [SEP]` for pairs, padded with `[PAD]` to
    `sequence_length`. Labels and sample weights pass through.

    Args:
        tokenizer: `keras_gmlp.GMLPTokenizer`.
        sequence_length: int. Length of the packed sequences. Defaults to
            `512`.
        truncate: str. How pairs are truncated, `"round_robin"` or
            `"waterfall"`. Defaults to `"round_robin"`.
        **kwargs: base layer arguments.

    Call arguments:
        x: a string or a batch of strings, or a tuple of two for pairs
            (passed as `x=(first, second)`: a positional tuple is read as
            `(x, y)`).
        y: labels, or `None`.
        sample_weight: sample weights, or `None`.

    Returns:
        `(x, y, sample_weight)` with `x` a dict of `"token_ids"` and
        `"padding_mask"` (just `x` when `y` and `sample_weight` are
        `None`).

    Example:

    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> vocabulary += ["the", "quick", "brown", "fox", "."]
    >>> preprocessor = keras_gmlp.GMLPTextClassifierPreprocessor(
    ...     keras_gmlp.GMLPTokenizer(vocabulary=vocabulary),
    ...     sequence_length=8,
    ... )
    >>> x = preprocessor(x=("the fox.", "quick"))
    >>> keras.ops.convert_to_numpy(x["token_ids"]).tolist()
    [2, 5, 8, 9, 3, 6, 3, 0]
    """

    backbone_cls = GMLPTextBackbone
    tokenizer_cls = GMLPTokenizer

    def call(self, x, y=None, sample_weight=None):
        output = super().call(x, y=y, sample_weight=sample_weight)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(output)
        # The gMLP backbones have no segment embedding.
        del x["segment_ids"]
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
