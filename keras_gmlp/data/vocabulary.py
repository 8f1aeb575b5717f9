"""WordPiece vocabularies: learnt from a corpus, saved with a run, loaded.

`train_vocabulary` learns a WordPiece vocabulary with keras-hub;
`save_vocabulary` / `load_vocabulary` keep it with the run. `[PAD]` is
always id 0, the id the models mask, followed by the other
`SPECIAL_TOKENS`. `make_tokenizer` returns keras-hub's WordPiece tokenizer
over a vocabulary.

Learning a vocabulary and tokenizing import TensorFlow (and keras-hub);
the constants and the file functions do not.
"""

import os

PAD = "[PAD]"
UNK = "[UNK]"
CLS = "[CLS]"
SEP = "[SEP]"
MASK = "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)


def train_vocabulary(
    texts, vocabulary_size, lowercase=True, max_records=200_000
):
    """Learns a WordPiece vocabulary with keras-hub.

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
    import keras_hub
    import tensorflow as tf

    if vocabulary_size <= len(SPECIAL_TOKENS):
        raise ValueError(
            f"Received vocabulary_size={vocabulary_size}; expected more than "
            f"the {len(SPECIAL_TOKENS)} special tokens {SPECIAL_TOKENS}."
        )
    if isinstance(texts, tf.data.Dataset):
        sample = texts.take(max_records)
    else:
        sample_list = []
        for text in texts:
            sample_list.append(text)
            if len(sample_list) >= max_records:
                break
        if not sample_list:
            raise ValueError(
                "Received an empty corpus; expected text to learn a "
                "vocabulary from."
            )
        sample = tf.data.Dataset.from_tensor_slices(sample_list)
    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        sample.batch(1024),
        vocabulary_size,
        lowercase=lowercase,
        reserved_tokens=list(SPECIAL_TOKENS),
    )
    if len(vocabulary) <= len(SPECIAL_TOKENS):
        raise ValueError(
            "Received an empty corpus; expected text to learn a vocabulary "
            "from."
        )
    return vocabulary


def save_vocabulary(vocabulary, path):
    """Writes a vocabulary, one token per line, atomically."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        file.writelines(f"{token}\n" for token in vocabulary)
    os.replace(temporary, path)


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
    """Returns a keras-hub `WordPieceTokenizer` over a vocabulary.

    Args:
        vocabulary: list of str or the path of a vocabulary file.
        lowercase: bool. Whether the text is lowercased first; as when the
            vocabulary was learnt.
        special_tokens_in_strings: bool. Whether special tokens written in
            a string, such as `"[MASK]"`, become their ids (for demos: it
            makes the tokenizer slower to trace). Defaults to `False`.
    """
    import keras_hub

    if isinstance(vocabulary, str):
        vocabulary = load_vocabulary(vocabulary)
    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=vocabulary,
        lowercase=lowercase,
        oov_token=UNK,
        special_tokens=list(SPECIAL_TOKENS),
        special_tokens_in_strings=special_tokens_in_strings,
        dtype="int32",
    )


def special_ids(tokenizer):
    """Returns a dict from special token to its id in `tokenizer`."""
    return {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}
