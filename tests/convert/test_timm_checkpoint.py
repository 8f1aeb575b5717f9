"""timm checkpoints in and out, against fixtures made by real timm.

`tests/fixtures/timm/make_timm_fixtures.py` (run with timm in a separate
virtualenv) wrote two random timm gMLPs in timm's Hugging Face folder layout,
with timm's logits and timm's evaluation transform of uint8 images. Nothing
here imports timm; torch is used only for the `.pth` file format.
"""

import json
import pathlib
import sys

import keras
import numpy as np
import pytest

from keras_gmlp import models
from keras_gmlp.convert import apply_timm_preprocessing
from keras_gmlp.convert import timm_checkpoint
from keras_gmlp.convert.timm_checkpoint import load_timm_checkpoint
from keras_gmlp.convert.timm_checkpoint import set_timm_weights
from keras_gmlp.convert.timm_checkpoint import to_timm
from keras_gmlp.models.gmlp_image import timm_preprocessing

safetensors_numpy = pytest.importorskip("safetensors.numpy")

FIXTURES = pathlib.Path(__file__).parents[1] / "fixtures" / "timm"
NAMES = ["gmlp_a", "gmlp_b"]


def reference(name):
    return np.load(FIXTURES / name / "reference.npz")


def timm_state_dict(name):
    return safetensors_numpy.load_file(
        str(FIXTURES / name / "model.safetensors")
    )


def assert_logits_close(actual, expected):
    """Equal to 1e-4 of the largest logit."""
    actual = keras.ops.convert_to_numpy(actual)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * scale)


def small_classifier(**config):
    config = {
        "num_classes": 3,
        "image_size": (8, 12),
        "patch_size": (4, 3),
        "num_layers": 2,
        "hidden_dim": 8,
        "ffn_dim": 16,
        **config,
    }
    model = models.image_classifier(**config)
    rng = np.random.default_rng(0)
    for weight in model.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    return model


# === Loading timm's checkpoints ===


@pytest.mark.parametrize("name", NAMES)
def test_loaded_checkpoint_gives_timms_logits(name):
    model = load_timm_checkpoint(FIXTURES / name)
    data = reference(name)
    assert_logits_close(model(data["inputs"]), data["logits"])


@pytest.mark.parametrize("name", NAMES)
def test_inferred_sizes_are_the_ones_timm_recorded(name):
    model = load_timm_checkpoint(FIXTURES / name)
    args = json.loads((FIXTURES / name / "config.json").read_text())
    args = args["model_args"]
    patch = args["patch_size"]
    patch = tuple(patch) if isinstance(patch, list) else (patch, patch)
    image = args["img_size"]
    image = tuple(image) if isinstance(image, list) else (image, image)
    stem = model.get_layer("stem")
    backbone = getattr(model, "backbone", model)
    blocks = [
        layer for layer in backbone.layers if layer.name.startswith("block_")
    ]
    assert stem.patch_size == patch
    assert model.input_shape[1:3] == image
    assert len(blocks) == args["num_blocks"]
    assert stem.hidden_dim == args["embed_dim"]
    assert blocks[0].ffn_dim == args["mlp_ratio"] * args["embed_dim"]
    assert model.output_shape == (None, args["num_classes"])


def test_a_file_beside_a_config_and_a_bare_file_load_alike(tmp_path):
    data = reference("gmlp_a")
    # The weights file alone: the square token grid gives the image size.
    bare = tmp_path / "weights.safetensors"
    bare.write_bytes((FIXTURES / "gmlp_a" / "model.safetensors").read_bytes())
    assert_logits_close(
        load_timm_checkpoint(bare)(data["inputs"]), data["logits"]
    )
    # The file inside timm's folder reads the folder's config.json.
    model = load_timm_checkpoint(FIXTURES / "gmlp_b" / "model.safetensors")
    assert_logits_close(
        model(reference("gmlp_b")["inputs"]), reference("gmlp_b")["logits"]
    )


def test_hf_handle_loads_the_downloaded_folder(monkeypatch):
    requested = []

    def download(repo_id):
        requested.append(repo_id)
        return FIXTURES / "gmlp_b"

    monkeypatch.setattr(timm_checkpoint, "_download", download)
    model = load_timm_checkpoint("hf://timm/gmlp_b.test")
    assert requested == ["timm/gmlp_b.test"]
    data = reference("gmlp_b")
    assert_logits_close(model(data["inputs"]), data["logits"])


def test_hf_handle_without_huggingface_hub_says_what_to_install(
    monkeypatch,
):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(ImportError, match="huggingface_hub.*local folder"):
        load_timm_checkpoint("hf://timm/gmlp_s16_224.ra3_in1k")
    with pytest.raises(ValueError, match="'hf://<owner>/<name>'"):
        load_timm_checkpoint("hf://gmlp_s16_224")


