"""timm gMLP checkpoints in and out, without timm or PyTorch.

timm publishes its gMLP (`gmlp_s16_224.ra3_in1k`) as a folder holding
`config.json` and `model.safetensors`. `from_timm` reads such a folder (or
a bare state dict file, or an `hf://timm/...` handle), infers the model's
sizes from the weight shapes and the configuration, and builds a
`keras_gmlp.models.GMLPImageClassifier` with every weight set and a
preprocessor that applies the checkpoint's evaluation transform;
`load_timm_checkpoint` builds the bare `keras_gmlp.models.image_classifier`.
`timm_data_config` and `apply_timm_preprocessing` reproduce the evaluation
transform recorded in `config.json`, so that uint8 images give timm's
predictions. `to_timm` writes a model back as a state dict that timm loads
with `load_state_dict(strict=True)`.

The layers are found by name (`stem`, `block_<i>`, `final_norm`, `head`)
anywhere in the model, also inside a nested backbone.
"""

import json
import math
import pathlib
import re

import keras
import numpy as np

from keras_gmlp.convert.timm import timm_weight_map
from keras_gmlp.layers.patch_embedding import pair as _checked_pair
from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone
from keras_gmlp.models.gmlp_image.gmlp_image_classifier import (
    GMLPImageClassifier,
)
from keras_gmlp.models.gmlp_image.gmlp_image_classifier_preprocessor import (
    GMLPImageClassifierPreprocessor,
)
from keras_gmlp.models.gmlp_image.gmlp_image_converter import GMLPImageConverter
from keras_gmlp.models.gmlp_image.resample import resample_spatial_weights
from keras_gmlp.models.gmlp_image.timm_preprocessing import DEFAULT_DATA_CONFIG
from keras_gmlp.models.gmlp_image.timm_preprocessing import pair as _pair

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
TORCH_FILE = "pytorch_model.bin"
TORCH_SUFFIXES = (".pth", ".pt", ".bin")
HF_PREFIXES = ("hf://", "hf-hub:")

# Names a layer may have in the Keras model, for each name of the weight
# map: the head is `head` in `image_classifier` and `predictions` in a
# keras-hub `ImageClassifier`.
LAYER_ALIASES = {"head": ("head", "predictions")}

GATE_WEIGHT = "blocks.0.mlp_channels.gate.proj.weight"
BLOCK_KEY = re.compile(r"blocks\.(\d+)\.")


# === Reading ===


def _import_safetensors():
    try:
        import safetensors.numpy
    except ImportError as error:
        raise ImportError(
            "Reading or writing a .safetensors checkpoint needs the "
            "`safetensors` package: `pip install safetensors`."
        ) from error
    return safetensors.numpy


def _import_torch(path):
    try:
        import torch
    except ImportError as error:
        raise ImportError(
            f"{path} is a PyTorch pickle file, which needs `torch` to read "
            "or write; install torch, or use a .safetensors file."
        ) from error
    return torch


def _read_torch_file(path):
    torch = _import_torch(path)
    try:
        content = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise ValueError(
            f"Could not read {path} as a plain PyTorch state dict "
            f"(`torch.load(weights_only=True)` failed: {error}). Save "
            "`model.state_dict()` alone and load that file."
        ) from error
    # timm's training checkpoints hold the weights under `state_dict`.
    for key in ("state_dict", "model"):
        if isinstance(content, dict) and isinstance(content.get(key), dict):
            content = content[key]
    if not isinstance(content, dict):
        raise ValueError(
            f"{path} holds a {type(content).__name__}; expected a state dict "
            "(a mapping from weight names to tensors)."
        )
    state_dict = {}
    for name, value in content.items():
        # Weights saved from a DistributedDataParallel wrapper.
        name = name[len("module.") :] if name.startswith("module.") else name
        state_dict[name] = value.detach().cpu().float().numpy()
    return state_dict


def _read_state_dict(path):
    path = pathlib.Path(path)
    if path.suffix == ".safetensors":
        return dict(_import_safetensors().load_file(str(path)))
    if path.suffix in TORCH_SUFFIXES:
        return _read_torch_file(path)
    raise ValueError(
        f"Unknown checkpoint file type {path.name!r}; expected a "
        f".safetensors file or a PyTorch file ({', '.join(TORCH_SUFFIXES)})."
    )


