import keras
from keras_hub.layers import ImageConverter

from keras_gmlp.models.gmlp_image_backbone import GMLPImageBackbone


@keras.saving.register_keras_serializable(package="keras_gmlp")
class GMLPImageConverter(ImageConverter):
    """Turns raw images into gMLP image backbone inputs.

    Resizes the images to the model's size and rescales pixel values from
    [0, 255] to [-1, 1], `x / 127.5 - 1`: timm's normalisation of its gMLP
    checkpoints (mean = std = 0.5 of [0, 1] pixels) and the recipes'.
    Takes batched `(batch, height, width, channels)` or single images,
    inside or outside `tf.data`.

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
        **kwargs: `keras_hub.layers.ImageConverter` arguments.

    Call arguments:
        inputs: uint8 or float images with pixel values in [0, 255].

    Example:

    >>> converter = keras_gmlp.models.GMLPImageConverter(image_size=(8, 8))
    >>> images = np.full((2, 16, 16, 3), 255, "uint8")
    >>> outputs = converter(images)
    >>> tuple(outputs.shape), float(keras.ops.max(outputs))
    ((2, 8, 8, 3), 1.0)
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
        **kwargs,
    ):
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
