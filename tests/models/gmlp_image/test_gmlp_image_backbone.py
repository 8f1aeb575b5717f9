import keras
import numpy as np
import pytest
from keras_hub.src.tests.test_case import TestCase

from keras_gmlp.layers.gmlp_block import GMLPBlock
from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone
from tests import reference

TINY = dict(
    image_size=8,
    patch_size=4,
    num_layers=2,
    hidden_dim=8,
    ffn_dim=16,
)


def array(x):
    return keras.ops.convert_to_numpy(x)


def numpy_backbone(backbone, images):
    """The backbone's forward pass from its weights, in numpy."""
    patch_h, patch_w = backbone.patch_size
    batch, height, width, channels = images.shape
    rows, columns = height // patch_h, width // patch_w
    # Row-major patches, each flattened as (patch row, patch column, channel).
    patches = images.reshape(batch, rows, patch_h, columns, patch_w, channels)
    patches = patches.transpose(0, 1, 3, 2, 4, 5).reshape(
        batch, rows * columns, patch_h * patch_w * channels
    )
    stem = backbone.get_layer("stem").projection
    kernel = array(stem.kernel).reshape(-1, backbone.hidden_dim)
    x = patches @ kernel + array(stem.bias)
    for i in range(backbone.num_layers):
        block = backbone.get_layer(f"block_{i}")
        unit = block.spatial_gating_unit
        h = reference.layer_norm(
            x, array(block.norm.gamma), array(block.norm.beta), 1e-6
        )
        h = h @ array(block.channel_projection_in.kernel)
        h = reference.gelu(h + array(block.channel_projection_in.bias))
        h = reference.spatial_gating(
            h,
            array(unit.kernel),
            array(unit.bias),
            array(unit.norm.gamma),
            array(unit.norm.beta),
            eps=unit.norm.epsilon,
        )
        h = h @ array(block.channel_projection_out.kernel)
        x = x + h + array(block.channel_projection_out.bias)
    norm = backbone.get_layer("final_norm")
    return reference.layer_norm(x, array(norm.gamma), array(norm.beta), 1e-6)


