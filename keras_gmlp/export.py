"""Export with the preprocessing inside: SavedModel, ONNX and LiteRT.

`export(model, path, format=...)` serves a task (or a `.keras` file, or a
preset folder) as one of three formats, built by Keras' own
`model.export` where Keras 3.15 can make that format from the current
backend:

| format        | tensorflow        | jax                      | torch |
| ------------- | ----------------- | ------------------------ | ----- |
| `saved_model` | Keras             | Keras (jax2tf)           | no    |
| `onnx`        | Keras (tf2onnx)   | Keras (jax2onnx)         | no    |
| `litert`      | Keras             | jax2tf, TFLite converter | no    |

Text models (token ids of any length) are exported as ONNX and LiteRT
from TensorFlow only (see `TEXT_FORMAT_BACKENDS`).

From torch, Keras 3.15 (torch 2.13) fails on all three with a dynamic
batch: `torch.export` rejects the SavedModel's dynamic shapes, LiteRT needs
`litert-torch` and a static shape, and the ONNX exporter cannot trace
LayerNormalization's shape with a dynamic batch. A `.keras` file or preset
folder saved under torch loads under the other two backends.

Elsewhere a `ValueError` names the backends that can. Images are served as
uint8 pixels with the task's image converter inside, token ids as int32
of any length up to the model's `sequence_length` (the batch is dynamic in
every format). The exact GELU of the gMLP blocks survives: for ONNX it is
traced as `0.5 x (1 + erf(x / sqrt(2)))`, whose `Erf` every converter keeps
(TensorFlow's own form, through `erfc`, has no ONNX counterpart);
`gelu="tanh"` traces the tanh approximation instead and warns with the
difference it measured.

`export_saved_model` below is the SavedModel-only path of the run
workflows, which reaches TensorFlow from torch through a subprocess.

TensorFlow and JAX export through Keras' `model.export` (JAX through
jax2tf). Keras 3.15 cannot export from PyTorch (`torch.export` fails on the
dynamic batch), so under torch the serving model is saved as a
backend-independent `.keras` file, reloaded under the TensorFlow backend in
a subprocess and exported there: the weights and the computation are the
same, only the backend that traces them differs.

The SavedModel loads with `tf.saved_model.load` in a plain TensorFlow
process (no Keras or keras_gmlp import needed) and has the signature
`serve` (also `serving_default`): raw inputs -> probabilities.

Command line (what the torch path runs):
`KERAS_BACKEND=tensorflow python -m keras_gmlp.export MODEL.keras DIR`.
"""

import contextlib
import math
import os
import subprocess
import sys
import tempfile
import warnings

import keras
import numpy as np

from keras_gmlp.generation import model_sequence_length
from keras_gmlp.kernels import reference_only
from keras_gmlp.layers.toeplitz_matrix import FFT_FREE_FORMATS
from keras_gmlp.layers.toeplitz_matrix import materialised_toeplitz
from keras_gmlp.training import files


def serving_model(
    model,
    input_shape=None,
    input_dtype=None,
    preprocessing=(),
    activation="softmax",
):
    """Wraps `model` into raw inputs -> preprocessing -> model -> activation.

    Args:
        model: `keras.Model` with one input.
        input_shape: tuple. Shape of one raw input, without the batch.
            Defaults to the model's input shape.
        input_dtype: str. Dtype of the raw input, e.g. `"uint8"` for images
            or `"int32"` for token ids. Defaults to the model's input dtype.
        preprocessing: list of `keras.layers.Layer`. Applied in order to the
            raw input, e.g. `[keras.layers.Rescaling(1 / 127.5, offset=-1)]`
            for uint8 images. Defaults to none.
        activation: str or `None`. Applied to the outputs in float32, e.g.
            `"softmax"` for class probabilities. Defaults to `"softmax"`.

    Returns:
        A functional `keras.Model`.

    Example:

    >>> from keras_gmlp.export import serving_model
    >>> classifier = keras_gmlp.models.image_classifier(
    ...     num_classes=2, image_size=8, patch_size=4, num_layers=1,
    ...     hidden_dim=4, ffn_dim=8)
    >>> serving = serving_model(
    ...     classifier, input_dtype="uint8",
    ...     preprocessing=[keras.layers.Rescaling(1 / 127.5, offset=-1)])
    >>> serving(np.zeros((1, 8, 8, 3), "uint8")).shape
    (1, 2)
    """
    if input_shape is None:
        input_shape = tuple(model.inputs[0].shape[1:])
    if input_dtype is None:
        input_dtype = model.inputs[0].dtype
    inputs = keras.Input(tuple(input_shape), dtype=input_dtype, name="inputs")
    x = inputs
    for layer in preprocessing:
        x = layer(x)
    if keras.backend.standardize_dtype(x.dtype) != model.inputs[0].dtype:
        x = keras.ops.cast(x, model.inputs[0].dtype)
    x = model(x)
    if activation:
        x = keras.layers.Activation(
            activation, dtype="float32", name="probabilities"
        )(x)
    return keras.Model(inputs, x, name=f"{model.name}_serving")