def _download(repo_id):
    """Downloads a timm repository's configuration and weights."""
    try:
        import huggingface_hub
    except ImportError as error:
        raise ImportError(
            f"Loading 'hf://{repo_id}' needs the `huggingface_hub` package "
            "(`pip install huggingface_hub`) and a network connection; or "
            "pass the path of a local folder with config.json and "
            "model.safetensors."
        ) from error
    try:
        folder = huggingface_hub.snapshot_download(
            repo_id, allow_patterns=[CONFIG_FILE, SAFETENSORS_FILE]
        )
    except Exception as error:
        raise ValueError(
            f"Could not download 'hf://{repo_id}' from the Hugging Face Hub "
            f"({type(error).__name__}: {error}). Offline, pass the path of a "
            "local folder with config.json and model.safetensors."
        ) from error
    return folder


def _resolve(path):
    """Returns `(weights file, config.json path or None)` for a checkpoint."""
    text = str(path)
    for prefix in HF_PREFIXES:
        if text.startswith(prefix):
            repo_id = text[len(prefix) :].strip("/")
            if repo_id.count("/") != 1:
                raise ValueError(
                    f"Received the handle {text!r}; expected "
                    "'hf://<owner>/<name>', such as "
                    "'hf://timm/gmlp_s16_224.ra3_in1k'."
                )
            path = _download(repo_id)
            break
    path = pathlib.Path(path)
    if path.is_dir():
        config = path / CONFIG_FILE
        for name in (SAFETENSORS_FILE, TORCH_FILE):
            if (path / name).is_file():
                return path / name, config if config.is_file() else None
        found = sorted(p.name for p in path.iterdir())
        raise FileNotFoundError(
            f"The folder {path} holds no {SAFETENSORS_FILE} or {TORCH_FILE}; "
            f"it holds {found}."
        )
    if path.is_file():
        config = path.parent / CONFIG_FILE
        return path, config if config.is_file() else None
    raise FileNotFoundError(
        f"No timm checkpoint at {text!r}: expected a folder with "
        f"{CONFIG_FILE} and {SAFETENSORS_FILE}, a weights file, or an "
        "'hf://<owner>/<name>' handle."
    )


def _shape(state_dict, name, rank):
    if name not in state_dict:
        raise ValueError(
            f"The state dict has no {name!r}; expected a timm gMLP "
            "(`MlpMixer` with spatial gating blocks). It holds "
            f"{_names(state_dict)}."
        )
    shape = tuple(np.shape(state_dict[name]))
    if len(shape) != rank:
        raise ValueError(
            f"timm weight {name!r} has shape {shape}; expected a rank "
            f"{rank} array."
        )
    return shape


def _names(names, limit=8):
    names = sorted(names)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"{names[:limit]}{more}"


