import keras
import numpy as np
from keras_hub.layers import ImageConverter

from keras_gmlp.models.gmlp_image_backbone import GMLPImageBackbone


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

    def _call_python(self, inputs):
        if self.crop_pct is None:
            return super()._call_python(inputs)
        if isinstance(inputs, (list, tuple)):
            inputs = np.asarray(inputs)
        if _tensorflow_in_graph():
            import tensorflow as tf

            x = tf.cast(inputs, "float32")
            einsum, floor, clip = tf.einsum, tf.math.floor, tf.clip_by_value
        else:
            x = keras.ops.cast(keras.ops.convert_to_tensor(inputs), "float32")
            einsum, floor, clip = (
                keras.ops.einsum,
                keras.ops.floor,
                keras.ops.clip,
            )
        batched = len(x.shape) == 4
        height, width = x.shape[-3], x.shape[-2]
        if height is None or width is None:
            raise ValueError(
                f"Received images of shape {tuple(x.shape)}; timm's crop "
                "(crop_pct) needs their height and width when traced."
            )
        from keras_gmlp.convert.timm_checkpoint import timm_resize_plan

        plan = timm_resize_plan(
            (height, width),
            self.image_size,
            self.crop_pct,
            self.interpolation,
            self.crop_mode,
        )
        prefix = "b" if batched else ""
        for axis, matrix in plan:
            spec = f"{prefix}hwc,oh->{prefix}owc"
            if axis == 1:
                spec = f"{prefix}hwc,ow->{prefix}hoc"
            x = clip(floor(einsum(spec, x, matrix) + 0.5), 0.0, 255.0)
        scale = 1.0 if self.scale is None else self.scale
        offset = 0.0 if self.offset is None else self.offset
        scale = self._expand_non_channel_dims(scale, x)
        offset = self._expand_non_channel_dims(offset, x)
        x, scale = self._convert_types(x, scale, self.compute_dtype)
        x, offset = self._convert_types(x, offset, x.dtype)
        return x * scale + offset

    def get_config(self):
        config = super().get_config()
        config.update({"crop_pct": self.crop_pct, "crop_mode": self.crop_mode})
        return config