def export_saved_model(
    model,
    export_dir,
    input_shape=None,
    input_dtype=None,
    preprocessing=(),
    activation="softmax",
):
    """Exports `model` as a TensorFlow SavedModel from any backend.

    Args:
        model: `keras.Model`. The trained model.
        export_dir: str. The SavedModel folder to write.
        input_shape: tuple. Raw input shape without the batch. Defaults to
            the model's: a text model then serves any number of tokens up to
            its `sequence_length` (from JAX too, where the length is a
            symbolic dimension bounded by `sequence_length`); `(512,)`
            fixes it.
        input_dtype: str. Raw input dtype (`"uint8"`, `"int32"`). Defaults
            to the model's.
        preprocessing: list of `keras.layers.Layer`. Serializable layers
            from the raw input to the model's input. Defaults to none.
        activation: str or `None`. Output activation. Defaults to
            `"softmax"`.

    Returns:
        `export_dir`.

    Raises:
        RuntimeError: when the TensorFlow subprocess of the torch path
            fails, with its error output.

    Example:

    >>> import tempfile
    >>> from keras_gmlp.export import export_saved_model
    >>> classifier = keras_gmlp.models.image_classifier(
    ...     num_classes=2, image_size=8, patch_size=4, num_layers=1,
    ...     hidden_dim=4, ffn_dim=8)
    >>> folder = export_saved_model(
    ...     classifier, tempfile.mkdtemp(), input_dtype="uint8",
    ...     preprocessing=[keras.layers.Rescaling(1 / 127.5, offset=-1)])
    >>> import tensorflow as tf  # in any TensorFlow process
    >>> loaded = tf.saved_model.load(folder)
    >>> loaded.serve(tf.zeros((1, 8, 8, 3), tf.uint8)).shape
    (1, 2)
    """
    serving = serving_model(
        model, input_shape, input_dtype, preprocessing, activation
    )
    export_dir = os.path.abspath(export_dir)
    if keras.config.backend() in ("tensorflow", "jax"):
        _export(serving, export_dir)
        return export_dir
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "serving.keras")
        serving.save(path)
        env = dict(os.environ, KERAS_BACKEND="tensorflow")
        process = subprocess.run(
            [sys.executable, "-m", "keras_gmlp.export", path, export_dir],
            env=env,
            capture_output=True,
            text=True,
        )
    if process.returncode:
        raise RuntimeError(
            "Exporting through the TensorFlow backend failed "
            f"(exit {process.returncode}):\n{process.stderr[-4000:]}"
        )
    return export_dir