def infer_timm_config(state_dict, timm_config=None, image_size=None):
    """Infers `image_classifier` arguments from a timm gMLP checkpoint.

    Depth, widths, patch size, input channels and class count come from
    the weight shapes; the image size from `image_size`, else from
    `timm_config` (`pretrained_cfg.input_size`, `model_args.img_size`), else
    from the token count of the spatial weight, assuming a square grid.

    Args:
        state_dict: dict. timm weight names to arrays.
        timm_config: dict. The checkpoint's `config.json`. Defaults to
            `None`.
        image_size: int or `(height, width)`. Overrides the image size.
            Defaults to `None`.

    Returns:
        A dict of `keras_gmlp.models.image_classifier` keyword arguments.

    Raises:
        ValueError: when the state dict is not a timm gMLP or disagrees with
            `timm_config` or `image_size`.
    """
    timm_config = timm_config or {}
    architecture = timm_config.get("architecture")
    if architecture is not None and not architecture.startswith("gmlp"):
        raise ValueError(
            f"config.json names the architecture {architecture!r}; expected "
            "a timm gMLP ('gmlp_ti16_224', 'gmlp_s16_224', ...)."
        )
    hidden_dim, num_channels, *patch_size = _shape(
        state_dict, "stem.proj.weight", 4
    )
    indices = {int(m.group(1)) for m in map(BLOCK_KEY.match, state_dict) if m}
    num_layers = len(indices)
    if not num_layers or indices != set(range(num_layers)):
        raise ValueError(
            f"The state dict has the blocks {sorted(indices)}; expected "
            "blocks 0, 1, ..., depth - 1."
        )
    ffn_dim = _shape(state_dict, "blocks.0.mlp_channels.fc1.weight", 2)[0]
    num_tokens = _shape(state_dict, GATE_WEIGHT, 2)[0]
    if "head.weight" not in state_dict:
        raise ValueError(
            "The state dict has no 'head.weight': a timm gMLP without a "
            "classification head (num_classes=0); image_classifier needs "
            "one."
        )
    num_classes = _shape(state_dict, "head.weight", 2)[0]
    if timm_config.get("num_classes", num_classes) != num_classes:
        raise ValueError(
            f"config.json says num_classes={timm_config['num_classes']}, "
            f"but 'head.weight' has {num_classes} rows."
        )

    pretrained_cfg = timm_config.get("pretrained_cfg") or {}
    model_args = timm_config.get("model_args") or {}
    if image_size is not None:
        image_size = _pair(image_size)
    elif pretrained_cfg.get("input_size"):
        image_size = _pair(pretrained_cfg["input_size"][1:])
    elif model_args.get("img_size"):
        image_size = _pair(model_args["img_size"])
    else:
        side = math.isqrt(num_tokens)
        if side * side != num_tokens:
            raise ValueError(
                f"The spatial weights mix {num_tokens} tokens, not a square "
                "grid, and no config.json gives the image size: pass "
                "image_size=(height, width)."
            )
        image_size = (side * patch_size[0], side * patch_size[1])
    grid = [
        size // patch
        for size, patch in zip(image_size, patch_size, strict=True)
    ]
    if (
        any(
            size % patch
            for size, patch in zip(image_size, patch_size, strict=True)
        )
        or grid[0] * grid[1] != num_tokens
    ):
        raise ValueError(
            f"Image size {image_size} with patch size {tuple(patch_size)} "
            f"does not give the {num_tokens} tokens of the spatial weight "
            f"{GATE_WEIGHT!r}."
        )
    return {
        "num_classes": num_classes,
        "image_size": image_size,
        "patch_size": tuple(patch_size),
        "num_channels": num_channels,
        "num_layers": num_layers,
        "hidden_dim": hidden_dim,
        "ffn_dim": ffn_dim,
    }


def timm_data_config(timm_config=None, image_size=None, num_channels=3):
    """Returns the evaluation preprocessing of a timm checkpoint, as data.

    The keys are those of timm's `resolve_data_config`: `input_size`
    (`(channels, height, width)`), `interpolation`, `crop_pct`,
    `crop_mode`, `mean` and `std` (of pixels scaled to [0, 1]). Values
    missing from `timm_config` are timm's gMLP defaults (bicubic, 0.875,
    centre crop, mean = std = 0.5).

    Args:
        timm_config: dict. The checkpoint's `config.json`. Defaults to
            `None`.
        image_size: `(height, width)`. The model's input size, used when
            `timm_config` has none. Defaults to `None`.
        num_channels: int. Image channels. Defaults to `3`.

    Returns:
        A dict.

    Example:

    >>> from keras_gmlp.convert import timm_checkpoint
    >>> timm_checkpoint.timm_data_config(image_size=(32, 32))["input_size"]
    (3, 32, 32)
    """
    pretrained_cfg = (timm_config or {}).get("pretrained_cfg") or {}
    data_config = dict(DEFAULT_DATA_CONFIG)
    for key in data_config:
        if pretrained_cfg.get(key) is not None:
            data_config[key] = pretrained_cfg[key]
    if pretrained_cfg.get("input_size"):
        input_size = tuple(pretrained_cfg["input_size"])
    elif image_size is not None:
        input_size = (num_channels,) + _pair(image_size)
    else:
        raise ValueError(
            "Received no image size: the configuration has no "
            "pretrained_cfg.input_size and image_size is None."
        )
    data_config["input_size"] = input_size
    data_config["mean"] = tuple(data_config["mean"])
    data_config["std"] = tuple(data_config["std"])
    return data_config


