"""SavedModel export (`export_saved_model`) and `export` to every format.

`export`: SavedModel by `tf.saved_model.load`, ONNX by onnxruntime, LiteRT
by the `ai_edge_litert` interpreter, compared with the Keras model (float32,
1e-4 of the largest output). Images are served as uint8 with timm's
preprocessing inside (a checkpoint made by real timm), token ids of any
length up to `sequence_length`. Where Keras cannot make a format from the
current backend, the export raises naming the backends that can.
"""

import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_gmlp import models
from keras_gmlp.convert import from_timm
from keras_gmlp.export import FORMAT_BACKENDS
from keras_gmlp.export import TEXT_FORMAT_BACKENDS
from keras_gmlp.export import export
from keras_gmlp.export import export_saved_model
from keras_gmlp.export import serving_model
from keras_gmlp.layers.spatial_gating_unit import FFT_CROSSOVER

# Runs in a plain TensorFlow process: no Keras, no keras_gmlp.
PLAIN_TF_SERVE = """
import sys
import numpy as np
import tensorflow as tf
for export_dir, inputs, outputs in zip(*[iter(sys.argv[1:])] * 3):
    loaded = tf.saved_model.load(export_dir)
    served = loaded.serve(tf.constant(np.load(inputs))).numpy()
    assert "serving_default" in loaded.signatures
    np.save(outputs, served)
assert "keras_gmlp" not in sys.modules
"""


def serve_in_plain_tensorflow(exports, tmp_path):
    """Serves `[(export_dir, inputs)]` in one plain TensorFlow process."""
    argv = []
    for index, (export_dir, inputs) in enumerate(exports):
        np.save(tmp_path / f"inputs{index}.npy", inputs)
        argv += [
            export_dir,
            str(tmp_path / f"inputs{index}.npy"),
            str(tmp_path / f"outputs{index}.npy"),
        ]
    env = dict(os.environ)
    env.pop("KERAS_BACKEND", None)
    process = subprocess.run(
        [sys.executable, "-c", PLAIN_TF_SERVE, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return [np.load(tmp_path / f"outputs{i}.npy") for i in range(len(exports))]


def test_exports_serve_the_keras_models_outputs(tmp_path, rng):
    # One plain TensorFlow process serves the three exports.
    exports, expected = [], []
    # Images: uint8 in, preprocessing inside, probabilities out.
    image_model = models.image_classifier(
        num_classes=5,
        image_size=8,
        patch_size=4,
        num_channels=3,
        num_layers=2,
        hidden_dim=8,
        ffn_dim=16,
    )
    # Move W away from its near-zero initial values.
    for layer in image_model.backbone.layers:
        if layer.name.startswith("block_"):
            unit = layer.spatial_gating_unit
            unit.kernel.assign(rng.normal(size=unit.kernel.shape) * 0.3)
    pixels = rng.integers(0, 256, size=(3, 8, 8, 3), dtype=np.uint8)
    image_dir = export_saved_model(
        image_model,
        str(tmp_path / "images"),
        input_dtype="uint8",
        preprocessing=[keras.layers.Rescaling(1 / 127.5, offset=-1.0)],
    )
    exports.append((image_dir, pixels))
    expected.append(
        keras.ops.softmax(image_model(pixels.astype("float32") / 127.5 - 1.0))
    )
    # Text: int32 token ids in. The classifier (Toeplitz spatial weights,
    # probabilities out) at a fixed sequence length; the language model
    # (a dense spatial weight, causal, logits out) without input_shape, so
    # that it serves any length up to its sequence_length (under JAX, a
    # symbolic length bounded by it).
    config = dict(
        vocabulary_size=20,
        sequence_length=6,
        num_layers=2,
        hidden_dim=8,
        ffn_dim=16,
        attention_dim=4,
    )
    classifier = models.text_classifier(**config, num_classes=3)
    language_model = models.causal_lm(**config, spatial="dense")
    for model in (classifier, language_model):
        for weight in model.weights:  # away from the near-zero spatial W
            weight.assign(rng.normal(0.0, 0.5, weight.shape))
    classifier_dir = export_saved_model(
        classifier,
        str(tmp_path / "classifier"),
        input_shape=(6,),
        input_dtype="int32",
    )
    tokens = rng.integers(1, 20, size=(2, 6)).astype("int32")
    exports.append((classifier_dir, tokens))
    expected.append(keras.ops.softmax(classifier(tokens)))
    lm_dir = export_saved_model(
        language_model, str(tmp_path / "lm"), activation=None
    )
    for length in (3, 6):
        tokens = rng.integers(1, 20, size=(2, length)).astype("int32")
        tokens[1, length - 1 :] = 0  # a padded row
        exports.append((lm_dir, tokens))
        expected.append(language_model(tokens))

    served = serve_in_plain_tensorflow(exports, tmp_path)
    assert served[0].shape == (3, 5) and served[0].dtype == np.float32
    np.testing.assert_allclose(served[0].sum(axis=1), 1.0, rtol=1e-5)
    for got, want in zip(served, expected, strict=True):
        want = keras.ops.convert_to_numpy(want)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=5e-5)


def test_serving_model_defaults_to_the_model_input():
    model = models.image_classifier(
        num_classes=2,
        image_size=4,
        patch_size=2,
        num_layers=1,
        hidden_dim=4,
        ffn_dim=8,
    )
    serving = serving_model(model)
    assert tuple(serving.inputs[0].shape) == (None, 4, 4, 3)
    assert serving.inputs[0].dtype == "float32"
    outputs = serving(np.zeros((2, 4, 4, 3), "float32"))
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(outputs).sum(axis=1), 1.0, rtol=1e-6
    )