def test_nested_backbone_with_keras_hub_head_name():
    # The shape of a keras-hub task: the layers up to the final norm in a
    # nested backbone model, the head named `predictions` outside it.
    flat = load_timm_checkpoint(FIXTURES / "gmlp_b")
    flat_backbone = keras.Model(
        flat.input, flat.get_layer("final_norm").output, name="backbone"
    )
    backbone = keras.models.clone_model(flat_backbone)
    images = keras.Input(flat.input_shape[1:])
    tokens = backbone(images)
    pooled = keras.layers.GlobalAveragePooling1D()(tokens)
    logits = keras.layers.Dense(5, name="predictions")(pooled)
    task = keras.Model(images, logits)
    set_timm_weights(task, timm_state_dict("gmlp_b"))
    data = reference("gmlp_b")
    assert_logits_close(task(data["inputs"]), data["logits"])


# === Preprocessing ===


@pytest.mark.parametrize("name", NAMES)
def test_uint8_preprocessing_gives_timms_transform_and_predictions(name):
    model = load_timm_checkpoint(FIXTURES / name)
    data = reference(name)
    images = [data[f"image_{i}"] for i in range(len(data["transformed"]))]
    inputs = apply_timm_preprocessing(images, model.timm_data_config)
    np.testing.assert_allclose(inputs, data["transformed"], atol=1e-6)
    logits = model.predict(inputs, verbose=0)
    assert_logits_close(logits, data["transformed_logits"])
    assert (logits.argmax(-1) == data["transformed_logits"].argmax(-1)).all()


def test_data_config_is_the_checkpoints():
    model = load_timm_checkpoint(FIXTURES / "gmlp_b")
    assert dict(model.timm_data_config) == {
        "input_size": (3, 20, 24),
        "interpolation": "bicubic",
        "crop_pct": 0.875,
        "crop_mode": "center",
        "mean": (0.5, 0.5, 0.5),
        "std": (0.5, 0.5, 0.5),
    }


@pytest.mark.parametrize("interpolation", ["bicubic", "bilinear"])
def test_resize_equals_pillow(interpolation):
    image_module = pytest.importorskip("PIL.Image")
    resample = {
        "bicubic": image_module.BICUBIC,
        "bilinear": image_module.BILINEAR,
    }[interpolation]
    rng = np.random.default_rng(0)
    # Enlarging, reducing, mixed, and a height reduced enough that Pillow
    # resamples the height first.
    for (height, width), (new_height, new_width) in [
        ((20, 30), (40, 45)),
        ((41, 37), (13, 29)),
        ((30, 20), (15, 40)),
        ((70, 30), (20, 28)),
    ]:
        image = rng.integers(0, 256, (height, width, 3)).astype("uint8")
        expected = np.asarray(
            image_module.fromarray(image).resize(
                (new_width, new_height), resample
            )
        )
        actual = timm_preprocessing._resize(
            image, (new_height, new_width), interpolation
        )
        np.testing.assert_array_equal(actual, expected)


def test_preprocessing_rejects_bad_images():
    config = timm_checkpoint.timm_data_config(image_size=(8, 8))
    with pytest.raises(ValueError, match="dtype float32; expected uint8"):
        apply_timm_preprocessing(np.zeros((1, 9, 9, 3), "float32"), config)
    with pytest.raises(ValueError, match=r"\(9, 9, 4\); expected"):
        apply_timm_preprocessing(np.zeros((9, 9, 4), "uint8"), config)
    with pytest.raises(ValueError, match="interpolation='lanczos'"):
        apply_timm_preprocessing(
            np.zeros((9, 9, 3), "uint8"),
            {**config, "interpolation": "lanczos"},
        )


# === Writing timm checkpoints ===


@pytest.mark.parametrize("name", NAMES)
def test_written_state_dict_equals_timms(name, tmp_path):
    model = load_timm_checkpoint(FIXTURES / name)
    path = to_timm(model, tmp_path / "model.safetensors")
    written = safetensors_numpy.load_file(str(path))
    expected = timm_state_dict(name)
    assert sorted(written) == sorted(expected)
    for key, value in expected.items():
        assert written[key].dtype == value.dtype, key
        np.testing.assert_array_equal(written[key], value, err_msg=key)


def assert_same_weights(model, other):
    assert len(model.weights) == len(other.weights)
    for weight, other_weight in zip(model.weights, other.weights, strict=True):
        assert weight.path == other_weight.path
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(keras.ops.copy(weight)),
            keras.ops.convert_to_numpy(keras.ops.copy(other_weight)),
            err_msg=weight.path,
        )


def test_round_trip_through_a_safetensors_file_is_exact(tmp_path):
    model = small_classifier()
    path = to_timm(model, tmp_path / "weights.safetensors")
    loaded = load_timm_checkpoint(path, image_size=(8, 12))
    assert_same_weights(model, loaded)


