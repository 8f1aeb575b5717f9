import keras
import numpy as np
from keras_hub.src.tests.test_case import TestCase

from keras_gmlp.models.gmlp_image.gmlp_image_classifier_preprocessor import (
    GMLPImageClassifierPreprocessor,
)
from keras_gmlp.models.gmlp_image.gmlp_image_converter import GMLPImageConverter


class GMLPImageConverterTest(TestCase):
    def setUp(self):
        self.images = np.random.default_rng(0).integers(
            0, 256, size=(3, 8, 8, 3), dtype="uint8"
        )

    def test_converter_basics(self):
        # keras-hub's preprocessing-layer checks: config round trip, direct
        # call, tf.data (batched and not) and Grain; at the model's size the
        # output is the pixels mapped to [-1, 1] (timm's mean = std = 0.5).
        output = self.run_preprocessing_layer_test(
            cls=GMLPImageConverter,
            init_kwargs={"image_size": (8, 8)},
            input_data=self.images,
            return_output=True,
        )
        self.assertAllClose(output, self.images / 127.5 - 1.0)

    def test_preprocessor_basics(self):
        labels = np.array([0, 1, 2])
        self.run_preprocessing_layer_test(
            cls=GMLPImageClassifierPreprocessor,
            init_kwargs={"image_converter": GMLPImageConverter((8, 8))},
            input_data=(self.images, labels),
            expected_output=(
                self.images.astype("float32") / 127.5 - 1.0,
                labels,
            ),
        )

    def test_range_resize_and_crop(self):
        converter = GMLPImageConverter(image_size=(4, 4))
        white = np.full((2, 8, 12, 3), 255, "uint8")
        black = np.zeros((2, 8, 12, 3), "uint8")
        self.assertAllClose(converter(white), np.ones((2, 4, 4, 3)))
        self.assertAllClose(converter(black), -np.ones((2, 4, 4, 3)))
        # A wide image: the centred square is kept, the sides are cut.
        image = np.zeros((1, 8, 16, 1), "float32")
        image[:, :, 4:12] = 255.0
        cropped = GMLPImageConverter(image_size=(4, 4))(image)
        self.assertAllClose(cropped, np.ones((1, 4, 4, 1)))
        squeezed = GMLPImageConverter(
            image_size=(4, 4), crop_to_aspect_ratio=False
        )(image)
        self.assertLess(float(keras.ops.min(squeezed)), 0.0)

    def test_interpolation_is_configurable(self):
        image = np.random.default_rng(1).integers(0, 256, size=(1, 9, 9, 3))
        image = image.astype("float32")
        bilinear = GMLPImageConverter(image_size=(4, 4))(image)
        bicubic = GMLPImageConverter(
            image_size=(4, 4), interpolation="bicubic"
        )(image)
        self.assertGreater(
            float(keras.ops.max(keras.ops.abs(bilinear - bicubic))), 1e-3
        )
        config = GMLPImageConverter(interpolation="bicubic").get_config()
        self.assertEqual(config["interpolation"], "bicubic")
        self.assertAllClose(config["scale"], 1 / 127.5)
        self.assertAllClose(config["offset"], -1.0)
