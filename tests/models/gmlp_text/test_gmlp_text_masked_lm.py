import os
import subprocess
import sys

import keras
import keras_hub
import numpy as np
import pytest
from keras_hub.src.tests.test_case import TestCase

from keras_gmlp.models.gmlp_text.gmlp_masked_lm import GMLPMaskedLM
from keras_gmlp.models.gmlp_text.gmlp_masked_lm_preprocessor import (
    GMLPMaskedLMPreprocessor,
)
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import GMLPTokenizer
from tests.backends import next_backend
from tests.models.text_corpus import CORPUS
from tests.models.text_corpus import TINY_TEXT

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCABULARY += ["the", "quick", "brown", "fox", ".", "jump", "##ed"]


def as_numpy(x):
    return keras.ops.convert_to_numpy(x)


def randomize(model, seed=0):
    """Random weights everywhere, so a weight lost in saving shows."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32") * 0.3)


def predict_in_another_backend(preset_dir, base_class, inputs_path, backend):
    """Loads a preset with `keras_hub.models.<base_class>.from_preset` in a
    fresh process under `backend`; returns its class name and outputs."""
    code = (
        ("import torch\n" if backend == "torch" else "")
        + "import sys, keras, keras_hub, numpy as np\n"
        + "import keras_gmlp.models  # registers the classes\n"
        + f"task = keras_hub.models.{base_class}.from_preset(sys.argv[1])\n"
        + "inputs = dict(np.load(sys.argv[2]))\n"
        + "out = keras.ops.convert_to_numpy(task(inputs))\n"
        + "np.save(sys.argv[3], out)\n"
        + "print(type(task).__name__)\n"
    )
    output_path = inputs_path + f".{backend}.npy"
    result = subprocess.run(
        [sys.executable, "-c", code, preset_dir, inputs_path, output_path],
        env=dict(os.environ, KERAS_BACKEND=backend),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.split()[-1], np.load(output_path)


class GMLPMaskedLMPreprocessorTest(TestCase):
    def setUp(self):
        self.tokenizer = GMLPTokenizer(vocabulary=VOCABULARY)
        self.init_kwargs = {
            "tokenizer": self.tokenizer,
            # Mask everything, with [MASK] only, for checkable outputs.
            "mask_selection_rate": 1.0,
            "mask_token_rate": 1.0,
            "random_token_rate": 0.0,
            "mask_selection_length": 4,
            "sequence_length": 8,
        }

    def test_preprocessor_basics(self):
        self.run_preprocessor_test(
            cls=GMLPMaskedLMPreprocessor,
            init_kwargs=self.init_kwargs,
            input_data=["the quick fox."],
            expected_output=(
                {
                    "token_ids": [[2, 4, 4, 4, 4, 3, 0, 0]],
                    "padding_mask": [[1, 1, 1, 1, 1, 1, 0, 0]],
                    "mask_positions": [[1, 2, 3, 4]],
                },
                [[5, 6, 8, 9]],
                [[1.0, 1.0, 1.0, 1.0]],
            ),
        )

    def test_special_tokens_are_never_masked(self):
        preprocessor = GMLPMaskedLMPreprocessor(**self.init_kwargs)
        x, y, _ = preprocessor(["the fox"])
        self.assertAllEqual(x["token_ids"], [[2, 4, 4, 3, 0, 0, 0, 0]])
        self.assertAllEqual(x["mask_positions"], [[1, 2, 0, 0]])
        self.assertAllEqual(y, [[5, 8, 0, 0]])

    def test_mask_packed(self):
        preprocessor = GMLPMaskedLMPreprocessor(**self.init_kwargs)
        packed = np.array([[2, 5, 6, 3, 8, 9, 3, 0]], "int32")
        x, y, sample_weight = preprocessor.mask_packed(packed)
        self.assertAllEqual(x["token_ids"], [[2, 4, 4, 3, 4, 4, 3, 0]])
        self.assertAllEqual(x["padding_mask"], [[1, 1, 1, 1, 1, 1, 1, 0]])
        self.assertAllEqual(x["mask_positions"], [[1, 2, 4, 5]])
        self.assertAllEqual(y, [[5, 6, 8, 9]])
        self.assertAllEqual(sample_weight, [[1.0, 1.0, 1.0, 1.0]])

    def test_mask_packed_in_tf_data(self):
        import tensorflow as tf

        preprocessor = GMLPMaskedLMPreprocessor(**self.init_kwargs)
        packed = np.array([[2, 5, 6, 3, 8, 9, 3, 0]] * 4, "int32")
        dataset = tf.data.Dataset.from_tensor_slices(packed).batch(2)
        x, y, sample_weight = next(iter(dataset.map(preprocessor.mask_packed)))
        self.assertAllEqual(x["token_ids"], [[2, 4, 4, 3, 4, 4, 3, 0]] * 2)
        self.assertAllEqual(y, [[5, 6, 8, 9]] * 2)


class GMLPMaskedLMTest(TestCase):
    def setUp(self):
        self.tokenizer = GMLPTokenizer(vocabulary=VOCABULARY)
        # Deterministic masks: predict(x) and predict(dataset) must agree.
        self.preprocessor = GMLPMaskedLMPreprocessor(
            self.tokenizer,
            sequence_length=8,
            mask_selection_rate=1.0,
            mask_token_rate=1.0,
            random_token_rate=0.0,
            mask_selection_length=5,
        )
        self.backbone = GMLPTextBackbone(
            vocabulary_size=len(VOCABULARY),
            **dict(TINY_TEXT, sequence_length=8),
            attention_dim=4,
        )
        self.init_kwargs = {
            "backbone": self.backbone,
            "preprocessor": self.preprocessor,
        }
        self.train_data = (["the quick brown fox.", "the fox jumped."],)

    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_task_basics(self):
        self.run_task_test(
            cls=GMLPMaskedLM,
            init_kwargs=self.init_kwargs,
            train_data=self.train_data,
            expected_output_shape=(2, 5, len(VOCABULARY)),
        )

    def test_logits_are_the_tied_embedding_at_mask_positions(self):
        task = GMLPMaskedLM(self.backbone)
        randomize(task)
        self.assertEqual(task.count_params(), self.backbone.count_params())
        inputs = {
            "token_ids": np.array([[2, 5, 4, 8, 3, 0, 0, 0]], "int32"),
            "padding_mask": np.array([[1, 1, 1, 1, 1, 0, 0, 0]], "int32"),
            "mask_positions": np.array([[2, 4, 0]], "int32"),
        }
        logits = as_numpy(task(inputs))
        del inputs["mask_positions"]
        hidden = as_numpy(self.backbone(inputs))[0, [2, 4, 0]]
        embeddings = as_numpy(self.backbone.token_embedding.embeddings)
        self.assertAllClose(logits[0], hidden @ embeddings.T, atol=1e-4)

    def test_paper_preset_by_name(self):
        # Two of the preset's blocks (the paper's 130M parameters:
        # tests/models/test_presets.py).
        task = GMLPMaskedLM.from_preset("gmlp_base", num_layers=2)
        self.assertIsNone(task.preprocessor)
        self.assertEqual(task.backbone.hidden_dim, 512)
        self.assertEqual(task.backbone.sequence_length, 512)
        # The task adds no weights to the backbone.
        backbone = GMLPTextBackbone.from_preset("gmlp_base", num_layers=2)
        self.assertEqual(task.count_params(), backbone.count_params())
        tiny = GMLPMaskedLM.from_preset(
            "amlp_tiny",
            num_layers=1,
            vocabulary_size=len(VOCABULARY),
            preprocessor=self.preprocessor,
        )
        self.assertEqual(tiny.backbone.attention_dim, 32)
        self.assertEqual(tiny.predict(["the fox"], verbose=0).shape, (1, 5, 12))

    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_fit_on_raw_strings_lowers_the_loss(self):
        tokenizer = GMLPTokenizer.from_corpus(CORPUS, vocabulary_size=120)
        preprocessor = GMLPMaskedLMPreprocessor(
            tokenizer,
            sequence_length=24,
            mask_selection_rate=0.25,
            mask_selection_length=8,
        )
        backbone = GMLPTextBackbone(
            vocabulary_size=tokenizer.vocabulary_size(),
            **dict(TINY_TEXT, sequence_length=24, hidden_dim=32, ffn_dim=64),
        )
        task = GMLPMaskedLM(backbone, preprocessor)
        task.compile(optimizer=keras.optimizers.AdamW(3e-3))
        # Fixed masks to measure the loss on, before and after training.
        keras.utils.set_random_seed(0)
        x, y, sample_weight = preprocessor(CORPUS)
        task.preprocessor = None
        before = task.evaluate(x, y, sample_weight=sample_weight, verbose=0)
        task.preprocessor = preprocessor
        task.fit(CORPUS, batch_size=8, epochs=100, verbose=0)
        task.preprocessor = None
        after = task.evaluate(x, y, sample_weight=sample_weight, verbose=0)
        self.assertLess(after[0], 0.8 * before[0])

    # Saved under JAX, loaded under torch: the task families take turns
    # (tests/models/test_gmlp_image_classifier.py).
    @pytest.mark.one_backend("jax")
    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_saved_preset_gives_equal_outputs_here_and_in_another_backend(
        self,
    ):
        task = GMLPMaskedLM(**self.init_kwargs)
        randomize(task)
        preset_dir = self.get_temp_dir()
        task.save_to_preset(preset_dir)
        for name in ("config.json", "model.weights.h5", "task.json"):
            self.assertTrue(os.path.exists(os.path.join(preset_dir, name)))
        self.assertTrue(
            os.path.exists(
                os.path.join(preset_dir, "assets/tokenizer/vocabulary.txt")
            )
        )
        x, _, _ = self.preprocessor(["the quick brown fox.", "the fox"])
        x = {key: as_numpy(value).astype("int32") for key, value in x.items()}
        expected = as_numpy(task(x))

        loaded = keras_hub.models.MaskedLM.from_preset(preset_dir)
        self.assertIsInstance(loaded, GMLPMaskedLM)
        self.assertIsInstance(loaded.preprocessor, GMLPMaskedLMPreprocessor)
        self.assertEqual(loaded.preprocessor.sequence_length, 8)
        self.assertAllClose(loaded(x), expected, atol=1e-5, rtol=1e-5)
        self.run_preset_test(cls=GMLPMaskedLM, preset=preset_dir, input_data=x)

        inputs_path = os.path.join(self.get_temp_dir(), "inputs.npz")
        np.savez(inputs_path, **x)
        name, outputs = predict_in_another_backend(
            preset_dir, "MaskedLM", inputs_path, next_backend()
        )
        self.assertEqual(name, "GMLPMaskedLM")
        self.assertAllClose(outputs, expected, atol=1e-4, rtol=1e-4)