def jax2tf_arguments(serving):
    """The `jax2tf.convert` arguments of a JAX export of `serving`.

    A `None` dimension of the input (other than the batch) becomes a
    symbolic dimension. A gMLP text model accepts at most its
    `sequence_length` tokens, and its spatial unit compares the length
    with that limit: the constraint `tokens <= sequence_length` makes the
    comparison decidable, so the SavedModel serves every length up to
    `sequence_length`.

    Args:
        serving: `keras.Model` with one input.

    Returns:
        A dict of `jax2tf.convert` keyword arguments (empty when every
        dimension is known).
    """
    shape = tuple(serving.inputs[0].shape)
    if all(dimension is not None for dimension in shape[1:]):
        return {}
    limit = model_sequence_length(serving)
    names, constraints = ["batch"], []
    for index, dimension in enumerate(shape[1:]):
        if dimension is not None:
            names.append(str(dimension))
            continue
        name = f"length_{index}"
        names.append(name)
        if limit is not None:
            constraints.append(f"{name} <= {limit}")
    return {
        "polymorphic_shapes": [f"({', '.join(names)})"],
        "polymorphic_constraints": constraints,
        # Serving needs no gradient, and jax2tf cannot save the one of a
        # function of symbolic shape.
        "with_gradient": False,
    }


def _export(serving, export_dir):
    with reference_only():
        _export_saved_model(serving, export_dir)


def _export_saved_model(serving, export_dir):
    if keras.config.backend() == "jax":
        # Trace on one device: the SavedModel must not depend on the
        # training's device mesh.
        distribution = keras.distribution.distribution()
        keras.distribution.set_distribution(None)
        try:
            serving.export(
                export_dir,
                format="tf_saved_model",
                verbose=False,
                jax2tf_kwargs=jax2tf_arguments(serving) or None,
            )
        finally:
            keras.distribution.set_distribution(distribution)
        return
    serving.export(export_dir, format="tf_saved_model", verbose=False)


FORMATS = ("saved_model", "onnx", "litert")
GELU_FORMS = ("exact", "tanh")
# The backends from which each format is made (Keras 3.15, this project's
# packages).
FORMAT_BACKENDS = {
    "saved_model": ("tensorflow", "jax"),
    "onnx": ("tensorflow", "jax"),
    "litert": ("tensorflow", "jax"),
}
SUFFIXES = {"saved_model": "", "onnx": ".onnx", "litert": ".tflite"}


def _gelu_exact_erf(x, approximate=False):
    x = keras.ops.convert_to_tensor(x)
    if approximate:
        return keras.ops.gelu(x, approximate=True)
    half = keras.ops.cast(0.5, x.dtype)
    root = keras.ops.cast(1.0 / math.sqrt(2.0), x.dtype)
    return half * x * (1.0 + keras.ops.erf(x * root))


def _gelu_tanh(x, approximate=False):
    return keras.ops.gelu(x, approximate=True)


@contextlib.contextmanager
def gelu_form(form):
    """Traces `keras.activations.gelu` in the given form inside the block.

    Args:
        form: str. `"exact"`: the backend's own exact GELU; `"erf"`: the
            exact GELU written `0.5 x (1 + erf(x / sqrt(2)))`, whose `Erf`
            every ONNX converter keeps (TensorFlow's form goes through
            `erfc`, which ONNX lacks; JAX's `erf` does not reach TensorFlow
            through jax2tf); `"tanh"`: the tanh approximation.
    """
    replacements = {
        "exact": None,
        "erf": _gelu_exact_erf,
        "tanh": _gelu_tanh,
    }
    if form not in replacements:
        raise ValueError(
            f"Received gelu={form!r}; expected one of {sorted(replacements)}."
        )
    original = keras.activations.gelu
    keras.activations.gelu = replacements[form] or original
    try:
        yield
    finally:
        keras.activations.gelu = original


class _ImagePreprocessing(keras.layers.Layer):
    """uint8 images -> the converter's output, with backend operations."""

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = config

    def call(self, images):
        from keras_gmlp.models.gmlp_image.gmlp_image_converter import (
            transform_images,
        )

        return transform_images(images, self.config)


