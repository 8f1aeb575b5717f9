import keras
import keras_hub
import numpy as np
import pytest
from keras_hub.src.tests.test_case import TestCase

from keras_gmlp.models.gmlp_text.gmlp_causal_lm import GMLPCausalLM
from keras_gmlp.models.gmlp_text.gmlp_causal_lm_preprocessor import (
    GMLPCausalLMPreprocessor,
)
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
from keras_gmlp.models.gmlp_text.gmlp_tokenizer import GMLPTokenizer
from tests.models.gmlp_text.test_gmlp_text_masked_lm import randomize
from tests.models.text_corpus import TINY_TEXT

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCABULARY += ["the", "quick", "brown", "fox", ".", "jump", "##ed"]
VOCABULARY += ["a", "dog", "cat", "sat", "on", "mat", "log", "and"]


def as_numpy(x):
    return keras.ops.convert_to_numpy(x)


def as_text(x):
    if hasattr(x, "numpy"):
        x = x.numpy()
    if isinstance(x, bytes):
        x = x.decode("utf-8")
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, list):
        return [as_text(item) for item in x]
    return x


def greedy_reference(causal_lm, prompt_ids, max_length, stop_id=None):
    """Greedy decoding with the plain forward pass on the growing prefix,
    padded on the right to `max_length` (one shape, traced once): a causal
    model's outputs up to the prefix's last token do not see the padding."""
    ids = list(prompt_ids)
    while len(ids) < max_length:
        token_ids = np.zeros((1, max_length), "int32")
        token_ids[0, : len(ids)] = ids
        x = {
            "token_ids": token_ids,
            "padding_mask": np.arange(max_length)[None] < len(ids),
        }
        logits = as_numpy(causal_lm(x))[0, len(ids) - 1]
        ids.append(int(logits.argmax()))
        if ids[-1] == stop_id:
            break
    return ids


class GMLPCausalLMPreprocessorTest(TestCase):
    def setUp(self):
        self.tokenizer = GMLPTokenizer(vocabulary=VOCABULARY)
        self.init_kwargs = {"tokenizer": self.tokenizer, "sequence_length": 8}

    def test_preprocessor_basics(self):
        self.run_preprocessor_test(
            cls=GMLPCausalLMPreprocessor,
            init_kwargs=self.init_kwargs,
            input_data=["the quick fox."],
            expected_output=(
                {
                    "token_ids": [[2, 5, 6, 8, 9, 3, 0, 0]],
                    "padding_mask": [[1, 1, 1, 1, 1, 1, 0, 0]],
                },
                [[5, 6, 8, 9, 3, 0, 0, 0]],
                [[1, 1, 1, 1, 1, 0, 0, 0]],
            ),
        )

    def test_generate_pre_and_postprocess(self):
        preprocessor = GMLPCausalLMPreprocessor(**self.init_kwargs)
        x = preprocessor.generate_preprocess("the fox")
        self.assertAllEqual(x["token_ids"], [2, 5, 8, 0, 0, 0, 0, 0])
        self.assertAllEqual(x["padding_mask"], [1, 1, 1, 0, 0, 0, 0, 0])
        text = preprocessor.generate_postprocess(
            {
                "token_ids": np.array([2, 5, 8, 10, 11, 3, 0, 0]),
                "padding_mask": np.array([1, 1, 1, 1, 1, 1, 0, 0], bool),
            }
        )
        self.assertEqual(as_text(text), "the fox jumped")


