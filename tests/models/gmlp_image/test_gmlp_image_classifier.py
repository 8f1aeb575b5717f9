import os
import subprocess
import sys

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from keras_hub.src.tests.test_case import TestCase

from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone
from keras_gmlp.models.gmlp_image.gmlp_image_classifier import (
    GMLPImageClassifier,
)
from keras_gmlp.models.gmlp_image.gmlp_image_classifier_preprocessor import (
    GMLPImageClassifierPreprocessor,
)
from keras_gmlp.models.gmlp_image.gmlp_image_converter import GMLPImageConverter
from keras_gmlp.models.gmlp_image.image_classifier import image_classifier
from tests.backends import loading_backends

TINY = dict(image_size=8, patch_size=4, num_layers=2, hidden_dim=8, ffn_dim=16)

# Loads a preset folder in a fresh process and saves its predictions.
LOAD_PRESET = """
import sys
import keras
import keras_hub
import numpy as np
import keras_gmlp.models  # registers the classes
folder, images, out = sys.argv[1:]
task = keras_hub.models.ImageClassifier.from_preset(folder)
assert type(task).__name__ == "GMLPImageClassifier", type(task)
np.save(out, task.predict(np.load(images), verbose=0))
"""


def array(x):
    return keras.ops.convert_to_numpy(x)


def tiny_preprocessor():
    return GMLPImageClassifierPreprocessor(
        GMLPImageConverter(image_size=(8, 8))
    )


def randomize(model, seed=0):
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(size=weight.shape) * 0.3)


