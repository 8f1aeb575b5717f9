import keras
import numpy as np
from keras_hub.layers import ImageConverter

from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone


def _tensorflow_in_graph():
    """Whether the call runs in a TensorFlow graph under another backend."""
    if keras.config.backend() == "tensorflow":
        return False
    try:
        import tensorflow as tf
    except ImportError:
        return False
    return not tf.executing_eagerly()


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPImageConverter(ImageConverter):
    """Turns raw images into gMLP image backbone inputs.

    Resizes the images to the model's size and rescales pixel values from
    [0, 255] to [-1, 1], `x / 127.5 - 1`: timm's normalisation of its gMLP
    checkpoints (mean = std = 0.5 of [0, 1] pixels) and the recipes'.
    Takes batched `(batch, height, width, channels)` or single images,
    inside or outside `tf.data`.

    With `crop_pct`, the converter applies timm's evaluation transform
    instead of keras-hub's resize: Pillow's antialiased 8-bit resampling
    (`interpolation` `"bicubic"` or `"bilinear"`, rounded to uint8 after
    each pass) so that the centre crop of `image_size` is `crop_pct` of the
    resized image, then the scale and offset. Images of one batch share a
    size, known when the model is traced.

    Args:
        image_size: `(height, width)` tuple or `None`. Output image size;
            `None` skips the resize. Defaults to `None`.
        scale: float or per-channel tuple. Multiplies the pixels. Defaults
            to `1 / 127.5`.
        offset: float or per-channel tuple. Added after the scale. Defaults
            to `-1.0`.
        crop_to_aspect_ratio: bool. Crops the largest centred window of the
            target aspect ratio before resizing, so no image is distorted.
            Defaults to `True`.
        pad_to_aspect_ratio: bool. Pads to the target aspect ratio instead
            of cropping. Defaults to `False`.
        interpolation: str. Resize interpolation: `"bilinear"`,
            `"bicubic"` (timm's checkpoints), `"nearest"`, `"lanczos3"`,
            `"lanczos5"`. Defaults to `"bilinear"`.
        antialias: bool. Antialiasing when downsampling. Defaults to
            `False`.
        crop_pct: float or `None`. timm's evaluation crop share in (0, 1],
            such as `0.875`; `None` uses keras-hub's resize. Defaults to
            `None`.
        crop_mode: str. With `crop_pct`: `"center"` (resize the shorter
            edge, then crop) or `"squash"` (resize both edges, then crop).
            Defaults to `"center"`.
        **kwargs: `keras_hub.layers.ImageConverter` arguments.

    Call arguments:
        inputs: uint8 or float images with pixel values in [0, 255].

    Example:

    >>> converter = keras_gmlp.models.GMLPImageConverter(image_size=(8, 8))
    >>> images = np.full((2, 16, 16, 3), 255, "uint8")
    >>> outputs = converter(images)
    >>> tuple(outputs.shape), float(keras.ops.max(outputs))
    ((2, 8, 8, 3), 1.0)

    timm's evaluation transform of its gMLP checkpoints:

    >>> converter = keras_gmlp.models.GMLPImageConverter(
    ...     image_size=(8, 8), interpolation="bicubic", crop_pct=0.875)
    >>> tuple(converter(np.zeros((1, 20, 12, 3), "uint8")).shape)
    (1, 8, 8, 3)
    """

    backbone_cls = GMLPImageBackbone

    def __init__(
        self,
        image_size=None,
        scale=1.0 / 127.5,
        offset=-1.0,
        crop_to_aspect_ratio=True,
        pad_to_aspect_ratio=False,
        interpolation="bilinear",
        antialias=False,
        crop_pct=None,
        crop_mode="center",
        **kwargs,
    ):
        if crop_pct is not None:
            if image_size is None:
                raise ValueError(
                    f"Received crop_pct={crop_pct} without an image_size; "
                    "timm's crop needs the output size."
                )
            if interpolation not in ("bicubic", "bilinear"):
                raise ValueError(
                    f"Received interpolation={interpolation!r} with "
                    "crop_pct; expected 'bicubic' or 'bilinear' (Pillow's "
                    "filters)."
                )
            if not 0.0 < crop_pct <= 1.0 or crop_mode not in (
                "center",
                "squash",
            ):
                raise ValueError(
                    f"Received crop_pct={crop_pct}, crop_mode={crop_mode!r}; "
                    "expected a crop_pct in (0, 1] and crop_mode 'center' "
                    "or 'squash'."
                )
        self.crop_pct = crop_pct
        self.crop_mode = crop_mode
        super().__init__(
            image_size=image_size,
            scale=scale,
            offset=offset,
            crop_to_aspect_ratio=crop_to_aspect_ratio,
            pad_to_aspect_ratio=pad_to_aspect_ratio,
            interpolation=interpolation,
            antialias=antialias,
            **kwargs,
        )

    @property
    def output_dtype(self):
        """The dtype of the images it returns: the compute dtype, except
        float32 for bfloat16.

        keras-hub's pipeline hands the backend its preprocessed batches as
        numpy arrays where it preprocesses in tf.data or grain, and torch
        converts no numpy bfloat16 array; the backbone casts its input to
        its own compute dtype.
        """
        if self.compute_dtype == "bfloat16":
            return "float32"
        return self.compute_dtype

    def _call_python(self, inputs):
        if self.crop_pct is None:
            outputs = super()._call_python(inputs)
            if isinstance(outputs, dict):
                images = outputs["images"]
                return {**outputs, "images": self._cast_output(images)}
            return self._cast_output(outputs)
        if isinstance(inputs, (list, tuple)):
            inputs = np.asarray(inputs)
        if _tensorflow_in_graph():
            import tensorflow as tf

            x = timm_transform(
                tf.cast(inputs, "float32"),
                self.transform_config(),
                (tf.einsum, tf.math.floor, tf.clip_by_value, tf.constant),
            )
            return tf.cast(x, self.output_dtype)
        return self._cast_output(
            transform_images(inputs, self.transform_config())
        )

    def _cast_output(self, images):
        if isinstance(images, np.ndarray):
            return images.astype(self.output_dtype, copy=False)
        if _tensorflow_in_graph():
            import tensorflow as tf

            return tf.cast(images, self.output_dtype)
        return keras.ops.cast(images, self.output_dtype)

    def transform_config(self):
        """The settings `transform_images` reads, as plain Python values."""
        return {
            "image_size": self.image_size,
            "scale": self.scale,
            "offset": self.offset,
            "interpolation": self.interpolation,
            "antialias": self.antialias,
            "crop_to_aspect_ratio": self.crop_to_aspect_ratio,
            "pad_to_aspect_ratio": self.pad_to_aspect_ratio,
            "crop_pct": self.crop_pct,
            "crop_mode": self.crop_mode,
        }

    def get_config(self):
        config = super().get_config()
        config.update({"crop_pct": self.crop_pct, "crop_mode": self.crop_mode})
        return config


