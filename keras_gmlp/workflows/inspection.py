"""What a preset, a run or a model file is, and exporting them for serving.

`info(name)` describes a preset of `keras_gmlp.PRESETS`, a saved preset
folder, a training run's folder or a `.keras` file: configuration,
parameter count and backend.
`export(model, export_dir)` writes a SavedModel with the preprocessing
inside, as the training jobs do.
"""

import os

import keras

from keras_gmlp.models.presets import PRESETS
from keras_gmlp.workflows import run_folder

BUILDERS = {"image": "image_classifier", "text": "masked_lm"}


def info(name=None):
    """Describes a preset, a run folder or a `.keras` file.

    Args:
        name: str or `None`. A preset name, a saved preset folder, a
            run's `output_dir` or a `.keras` file; `None` lists the
            presets.

    Returns:
        A JSON-serialisable dict.

    Raises:
        ValueError: when `name` is none of these.

    Example:

    >>> from keras_gmlp.workflows.inspection import info
    >>> info("gmlp_tiny")["parameters"]
    1449212
    """
    summary = {
        "backend": keras.config.backend(),
        "keras_version": keras.__version__,
    }
    if name is None:
        summary["presets"] = {
            key: entry["description"] for key, entry in PRESETS.items()
        }
        return summary
    if name in PRESETS:
        from keras_gmlp import models

        entry = PRESETS[name]
        model = getattr(models, BUILDERS[entry["family"]])(name)
        summary.update(
            preset=name,
            family=entry["family"],
            description=entry["description"],
            builder=f"keras_gmlp.models.{BUILDERS[entry['family']]}",
            config=entry["config"],
            parameters=int(model.count_params()),
        )
        return summary
    if os.path.isfile(os.path.join(str(name), "config.json")):
        return {**summary, **_preset_summary(name)}
    if os.path.isdir(name):
        record = run_folder.read_run_config(name)
        summary.update(run_dir=name, job=record["job"], config=record["config"])
        path = _run_model_path(name, record["job"])
        if path is not None:
            summary["model"] = _model_summary(path, record)
        return summary
    if os.path.isfile(name) and name.endswith(".keras"):
        summary["model"] = _model_summary(name, {})
        return summary
    raise ValueError(
        f"Received {name!r}; expected a preset (one of {sorted(PRESETS)}), "
        "the --output-dir of a training run, or a .keras file."
    )


def _preset_summary(folder):
    """A saved preset folder: its task (or backbone), configuration, size."""
    import json

    import keras_hub

    with open(os.path.join(folder, "config.json")) as file:
        config = json.load(file)
    summary = {
        "preset_dir": folder,
        "backbone": config.get("class_name"),
        "config": config.get("config", {}),
    }
    task_file = os.path.join(folder, "task.json")
    if os.path.exists(task_file):
        with open(task_file) as file:
            name = json.load(file).get("registered_name")
        task_class = keras.saving.get_registered_object(name)
        model = run_folder.load_preset(task_class, folder)
        summary["task"] = type(model).__name__
    else:
        model = run_folder.load_preset(keras_hub.models.Backbone, folder)
    summary["parameters"] = int(model.count_params())
    return summary


def _run_model_path(run_dir, job):
    names = {
        "image_classification": ("model.keras", "best.keras", "last.keras"),
        "pretraining": (
            "best.keras",
            "last.keras",
            "masked_lm.keras",
            "causal_lm.keras",
        ),
        "text_classification": ("best.keras", "last.keras"),
    }[job]
    for file_name in names:
        path = os.path.join(run_dir, file_name)
        if os.path.exists(path):
            return path
    return None


def _model_summary(path, record):
    from keras_gmlp.layers.gmlp_block import GMLPBlock

    if record.get("config", {}).get("architecture") == "transformer":
        import keras_hub  # noqa: F401 (registers keras-hub's classes)
    model = keras.saving.load_model(path, compile=False)
    blocks = [
        layer
        for layer in model._flatten_layers(include_self=False)
        if isinstance(layer, GMLPBlock)
    ]
    summary = {
        "file": path,
        "name": model.name,
        "parameters": int(model.count_params()),
        "inputs": [_shape(tensor) for tensor in model.inputs],
        "outputs": [_shape(tensor) for tensor in model.outputs],
        "gmlp_blocks": len(blocks),
    }
    if blocks:
        block = blocks[0].get_config()
        summary["block_config"] = {
            key: block.get(key)
            for key in (
                "ffn_dim",
                "sequence_length",
                "attention_dim",
                "spatial",
                "gating",
                "causal",
            )
            if key in block
        }
    return summary


def _shape(tensor):
    return {"shape": list(tensor.shape), "dtype": str(tensor.dtype)}


def export(model, export_dir, activation="softmax"):
    """Exports a run's model (or a `.keras` file) as a SavedModel.

    An image classification run's model takes uint8 images and a text
    classification run's takes token ids of its `sequence_length`; both
    give class probabilities. A `.keras` file is exported as it is, with
    `activation` on its outputs.

    Args:
        model: str. A run's `output_dir` or a `.keras` file.
        export_dir: str. The SavedModel folder to write.
        activation: str or `None`. Output activation of a `.keras` file's
            export. Defaults to `"softmax"`.

    Returns:
        The absolute path of the SavedModel.
    """
    from keras_gmlp.export import export_saved_model
    from keras_gmlp.generation import model_sequence_length

    if os.path.isdir(model):
        record = run_folder.read_run_config(model)
        job = record["job"]
        if job == "image_classification":
            from keras_gmlp.workflows import image_classification

            return image_classification.export_classifier(
                image_classification.load_run_model(model), export_dir
            )
        if job == "text_classification":
            from keras_gmlp.workflows import text_classification

            return text_classification.export_classifier(
                text_classification.load_task(model),
                export_dir,
                record["config"]["sequence_length"],
            )
        raise ValueError(
            f"{model!r} holds a {job} run; export takes an image or text "
            "classification run, or a .keras file."
        )
    if not (os.path.isfile(model) and model.endswith(".keras")):
        raise ValueError(
            f"Received {model!r}; expected a run's --output-dir or a .keras "
            "file."
        )
    loaded = keras.saving.load_model(model, compile=False)
    input_shape = None
    length = model_sequence_length(loaded)
    if length is not None and len(loaded.inputs[0].shape) == 2:
        input_shape = (length,)
    return export_saved_model(
        loaded, export_dir, input_shape=input_shape, activation=activation
    )