@pytest.mark.skipif(
    keras.config.backend() != "torch", reason="the torch path only"
)
def test_torch_export_reports_the_subprocess_error(tmp_path, monkeypatch):
    model = models.image_classifier(
        num_classes=2,
        image_size=4,
        patch_size=2,
        num_layers=1,
        hidden_dim=4,
        ffn_dim=8,
    )
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(RuntimeError, match="TensorFlow backend failed"):
        export_saved_model(model, str(tmp_path / "x"))


# === export(): every format ===

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "timm" / "gmlp_b"
BACKEND = keras.config.backend()


def run_export(path, format, inputs):
    """Runs an exported artifact on `inputs` with the format's runtime."""
    if format == "saved_model":
        tf = pytest.importorskip("tensorflow")
        loaded = tf.saved_model.load(path)
        return loaded.serve(tf.constant(inputs)).numpy()
    if format == "onnx":
        onnxruntime = pytest.importorskip("onnxruntime")
        session = onnxruntime.InferenceSession(path)
        name = session.get_inputs()[0].name
        return session.run(None, {name: inputs})[0]
    interpreter_module = pytest.importorskip("ai_edge_litert.interpreter")
    interpreter = interpreter_module.Interpreter(model_path=path)
    detail = interpreter.get_input_details()[0]
    interpreter.resize_tensor_input(detail["index"], inputs.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(detail["index"], inputs)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def assert_close(actual, expected):
    scale = np.abs(expected).max()
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * scale)


def skip_unless_made_here(format):
    if BACKEND not in FORMAT_BACKENDS[format]:
        pytest.skip(f"{format} is not made from {BACKEND}")


@pytest.mark.parametrize("format", ["saved_model", "onnx", "litert"])
def test_uint8_images_served_with_timms_preprocessing(format, tmp_path):
    skip_unless_made_here(format)
    classifier = from_timm(FIXTURE)
    reference = np.load(FIXTURE / "reference.npz")
    path = export(classifier, tmp_path / "model", format=format)
    # Images of the model's size (20 x 24): timm resizes them to 22 x 27
    # and crops back. Batches of 1 and 3: the batch is dynamic.
    rng = np.random.default_rng(0)
    for batch in (1, 3):
        images = rng.integers(0, 256, (batch, 20, 24, 3), dtype=np.uint8)
        expected = classifier.predict(images, verbose=0)
        assert_close(run_export(path, format, images), expected)
    # timm's own images at another size, served at that size.
    image = reference["image_0"][None]
    path = export(
        classifier,
        tmp_path / "other",
        format=format,
        image_shape=image.shape[1:3],
    )
    assert_close(
        run_export(path, format, image), reference["transformed_logits"][:1]
    )


@pytest.mark.parametrize("format", ["saved_model", "onnx", "litert"])
def test_formats_another_backend_makes_raise_naming_it(format, tmp_path):
    if BACKEND in FORMAT_BACKENDS[format]:
        pytest.skip(f"{format} is made from {BACKEND}")
    classifier = from_timm(FIXTURE)
    with pytest.raises(ValueError, match=f"from the {BACKEND} backend.*"):
        export(classifier, tmp_path / "model", format=format)


def test_unknown_format_and_gelu_raise(tmp_path):
    classifier = from_timm(FIXTURE)
    with pytest.raises(ValueError, match="format='torchscript'"):
        export(classifier, tmp_path / "model", format="torchscript")
    with pytest.raises(ValueError, match="gelu='fast'"):
        export(classifier, tmp_path / "model", gelu="fast")


@pytest.mark.large
@pytest.mark.parametrize("format", ["saved_model", "onnx", "litert"])
def test_token_ids_of_any_length_up_to_sequence_length(format, tmp_path):
    skip_unless_made_here(format)
    rng = np.random.default_rng(1)
    model = models.text_classifier(
        num_classes=3,
        vocabulary_size=20,
        sequence_length=6,
        num_layers=2,
        hidden_dim=8,
        ffn_dim=16,
    )
    for weight in model.weights:  # away from the near-zero spatial W
        weight.assign(rng.normal(0.0, 0.5, weight.shape))
    if BACKEND not in TEXT_FORMAT_BACKENDS[format]:
        with pytest.raises(ValueError, match="KERAS_BACKEND=tensorflow"):
            export(model, tmp_path / "text", format=format)
        return
    path = export(model, tmp_path / "text", format=format)
    for length in (3, 6):
        tokens = rng.integers(1, 20, size=(2, length)).astype("int32")
        tokens[1, length - 1 :] = 0
        expected = keras.ops.convert_to_numpy(model(tokens))
        assert_close(run_export(path, format, tokens), expected)