class GMLPImageClassifierTest(TestCase):
    def setUp(self):
        rng = np.random.default_rng(0)
        # Raw uint8 images of another size than the model's.
        self.images = rng.integers(0, 256, size=(4, 12, 10, 3), dtype="uint8")
        self.labels = np.array([0, 1, 2, 0])
        self.init_kwargs = {
            "backbone": GMLPImageBackbone(**TINY),
            "num_classes": 3,
            "preprocessor": tiny_preprocessor(),
        }

    def test_classifier_basics(self):
        # keras-hub's task checks on raw uint8 images: serialization,
        # predict on arrays, tf.data and split preprocessing, fit on each,
        # and that fit without compile raises. The images have the model's
        # size: the check compares eager preprocessing (the backend's
        # resize) with tf.data's (TensorFlow's), whose downscaling differs
        # by about 1e-3 under JAX.
        images = np.random.default_rng(2).integers(
            0, 256, size=(4, 8, 8, 3), dtype="uint8"
        )
        self.run_task_test(
            cls=GMLPImageClassifier,
            init_kwargs=self.init_kwargs,
            train_data=(images, self.labels),
            expected_output_shape=(4, 3),
        )

    def test_saved_model(self):
        self.run_model_saving_test(
            cls=GMLPImageClassifier,
            init_kwargs={**self.init_kwargs, "dropout": 0.1},
            input_data=keras.ops.zeros((2, 8, 8, 3)),
        )

    def test_preset_folder_loads_with_equal_outputs(self):
        task = GMLPImageClassifier(**self.init_kwargs)
        randomize(task)
        expected = task.predict(self.images, verbose=0)
        folder = self.get_temp_dir()
        task.save_to_preset(folder)
        self.run_preset_test(
            cls=GMLPImageClassifier,
            preset=folder,
            input_data=tiny_preprocessor()(self.images),
            expected_output=expected,
        )
        # keras-hub's generic class finds this package's class.
        for cls in (GMLPImageClassifier, keras_hub.models.ImageClassifier):
            loaded = cls.from_preset(folder)
            self.assertIsInstance(loaded, GMLPImageClassifier)
            self.assertIsInstance(
                loaded.preprocessor, GMLPImageClassifierPreprocessor
            )
            self.assertAllClose(
                loaded.predict(self.images, verbose=0), expected
            )
        # A new head for another class count keeps the backbone's weights.
        other = GMLPImageClassifier.from_preset(folder, num_classes=5)
        self.assertEqual(other.predict(self.images, verbose=0).shape, (4, 5))
        self.assertAllClose(
            other.backbone(keras.ops.zeros((1, 8, 8, 3))),
            task.backbone(keras.ops.zeros((1, 8, 8, 3))),
        )

    def test_preset_folder_loads_resampled_to_another_image_size(self):
        task = GMLPImageClassifier(**self.init_kwargs)
        folder = self.get_temp_dir()
        task.save_to_preset(folder)
        resized = GMLPImageClassifier.from_preset(folder, image_size=12)
        self.assertEqual(resized.backbone.image_size, (12, 12))
        converter = resized.preprocessor.image_converter
        self.assertEqual(converter.image_size, (12, 12))
        self.assertEqual(resized.predict(self.images, verbose=0).shape, (4, 3))
        # The same size: the saved model itself.
        same = GMLPImageClassifier.from_preset(folder, image_size=8)
        self.assertAllClose(
            same.predict(self.images, verbose=0),
            task.predict(self.images, verbose=0),
        )

    def test_logits_are_the_head_of_the_mean_token(self):
        task = GMLPImageClassifier(**self.init_kwargs)
        randomize(task)
        x = keras.ops.convert_to_tensor(
            np.random.default_rng(1).uniform(-1, 1, size=(2, 8, 8, 3)),
            "float32",
        )
        features = array(task.backbone(x))
        head = task.get_layer("head")
        expected = features.mean(axis=1) @ array(head.kernel) + array(head.bias)
        self.assertAllClose(task(x), expected, atol=1e-5, rtol=1e-5)
        self.assertEqual(task.backbone.output_shape, (None, 4, 8))

    def test_fit_on_raw_images_lowers_the_loss(self):
        # Dark images are class 0, bright ones class 1: separable.
        rng = np.random.default_rng(0)
        dark = rng.integers(0, 80, size=(32, 10, 10, 3))
        bright = rng.integers(176, 256, size=(32, 10, 10, 3))
        images = np.concatenate([dark, bright]).astype("uint8")
        labels = np.repeat([0, 1], 32)
        dataset = (
            tf.data.Dataset.from_tensor_slices((images, labels))
            .shuffle(64, seed=0)
            .batch(16)
        )
        task = GMLPImageClassifier(
            backbone=GMLPImageBackbone(**TINY),
            num_classes=2,
            preprocessor=tiny_preprocessor(),
        )
        history = task.fit(dataset, epochs=8, verbose=0).history
        self.assertLess(history["loss"][-1], 0.5 * history["loss"][0])
        predicted = task.predict(images, verbose=0).argmax(axis=-1)
        self.assertGreaterEqual((predicted == labels).mean(), 0.9)

    def test_compile_defaults(self):
        task = GMLPImageClassifier(**self.init_kwargs)
        self.assertIsInstance(task.optimizer, keras.optimizers.AdamW)
        self.assertAllClose(task.optimizer.weight_decay, 0.05)
        self.assertTrue(task.loss.from_logits)
        bias = task.get_layer("head").bias
        self.assertTrue(
            task.optimizer._use_weight_decay(task.get_layer("head").kernel)
        )
        self.assertFalse(task.optimizer._use_weight_decay(bias))
        softmax = GMLPImageClassifier(**self.init_kwargs, activation="softmax")
        self.assertFalse(softmax.loss.from_logits)
        task.fit(self.images, self.labels, verbose=0)
        self.assertIn("accuracy", task.get_metrics_result())

    def test_reloaded_task_keeps_its_optimizer_state(self):
        task = GMLPImageClassifier(**{**self.init_kwargs, "preprocessor": None})
        x = tiny_preprocessor()(self.images)
        task.fit(x, self.labels, epochs=2, verbose=0)
        path = os.path.join(self.get_temp_dir(), "task.keras")
        task.save(path)
        loaded = keras.saving.load_model(path)
        self.assertEqual(int(loaded.optimizer.iterations), 2)
        for saved, restored in zip(
            task.optimizer.variables, loaded.optimizer.variables, strict=True
        ):
            self.assertAllClose(saved, restored)
        bias = loaded.get_layer("head").bias
        self.assertFalse(loaded.optimizer._use_weight_decay(bias))

    def test_mixed_precision_and_head_dtype(self):
        backbone = GMLPImageBackbone(**TINY, dtype="mixed_bfloat16")
        task = GMLPImageClassifier(backbone=backbone, num_classes=3)
        x = keras.ops.zeros((2, 8, 8, 3))
        self.assertEqual(
            keras.backend.standardize_dtype(task(x).dtype), "bfloat16"
        )
        task = GMLPImageClassifier(
            backbone=backbone, num_classes=3, head_dtype="float32"
        )
        self.assertEqual(
            keras.backend.standardize_dtype(task(x).dtype), "float32"
        )
        revived = GMLPImageClassifier.from_config(task.get_config())
        self.assertEqual(revived.get_layer("head").compute_dtype, "float32")

    def test_fits_numpy_images_under_every_dtype_policy(self):
        # keras-hub's pipeline preprocesses numpy input in tf.data and hands
        # the backend numpy batches: torch takes no numpy bfloat16.
        for policy in ("float32", "mixed_bfloat16", "mixed_float16"):
            with self.subTest(policy=policy):
                task = GMLPImageClassifier(
                    backbone=GMLPImageBackbone(**TINY, dtype=policy),
                    num_classes=3,
                    preprocessor=GMLPImageClassifierPreprocessor(
                        GMLPImageConverter(image_size=(8, 8), dtype=policy)
                    ),
                )
                task.compile(optimizer="sgd")
                loss = task.fit(
                    self.images, self.labels, batch_size=2, verbose=0
                ).history["loss"][-1]
                self.assertTrue(np.isfinite(loss))
                logits = task.predict(self.images, batch_size=2, verbose=0)
                self.assertEqual(logits.shape, (4, 3))
                self.assertTrue(np.isfinite(np.float32(logits)).all())

    def test_pooling(self):
        task = GMLPImageClassifier(**self.init_kwargs, pooling="max")
        randomize(task)
        x = keras.ops.zeros((1, 8, 8, 3))
        head = task.get_layer("head")
        expected = array(task.backbone(x)).max(axis=1) @ array(
            head.kernel
        ) + array(head.bias)
        self.assertAllClose(task(x), expected, atol=1e-5, rtol=1e-5)
        with pytest.raises(ValueError, match="pooling='sum'"):
            GMLPImageClassifier(**self.init_kwargs, pooling="sum")

    def test_backbone_layers_are_found_by_name(self):
        task = GMLPImageClassifier(**self.init_kwargs)
        self.assertIs(
            task.get_layer("block_1"), task.backbone.get_layer("block_1")
        )
        self.assertIs(task.get_layer("stem"), task.backbone.get_layer("stem"))
        with pytest.raises(ValueError, match="nothing"):
            task.get_layer("nothing")

    def test_named_preset_builds_with_a_preprocessor(self):
        task = GMLPImageClassifier.from_preset(
            "gmlp_micro4_32", num_classes=3, num_layers=1, dropout=0.1
        )
        self.assertEqual(task.backbone.num_layers, 1)
        self.assertEqual(task.backbone.image_size, (32, 32))
        self.assertEqual(task.dropout, 0.1)
        converter = task.preprocessor.image_converter
        self.assertEqual(converter.image_size, (32, 32))
        images = np.zeros((2, 40, 36, 3), "uint8")
        self.assertEqual(task.predict(images, verbose=0).shape, (2, 3))
        with pytest.raises(ValueError, match="Unknown configuration keys"):
            GMLPImageClassifier.from_preset("gmlp_micro4_32", colour=1)

    def test_builder_returns_the_task_without_preprocessor(self):
        task = image_classifier("gmlp_ti16_224")
        self.assertIsInstance(task, GMLPImageClassifier)
        self.assertIsNone(task.preprocessor)
        self.assertEqual(task.count_params(), 5_867_328)
        task = image_classifier(num_classes=2, name="mine", **TINY)
        self.assertEqual(task.name, "mine")
        self.assertEqual(task(keras.ops.zeros((1, 8, 8, 3))).shape, (1, 2))


