import keras
import numpy as np
import pytest
from keras_hub.src.tests.test_case import TestCase

from keras_gmlp import models
from keras_gmlp.models import PRESETS
from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone

TINY = {
    "vocabulary_size": 20,
    "sequence_length": 8,
    "num_layers": 2,
    "hidden_dim": 8,
    "ffn_dim": 16,
}


def tiny_inputs(batch=2, length=8, seed=0):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, 20, size=(batch, length)).astype("int32")
    padding_mask = np.ones((batch, length), "int32")
    padding_mask[1, length - 3 :] = 0
    token_ids[padding_mask == 0] = 0
    return {"token_ids": token_ids, "padding_mask": padding_mask}


class GMLPTextBackboneTest(TestCase):
    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_backbone_basics(self):
        self.run_backbone_test(
            cls=GMLPTextBackbone,
            init_kwargs=dict(TINY),
            input_data=tiny_inputs(),
            expected_output_shape=(2, 8, 8),
        )

    @pytest.mark.filterwarnings("ignore::UserWarning")
    @pytest.mark.one_backend("torch")
    def test_amlp_causal_backbone_basics(self):
        self.run_backbone_test(
            cls=GMLPTextBackbone,
            init_kwargs=dict(TINY, attention_dim=4, causal=True),
            input_data=tiny_inputs(),
            expected_output_shape=(2, 8, 8),
        )

    def test_saved_model(self):
        self.run_model_saving_test(
            cls=GMLPTextBackbone,
            init_kwargs=dict(TINY, attention_dim=4),
            input_data=tiny_inputs(),
        )

    def test_config_is_the_constructor_arguments(self):
        backbone = GMLPTextBackbone(**TINY, attention_dim=4, causal=True)
        config = backbone.get_config()
        expected = set(TINY) | {
            "attention_dim",
            "spatial",
            "causal",
            "gating",
            "drop_path_rate",
            "dtype",
            "name",
            "trainable",
        }
        self.assertEqual(set(config), expected)
        rebuilt = GMLPTextBackbone(**config)
        self.assertEqual(rebuilt.get_config(), config)

    def test_layer_names_and_tied_embedding(self):
        backbone = GMLPTextBackbone(**TINY)
        names = [layer.name for layer in backbone.layers]
        self.assertIn("token_embedding", names)
        self.assertIn("block_0", names)
        self.assertIn("block_1", names)
        self.assertIn("final_norm", names)
        self.assertIs(
            backbone.token_embedding, backbone.get_layer("token_embedding")
        )
        self.assertIsInstance(
            backbone.token_embedding, keras_gmlp_layers().TiedEmbedding
        )

    def test_padding_mask_reaches_the_tiny_attention(self):
        data = tiny_inputs()
        unmasked = dict(data, padding_mask=np.ones_like(data["padding_mask"]))
        real = data["padding_mask"][1] == 1
        for attention_dim, moves in ((4, True), (None, False)):
            backbone = GMLPTextBackbone(**TINY, attention_dim=attention_dim)
            difference = np.abs(
                keras.ops.convert_to_numpy(backbone(data))
                - keras.ops.convert_to_numpy(backbone(unmasked))
            )
            # Row 0 has no padding: the mask changes nothing there.
            self.assertLess(difference[0].max(), 1e-6)
            if moves:
                self.assertGreater(difference[1][real].max(), 1e-4)
            else:
                self.assertLess(difference[1].max(), 1e-6)

    def test_same_outputs_as_the_builder_network(self):
        # The backbone is the network of models.masked_lm's encoder.
        model = models.masked_lm(**TINY, attention_dim=4)
        backbone = GMLPTextBackbone(**TINY, attention_dim=4)
        backbone.set_weights(
            [
                np.random.default_rng(i).normal(size=w.shape) * 0.3
                for i, w in enumerate(backbone.get_weights())
            ]
        )
        model.set_weights(backbone.get_weights())
        # The builder masks token id 0, the backbone its padding_mask.
        data = tiny_inputs()
        hidden = backbone(data)
        logits = backbone.token_embedding(hidden, reverse=True)
        expected = model(data["token_ids"])
        self.assertAllClose(logits, expected, atol=1e-5, rtol=1e-5)

    def test_paper_presets_by_name(self):
        # The preset's configuration, two of its blocks (its parameter
        # count: tests/models/test_presets.py).
        backbone = GMLPTextBackbone.from_preset("gmlp_base", num_layers=2)
        model = models.masked_lm("gmlp_base", num_layers=2)
        self.assertEqual(backbone.count_params(), model.count_params())
        config = backbone.get_config()
        for key, value in PRESETS["gmlp_base"]["config"].items():
            if key != "num_layers":
                self.assertEqual(config[key], value, key)
        tiny = GMLPTextBackbone.from_preset(
            "amlp_tiny", num_layers=1, causal=True
        )
        self.assertEqual(tiny.attention_dim, 32)
        self.assertTrue(tiny.causal)
        with self.assertRaisesRegex(ValueError, "image"):
            GMLPTextBackbone.from_preset("gmlp_s16_224")
        with self.assertRaisesRegex(ValueError, "clowntown"):
            GMLPTextBackbone.from_preset("clowntown")

    def test_local_preset(self):
        backbone = GMLPTextBackbone(**TINY, attention_dim=4)
        preset_dir = self.get_temp_dir()
        backbone.save_to_preset(preset_dir)
        data = tiny_inputs()
        self.run_preset_test(
            cls=GMLPTextBackbone,
            preset=preset_dir,
            input_data=data,
            expected_output=backbone(data),
        )


def keras_gmlp_layers():
    import keras_gmlp.layers

    return keras_gmlp.layers
