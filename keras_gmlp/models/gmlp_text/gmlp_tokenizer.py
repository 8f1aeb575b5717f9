import keras
from keras_hub.src.tokenizers.word_piece_tokenizer import WordPieceTokenizer
from keras_hub.src.tokenizers.word_piece_tokenizer_trainer import (
    compute_word_piece_vocabulary,
)

from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone

PAD = "[PAD]"
UNK = "[UNK]"
CLS = "[CLS]"
SEP = "[SEP]"
MASK = "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPTokenizer(WordPieceTokenizer):
    """A WordPiece tokenizer for the gMLP and aMLP language models.

    keras-hub's `WordPieceTokenizer` with the special tokens the gMLP text
    tasks use: `[PAD]`, which must be token 0 (the id the backbones treat as
    padding), `[UNK]` for words out of the vocabulary, `[CLS]` to start a
    sequence, `[SEP]` to end a segment and `[MASK]` for masked-language-model
    inputs. A vocabulary is given as a list or a file (one token per line),
    or learnt from a corpus with `GMLPTokenizer.from_corpus()`.

    Args:
        vocabulary: list of str or str. The vocabulary, or the path of a
            file holding it one token per line. Defaults to `None`, for a
            tokenizer whose vocabulary is loaded later (from a preset).
        lowercase: bool. Whether the text is lowercased before it is split;
            as when the vocabulary was learnt. Defaults to `True`.
        **kwargs: arguments of `keras_hub.tokenizers.WordPieceTokenizer`,
            such as `special_tokens_in_strings`.

    Example:

    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> vocabulary += ["the", "quick", "brown", "fox", "."]
    >>> tokenizer = keras_gmlp.GMLPTokenizer(vocabulary=vocabulary)
    >>> keras.ops.convert_to_numpy(tokenizer("The quick fox.")).tolist()
    [5, 6, 8, 9]
    >>> tokenizer.detokenize([5, 7, 8])
    'the brown fox'

    References:
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    backbone_cls = GMLPTextBackbone

    def __init__(self, vocabulary=None, lowercase=True, **kwargs):
        self._add_special_token(PAD, "pad_token")
        self._add_special_token(UNK, "unk_token")
        self._add_special_token(CLS, "cls_token")
        self._add_special_token(SEP, "sep_token")
        self._add_special_token(MASK, "mask_token")
        self._add_special_token(CLS, "start_token")
        self._add_special_token(SEP, "end_token")
        kwargs.setdefault("oov_token", UNK)
        super().__init__(vocabulary=vocabulary, lowercase=lowercase, **kwargs)

    def set_vocabulary(self, vocabulary):
        super().set_vocabulary(vocabulary)
        if self.vocabulary is not None and self.vocabulary[0] != PAD:
            raise ValueError(
                f"The vocabulary starts with {self.vocabulary[0]!r}; "
                f"expected {PAD!r} as token 0, the id the gMLP models "
                "treat as padding."
            )

    @staticmethod
    def compute_vocabulary(
        texts, vocabulary_size, lowercase=True, max_records=200_000
    ):
        """Learns a WordPiece vocabulary from a corpus.

        Uses `keras_hub.tokenizers.compute_word_piece_vocabulary`, which
        needs TensorFlow and tensorflow-text.

        Args:
            texts: iterable of str or a `tf.data.Dataset` of strings. Only
                the first `max_records` records are read.
            vocabulary_size: int. Largest number of tokens, the five
                special tokens included.
            lowercase: bool. Whether the text is lowercased first.
                Defaults to `True`.
            max_records: int. Number of records the vocabulary is learnt
                from. Defaults to `200_000`.

        Returns:
            list of str: `[PAD] [UNK] [CLS] [SEP] [MASK]` (ids 0 to 4) and
            the learnt tokens.

        Raises:
            ValueError: for an empty corpus, or a `vocabulary_size` that
                leaves no room for learnt tokens.
        """
        import tensorflow as tf

        if vocabulary_size <= len(SPECIAL_TOKENS):
            raise ValueError(
                f"Received vocabulary_size={vocabulary_size}; expected more "
                f"than the {len(SPECIAL_TOKENS)} special tokens "
                f"{SPECIAL_TOKENS}."
            )
        if isinstance(texts, str):
            raise ValueError(
                "Received a single string as `texts`; expected an iterable "
                "of strings or a tf.data.Dataset of strings."
            )
        if isinstance(texts, tf.data.Dataset):
            sample = texts.take(max_records)
        else:
            records = []
            for text in texts:
                records.append(text)
                if len(records) >= max_records:
                    break
            if not records:
                raise ValueError(
                    "Received an empty corpus; expected text to learn a "
                    "vocabulary from."
                )
            sample = tf.data.Dataset.from_tensor_slices(records)
        vocabulary = compute_word_piece_vocabulary(
            sample.batch(1024),
            vocabulary_size,
            lowercase=lowercase,
            reserved_tokens=list(SPECIAL_TOKENS),
        )
        if len(vocabulary) <= len(SPECIAL_TOKENS):
            raise ValueError(
                "Received an empty corpus; expected text to learn a "
                "vocabulary from."
            )
        return vocabulary

    @classmethod
    def from_corpus(
        cls,
        texts,
        vocabulary_size,
        lowercase=True,
        max_records=200_000,
        **kwargs,
    ):
        """Creates a tokenizer whose vocabulary is learnt from a corpus.

        Args:
            texts: iterable of str or a `tf.data.Dataset` of strings.
            vocabulary_size: int. Largest number of tokens, the five
                special tokens included.
            lowercase: bool. Whether the text is lowercased. Defaults to
                `True`.
            max_records: int. Number of records the vocabulary is learnt
                from. Defaults to `200_000`.
            **kwargs: other arguments of `GMLPTokenizer`.

        Returns:
            A `GMLPTokenizer`.

        Example:

        >>> texts = ["the cat sat on the mat", "the dog sat on the log"]
        >>> tokenizer = keras_gmlp.GMLPTokenizer.from_corpus(texts, 30)
        >>> tokenizer.id_to_token(0), tokenizer.vocabulary_size() <= 30
        ('[PAD]', True)
        """
        vocabulary = cls.compute_vocabulary(
            texts,
            vocabulary_size,
            lowercase=lowercase,
            max_records=max_records,
        )
        return cls(vocabulary=vocabulary, lowercase=lowercase, **kwargs)