# The task families take turns saving a preset under one backend and
# loading it in the next (image: tensorflow, masked LM: jax, text
# classifier: torch); tests/models/test_saving.py loads each model's
# `.keras` file so under every backend.
@pytest.mark.one_backend("tensorflow")
@pytest.mark.parametrize("backend", loading_backends())
def test_preset_loads_in_a_fresh_process_on_every_backend(tmp_path, backend):
    task = GMLPImageClassifier(
        backbone=GMLPImageBackbone(**TINY, attention_dim=4),
        num_classes=3,
        preprocessor=tiny_preprocessor(),
    )
    randomize(task)
    images = np.random.default_rng(0).integers(
        0, 256, size=(3, 12, 10, 3), dtype="uint8"
    )
    expected = task.predict(images, verbose=0)
    task.save_to_preset(str(tmp_path / "preset"))
    np.save(tmp_path / "images.npy", images)
    subprocess.run(
        [
            sys.executable,
            "-c",
            LOAD_PRESET,
            str(tmp_path / "preset"),
            str(tmp_path / "images.npy"),
            str(tmp_path / "out.npy"),
        ],
        env=dict(os.environ, KERAS_BACKEND=backend),
        check=True,
        capture_output=True,
        timeout=600,
    )
    outputs = np.load(tmp_path / "out.npy")
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