def _load(model):
    """A task from a model, a `.keras` file or a preset folder."""
    if isinstance(model, keras.Model):
        return model
    text = os.fspath(model)
    if text.endswith(".keras") and os.path.isfile(text):
        import keras_gmlp.models  # noqa: F401  (registers the classes)

        return keras.saving.load_model(text)
    if os.path.isdir(text) or "://" in text:
        from keras_gmlp import convert

        if convert.is_timm_checkpoint(text):
            return convert.from_timm(text)
        import json

        import keras_gmlp.models  # noqa: F401  (registers the classes)

        task_file = os.path.join(text, "task.json")
        if not os.path.isfile(task_file):
            raise ValueError(
                f"The folder {text!r} holds no task.json: expected a task "
                "preset folder (`task.save_to_preset`, or the preset/ "
                "folder of a training run) or timm's checkpoint folder."
            )
        with open(task_file) as file:
            name = json.load(file)["registered_name"]
        task_class = keras.saving.get_registered_object(name)
        if task_class is None:
            raise ValueError(f"Unknown task class {name!r} in {task_file}.")
        return task_class.from_preset(text)
    raise ValueError(
        f"Received model={model!r}; expected a keras.Model, a .keras file "
        "or a preset folder."
    )


def _text_input_names(model):
    names = [tensor.name.split(":")[0] for tensor in model.inputs]
    return names


def export_serving_model(model, image_shape=None, activation=None):
    """The served graph: raw inputs -> preprocessing -> task -> outputs.

    Args:
        model: `keras.Model`. An image task (4-D image input) or a text
            task (token ids, with or without a padding mask).
        image_shape: `(height, width)`. The size of the served uint8
            images. Defaults to the model's image size.
        activation: str or `None`. Applied to the outputs in float32.
            Defaults to `None`, the task's outputs.

    Returns:
        A functional `keras.Model` with one input: uint8 images `(batch,
        height, width, channels)` or int32 token ids `(batch, length)`.

    Example:

    >>> from keras_gmlp.export import export_serving_model
    >>> classifier = keras_gmlp.GMLPImageClassifier.from_preset(
    ...     "gmlp_micro4_32", num_layers=1, num_classes=3)
    >>> serving = export_serving_model(classifier, image_shape=(40, 40))
    >>> serving(np.zeros((2, 40, 40, 3), "uint8")).shape
    (2, 3)
    """
    preprocessor = getattr(model, "preprocessor", None)
    first = model.inputs[0]
    if len(first.shape) == 4:
        height, width, channels = first.shape[1:]
        if image_shape is not None:
            height, width = image_shape
        inputs = keras.Input(
            (height, width, channels), dtype="uint8", name="images"
        )
        converter = getattr(preprocessor, "image_converter", None)
        if converter is not None and hasattr(converter, "transform_config"):
            x = _ImagePreprocessing(
                converter.transform_config(), name="preprocessing"
            )(inputs)
        elif converter is not None:
            raise ValueError(
                f"The image converter {type(converter).__name__} cannot "
                "run inside the served graph; expected a "
                "GMLPImageConverter."
            )
        else:
            x = keras.ops.cast(inputs, first.dtype)
        outputs = model(x)
    else:
        inputs = keras.Input((None,), dtype="int32", name="token_ids")
        if len(model.inputs) == 1:
            outputs = model(inputs)
        else:
            mask = keras.ops.not_equal(inputs, 0)
            names = _text_input_names(model)
            if "token_ids" not in names or "padding_mask" not in names:
                raise ValueError(
                    f"Received a text model with the inputs {names}; "
                    "expected token_ids and padding_mask."
                )
            outputs = model(
                {
                    "token_ids": inputs,
                    "padding_mask": keras.ops.cast(
                        mask, model.inputs[names.index("padding_mask")].dtype
                    ),
                }
            )
    if activation:
        outputs = keras.layers.Activation(
            activation, dtype="float32", name="activation"
        )(outputs)
    return keras.Model(inputs, outputs, name=f"{model.name}_serving")


def probe_inputs(serving, batch=2, seed=0):
    """Random raw inputs of the served graph (uint8 images, token ids)."""
    rng = np.random.default_rng(seed)
    spec = serving.inputs[0]
    if spec.dtype == "uint8":
        return rng.integers(0, 256, (batch,) + tuple(spec.shape[1:]), "uint8")
    length = model_sequence_length(serving) or 16
    return rng.integers(1, 20, (batch, length)).astype("int32")


