"""Resolution of a builder's preset and keyword configuration."""

from keras_gmlp.kernels.fused_adamw import FusedAdamW
from keras_gmlp.models.presets import PRESETS


def resolve_config(family, defaults, preset=None, **config):
    """Returns the configuration a builder uses.

    The builder's `defaults`, overridden by the preset's values, overridden
    by the keyword arguments.

    Args:
        family: str. The preset family the builder accepts, `"image"` or
            `"text"`.
        defaults: dict. Every keyword the builder accepts, with its default.
        preset: str. A key of `PRESETS`, or `None`.
        **config: keyword overrides.

    Raises:
        ValueError: for an unknown preset, a preset of another family or an
            unknown keyword.
    """
    resolved = dict(defaults)
    if preset is not None:
        if preset not in PRESETS:
            raise ValueError(
                f"Unknown preset {preset!r}; expected one of {sorted(PRESETS)}."
            )
        entry = PRESETS[preset]
        if entry["family"] != family:
            names = sorted(
                k for k, v in PRESETS.items() if v["family"] == family
            )
            raise ValueError(
                f"Preset {preset!r} is a {entry['family']} model; this "
                f"builder takes the {family} presets {names}."
            )
        resolved.update(entry["config"])
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise ValueError(
            f"Unknown configuration keys {unknown}; expected some of "
            f"{sorted(defaults)}."
        )
    resolved.update(config)
    return resolved


def drop_path_rates(drop_path_rate, num_layers):
    """Stochastic depth rates rising linearly from 0 to `drop_path_rate`."""
    if num_layers == 1:
        return [drop_path_rate]
    step = drop_path_rate / (num_layers - 1)
    return [step * i for i in range(num_layers)]


NO_DECAY_NAMES = ("bias", "gamma", "beta")


def task_optimizer(learning_rate, weight_decay=0.01):
    """The default optimizer of the text tasks' `compile()`.

    AdamW with decoupled weight decay on every weight except biases and
    normalisation scales and offsets (variables named `bias`, `gamma` or
    `beta`, which include the spatial gating unit's per-token bias; its
    spatial weight decays in both forms), and gradients clipped to a global
    norm of 1.

    Args:
        learning_rate: float or `keras.optimizers.schedules`
            `LearningRateSchedule`.
        weight_decay: float. Decoupled weight decay. Defaults to `0.01`.

    Returns:
        A `keras_gmlp.kernels.fused_adamw.FusedAdamW` (Keras' `AdamW`
        with TensorFlow's fused update).
    """
    optimizer = FusedAdamW(
        learning_rate=learning_rate,
        weight_decay=weight_decay,
        global_clipnorm=1.0,
    )
    optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    return optimizer