def transform_images(images, config):
    """A converter's computation with `keras.ops` alone, in a model graph.

    What `GMLPImageConverter` does to a batch, as backend operations, for
    graphs that are traced and exported (a serving model with the
    preprocessing inside), where the layer's `tf.data` handling does not
    apply.

    Args:
        images: uint8 or float tensor `(batch, height, width, channels)`
            with a known height and width.
        config: dict. `GMLPImageConverter.transform_config()`.

    Returns:
        A float32 tensor.
    """
    ops = keras.ops
    x = ops.cast(images, "float32")
    if config["crop_pct"] is not None:
        return timm_transform(
            x,
            config,
            (ops.einsum, ops.floor, ops.clip, ops.convert_to_tensor),
        )
    if config["image_size"] is not None:
        x = ops.image.resize(
            x,
            config["image_size"],
            interpolation=config["interpolation"],
            antialias=config["antialias"],
            crop_to_aspect_ratio=config["crop_to_aspect_ratio"],
            pad_to_aspect_ratio=config["pad_to_aspect_ratio"],
        )
    return _scale(x, config, ops.convert_to_tensor)


def _channel_array(value, default, rank):
    value = np.asarray(default if value is None else value, "float32")
    return value.reshape((1,) * (rank - 1) + (-1,))


def _scale(x, config, constant):
    rank = len(x.shape)
    scale = constant(_channel_array(config["scale"], 1.0, rank))
    offset = constant(_channel_array(config["offset"], 0.0, rank))
    return x * scale + offset


def timm_transform(x, config, functions):
    """timm's resize, centre crop and scale of float pixels `x`.

    Args:
        x: float32 tensor `(batch, height, width, channels)` or one image.
        config: dict. `GMLPImageConverter.transform_config()`.
        functions: `(einsum, floor, clip, constant)` of the framework that
            runs it.

    Returns:
        The scaled crop, float32.
    """
    from keras_gmlp.models.gmlp_image.timm_preprocessing import timm_resize_plan

    einsum, floor, clip, constant = functions
    batched = len(x.shape) == 4
    height, width = x.shape[-3], x.shape[-2]
    if height is None or width is None:
        raise ValueError(
            f"Received images of shape {tuple(x.shape)}; timm's crop "
            "(crop_pct) needs their height and width when traced."
        )
    plan = timm_resize_plan(
        (int(height), int(width)),
        config["image_size"],
        config["crop_pct"],
        config["interpolation"],
        config["crop_mode"],
    )
    prefix = "b" if batched else ""
    for axis, matrix in plan:
        spec = f"{prefix}hwc,oh->{prefix}owc"
        if axis == 1:
            spec = f"{prefix}hwc,ow->{prefix}hoc"
        matrix = constant(matrix)
        x = clip(floor(einsum(spec, x, matrix) + 0.5), 0.0, 255.0)
    return _scale(x, config, constant)