class GMLPCausalLMTest(TestCase):
    def setUp(self):
        self.preprocessor = GMLPCausalLMPreprocessor(
            GMLPTokenizer(vocabulary=VOCABULARY), sequence_length=8
        )
        self.backbone = GMLPTextBackbone(
            vocabulary_size=len(VOCABULARY),
            **dict(TINY_TEXT, sequence_length=12),
            attention_dim=4,
            causal=True,
        )
        self.init_kwargs = {
            "backbone": self.backbone,
            "preprocessor": self.preprocessor,
        }
        self.train_data = (["the quick brown fox.", "the fox jumped."],)

    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_task_basics(self):
        self.run_task_test(
            cls=GMLPCausalLM,
            init_kwargs=self.init_kwargs,
            train_data=self.train_data,
            expected_output_shape=(2, 8, len(VOCABULARY)),
        )

    def test_refuses_a_bidirectional_backbone(self):
        backbone = GMLPTextBackbone(
            vocabulary_size=len(VOCABULARY), **TINY_TEXT
        )
        with self.assertRaisesRegex(ValueError, "causal=False"):
            GMLPCausalLM(backbone)

    @pytest.mark.one_backend("tensorflow")
    def test_greedy_generate_matches_a_step_by_step_reference(self):
        causal_lm = GMLPCausalLM(**self.init_kwargs)
        # Weights whose greedy continuations are not one repeated token.
        randomize(causal_lm, seed=7)
        causal_lm.compile(sampler="greedy")
        # Token ids in, token ids out: two right-padded prompts.
        prompts = [[2, 5, 8], [2, 13, 15, 16, 5]]
        token_ids = np.zeros((2, 12), "int32")
        for row, prompt in enumerate(prompts):
            token_ids[row, : len(prompt)] = prompt
        causal_lm.preprocessor = None
        outputs = causal_lm.generate(
            {"token_ids": token_ids, "padding_mask": token_ids != 0},
            stop_token_ids=None,
        )
        for row, prompt in enumerate(prompts):
            expected = greedy_reference(causal_lm, prompt, 12)
            self.assertAllEqual(outputs["token_ids"][row], expected)
        # The generated tokens are not all the same token.
        for row, prompt in enumerate(prompts):
            generated = outputs["token_ids"][row, len(prompt) :]
            self.assertGreater(len(set(generated.tolist())), 1)

        # Strings in, strings out: stops after [SEP], drops special tokens.
        causal_lm.preprocessor = self.preprocessor
        text = causal_lm.generate("the fox", max_length=12)
        self.assertIsInstance(as_text(text), str)
        expected = greedy_reference(causal_lm, [2, 5, 8], 12, stop_id=3)
        words = [VOCABULARY[i] for i in expected if i > 4]
        self.assertEqual(as_text(text), " ".join(words).replace(" ##", ""))
        texts = causal_lm.generate(["the fox", "a dog sat"], max_length=10)
        self.assertEqual(len(as_text(texts)), 2)

    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_every_sampler_generates_text(self):
        causal_lm = GMLPCausalLM(**self.init_kwargs)
        randomize(causal_lm, seed=1)
        for sampler in ("greedy", "top_k", "top_p", "beam"):
            causal_lm.compile(sampler=sampler)
            texts = as_text(
                causal_lm.generate(["the fox", "a cat"], max_length=10)
            )
            self.assertEqual(len(texts), 2)
            self.assertTrue(texts[0].startswith("the fox"), texts)
            self.assertTrue(texts[1].startswith("a cat"), texts)

    def test_fit_on_raw_strings(self):
        causal_lm = GMLPCausalLM(**self.init_kwargs)
        causal_lm.compile(optimizer=keras.optimizers.AdamW(1e-2))
        history = causal_lm.fit(
            ["the quick brown fox jumped.", "a dog sat on the mat."] * 4,
            batch_size=4,
            epochs=20,
            verbose=0,
        )
        losses = history.history["loss"]
        self.assertLess(losses[-1], 0.7 * losses[0])

    def test_paper_preset_by_name(self):
        causal_lm = GMLPCausalLM.from_preset(
            "amlp_tiny", num_layers=1, vocabulary_size=len(VOCABULARY)
        )
        self.assertTrue(causal_lm.backbone.causal)
        self.assertIsNone(causal_lm.preprocessor)
        with self.assertRaisesRegex(ValueError, "causal=False"):
            GMLPCausalLM.from_preset("gmlp_tiny", causal=False)

    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_saved_preset_generates_the_same_text(self):
        causal_lm = GMLPCausalLM(**self.init_kwargs)
        randomize(causal_lm, seed=3)
        causal_lm.compile(sampler="greedy")
        preset_dir = self.get_temp_dir()
        causal_lm.save_to_preset(preset_dir)
        loaded = keras_hub.models.CausalLM.from_preset(preset_dir)
        self.assertIsInstance(loaded, GMLPCausalLM)
        loaded.compile(sampler="greedy")
        prompts = ["the fox", "a dog sat"]
        self.assertEqual(
            as_text(loaded.generate(prompts, max_length=10)),
            as_text(causal_lm.generate(prompts, max_length=10)),
        )
        x, _, _ = self.preprocessor(prompts)
        self.run_preset_test(
            cls=GMLPCausalLM,
            preset=preset_dir,
            input_data=x,
            expected_output=causal_lm(x),
        )

    def test_token_id_generate_function_takes_the_task(self):
        from keras_gmlp.generation import generate

        causal_lm = GMLPCausalLM(**self.init_kwargs)
        randomize(causal_lm, seed=7)
        tokens = generate(causal_lm, [2, 5, 8], max_new_tokens=6)
        self.assertEqual(
            tokens.tolist(), greedy_reference(causal_lm, [2, 5, 8], 9)
        )
