"""WordPiece vocabularies: learnt from a corpus, saved with a run, loaded.

`GMLPTokenizer` decides what a vocabulary is (`[PAD]` first, then the
other `SPECIAL_TOKENS`) and learns one (`compute_vocabulary`);
`train_vocabulary` and `make_tokenizer` are its short forms for the data
pipelines, and `save_vocabulary` / `load_vocabulary` keep a vocabulary
with a run as a text file, checked when it is read back.
"""

from keras_gmlp.models.gmlp_text.gmlp_tokenizer import CLS
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import MASK
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import PAD
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import SEP
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import SPECIAL_TOKENS
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import UNK
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import GMLPTokenizer

__all__ = [
    "CLS",
    "MASK",
    "PAD",
    "SEP",
    "SPECIAL_TOKENS",
    "UNK",
    "load_vocabulary",
    "make_tokenizer",
    "save_vocabulary",
    "special_ids",
    "train_vocabulary",
]


def train_vocabulary(
    texts, vocabulary_size, lowercase=True, max_records=200_000
):
    """Learns a WordPiece vocabulary: `GMLPTokenizer.compute_vocabulary`.

    Args:
        texts: iterable of str or a `tf.data.Dataset` of strings. Only the
            first `max_records` records are read.
        vocabulary_size: int. Largest number of tokens, special tokens
            included.
        lowercase: bool. Whether the text is lowercased first.
        max_records: int. Number of records the vocabulary is learnt from.

    Returns:
        list of str, `SPECIAL_TOKENS` first (`[PAD]` is id 0).

    Raises:
        ValueError: when `texts` is empty or the size is too small.
    """
    return GMLPTokenizer.compute_vocabulary(
        texts, vocabulary_size, lowercase=lowercase, max_records=max_records
    )


def save_vocabulary(vocabulary, path):
    """Writes a vocabulary, one token per line, atomically."""
    from keras_gmlp.training import files

    def write(temporary):
        with open(temporary, "w", encoding="utf-8") as file:
            file.writelines(f"{token}\n" for token in vocabulary)

    files.write_file(path, write)


def load_vocabulary(path):
    """Reads and checks a WordPiece vocabulary file.

    Args:
        path: str. A file with one token per line.

    Returns:
        list of str.

    Raises:
        ValueError: when `[PAD]` is not the first token, a special token is
            missing or a token is repeated.
    """
    with open(path, encoding="utf-8") as file:
        vocabulary = [line.rstrip("\n") for line in file]
    if not vocabulary or vocabulary[0] != PAD:
        first = vocabulary[0] if vocabulary else None
        raise ValueError(
            f"The vocabulary {path!r} starts with {first!r}; expected "
            f"{PAD!r} as token 0, the id the models mask."
        )
    missing = [token for token in SPECIAL_TOKENS if token not in vocabulary]
    if missing:
        raise ValueError(
            f"The vocabulary {path!r} lacks the special tokens {missing}; "
            f"expected all of {SPECIAL_TOKENS}."
        )
    if len(set(vocabulary)) != len(vocabulary):
        seen, repeated = set(), []
        for token in vocabulary:
            if token in seen:
                repeated.append(token)
            seen.add(token)
        raise ValueError(
            f"The vocabulary {path!r} repeats the tokens {repeated[:10]}; "
            "expected each token once."
        )
    return vocabulary


def make_tokenizer(vocabulary, lowercase=True, special_tokens_in_strings=False):
    """Returns the `GMLPTokenizer` of a vocabulary.

    Args:
        vocabulary: list of str or the path of a vocabulary file (checked
            by `load_vocabulary`).
        lowercase: bool. Whether the text is lowercased first; as when the
            vocabulary was learnt.
        special_tokens_in_strings: bool. Whether special tokens written in
            a string, such as `"[MASK]"`, become their ids (for demos: it
            makes the tokenizer slower to trace). Defaults to `False`.
    """
    if isinstance(vocabulary, str):
        vocabulary = load_vocabulary(vocabulary)
    return GMLPTokenizer(
        vocabulary=vocabulary,
        lowercase=lowercase,
        special_tokens_in_strings=special_tokens_in_strings,
        dtype="int32",
    )


def special_ids(tokenizer):
    """Returns a dict from special token to its id in `tokenizer`."""
    return {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}
