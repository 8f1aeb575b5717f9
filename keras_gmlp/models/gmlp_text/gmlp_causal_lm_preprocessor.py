import keras
from keras_hub.src.models.causal_lm_preprocessor import CausalLMPreprocessor

from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import GMLPTokenizer


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPCausalLMPreprocessor(CausalLMPreprocessor):
    """Turns raw strings into next-token training pairs and prompts.

    For training, tokenizes with a `GMLPTokenizer`, packs `[CLS] text
    [SEP]` to `sequence_length + 1` tokens and shifts by one: the inputs
    are the first `sequence_length` tokens, the labels the next ones, and
    the sample weights mask the padding. For `GMLPCausalLM.generate()`,
    `generate_preprocess()` packs a prompt without `[SEP]` and
    `generate_postprocess()` turns ids back into text without special
    tokens.

    Args:
        tokenizer: `keras_gmlp.GMLPTokenizer`.
        sequence_length: int. Length of the packed inputs; at most the
            backbone's `sequence_length`. Defaults to `1024`.
        add_start_token: bool. Whether `[CLS]` starts each text. Defaults
            to `True`.
        add_end_token: bool. Whether `[SEP]` ends each training text.
            Defaults to `True`.
        **kwargs: base layer arguments.

    Call arguments:
        x: a string or a batch of strings.
        y: must be `None`.
        sample_weight: must be `None`.
        sequence_length: int. Overrides `sequence_length`.

    Example:

    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> vocabulary += ["the", "quick", "brown", "fox", "."]
    >>> preprocessor = keras_gmlp.GMLPCausalLMPreprocessor(
    ...     keras_gmlp.GMLPTokenizer(vocabulary=vocabulary),
    ...     sequence_length=6,
    ... )
    >>> x, y, sample_weight = preprocessor("the quick fox")
    >>> keras.ops.convert_to_numpy(x["token_ids"]).tolist()
    [2, 5, 6, 8, 3, 0]
    >>> keras.ops.convert_to_numpy(y).tolist()
    [5, 6, 8, 3, 0, 0]
    """

    backbone_cls = GMLPTextBackbone
    tokenizer_cls = GMLPTokenizer
