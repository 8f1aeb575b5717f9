"""SavedModel export with the preprocessing inside, from every backend.

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

import os
import subprocess
import sys
import tempfile

import keras

from keras_gmlp.generation import model_sequence_length


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