def _check_backend(format):
    backend = keras.config.backend()
    if format not in FORMATS:
        raise ValueError(
            f"Received format={format!r}; expected one of {FORMATS}."
        )
    if backend not in FORMAT_BACKENDS[format]:
        backends = " or ".join(FORMAT_BACKENDS[format])
        raise ValueError(
            f"Keras {keras.__version__} cannot export format={format!r} "
            f"from the {backend} backend; export from the {backends} "
            f"backend (e.g. KERAS_BACKEND={FORMAT_BACKENDS[format][0]} "
            "keras-gmlp export ...). A .keras file or preset folder saved "
            "under any backend loads under those."
        )


# Token ids of any length: jax2onnx cannot trace the spatial unit's
# `arange` of a symbolic length, and TFLite's converter rejects the dynamic
# gather jax2tf makes of it.
TEXT_FORMAT_BACKENDS = {
    "saved_model": ("tensorflow", "jax"),
    "onnx": ("tensorflow",),
    "litert": ("tensorflow",),
}


def _check_text_format(serving, format):
    backend = keras.config.backend()
    if serving.inputs[0].dtype == "uint8":
        return
    if backend not in TEXT_FORMAT_BACKENDS[format]:
        raise ValueError(
            f"A text model's format={format!r} export serves token ids of "
            f"any length only from the tensorflow backend, not {backend}: "
            "KERAS_BACKEND=tensorflow keras-gmlp export ... (a .keras file "
            "or preset folder loads there)."
        )


def _output_path(path, format):
    path = os.path.abspath(os.fspath(path))
    suffix = SUFFIXES[format]
    if suffix and not path.endswith(suffix):
        path += suffix
    return path


def _input_signature(serving):
    spec = serving.inputs[0]
    return [keras.InputSpec(shape=spec.shape, dtype=spec.dtype)]


def _export_litert_from_jax(serving, path):
    # Keras makes LiteRT from TensorFlow and torch only. From JAX: jax2tf
    # with the weights as constants (a SavedModel's variables include the
    # uint32 seed state, which LiteRT cannot hold), then TFLite's converter.
    import tensorflow as tf
    from jax.experimental import jax2tf

    spec = serving.inputs[0]
    arguments = jax2tf_arguments(serving)
    shape = tuple(spec.shape)
    names = ["batch"] + [str(d) for d in shape[1:]]
    polymorphic = arguments.get("polymorphic_shapes") or [
        f"({', '.join(names)})"
    ]
    function = jax2tf.convert(
        lambda x: serving(x, training=False),
        polymorphic_shapes=polymorphic,
        polymorphic_constraints=arguments.get("polymorphic_constraints", ()),
        with_gradient=False,
    )
    traced = tf.function(
        function,
        autograph=False,
        input_signature=[tf.TensorSpec((None,) + shape[1:], spec.dtype)],
    )
    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [traced.get_concrete_function()]
    )
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS,
        tf.lite.OpsSet.SELECT_TF_OPS,
    ]
    with open(path, "wb") as file:
        file.write(converter.convert())


def _write(serving, path, format):
    fft_free = format in FFT_FREE_FORMATS
    fft_context = (
        materialised_toeplitz() if fft_free else contextlib.nullcontext()
    )
    with reference_only(), fft_context:
        _write_format(serving, path, format)


def _write_format(serving, path, format):
    backend = keras.config.backend()
    if format == "saved_model":
        _export(serving, path)
    elif format == "litert" and backend == "jax":
        _export_litert_from_jax(serving, path)
    elif format == "onnx" and backend == "jax":
        distribution = keras.distribution.distribution()
        keras.distribution.set_distribution(None)
        import jax

        try:
            serving.export(
                path,
                format="onnx",
                verbose=False,
                input_signature=_input_signature(serving),
            )
        except jax.errors.InconclusiveDimensionOperation as error:
            # jax2onnx traces a dynamic batch symbolically, which the
            # image resize of a preprocessor cannot take.
            raise ValueError(
                "ONNX export from the jax backend cannot trace this model "
                "with a batch of any size (the preprocessor resizes the "
                "images); export from the tensorflow backend "
                "(KERAS_BACKEND=tensorflow keras-gmlp export ...): a .keras "
                "file or preset folder saved under any backend loads there."
            ) from error
        finally:
            keras.distribution.set_distribution(distribution)
    else:
        serving.export(
            path,
            format=format,
            verbose=False,
            input_signature=_input_signature(serving),
        )