def _channel_values(values):
    values = tuple(float(v) for v in values)
    return values[0] if len(set(values)) == 1 else values


def read_timm_checkpoint(path, image_size=None):
    """Reads a timm gMLP checkpoint without building a model.

    Args:
        path: str or path. A folder with `config.json` and
            `model.safetensors` (or `pytorch_model.bin`), a `.safetensors`
            or PyTorch (`.pth`, `.pt`, `.bin`) state dict file, or a Hugging
            Face handle `"hf://timm/<name>"` (downloaded with
            `huggingface_hub`).
        image_size: int or `(height, width)`. Overrides the image size of
            the configuration. Defaults to `None`.

    Returns:
        A dict with `state_dict` (timm names to numpy arrays), `config`
        (the `image_classifier` arguments, see `infer_timm_config`),
        `data_config` (see `timm_data_config`) and `timm_config` (the
        `config.json` contents, or `{}`).
    """
    weights, config_path = _resolve(path)
    timm_config = {}
    if config_path is not None:
        timm_config = json.loads(pathlib.Path(config_path).read_text())
    state_dict = _read_state_dict(weights)
    config = infer_timm_config(state_dict, timm_config, image_size)
    data_config = timm_data_config(
        timm_config, config["image_size"], config["num_channels"]
    )
    if tuple(data_config["input_size"][1:]) != config["image_size"]:
        # An image_size override resizes the model; evaluate at that size.
        data_config["input_size"] = (config["num_channels"],) + tuple(
            config["image_size"]
        )
    return {
        "state_dict": state_dict,
        "config": config,
        "data_config": data_config,
        "timm_config": timm_config,
    }


def load_timm_checkpoint(path, image_size=None, **config):
    """Builds an `image_classifier` from a timm gMLP checkpoint.

    Reads the checkpoint (see `read_timm_checkpoint`), infers depth, widths,
    patch size, image size and class count, builds
    `keras_gmlp.models.image_classifier` and sets every weight from it. The
    checkpoint's evaluation preprocessing is attached to the model as
    `model.timm_data_config`; `apply_timm_preprocessing(images,
    model.timm_data_config)` turns uint8 images into the model's input.

    Args:
        path: str or path. A timm checkpoint folder, state dict file or
            `"hf://timm/<name>"` handle.
        image_size: int or `(height, width)`. Needed only for a bare state
            dict of a non-square token grid. Defaults to `None`.
        **config: further `image_classifier` arguments that do not change
            the weights, such as `dtype` or `drop_path_rate`.

    Returns:
        The `keras.Model`, with the attribute `timm_data_config`.

    Example:

    >>> import pathlib, tempfile
    >>> model = keras_gmlp.models.image_classifier(
    ...     num_classes=3, image_size=8, patch_size=4, num_layers=2,
    ...     hidden_dim=8, ffn_dim=16)
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "model.safetensors"
    >>> from keras_gmlp.convert import timm_checkpoint
    >>> _ = timm_checkpoint.to_timm(model, path)
    >>> loaded = timm_checkpoint.load_timm_checkpoint(path)
    >>> loaded.timm_data_config["input_size"]
    (3, 8, 8)
    """
    from keras_gmlp.models import image_classifier

    checkpoint = read_timm_checkpoint(path, image_size=image_size)
    overlap = sorted(set(config) & set(checkpoint["config"]))
    if overlap:
        raise ValueError(
            f"Received {overlap}, which the checkpoint decides; pass only "
            "arguments that do not change the weights (dtype, "
            "drop_path_rate, dropout, name)."
        )
    model = image_classifier(**checkpoint["config"], **config)
    set_timm_weights(model, checkpoint["state_dict"])
    model.timm_data_config = checkpoint["data_config"]
    return model


