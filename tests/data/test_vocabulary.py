import numpy as np
import pytest

from keras_gmlp.data.vocabulary import SPECIAL_TOKENS
from keras_gmlp.data.vocabulary import load_vocabulary
from keras_gmlp.data.vocabulary import make_tokenizer
from keras_gmlp.data.vocabulary import save_vocabulary
from keras_gmlp.data.vocabulary import train_vocabulary

# tf.data and numpy only: the Keras backend plays no part, so the
# default suite runs these under one backend (`-m large`: every one).
pytestmark = pytest.mark.one_backend("torch")


def test_vocabulary_puts_pad_first_and_round_trips(vocabulary, tmp_path):
    assert vocabulary[: len(SPECIAL_TOKENS)] == list(SPECIAL_TOKENS)
    assert vocabulary[0] == "[PAD]"
    assert 20 < len(vocabulary) <= 120
    assert "cat" in vocabulary
    path = str(tmp_path / "vocabulary.txt")
    save_vocabulary(vocabulary, path)
    assert load_vocabulary(path) == vocabulary
    tokenizer = make_tokenizer(path, special_tokens_in_strings=True)
    ids = np.asarray(tokenizer.tokenize("the [MASK] sat")).tolist()
    assert ids == [
        vocabulary.index("the"),
        vocabulary.index("[MASK]"),
        vocabulary.index("sat"),
    ]


@pytest.mark.parametrize(
    "tokens, message",
    [
        (["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"], "starts with"),
        (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"], "lacks"),
        (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"], "repeats"),
    ],
)
def test_bad_vocabulary_files_fail_clearly(tmp_path, tokens, message):
    path = tmp_path / "bad_vocabulary.txt"
    path.write_text("\n".join(tokens) + "\n")
    with pytest.raises(ValueError, match=message):
        load_vocabulary(str(path))


def test_tiny_vocabulary_size_fails_clearly():
    with pytest.raises(ValueError, match="vocabulary_size=4"):
        train_vocabulary(["some text"], 4)
