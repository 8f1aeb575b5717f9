"""`from_preset` of the gMLP backbones and tasks, named presets included.

The named presets (`keras_gmlp.models.PRESETS`) are configurations
without weights. Each family is registered with keras-hub as its
backbone's presets (`register_family_presets`, as keras-hub registers
BERT's), so `cls.presets` lists them, and `ConfigurationLoader`, a
keras-hub preset loader, builds a model from one as keras-hub's loaders of
Transformers and timm checkpoints build it from theirs.
"""

import inspect
import json
import os
import pathlib

from keras_hub.models import Backbone
from keras_hub.src.models.causal_lm import CausalLM
from keras_hub.src.utils.preset_utils import PresetLoader
from keras_hub.src.utils.preset_utils import get_preset_loader
from keras_hub.src.utils.preset_utils import register_presets

from keras_gmlp.layers.patch_embedding import pair
from keras_gmlp.models.presets import PRESETS

# Arguments of every keras-hub task besides its constructor's own.
TASK_KEYWORDS = ("compile", "name")


def register_family_presets(family, backbone_cls):
    """Registers the `family`'s presets with keras-hub as `backbone_cls`'s.

    Args:
        family: str. `"image"` or `"text"`.
        backbone_cls: the family's backbone class.
    """
    register_presets(
        {
            name: {"metadata": {"description": entry["description"]}, **entry}
            for name, entry in PRESETS.items()
            if entry["family"] == family
        },
        backbone_cls,
    )


def is_configuration(preset):
    """Whether `preset` names an entry of `PRESETS` (a local folder of the
    same name wins: it is a saved preset)."""
    return (
        isinstance(preset, str)
        and preset in PRESETS
        and not os.path.isdir(preset)
    )


def is_timm_checkpoint(preset):
    """Whether `preset` is a timm checkpoint folder or `hf://timm/` handle."""
    text = str(preset)
    if text.startswith(("hf://timm/", "hf-hub:timm/")):
        return True
    config = pathlib.Path(text) / "config.json"
    if not config.is_file():
        return False
    try:
        content = json.loads(config.read_text())
    except ValueError:
        return False
    return "architecture" in content and "class_name" not in content


def saved_mixed_policy(preset):
    """The mixed-precision policy name a saved preset was written with.

    Args:
        preset: str. A preset folder or a keras-hub handle.

    Returns:
        The policy name, such as `"mixed_bfloat16"`, or `None` when the
        preset's backbone has no policy or a plain one.
    """
    config = get_preset_loader(preset).config
    dtype = config.get("config", {}).get("dtype")
    if isinstance(dtype, dict):
        dtype = dtype.get("config", {}).get("name")
    if isinstance(dtype, str) and dtype.startswith("mixed_"):
        return dtype
    return None


def with_saved_policy(preset, kwargs):
    """`from_preset` keyword arguments that keep a saved mixed policy.

    keras-hub 0.32 fails on a task preset saved under a mixed-precision
    policy, and loads a backbone preset under the global policy; this
    passes the saved policy as `dtype`, unless `kwargs` gives one.
    """
    if kwargs.get("dtype") is None:
        policy = saved_mixed_policy(preset)
        if policy is not None:
            kwargs = dict(kwargs, dtype=policy)
    return kwargs