def test_round_trip_through_a_folder_keeps_sizes_and_preprocessing(
    tmp_path,
):
    model = load_timm_checkpoint(FIXTURES / "gmlp_b")
    to_timm(model, tmp_path / "exported")
    loaded = load_timm_checkpoint(tmp_path / "exported")
    assert_same_weights(model, loaded)
    assert dict(loaded.timm_data_config) == dict(model.timm_data_config)
    config = json.loads((tmp_path / "exported" / "config.json").read_text())
    timm_config = json.loads((FIXTURES / "gmlp_b" / "config.json").read_text())
    assert config["model_args"] == timm_config["model_args"]


def test_round_trip_through_a_torch_file_is_exact(tmp_path):
    pytest.importorskip("torch")
    model = small_classifier()
    path = to_timm(model, tmp_path / "weights.pth")
    loaded = load_timm_checkpoint(path, image_size=(8, 12))
    assert_same_weights(model, loaded)


def test_toeplitz_model_is_written_as_its_dense_weight(tmp_path):
    model = small_classifier(
        spatial="toeplitz", image_size=(8, 8), patch_size=4
    )
    path = to_timm(model, tmp_path / "weights.safetensors")
    loaded = load_timm_checkpoint(path)
    assert loaded.get_layer("block_0").spatial == "dense"
    images = np.random.default_rng(1).normal(size=(2, 8, 8, 3))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(loaded(images)),
        keras.ops.convert_to_numpy(model(images)),
        rtol=1e-5,
        atol=1e-5,
    )


def test_amlp_weights_have_no_timm_counterpart(tmp_path):
    model = small_classifier(attention_dim=4)
    with pytest.raises(ValueError, match="block_0/tiny_attention/"):
        to_timm(model, tmp_path / "weights.safetensors")
    plain = small_classifier()
    state_dict = timm_checkpoint.timm_state_dict(plain)
    with pytest.raises(ValueError, match="Cannot load.*tiny_attention"):
        set_timm_weights(model, state_dict)


# === Bad checkpoints ===


def write(tmp_path, state_dict, name="weights.safetensors"):
    path = tmp_path / name
    safetensors_numpy.save_file(state_dict, str(path))
    return path


def test_missing_checkpoint_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="No timm checkpoint at"):
        load_timm_checkpoint(tmp_path / "nothing")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"holds \['config.json'\]"):
        load_timm_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="Unknown checkpoint file type"):
        load_timm_checkpoint(tmp_path / "config.json")


def test_extra_key_is_named(tmp_path):
    state_dict = timm_state_dict("gmlp_b")
    state_dict["blocks.0.extra.weight"] = np.zeros(3, "float32")
    with pytest.raises(ValueError, match=r"unexpected \['blocks.0.extra"):
        load_timm_checkpoint(write(tmp_path, state_dict), image_size=(20, 24))


def test_missing_key_is_named(tmp_path):
    state_dict = timm_state_dict("gmlp_b")
    del state_dict["blocks.1.mlp_channels.gate.norm.bias"]
    with pytest.raises(ValueError, match="missing.*gate.norm.bias"):
        load_timm_checkpoint(write(tmp_path, state_dict), image_size=(20, 24))
    del state_dict["head.weight"]
    with pytest.raises(ValueError, match="no 'head.weight'"):
        load_timm_checkpoint(write(tmp_path, state_dict), image_size=(20, 24))


def test_wrong_shapes_are_named(tmp_path):
    state_dict = timm_state_dict("gmlp_b")
    state_dict["blocks.1.mlp_channels.fc1.weight"] = np.zeros(
        (40, 16), "float32"
    )
    with pytest.raises(ValueError, match="'blocks.1.mlp_channels.fc1.weight"):
        load_timm_checkpoint(write(tmp_path, state_dict), image_size=(20, 24))
    model = load_timm_checkpoint(FIXTURES / "gmlp_a")
    with pytest.raises(ValueError, match="missing.*blocks.2"):
        set_timm_weights(model, timm_state_dict("gmlp_b"))


def test_image_size_must_fit_the_spatial_weight(tmp_path):
    path = write(tmp_path, timm_state_dict("gmlp_b"))
    with pytest.raises(ValueError, match="20 tokens, not a square grid"):
        load_timm_checkpoint(path)
    with pytest.raises(ValueError, match=r"\(24, 24\).*20 tokens"):
        load_timm_checkpoint(path, image_size=24)


def test_config_that_disagrees_with_the_weights_is_refused(tmp_path):
    config = json.loads((FIXTURES / "gmlp_b" / "config.json").read_text())
    write(tmp_path, timm_state_dict("gmlp_b"), "model.safetensors")
    config["num_classes"] = 9
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="num_classes=9.*5 rows"):
        load_timm_checkpoint(tmp_path)
    config["num_classes"] = 5
    config["architecture"] = "mixer_b16_224"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="'mixer_b16_224'; expected a timm"):
        load_timm_checkpoint(tmp_path)