def export(
    model,
    path,
    format="saved_model",
    gelu="exact",
    image_shape=None,
    activation=None,
):
    """Exports a task for serving, the preprocessing inside.

    Args:
        model: `keras.Model` (a task such as `GMLPImageClassifier`), or the
            path of a `.keras` file or of a preset folder (keras-hub's, or
            timm's `config.json` and `model.safetensors`).
        path: str. Where to write: a SavedModel folder, or a file (`.onnx`
            or `.tflite` is appended when missing). It is written under a
            temporary name beside it and renamed when complete.
        format: str. `"saved_model"` (`tf.saved_model.load`, signature
            `serve`), `"onnx"` (onnxruntime) or `"litert"` (the LiteRT
            interpreter). Defaults to `"saved_model"`.
        gelu: str. `"exact"` keeps the erf GELU; `"tanh"` exports the tanh
            approximation and warns with the largest output difference it
            measured on random inputs. Defaults to `"exact"`.
        image_shape: `(height, width)`. Size of the served uint8 images,
            resized by the task's converter. Defaults to the model's.
        activation: str or `None`. Output activation, e.g. `"softmax"`.
            Defaults to `None`, the task's outputs (logits).

    Returns:
        The path written.

    Raises:
        ValueError: for an unknown format, or one that Keras cannot make
            from the current backend (naming the backends that can).

    Example:

    ```python
    classifier = keras_gmlp.convert.from_timm(folder)
    path = export(classifier, "gmlp.onnx", format="onnx")
    session = onnxruntime.InferenceSession(path)
    logits = session.run(None, {"images": uint8_images})[0]
    ```
    """
    if gelu not in GELU_FORMS:
        raise ValueError(
            f"Received gelu={gelu!r}; expected one of {GELU_FORMS}."
        )
    _check_backend(format)
    model = _load(model)
    path = _output_path(path, format)
    form = "erf" if gelu == "exact" and format == "onnx" else gelu
    if gelu == "tanh":
        with gelu_form("exact"):
            serving = export_serving_model(model, image_shape, activation)
            probe = probe_inputs(serving)
            exact = keras.ops.convert_to_numpy(serving(probe))
    with gelu_form(form):
        serving = export_serving_model(model, image_shape, activation)
        _check_text_format(serving, format)
        if gelu == "tanh":
            approximate = keras.ops.convert_to_numpy(serving(probe))
            difference = float(np.abs(approximate - exact).max())
            scale = float(np.abs(exact).max())
            warnings.warn(
                f"Exported the tanh approximation of GELU: the outputs on "
                f"random inputs moved by up to {difference:.3g} (largest "
                f"output {scale:.3g}).",
                stacklevel=2,
            )
        else:
            serving(probe_inputs(serving))  # ONNX needs a called model.
        # Written under a temporary name, renamed when complete.
        write = (
            files.write_folder if format == "saved_model" else files.write_file
        )
        write(path, lambda temporary: _write(serving, temporary, format))
    return path


def main(argv=None):
    """Exports a serving `.keras` file: `python -m keras_gmlp.export IN OUT`."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        raise SystemExit(
            "usage: KERAS_BACKEND=tensorflow python -m keras_gmlp.export "
            "SERVING_MODEL.keras EXPORT_DIR"
        )
    import keras_gmlp.models  # noqa: F401  (registers the classes)

    serving = keras.saving.load_model(argv[0])
    _export(serving, argv[1])


if __name__ == "__main__":
    main()
