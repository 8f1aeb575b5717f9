import os

import keras
import keras_hub
import numpy as np
import pytest
from keras_hub.src.tests.test_case import TestCase

from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_text_classifier import GMLPTextClassifier
from keras_gmlp.models.gmlp_text.gmlp_text_classifier_preprocessor import (
    GMLPTextClassifierPreprocessor,
)
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import GMLPTokenizer
from tests.backends import next_backend
from tests.models.gmlp_text.test_gmlp_text_masked_lm import (
    predict_in_another_backend,
)
from tests.models.gmlp_text.test_gmlp_text_masked_lm import randomize
from tests.models.text_corpus import TINY_TEXT

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCABULARY += ["the", "quick", "brown", "fox", ".", "jump", "##ed"]


def as_numpy(x):
    return keras.ops.convert_to_numpy(x)


def head_reference(classifier, hidden):
    """The classifier's dense head applied in numpy to pooled vectors."""
    kernel, bias = (as_numpy(w) for w in classifier.output_dense.weights)
    return hidden @ kernel + bias


class GMLPTextClassifierPreprocessorTest(TestCase):
    def test_preprocessor_basics(self):
        self.init_kwargs = {
            "tokenizer": GMLPTokenizer(vocabulary=VOCABULARY),
            "sequence_length": 8,
        }
        self.run_preprocessor_test(
            cls=GMLPTextClassifierPreprocessor,
            init_kwargs=self.init_kwargs,
            input_data=(
                ["the quick fox."],
                [1],
                [1.0],
            ),
            expected_output=(
                {
                    "token_ids": [[2, 5, 6, 8, 9, 3, 0, 0]],
                    "padding_mask": [[1, 1, 1, 1, 1, 1, 0, 0]],
                },
                [1],
                [1.0],
            ),
        )

    def test_pairs_are_packed_cls_a_sep_b_sep(self):
        preprocessor = GMLPTextClassifierPreprocessor(
            GMLPTokenizer(vocabulary=VOCABULARY), sequence_length=8
        )
        # A pair goes in as `x=`: a positional tuple is `(x, y)`.
        x = preprocessor(x=(["the fox."], ["quick"]))
        self.assertAllEqual(x["token_ids"], [[2, 5, 8, 9, 3, 6, 3, 0]])
        self.assertEqual(sorted(x), ["padding_mask", "token_ids"])