def from_timm(path, image_size=None, load_weights=True, **kwargs):
    """Builds a `keras_gmlp.models.GMLPImageClassifier` from a timm gMLP
    checkpoint.

    Reads timm's folder (`config.json` and `model.safetensors`, or
    `pytorch_model.bin` with torch installed), a bare state dict file or
    an `hf://timm/<name>` handle (downloaded with `huggingface_hub`),
    without timm or PyTorch. Depth, widths, patch and image size and the
    class count come from the weight shapes and `config.json`; every
    weight is set, or a `ValueError` names the rest. The preprocessor
    applies the checkpoint's evaluation transform (timm's defaults for
    gMLP: Pillow bicubic resize, centre crop 0.875, mean = std = 0.5),
    so `predict()` on uint8 images gives timm's predictions.

    Args:
        path: str or path. The checkpoint.
        image_size: int or `(height, width)`. Builds the model at
            another image size, the dense spatial weights resampled
            over the token grid (see `keras_gmlp.models.gmlp_image.resample.
            resample_spatial_weights`). Defaults to `None`, the
            checkpoint's.
        load_weights: bool. Whether to set the checkpoint's weights.
            Defaults to `True`.
        **kwargs: arguments that do not change the weights: `dtype`,
            `drop_path_rate`, `pooling`, `dropout`, `activation`,
            `head_dtype`, `name`.

    Returns:
        A `GMLPImageClassifier` with a `GMLPImageClassifierPreprocessor`.

    Example:

    >>> import tempfile
    >>> from keras_gmlp.convert import from_timm, to_timm
    >>> model = keras_gmlp.models.image_classifier(
    ...     num_classes=3, image_size=8, patch_size=4, num_layers=1,
    ...     hidden_dim=8, ffn_dim=16)
    >>> folder = tempfile.mkdtemp()
    >>> _ = to_timm(model, folder)
    >>> classifier = from_timm(folder)
    >>> images = np.zeros((2, 20, 16, 3), "uint8")
    >>> classifier.predict(images, verbose=0).shape
    (2, 3)
    """
    checkpoint = read_timm_checkpoint(path)
    config = checkpoint["config"]
    data_config = dict(checkpoint["data_config"])
    state_dict = checkpoint["state_dict"]
    if image_size is not None:
        image_size = _checked_pair(image_size, "image_size")
        patch = config["patch_size"]
        source = tuple(
            s // p for s, p in zip(config["image_size"], patch, strict=True)
        )
        target = tuple(s // p for s, p in zip(image_size, patch, strict=True))
        if any(s % p for s, p in zip(image_size, patch, strict=True)):
            raise ValueError(
                f"Received image_size={image_size}; expected multiples "
                f"of the checkpoint's patch size {patch}."
            )
        if target != source:
            state_dict = dict(state_dict)
            for i in range(config["num_layers"]):
                name = f"blocks.{i}.mlp_channels.gate.proj"
                (
                    state_dict[f"{name}.weight"],
                    state_dict[f"{name}.bias"],
                ) = resample_spatial_weights(
                    state_dict[f"{name}.weight"],
                    state_dict[f"{name}.bias"],
                    source,
                    target,
                )
        config["image_size"] = image_size
        data_config["input_size"] = (config["num_channels"],) + image_size
    backbone_kwargs = {
        key: kwargs.pop(key)
        for key in ("dtype", "drop_path_rate")
        if key in kwargs
    }
    backbone = GMLPImageBackbone(
        **{k: v for k, v in config.items() if k != "num_classes"},
        **backbone_kwargs,
    )
    mean = np.asarray(data_config["mean"], "float64")
    std = np.asarray(data_config["std"], "float64")
    converter = GMLPImageConverter(
        image_size=backbone.image_size,
        scale=_channel_values(1.0 / (255.0 * std)),
        offset=_channel_values(-mean / std),
        interpolation=data_config["interpolation"],
        crop_pct=data_config["crop_pct"],
        crop_mode=data_config.get("crop_mode") or "center",
    )
    classifier = GMLPImageClassifier(
        backbone=backbone,
        num_classes=config["num_classes"],
        preprocessor=GMLPImageClassifierPreprocessor(converter),
        **kwargs,
    )
    if load_weights:
        set_timm_weights(classifier, state_dict)
    classifier.timm_data_config = data_config
    return classifier


# === Keras model weights ===


def _find_layer(model, name):
    candidates = LAYER_ALIASES.get(name, (name,))
    layers = [
        layer
        for layer in model._flatten_layers(include_self=False, recursive=True)
        if layer.name in candidates
    ]
    if len(layers) != 1:
        raise ValueError(
            f"Expected one layer named {' or '.join(map(repr, candidates))} "
            f"in model {model.name!r}; found {len(layers)}."
        )
    return layers[0]


def _num_blocks(model):
    return sum(
        1
        for layer in model._flatten_layers(include_self=False, recursive=True)
        if re.fullmatch(r"block_\d+", layer.name)
    )


def _weight_targets(model):
    """Returns `[(timm name, Keras variable, owning layer, transform)]`."""
    targets = []
    for timm_name, (layer_name, attribute), transform in timm_weight_map(
        _num_blocks(model)
    ):
        layer = _find_layer(model, layer_name)
        target = layer
        for part in attribute.split("."):
            owner, target = target, getattr(target, part)
        targets.append((timm_name, target, owner, transform))
    return targets


def _check_every_weight_is_mapped(model, targets, action):
    mapped = {id(variable) for _, variable, _, _ in targets}
    unset = [w.path for w in model.weights if id(w) not in mapped]
    if unset:
        raise ValueError(
            f"Cannot {action}: timm's gMLP has no counterpart for the Keras "
            f"weights {_names(unset)} (tiny attention of an aMLP, or layers "
            "outside a gMLP image classifier)."
        )


def set_timm_weights(model, state_dict):
    """Sets every weight of a gMLP image model from a timm state dict.

    The model may be an `image_classifier` or a task whose nested backbone
    holds the layers `stem`, `block_<i>` and `final_norm`. Nothing is
    assigned unless every timm weight has a Keras weight of the same shape
    and every Keras weight has a timm weight.

    Args:
        model: a `keras.Model` of the checkpoint's configuration.
        state_dict: dict. timm weight names to arrays (or torch tensors).

    Raises:
        ValueError: naming the missing, unexpected or misshapen timm weights
            or the Keras weights left unset.
    """
    targets = _weight_targets(model)
    expected = {name for name, _, _, _ in targets}
    missing = expected - set(state_dict)
    unexpected = set(state_dict) - expected
    if missing or unexpected:
        raise ValueError(
            f"The state dict does not match a {_num_blocks(model)}-block "
            f"gMLP: missing {_names(missing)}, unexpected "
            f"{_names(unexpected)}."
        )
    _check_every_weight_is_mapped(model, targets, "load the checkpoint")
    values = []
    wrong = []
    for name, variable, _, transform in targets:
        value = state_dict[name]
        if hasattr(value, "detach"):  # a torch tensor
            value = value.detach().cpu().float().numpy()
        value = transform(np.asarray(value))
        if tuple(value.shape) != tuple(variable.shape):
            wrong.append(
                f"{name!r} {value.shape} for {variable.path!r} "
                f"{tuple(variable.shape)}"
            )
        values.append(value)
    if wrong:
        raise ValueError(
            "timm weights of the wrong shape (after conversion) for the "
            f"Keras weights: {'; '.join(wrong)}."
        )
    for (_, variable, _, _), value in zip(targets, values, strict=True):
        variable.assign(value.astype(variable.dtype))


# === Writing ===


def _inverse(transform, rank):
    """Inverts a transform that permutes axes (a transpose)."""
    probe = (2, 3, 5, 7)[:rank]
    axes = [probe.index(size) for size in transform(np.empty(probe)).shape]
    return lambda array: np.transpose(array, np.argsort(axes))


def timm_state_dict(model):
    """Returns a gMLP image model's weights as a timm state dict.

    A Toeplitz spatial weight is written as the dense matrix it stands for.

    Args:
        model: an `image_classifier` (or a task with such a backbone)
            without tiny attention.

    Returns:
        A dict from timm weight names to float32 numpy arrays.
    """
    targets = _weight_targets(model)
    _check_every_weight_is_mapped(model, targets, "write a timm checkpoint")
    state_dict = {}
    for name, variable, owner, transform in targets:
        if name.endswith("gate.proj.weight"):
            # The dense matrix, also for a Toeplitz weight.
            value = keras.ops.convert_to_numpy(owner.spatial_weight())
        else:
            # A copy converts without NumPy 2's `__array__` warning.
            value = keras.ops.convert_to_numpy(keras.ops.copy(variable))
        value = np.asarray(value, "float32")
        value = _inverse(transform, value.ndim)(value)
        state_dict[name] = np.ascontiguousarray(value)
    return state_dict


def _ratio(numerator, denominator):
    ratio = numerator / denominator
    return int(ratio) if ratio == int(ratio) else ratio


def _timm_config(model, state_dict, data_config):
    height, width = _pair(model.input_shape[1:3])
    config = infer_timm_config(state_dict, image_size=(height, width))
    data_config = dict(
        data_config
        or timm_data_config(image_size=(height, width), num_channels=3)
    )
    data_config["input_size"] = (config["num_channels"], height, width)
    return {
        "architecture": "gmlp_s16_224",
        "num_classes": config["num_classes"],
        "num_features": config["hidden_dim"],
        "global_pool": "avg",
        "model_args": {
            "patch_size": list(config["patch_size"]),
            "num_blocks": config["num_layers"],
            "embed_dim": config["hidden_dim"],
            "mlp_ratio": _ratio(config["ffn_dim"], config["hidden_dim"]),
            "in_chans": config["num_channels"],
            "num_classes": config["num_classes"],
            "global_pool": "avg",
            "img_size": [height, width],
        },
        "pretrained_cfg": {
            "custom_load": False,
            "fixed_input_size": True,
            "num_classes": config["num_classes"],
            "pool_size": None,
            "first_conv": "stem.proj",
            "classifier": "head",
            **{
                k: list(v) if isinstance(v, tuple) else v
                for k, v in data_config.items()
            },
        },
    }


def to_timm(model, path, data_config=None):
    """Writes a gMLP image model as a timm checkpoint.

    timm loads the result into its gMLP of the same sizes (`MlpMixer` with
    `SpatialGatingBlock` and `GatedMlp`, as its `gmlp_*` entry points build
    it) with `load_state_dict(strict=True)`.

    Args:
        model: an `image_classifier` (or a task with such a backbone)
            without tiny attention.
        path: str or path. A `.safetensors` file; a PyTorch file (`.pth`,
            `.pt` or `.bin`, needs torch); or a folder, which receives
            timm's Hugging Face layout (`model.safetensors` and a
            `config.json` whose `model_args` give the sizes).
        data_config: dict. The evaluation preprocessing to record in a
            folder's `config.json` (see `timm_data_config`). Defaults to
            `None`: the model's own `timm_data_config` if it has one, else
            timm's gMLP defaults.

    Returns:
        The path of the weights file written.

    Raises:
        ValueError: for a model with weights timm's gMLP does not have.
    """
    state_dict = timm_state_dict(model)
    path = pathlib.Path(path)
    if path.suffix == ".safetensors":
        _import_safetensors().save_file(
            state_dict, str(path), metadata={"format": "pt"}
        )
        return path
    if path.suffix in TORCH_SUFFIXES:
        torch = _import_torch(path)
        tensors = {k: torch.from_numpy(v) for k, v in state_dict.items()}
        torch.save(tensors, path)
        return path
    if path.suffix:
        raise ValueError(
            f"Unknown checkpoint file type {path.name!r}; expected a "
            f".safetensors or PyTorch ({', '.join(TORCH_SUFFIXES)}) file, "
            "or a folder."
        )
    if data_config is None:
        data_config = getattr(model, "timm_data_config", None)
    path.mkdir(parents=True, exist_ok=True)
    config = _timm_config(model, state_dict, data_config)
    (path / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    weights = path / SAFETENSORS_FILE
    _import_safetensors().save_file(
        state_dict, str(weights), metadata={"format": "pt"}
    )
    return weights
