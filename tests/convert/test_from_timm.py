"""`keras_gmlp.convert.from_timm` of timm's folders, and
resampling the spatial weights to other image sizes, against fixtures made
by real timm (`tests/fixtures/timm/make_timm_fixtures.py`)."""

import pathlib

import keras
import numpy as np
import pytest

from keras_gmlp.convert import from_timm
from keras_gmlp.convert import resample_spatial_weights
from keras_gmlp.convert import resize_image_model
from keras_gmlp.models import GMLPImageBackbone
from keras_gmlp.models import GMLPImageClassifier
from keras_gmlp.models import GMLPImageConverter
from keras_gmlp.models.gmlp_image.resample import interpolation_matrix
from tests.backends import in_turn

pytest.importorskip("safetensors.numpy")

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures" / "timm"
NAMES = ["gmlp_a", "gmlp_b"]


def reference(name):
    return np.load(FIXTURES / name / "reference.npz")


def images_of(data):
    return [data[f"image_{i}"] for i in range(len(data["transformed"]))]


def assert_logits_close(actual, expected):
    scale = np.abs(expected).max()
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("name", in_turn(NAMES))
def test_from_timm_predicts_timms_logits_from_uint8_images(name):
    classifier = from_timm(FIXTURES / name)
    data = reference(name)
    for image, expected in zip(
        images_of(data), data["transformed_logits"], strict=True
    ):
        logits = classifier.predict(image[None], verbose=0)
        assert_logits_close(logits[0], expected)
    # Without the preprocessor: timm's float inputs give timm's logits.
    logits = classifier(data["inputs"])
    assert_logits_close(keras.ops.convert_to_numpy(logits), data["logits"])


def test_from_preset_of_a_timm_folder_names_from_timm():
    with pytest.raises(ValueError, match=r"keras_gmlp\.convert\.from_timm"):
        GMLPImageClassifier.from_preset(str(FIXTURES / "gmlp_b"))


def test_a_timm_checkpoint_saved_as_a_preset_keeps_its_transform(tmp_path):
    data = reference("gmlp_b")
    classifier = from_timm(FIXTURES / "gmlp_b")
    converter = classifier.preprocessor.image_converter
    assert converter.crop_pct == 0.875
    assert converter.interpolation == "bicubic"
    assert classifier.backbone.image_size == (20, 24)
    image = data["image_1"][None]
    assert_logits_close(
        classifier.predict(image, verbose=0)[0], data["transformed_logits"][1]
    )
    # A keras-hub preset folder saved from it keeps the preprocessing.
    classifier.save_to_preset(str(tmp_path / "preset"))
    reloaded = GMLPImageClassifier.from_preset(str(tmp_path / "preset"))
    assert reloaded.preprocessor.image_converter.crop_pct == 0.875
    assert_logits_close(
        reloaded.predict(image, verbose=0)[0], data["transformed_logits"][1]
    )


@pytest.mark.parametrize("name", in_turn(NAMES))
def test_converter_with_crop_pct_is_timms_transform(name):
    data = reference(name)
    size = data["transformed"].shape[1:3]
    converter = GMLPImageConverter(
        image_size=size, interpolation="bicubic", crop_pct=0.875
    )
    for image, expected in zip(
        images_of(data), data["transformed"], strict=True
    ):
        # Batched and single images.
        batched = keras.ops.convert_to_numpy(converter(image[None]))[0]
        single = keras.ops.convert_to_numpy(converter(image))
        np.testing.assert_allclose(batched, expected, atol=1e-6)
        np.testing.assert_allclose(single, expected, atol=1e-6)


def test_converter_rejects_a_crop_it_cannot_make():
    with pytest.raises(ValueError, match="crop_pct=0.875 without"):
        GMLPImageConverter(crop_pct=0.875)
    with pytest.raises(ValueError, match="interpolation='nearest'"):
        GMLPImageConverter(
            image_size=(8, 8), interpolation="nearest", crop_pct=0.875
        )
    with pytest.raises(ValueError, match="crop_pct=1.5"):
        GMLPImageConverter(image_size=(8, 8), crop_pct=1.5)


# === Other image sizes ===


def test_resampling_to_the_same_grid_is_the_identity():
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(12, 12)).astype("float32")
    bias = rng.normal(size=12).astype("float32")
    new_kernel, new_bias = resample_spatial_weights(
        kernel, bias, (3, 4), (3, 4)
    )
    np.testing.assert_array_equal(new_kernel, kernel)
    np.testing.assert_array_equal(new_bias, bias)
    # And a whole checkpoint loaded at its own size.
    data = reference("gmlp_a")
    classifier = from_timm(FIXTURES / "gmlp_a", image_size=32)
    assert_logits_close(
        keras.ops.convert_to_numpy(classifier(data["inputs"])), data["logits"]
    )


def test_resampling_follows_a_smooth_function_on_both_grid_axes():
    # W[(y, x), (y', x')] and b[(y, x)] sampled from linear functions of
    # the token centres: bilinear resampling reproduces the functions on
    # the new grid (inside), and W is scaled by n / n_new.
    def centres(rows, columns):
        y = (np.arange(rows) + 0.5) / rows
        x = (np.arange(columns) + 0.5) / columns
        return np.stack(np.meshgrid(y, x, indexing="ij"), -1).reshape(-1, 2)

    def weight(points):
        return points[:, None, 0] + 2 * points[:, None, 1] - points[None, :, 0]

    def bias(points):
        return 3 * points[:, 0] - points[:, 1]

    source, target = (4, 6), (8, 12)
    new_kernel, new_bias = resample_spatial_weights(
        weight(centres(*source)),
        bias(centres(*source)),
        source,
        target,
        interpolation="bilinear",
    )
    points = centres(*target)
    inside = (
        (points[:, 0] > 1 / 8)
        & (points[:, 0] < 7 / 8)
        & (points[:, 1] > 1 / 12)
    ) & (points[:, 1] < 11 / 12)
    expected = weight(points) * (24 / 96)
    np.testing.assert_allclose(
        new_kernel[np.ix_(inside, inside)],
        expected[np.ix_(inside, inside)],
        atol=1e-5,
    )
    np.testing.assert_allclose(
        new_bias[inside], bias(points)[inside], atol=1e-5
    )
    assert np.allclose(interpolation_matrix(5, 9).sum(1), 1.0)


def test_resized_classifier_keeps_every_other_weight_and_its_converter():
    classifier = from_timm(FIXTURES / "gmlp_b")
    resized = resize_image_model(classifier, (28, 36))
    assert resized.backbone.image_size == (28, 36)
    assert resized.preprocessor.image_converter.image_size == (28, 36)
    assert resized.preprocessor.image_converter.crop_pct == 0.875
    old = {w.path: w for w in classifier.weights}
    for weight in resized.weights:
        value = keras.ops.convert_to_numpy(weight)
        original = keras.ops.convert_to_numpy(old[weight.path])
        if "spatial_gating_unit/kernel" in weight.path:
            assert value.shape == (42, 42)
        elif "spatial_gating_unit/bias" in weight.path:
            assert value.shape == (42,)
        else:
            np.testing.assert_array_equal(value, original)
    images = reference("gmlp_b")["image_0"][None]
    assert resized.predict(images, verbose=0).shape == (1, 5)
    with pytest.raises(ValueError, match="spatial='toeplitz'"):
        resize_image_model(
            GMLPImageBackbone(
                image_size=8,
                patch_size=4,
                num_layers=1,
                hidden_dim=4,
                ffn_dim=8,
                spatial="toeplitz",
            ),
            12,
        )