class GMLPImageBackboneTest(TestCase):
    def setUp(self):
        self.init_kwargs = dict(TINY)
        # A backend tensor, as keras-hub's tests use: the precision check's
        # `compute_output_spec` sees no shape in a numpy array.
        self.input_data = keras.ops.convert_to_tensor(
            np.random.default_rng(0).uniform(-1, 1, size=(2, 8, 8, 3)),
            "float32",
        )

    def test_backbone_basics(self):
        # keras-hub's checks: config round trip, eager call, predict on
        # arrays and tf.data, the name, mixed precision, int8 and float8
        # quantization of the Dense layers. Its data-format check is off:
        # the backbone takes channels-last images only (the patch stem's
        # token order is row-major over a channels-last grid), and its
        # output is a token sequence, not a feature map whose axes the
        # check could transpose.
        self.run_vision_backbone_test(
            cls=GMLPImageBackbone,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
            expected_output_shape=(2, 4, 8),
            run_data_format_check=False,
        )

    @pytest.mark.one_backend("tensorflow")
    def test_amlp_toeplitz_backbone_basics(self):
        self.run_vision_backbone_test(
            cls=GMLPImageBackbone,
            init_kwargs=dict(
                self.init_kwargs,
                image_size=(8, 12),
                patch_size=(4, 2),
                attention_dim=4,
                spatial="toeplitz",
                drop_path_rate=0.1,
            ),
            input_data=keras.ops.zeros((2, 8, 12, 3)),
            expected_output_shape=(2, 12, 8),
            run_data_format_check=False,
        )

    def test_saved_model(self):
        self.run_model_saving_test(
            cls=GMLPImageBackbone,
            init_kwargs=self.init_kwargs,
            input_data=self.input_data,
        )

    def test_features_match_a_numpy_reference(self):
        rng = np.random.default_rng(1)
        backbone = GMLPImageBackbone(**dict(TINY, image_size=(8, 12)))
        for weight in backbone.weights:
            weight.assign(rng.normal(size=weight.shape) * 0.3)
        images = rng.uniform(-1, 1, size=(2, 8, 12, 3)).astype("float32")
        self.assertAllClose(
            backbone(images),
            numpy_backbone(backbone, images),
            atol=1e-4,
            rtol=1e-4,
        )

    def test_pooled_output_is_the_pooled_tokens(self):
        rng = np.random.default_rng(2)
        backbone = GMLPImageBackbone(**TINY, pooling="avg")
        for weight in backbone.weights:
            weight.assign(rng.normal(size=weight.shape) * 0.3)
        images = rng.uniform(-1, 1, size=(2, 8, 8, 3)).astype("float32")
        outputs = backbone(images)
        tokens = numpy_backbone(backbone, images)
        self.assertAllClose(
            outputs["sequence_output"], tokens, atol=1e-4, rtol=1e-4
        )
        self.assertAllClose(
            outputs["pooled_output"], tokens.mean(1), atol=1e-4, rtol=1e-4
        )
        config = dict(backbone.get_config(), pooling="max")
        maximum = GMLPImageBackbone.from_config(config)
        maximum.set_weights(backbone.get_weights())
        self.assertAllClose(
            maximum(images)["pooled_output"],
            tokens.max(1),
            atol=1e-4,
            rtol=1e-4,
        )
        with pytest.raises(ValueError, match="pooling='token'"):
            GMLPImageBackbone(**TINY, pooling="token")

    def test_pooled_backbone_saves_and_serves_a_classifier(self):
        from keras_gmlp.models import GMLPImageClassifier

        self.run_model_saving_test(
            cls=GMLPImageBackbone,
            init_kwargs=dict(self.init_kwargs, pooling="avg"),
            input_data=self.input_data,
        )
        plain = GMLPImageClassifier(GMLPImageBackbone(**TINY), num_classes=3)
        pooled = GMLPImageClassifier(
            GMLPImageBackbone(**TINY, pooling="avg"), num_classes=3
        )
        self.assertEqual(pooled.count_params(), plain.count_params())
        pooled.set_weights(plain.get_weights())
        self.assertAllClose(
            pooled(self.input_data), plain(self.input_data), atol=1e-6
        )
        small = GMLPImageBackbone.from_preset(
            "gmlp_micro4_32", num_layers=1, pooling="avg"
        )
        outputs = small(keras.ops.zeros((1, 32, 32, 3)))
        self.assertEqual(tuple(outputs["pooled_output"].shape), (1, 64))

    def test_layer_names_and_drop_path_rates(self):
        backbone = GMLPImageBackbone(
            **dict(TINY, num_layers=5), drop_path_rate=0.2
        )
        self.assertIsInstance(backbone.get_layer("block_4"), GMLPBlock)
        self.assertEqual(backbone.get_layer("stem").patch_size, (4, 4))
        self.assertEqual(backbone.get_layer("final_norm").epsilon, 1e-6)
        rates = [
            backbone.get_layer(f"block_{i}").drop_path_rate for i in range(5)
        ]
        self.assertAllClose(rates, [0.0, 0.05, 0.1, 0.15, 0.2])

    def test_config_rebuilds_the_backbone(self):
        backbone = GMLPImageBackbone(**TINY, attention_dim=4)
        config = backbone.get_config()
        self.assertEqual(
            set(config),
            {
                "name",
                "trainable",
                "dtype",
                "image_size",
                "patch_size",
                "num_layers",
                "hidden_dim",
                "ffn_dim",
                "num_channels",
                "attention_dim",
                "spatial",
                "drop_path_rate",
                "pooling",
            },
        )
        rebuilt = type(backbone)(**config)
        self.assertEqual(rebuilt.get_config(), config)
        self.assertEqual(rebuilt.count_params(), backbone.count_params())

    def test_named_presets_build_the_paper_configurations(self):
        # gMLP-S: 19,422,656 parameters with its 1000-class head of
        # 256 * 1000 + 1000.
        backbone = GMLPImageBackbone.from_preset("gmlp_s16_224")
        self.assertEqual(backbone.count_params(), 19_422_656 - 257_000)
        self.assertEqual(backbone.output_shape, (None, 196, 256))
        small = GMLPImageBackbone.from_preset(
            "gmlp_micro4_32", num_layers=1, attention_dim=8
        )
        self.assertEqual(small.num_layers, 1)
        self.assertEqual(small.attention_dim, 8)

    def test_preset_folder(self):
        backbone = GMLPImageBackbone(**TINY)
        expected = backbone(self.input_data)
        folder = self.get_temp_dir()
        backbone.save_to_preset(folder)
        self.run_preset_test(
            cls=GMLPImageBackbone,
            preset=folder,
            input_data=self.input_data,
            expected_output=expected,
        )

    def test_bad_arguments_raise(self):
        with pytest.raises(ValueError, match="225 is not divisible by patch"):
            GMLPImageBackbone(**dict(TINY, image_size=225, patch_size=16))
        with pytest.raises(ValueError, match="'gmlp_base' is a text model"):
            GMLPImageBackbone.from_preset("gmlp_base")
        with pytest.raises(ValueError, match=r"Unknown configuration keys"):
            GMLPImageBackbone.from_preset("gmlp_s16_224", num_classes=10)
        with pytest.raises(ValueError, match="ffn_dim=15"):
            GMLPImageBackbone(**dict(TINY, ffn_dim=15))

    def test_channels_first_config_raises(self):
        keras.config.set_image_data_format("channels_first")
        try:
            with pytest.raises(ValueError, match="channels-last images"):
                GMLPImageBackbone(**TINY)
        finally:
            keras.config.set_image_data_format("channels_last")
