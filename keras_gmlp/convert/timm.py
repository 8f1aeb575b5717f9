"""timm's gMLP `state_dict` <-> `keras_gmlp.models.image_classifier`.

timm (`timm/models/mlp_mixer.py`) holds the only public trained gMLP
checkpoint, `gmlp_s16_224.ra3_in1k`. Its weights map one to one onto an
`image_classifier` of the same configuration.
"""

import numpy as np


def _linear(array):
    # PyTorch Linear weights are (out, in); a Keras Dense kernel is (in, out).
    return array.T


def _conv(array):
    # PyTorch Conv2d (out, in, kh, kw) -> Keras Conv2D (kh, kw, in, out).
    return array.transpose(2, 3, 1, 0)


def _same(array):
    return array


def timm_weight_map(num_layers):
    """Lists how timm's weight names map onto the Keras model's weights.

    Args:
        num_layers: int. Number of gMLP blocks.

    Returns:
        A list of `(timm_name, (layer_name, attribute path), transform)`
        triples, where `transform` turns the timm array into the Keras one.
    """
    entries = [
        ("stem.proj.weight", ("stem", "projection.kernel"), _conv),
        ("stem.proj.bias", ("stem", "projection.bias"), _same),
        ("norm.weight", ("final_norm", "gamma"), _same),
        ("norm.bias", ("final_norm", "beta"), _same),
        ("head.weight", ("head", "kernel"), _linear),
        ("head.bias", ("head", "bias"), _same),
    ]
    block_entries = [
        ("norm.weight", "norm.gamma", _same),
        ("norm.bias", "norm.beta", _same),
        ("mlp_channels.fc1.weight", "channel_projection_in.kernel", _linear),
        ("mlp_channels.fc1.bias", "channel_projection_in.bias", _same),
        (
            "mlp_channels.gate.norm.weight",
            "spatial_gating_unit.norm.gamma",
            _same,
        ),
        ("mlp_channels.gate.norm.bias", "spatial_gating_unit.norm.beta", _same),
        ("mlp_channels.gate.proj.weight", "spatial_gating_unit.kernel", _same),
        ("mlp_channels.gate.proj.bias", "spatial_gating_unit.bias", _same),
        ("mlp_channels.fc2.weight", "channel_projection_out.kernel", _linear),
        ("mlp_channels.fc2.bias", "channel_projection_out.bias", _same),
    ]
    for i in range(num_layers):
        for timm_name, attribute, transform in block_entries:
            entries.append(
                (
                    f"blocks.{i}.{timm_name}",
                    (f"block_{i}", attribute),
                    transform,
                )
            )
    return entries


def _variable(model, layer_name, attribute):
    backbone = getattr(model, "backbone", None)
    if layer_name != "head" and backbone is not None:
        model = backbone
    target = model.get_layer(layer_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def _to_numpy(value):
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def load_timm_weights(model, state_dict):
    """Loads a timm gMLP `state_dict` into an `image_classifier` model.

    Args:
        model: a `keras_gmlp.models.image_classifier` model with the timm
            model's configuration (patch size, widths, depth, image size,
            classes).
        state_dict: mapping from timm weight names to torch tensors or
            arrays, e.g. `timm_model.state_dict()`.

    Every weight of `model` is set, or none is: the call checks the whole
    mapping before it assigns anything.

    Raises:
        ValueError: when a timm weight is missing, left over or of another
            shape, or when a weight of `model` has no timm counterpart (an
            aMLP's tiny attention, say); the message names the weights.

    Example:

    ```python
    timm_model = timm.create_model("gmlp_s16_224", pretrained=True)
    model = keras_gmlp.models.image_classifier("gmlp_s16_224")
    load_timm_weights(model, timm_model.state_dict())
    ```
    """
    # The blocks live in the classifier's backbone.
    layers = getattr(model, "backbone", model).layers
    num_layers = sum(1 for layer in layers if layer.name.startswith("block_"))
    entries = timm_weight_map(num_layers)
    expected = {name for name, _, _ in entries}
    missing = sorted(expected - set(state_dict))
    unused = sorted(set(state_dict) - expected)
    if missing or unused:
        raise ValueError(
            f"The state_dict does not match a {num_layers}-block gMLP: "
            f"missing {missing[:5]}, unexpected {unused[:5]}."
        )
    assignments = []
    for name, (layer_name, attribute), transform in entries:
        variable = _variable(model, layer_name, attribute)
        value = transform(_to_numpy(state_dict[name]))
        if tuple(value.shape) != tuple(variable.shape):
            raise ValueError(
                f"timm weight {name!r} has shape {value.shape} after "
                f"conversion; the Keras weight {variable.path!r} expects "
                f"{tuple(variable.shape)}."
            )
        assignments.append((variable, value))
    set_ids = {id(variable) for variable, _ in assignments}
    unset = [w.path for w in model.weights if id(w) not in set_ids]
    if unset:
        raise ValueError(
            f"The timm gMLP state_dict sets no value for {len(unset)} "
            f"weights of {model.name!r}: {unset}. Expected a model with "
            "timm's configuration (a gMLP, no tiny attention)."
        )
    for variable, value in assignments:
        variable.assign(value.astype(variable.dtype))