@pytest.mark.parametrize("format", ["onnx", "litert"])
def test_long_toeplitz_text_models_export_without_fft(format, tmp_path):
    """A Toeplitz model long enough for the FFT product exports to the
    formats whose converters take no FFT: the materialised product."""
    skip_unless_made_here(format)
    if BACKEND not in TEXT_FORMAT_BACKENDS[format]:
        pytest.skip(f"text models' {format} is not made from {BACKEND}")
    rng = np.random.default_rng(2)
    length = FFT_CROSSOVER
    model = models.text_classifier(
        num_classes=3,
        vocabulary_size=20,
        sequence_length=length,
        num_layers=1,
        hidden_dim=8,
        ffn_dim=16,
    )
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.5, weight.shape))
    tokens = rng.integers(1, 20, size=(2, length)).astype("int32")
    expected = keras.ops.convert_to_numpy(model(tokens))  # by FFT
    path = export(model, tmp_path / "text", format=format)
    assert_close(run_export(path, format, tokens), expected)
    if format == "litert":  # The model's own `export()` too (its ONNX
        # has TensorFlow's Erfc, which `export` writes in an ONNX form).
        path = str(tmp_path / "direct.tflite")
        model.export(path, format=format, verbose=False)
        assert_close(run_export(path, format, tokens), expected)


@pytest.mark.parametrize("format", ["onnx"])
def test_tanh_gelu_on_request_reports_its_difference(format, tmp_path):
    skip_unless_made_here(format)
    classifier = from_timm(FIXTURE)
    with pytest.warns(UserWarning, match="tanh approximation.*up to"):
        path = export(classifier, tmp_path / "tanh", format=format, gelu="tanh")
    images = np.random.default_rng(2).integers(0, 256, (2, 20, 24, 3), "uint8")
    exact = classifier.predict(images, verbose=0)
    served = run_export(path, format, images)
    difference = np.abs(served - exact).max()
    # The tanh form differs, by little.
    assert 0 < difference < 1e-2 * np.abs(exact).max()


def test_exports_a_keras_file_and_a_preset_folder(tmp_path):
    format = "saved_model" if BACKEND != "torch" else None
    if format is None:
        pytest.skip("no format is made from torch")
    classifier = from_timm(FIXTURE)
    images = np.random.default_rng(3).integers(0, 256, (2, 20, 24, 3), "uint8")
    expected = classifier.predict(images, verbose=0)
    classifier.save(tmp_path / "model.keras")
    classifier.save_to_preset(tmp_path / "preset")
    for source in (tmp_path / "model.keras", tmp_path / "preset", FIXTURE):
        path = export(str(source), tmp_path / f"out_{source.name}")
        assert_close(run_export(path, format, images), expected)


def test_command_line_exports_a_timm_folder(tmp_path, capsys):
    from keras_gmlp import cli

    argv = ["export", str(FIXTURE), str(tmp_path / "model")]
    argv += ["--format", "litert", "--activation", "none"]
    if BACKEND not in FORMAT_BACKENDS["litert"]:
        assert cli.main(argv) == 2
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1
        assert error[0].startswith("keras-gmlp: error: ")
        assert f"from the {BACKEND} backend" in error[0]
        return
    assert cli.main(argv) == 0
    path = capsys.readouterr().out.strip().splitlines()[-1]
    assert path == str(tmp_path / "model.tflite")
    classifier = from_timm(FIXTURE)
    images = np.random.default_rng(4).integers(0, 256, (2, 20, 24, 3), "uint8")
    assert_close(
        run_export(path, "litert", images),
        classifier.predict(images, verbose=0),
    )


def test_onnx_of_a_resizing_preprocessor_serves_or_names_the_backend(
    tmp_path,
):
    # jax2onnx cannot trace the image resize with a dynamic batch: from JAX
    # the export says which backend makes it, in one line.
    if BACKEND == "torch":
        pytest.skip("no format is made from torch")
    classifier = models.image_classifier(
        num_classes=3,
        image_size=8,
        patch_size=4,
        num_layers=1,
        hidden_dim=8,
        ffn_dim=16,
    )
    task = models.GMLPImageClassifier(
        backbone=classifier.backbone,
        num_classes=3,
        preprocessor=models.GMLPImageClassifierPreprocessor(
            models.GMLPImageConverter(image_size=(8, 8), scale=1 / 255)
        ),
    )
    images = np.random.default_rng(0).integers(0, 256, (2, 8, 8, 3), "uint8")
    if BACKEND == "jax":
        with pytest.raises(ValueError, match="KERAS_BACKEND=tensorflow"):
            export(task, tmp_path / "model.onnx", format="onnx")
        return
    path = export(task, tmp_path / "model.onnx", format="onnx")
    expected = task.predict(images, verbose=0)
    assert_close(run_export(path, "onnx", images), expected)