def arguments(cls):
    """The names of the arguments `cls`'s constructor declares."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    kinds = (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )
    return {p.name for p in parameters if p.kind in kinds} - {"self"}


def check_keys(kwargs, accepted):
    """Raises a `ValueError` naming the keys of `kwargs` not `accepted`."""
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(
            f"Unknown configuration keys {unknown}; expected some of "
            f"{sorted(accepted)}."
        )


class ConfigurationLoader(PresetLoader):
    """keras-hub's preset loader of a configuration of `PRESETS`.

    The backbone has random weights; keyword arguments override the
    configuration's values. A task gets the preprocessor its
    configuration makes: an image converter of the backbone's image size,
    and no text preprocessor (a configuration has no vocabulary) unless
    one is passed. A `CausalLM`'s backbone is causal.

    Args:
        preset: str. A key of `PRESETS`.
    """

    def __init__(self, preset):
        super().__init__(preset, dict(PRESETS[preset]["config"]))

    def load(self, cls, **kwargs):
        """Builds `cls`, a gMLP backbone or task class, of the
        configuration, `kwargs` overriding its values."""
        if self.preset not in cls.presets:
            family = PRESETS[self.preset]["family"]
            article = "an" if family[0] in "aeiou" else "a"
            raise ValueError(
                f"Preset {self.preset!r} is {article} {family} model; "
                f"{cls.__name__} takes the presets {sorted(cls.presets)}."
            )
        if issubclass(cls, Backbone):
            return self.load_backbone(cls, False, **kwargs)
        return self.load_task(cls, False, False, **kwargs)

    def load_backbone(self, cls, load_weights, **kwargs):
        accepted = arguments(cls) | {"name"}
        check_keys(kwargs, accepted)
        config = {k: v for k, v in self.config.items() if k in accepted}
        return cls(**{**config, **kwargs})

    def load_task(self, cls, load_weights, load_task_weights, **kwargs):
        task_keys = arguments(cls) | set(TASK_KEYWORDS)
        backbone_keys = arguments(cls.backbone_cls) | {"name"}
        check_keys(kwargs, task_keys | backbone_keys)
        # The backbone's overrides become the configuration's values.
        for key in [k for k in kwargs if k not in task_keys]:
            self.config[key] = kwargs.pop(key)
        if issubclass(cls, CausalLM):
            self.config.setdefault("causal", True)
        kwargs = {
            **{k: v for k, v in self.config.items() if k in task_keys},
            **kwargs,
        }
        if "backbone" not in kwargs:
            kwargs["backbone"] = self.load_backbone(
                cls.backbone_cls, load_weights
            )
        return super().load_task(cls, load_weights, load_task_weights, **kwargs)

    def load_preprocessor(self, cls, config_file=None, **kwargs):
        if cls.tokenizer_cls is not None:
            return None
        return super().load_preprocessor(cls, **kwargs)

    def load_image_converter(self, cls, **kwargs):
        image_size = pair(self.config["image_size"], "image_size")
        return cls(image_size=image_size, **kwargs)


class FromPreset:
    """`from_preset` of the named configurations too: a mixin of the gMLP
    backbones and tasks (`GMLPTask`)."""

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """Builds the model from a named configuration or a saved preset.

        A key of `keras_gmlp.models.PRESETS` of the model's family (those
        `cls.presets` lists, such as `"gmlp_s16_224"`) builds that
        configuration with random weights (`ConfigurationLoader`); keyword
        arguments override the configuration's, a task's own (such as
        `num_classes` or `preprocessor`) and its backbone's. Anything else
        (a folder written by `save_to_preset`, a `kaggle://` or `hf://`
        handle) is loaded by keras-hub's `from_preset`, under the
        mixed-precision policy it was saved with unless `dtype` is passed;
        there, an `image_size` other than a saved image model's resamples
        its spatial weights (`keras_gmlp.convert.resize_image_model`). A
        timm checkpoint is loaded by `keras_gmlp.convert.from_timm`, not
        here.

        keras-hub's own `from_preset` reads every preset from its files,
        which a named configuration does not have: this one override, for
        every gMLP model, serves those too.

        Args:
            preset: str. A preset name, folder or handle.
            load_weights: bool. Whether to load a saved preset's weights.
                Named configurations have none. Defaults to `True`.
            **kwargs: arguments that override the preset's.

        Example:

        >>> classifier = keras_gmlp.GMLPImageClassifier.from_preset(
        ...     "gmlp_micro4_32", num_classes=10, num_layers=2)
        >>> classifier.backbone.num_layers, classifier.num_classes
        (2, 10)
        """
        if is_timm_checkpoint(preset):
            raise ValueError(
                f"Received preset={str(preset)!r}, a timm checkpoint; load "
                "it with keras_gmlp.convert.from_timm(preset)."
            )
        if is_configuration(preset):
            return ConfigurationLoader(preset).load(cls, **kwargs)
        backbone_cls = cls if issubclass(cls, Backbone) else cls.backbone_cls
        image_size = None
        if "image_size" in arguments(backbone_cls):
            image_size = kwargs.pop("image_size", None)
        kwargs = with_saved_policy(preset, kwargs)
        model = super().from_preset(preset, load_weights=load_weights, **kwargs)
        backbone = model if isinstance(model, Backbone) else model.backbone
        if image_size is not None and (
            pair(image_size, "image_size") != tuple(backbone.image_size)
        ):
            from keras_gmlp.models.gmlp_image.resample import resize_image_model

            model = resize_image_model(model, image_size)
        return model