class GMLPTextClassifierTest(TestCase):
    def setUp(self):
        self.preprocessor = GMLPTextClassifierPreprocessor(
            GMLPTokenizer(vocabulary=VOCABULARY), sequence_length=8
        )
        self.text = dict(
            TINY_TEXT, vocabulary_size=len(VOCABULARY), sequence_length=8
        )
        self.train_data = (
            ["the quick brown fox.", "the fox jumped."],
            [1, 0],
        )

    def check_task_basics(self, causal):
        backbone = GMLPTextBackbone(**self.text, attention_dim=4, causal=causal)
        self.run_task_test(
            cls=GMLPTextClassifier,
            init_kwargs={
                "backbone": backbone,
                "num_classes": 3,
                "preprocessor": self.preprocessor,
            },
            train_data=self.train_data,
            expected_output_shape=(2, 3),
        )

    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_task_basics(self):
        self.check_task_basics(causal=False)

    # The causal pooling has its own test on every backend.
    @pytest.mark.one_backend("torch")
    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_task_basics_causal(self):
        self.check_task_basics(causal=True)

    def test_bidirectional_pools_the_first_token(self):
        backbone = GMLPTextBackbone(**self.text, attention_dim=4)
        classifier = GMLPTextClassifier(backbone, num_classes=3)
        randomize(classifier)
        x = self.preprocessor(["the quick brown fox.", "the fox"])
        hidden = as_numpy(backbone(x))
        expected = head_reference(classifier, hidden[:, 0])
        self.assertAllClose(classifier(x), expected, atol=1e-4)

    def test_causal_pools_the_last_real_token(self):
        backbone = GMLPTextBackbone(**self.text, attention_dim=4, causal=True)
        classifier = GMLPTextClassifier(backbone, num_classes=3)
        randomize(classifier)
        # Right padding (packed texts), left padding and no padding.
        token_ids = np.array(
            [
                [2, 5, 6, 8, 9, 3, 0, 0],
                [2, 5, 8, 3, 0, 0, 0, 0],
                [0, 0, 0, 2, 5, 8, 9, 3],
                [2, 5, 6, 7, 8, 10, 11, 3],
            ],
            "int32",
        )
        x = {"token_ids": token_ids, "padding_mask": token_ids != 0}
        hidden = as_numpy(backbone(x))
        last = np.array([5, 3, 7, 7])
        expected = head_reference(classifier, hidden[np.arange(4), last])
        self.assertAllClose(classifier(x), expected, atol=1e-4)

    def test_causal_classifier_sees_the_text(self):
        # A causal model pools its last real token: token 0 ([CLS]) would
        # see no other token and give the same logits for every text.
        backbone = GMLPTextBackbone(**self.text, attention_dim=4, causal=True)
        classifier = GMLPTextClassifier(
            backbone, num_classes=3, preprocessor=self.preprocessor
        )
        randomize(classifier)
        logits = classifier.predict(
            ["the quick brown fox.", "the fox jumped."], verbose=0
        )
        self.assertGreater(np.abs(logits[0] - logits[1]).max(), 1e-3)

    def test_paper_preset_by_name(self):
        classifier = GMLPTextClassifier.from_preset(
            "gmlp_tiny", num_classes=4, num_layers=1, vocabulary_size=12
        )
        self.assertIsNone(classifier.preprocessor)
        self.assertEqual(classifier.backbone.hidden_dim, 128)
        self.assertEqual(classifier.num_classes, 4)
        with self.assertRaisesRegex(ValueError, "image"):
            GMLPTextClassifier.from_preset("gmlp_ti16_224", num_classes=2)

    # Saved under torch, loaded under TensorFlow: the task families take
    # turns (tests/models/test_gmlp_image_classifier.py).
    @pytest.mark.one_backend("torch")
    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_saved_preset_gives_equal_outputs_here_and_in_another_backend(
        self,
    ):
        backbone = GMLPTextBackbone(**self.text, attention_dim=4, causal=True)
        classifier = GMLPTextClassifier(
            backbone, num_classes=3, preprocessor=self.preprocessor
        )
        randomize(classifier)
        preset_dir = self.get_temp_dir()
        classifier.save_to_preset(preset_dir)
        x = self.preprocessor(["the quick brown fox.", "the fox"])
        x = {key: as_numpy(value).astype("int32") for key, value in x.items()}
        expected = as_numpy(classifier(x))

        loaded = keras_hub.models.TextClassifier.from_preset(preset_dir)
        self.assertIsInstance(loaded, GMLPTextClassifier)
        self.assertIsInstance(
            loaded.preprocessor, GMLPTextClassifierPreprocessor
        )
        self.assertAllClose(loaded(x), expected, atol=1e-5, rtol=1e-5)
        self.run_preset_test(
            cls=GMLPTextClassifier,
            preset=preset_dir,
            input_data=x,
            expected_output_shape=(2, 3),
        )
        # A new head: the backbone's weights with other classes.
        fresh = GMLPTextClassifier.from_preset(preset_dir, num_classes=5)
        self.assertEqual(fresh(x).shape, (2, 5))

        inputs_path = os.path.join(self.get_temp_dir(), "inputs.npz")
        np.savez(inputs_path, **x)
        name, outputs = predict_in_another_backend(
            preset_dir, "TextClassifier", inputs_path, next_backend()
        )
        self.assertEqual(name, "GMLPTextClassifier")
        self.assertAllClose(outputs, expected, atol=1e-4, rtol=1e-4)
