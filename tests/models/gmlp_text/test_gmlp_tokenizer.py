import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras_hub.src.tests.test_case import TestCase

from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import GMLPTokenizer
from tests.models.text_corpus import CORPUS
from tests.models.text_corpus import TINY_TEXT

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCABULARY += ["the", "quick", "brown", "fox", ".", "jump", "##ed"]


def as_list(x):
    return keras.ops.convert_to_numpy(x).tolist()


class GMLPTokenizerTest(TestCase):
    def test_special_tokens_and_ids(self):
        tokenizer = GMLPTokenizer(vocabulary=VOCABULARY)
        self.assertEqual(tokenizer.pad_token_id, 0)
        self.assertEqual(tokenizer.start_token_id, 2)
        self.assertEqual(tokenizer.end_token_id, 3)
        self.assertEqual(tokenizer.mask_token_id, 4)
        self.assertEqual(sorted(tokenizer.special_token_ids), [0, 1, 2, 3, 4])

    def test_tokenize_lowercases_and_detokenizes(self):
        tokenizer = GMLPTokenizer(vocabulary=VOCABULARY)
        self.assertEqual(
            as_list(tokenizer("The fox jumped.")), [5, 8, 10, 11, 9]
        )
        self.assertEqual(as_list(tokenizer("The cat")), [5, 1])
        cased = GMLPTokenizer(vocabulary=VOCABULARY, lowercase=False)
        self.assertEqual(as_list(cased("The fox")), [1, 8])
        text = tokenizer.detokenize([5, 10, 11])
        if isinstance(text, tf.Tensor):
            text = text.numpy().decode()
        self.assertEqual(text, "the jumped")

    def test_preprocessing_layer(self):
        self.run_preprocessing_layer_test(
            cls=GMLPTokenizer,
            init_kwargs={"vocabulary": VOCABULARY},
            input_data=["the quick fox.", "the brown fox jumped."],
            expected_output=[[5, 6, 8, 9], [5, 7, 8, 10, 11, 9]],
            expected_detokenize_output=[
                "the quick fox .",
                "the brown fox jumped .",
            ],
        )

    def test_pad_must_be_token_zero(self):
        with self.assertRaisesRegex(ValueError, r"\[PAD\].*token 0"):
            GMLPTokenizer(vocabulary=VOCABULARY[1:] + ["[PAD]"])
        with self.assertRaisesRegex(ValueError, r"\[MASK\]"):
            GMLPTokenizer(vocabulary=[t for t in VOCABULARY if t != "[MASK]"])

    def test_from_corpus_learns_a_vocabulary(self):
        tokenizer = GMLPTokenizer.from_corpus(CORPUS, vocabulary_size=150)
        vocabulary = tokenizer.get_vocabulary()
        self.assertEqual(vocabulary[:5], VOCABULARY[:5])
        self.assertLessEqual(len(vocabulary), 150)
        self.assertIn("the", vocabulary)
        # Words of the corpus need no [UNK].
        ids = as_list(tokenizer("the river runs past the mill"))
        self.assertNotIn(1, ids)
        # A tf.data corpus gives the same vocabulary.
        dataset = tf.data.Dataset.from_tensor_slices(CORPUS)
        again = GMLPTokenizer.compute_vocabulary(dataset, 150)
        self.assertEqual(again, vocabulary)

    def test_from_corpus_bad_input(self):
        with self.assertRaisesRegex(ValueError, "empty corpus"):
            GMLPTokenizer.from_corpus([], vocabulary_size=50)
        with self.assertRaisesRegex(ValueError, "vocabulary_size=5"):
            GMLPTokenizer.from_corpus(CORPUS, vocabulary_size=5)
        with self.assertRaisesRegex(ValueError, "single string"):
            GMLPTokenizer.from_corpus("the river", vocabulary_size=50)

    def test_vocabulary_file(self):
        path = os.path.join(self.get_temp_dir(), "vocabulary.txt")
        with open(path, "w", encoding="utf-8") as file:
            file.writelines(f"{token}\n" for token in VOCABULARY)
        tokenizer = GMLPTokenizer(vocabulary=path)
        self.assertEqual(tokenizer.get_vocabulary(), VOCABULARY)

    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_preset_round_trip(self):
        tokenizer = GMLPTokenizer.from_corpus(CORPUS, vocabulary_size=100)
        preset_dir = self.get_temp_dir()
        # A preset folder always holds a backbone.
        GMLPTextBackbone(
            vocabulary_size=tokenizer.vocabulary_size(), **TINY_TEXT
        ).save_to_preset(preset_dir)
        tokenizer.save_to_preset(preset_dir)
        self.run_preset_test(
            cls=GMLPTokenizer,
            preset=preset_dir,
            input_data=["the baker sells bread"],
            expected_output=tokenizer(["the baker sells bread"]),
        )
        loaded = GMLPTokenizer.from_preset(preset_dir)
        self.assertIsInstance(loaded, GMLPTokenizer)
        self.assertEqual(loaded.get_vocabulary(), tokenizer.get_vocabulary())
        np.testing.assert_array_equal(
            np.asarray(loaded.special_token_ids),
            np.asarray(tokenizer.special_token_ids),
        )
