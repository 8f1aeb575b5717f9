"""timm's evaluation transform of uint8 images, in numpy.

Pillow's antialiased resize (its 8-bit fixed-point arithmetic), the centre
crop and the normalisation of timm's `create_transform(**data_config)`, so
that uint8 images give a timm checkpoint's predictions.
`timm_resize_plan` writes the resize and crop as two matrix products, the
form `keras_gmlp.models.GMLPImageConverter` runs in a graph.
"""

import math

import numpy as np

# timm's evaluation preprocessing of its gMLP checkpoints, used for what a
# checkpoint's `config.json` does not say.
DEFAULT_DATA_CONFIG = {
    "interpolation": "bicubic",
    "crop_pct": 0.875,
    "crop_mode": "center",
    "mean": (0.5, 0.5, 0.5),
    "std": (0.5, 0.5, 0.5),
}


def pair(value):
    """`(value, value)` for an int, else the ints of `value` as a tuple."""
    if isinstance(value, int):
        return (value, value)
    return tuple(int(v) for v in value)


# Pillow's fixed-point resampling of 8-bit images (`libImaging/Resample.c`):
# coefficients scaled by 2**22, rounded, summed with a rounding offset.
PRECISION_BITS = 32 - 8 - 2


def _bicubic(x):
    # Keys' cubic with a = -0.5, as Pillow evaluates it.
    a = -0.5
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _bilinear(x):
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


FILTERS = {"bicubic": (_bicubic, 2.0), "bilinear": (_bilinear, 1.0)}


def _resample_matrix(in_size, out_size, interpolation):
    """The `(out_size, in_size)` integer weights of one resampling pass."""
    filter_fn, support = FILTERS[interpolation]
    scale = in_size / out_size
    filter_scale = max(scale, 1.0)  # antialiasing when downsampling
    support = support * filter_scale
    inverse_scale = 1.0 / filter_scale
    matrix = np.zeros((out_size, in_size), np.int64)
    for out in range(out_size):
        center = (out + 0.5) * scale
        low = max(int(center - support + 0.5), 0)
        high = min(int(center + support + 0.5), in_size)
        weights = filter_fn(
            (np.arange(low, high) - center + 0.5) * inverse_scale
        )
        total = 0.0
        for weight in weights:  # in order, as Pillow sums
            total += weight
        if total != 0.0:
            weights = weights / total
        scaled = weights * (1 << PRECISION_BITS)
        matrix[out, low:high] = np.trunc(
            np.where(weights < 0, scaled - 0.5, scaled + 0.5)
        )
    return matrix


def _resample_pass(image, matrix, axis):
    """One Pillow pass along `axis` (0 rows, 1 columns) of a uint8 image."""
    moved = np.moveaxis(image.astype(np.int64), axis, -1)
    total = moved @ matrix.T + (1 << (PRECISION_BITS - 1))
    result = np.clip(total >> PRECISION_BITS, 0, 255).astype(np.uint8)
    return np.moveaxis(result, -1, axis)


def _resize(image, size, interpolation):
    # Pillow (13) resamples along the width first, unless the height
    # shrinks by more than twice as many pixels as the width does; each
    # pass rounds to uint8, so the order shows in the result.
    shrink_height = image.shape[0] - size[0]
    shrink_width = image.shape[1] - size[1]
    axes = (1, 0)
    if shrink_height > 0 and shrink_height > 2 * shrink_width:
        axes = (0, 1)
    for axis in axes:
        if image.shape[axis] != size[axis]:
            matrix = _resample_matrix(
                image.shape[axis], size[axis], interpolation
            )
            image = _resample_pass(image, matrix, axis)
    return image


def _resize_size(image_size, crop_size, crop_pct, crop_mode):
    """timm's evaluation resize target (`transforms_imagenet_eval`)."""
    height, width = image_size
    scale = [math.floor(size / crop_pct) for size in crop_size]
    if crop_mode == "squash":
        return tuple(scale)
    if scale[0] == scale[1]:
        # torchvision's Resize(int): the shorter edge to `scale`.
        short, long = sorted((height, width))
        new_long = int(scale[0] * long / short)
        if width <= height:
            return (new_long, scale[0])
        return (scale[0], new_long)
    # timm's ResizeKeepRatio: the edge with the smaller ratio to its target.
    ratio = min(height / scale[0], width / scale[1])
    return (round(height / ratio), round(width / ratio))


def timm_resize_plan(
    image_size, crop_size, crop_pct, interpolation="bicubic", crop_mode="center"
):
    """timm's evaluation resize and centre crop as two matrix products.

    Pillow resamples 8-bit images in two separable passes, each a matrix
    product with fixed-point weights followed by rounding to uint8; the
    centre crop keeps rows of those matrices. Applying the returned passes
    in order, each `x -> clip(floor(matrix @ x + 0.5), 0, 255)` along its
    axis, gives the crop of `apply_timm_preprocessing` before the
    normalisation (equal up to float32 rounding of the sums).

    Args:
        image_size: `(height, width)` of the input images.
        crop_size: `(height, width)` of the output.
        crop_pct: float. The crop's share of the resized image.
        interpolation: str. `"bicubic"` or `"bilinear"`. Defaults to
            `"bicubic"`.
        crop_mode: str. `"center"` or `"squash"`. Defaults to `"center"`.

    Returns:
        A list of `(axis, matrix)` pairs, axis 0 for the height and 1 for
        the width, each matrix float32 `(output size, input size)`.

    Example:

    >>> from keras_gmlp.models.gmlp_image import timm_preprocessing
    >>> plan = timm_preprocessing.timm_resize_plan((40, 30), (16, 16), 0.875)
    >>> [(axis, matrix.shape) for axis, matrix in plan]
    [(1, (16, 30)), (0, (16, 40))]
    """
    image_size = pair(image_size)
    crop_size = pair(crop_size)
    _check_data_config(
        {
            "interpolation": interpolation,
            "crop_pct": crop_pct,
            "crop_mode": crop_mode,
        }
    )
    size = _resize_size(image_size, crop_size, crop_pct, crop_mode)
    # The same pass order as `_resize`.
    shrink_height = image_size[0] - size[0]
    shrink_width = image_size[1] - size[1]
    axes = (1, 0)
    if shrink_height > 0 and shrink_height > 2 * shrink_width:
        axes = (0, 1)
    plan = []
    for axis in axes:
        start = int(round((size[axis] - crop_size[axis]) / 2.0))
        if image_size[axis] == size[axis]:
            if size[axis] == crop_size[axis]:
                continue
            matrix = np.eye(size[axis], dtype=np.int64) << PRECISION_BITS
        else:
            matrix = _resample_matrix(
                image_size[axis], size[axis], interpolation
            )
        matrix = matrix[start : start + crop_size[axis]]
        plan.append((axis, (matrix / (1 << PRECISION_BITS)).astype("float32")))
    return plan


def _check_data_config(data_config):
    interpolation = data_config["interpolation"]
    if interpolation not in FILTERS:
        raise ValueError(
            f"Received interpolation={interpolation!r}; expected one of "
            f"{sorted(FILTERS)}."
        )
    crop_mode = data_config.get("crop_mode") or "center"
    if crop_mode not in ("center", "squash"):
        raise ValueError(
            f"Received crop_mode={crop_mode!r}; expected 'center' or 'squash'."
        )
    crop_pct = data_config.get("crop_pct") or DEFAULT_DATA_CONFIG["crop_pct"]
    if not 0.0 < crop_pct <= 1.0:
        raise ValueError(
            f"Received crop_pct={crop_pct}; expected a value in (0, 1]."
        )
    return interpolation, crop_mode, crop_pct


def _preprocess_one(image, data_config):
    interpolation, crop_mode, crop_pct = _check_data_config(data_config)
    channels, crop_height, crop_width = data_config["input_size"]
    if image.ndim != 3 or image.shape[-1] != channels:
        raise ValueError(
            f"Received an image of shape {image.shape}; expected (height, "
            f"width, {channels})."
        )
    size = _resize_size(
        image.shape[:2], (crop_height, crop_width), crop_pct, crop_mode
    )
    image = _resize(image, size, interpolation)
    # torchvision's CenterCrop.
    top = int(round((image.shape[0] - crop_height) / 2.0))
    left = int(round((image.shape[1] - crop_width) / 2.0))
    image = image[top : top + crop_height, left : left + crop_width]
    mean = np.asarray(data_config["mean"], "float32")
    std = np.asarray(data_config["std"], "float32")
    return (image.astype("float32") / np.float32(255.0) - mean) / std


def apply_timm_preprocessing(images, data_config):
    """Applies timm's evaluation transform to uint8 images.

    The same steps and rounding as timm's
    `create_transform(**data_config)` on PIL images: resize (Pillow's
    antialiased bicubic or bilinear, in 8-bit fixed point) so the crop is
    `crop_pct` of the resized image, centre crop to `input_size`, scale to
    [0, 1], subtract `mean` and divide by `std`. The output is the
    channels-last input of the Keras model.

    Args:
        images: uint8 array `(height, width, channels)`, a batch
            `(batch, height, width, channels)`, or a list of images of any
            sizes.
        data_config: dict. See `timm_data_config`.

    Returns:
        A float32 array `(batch, crop_height, crop_width, channels)`, or
        `(crop_height, crop_width, channels)` for a single image.

    Example:

    >>> from keras_gmlp.models.gmlp_image.timm_preprocessing import (
    ...     apply_timm_preprocessing,
    ... )
    >>> config = {"input_size": (3, 32, 32), "interpolation": "bicubic",
    ...           "crop_pct": 0.875, "mean": (0.5,) * 3, "std": (0.5,) * 3}
    >>> images = np.zeros((2, 50, 40, 3), "uint8")
    >>> apply_timm_preprocessing(images, config).shape
    (2, 32, 32, 3)
    """
    single = isinstance(images, np.ndarray) and images.ndim == 3
    batch = [images] if single else list(images)
    for image in batch:
        if np.asarray(image).dtype != np.uint8:
            raise ValueError(
                f"Received images of dtype {np.asarray(image).dtype}; "
                "expected uint8 pixels, as timm's transform reads them."
            )
    outputs = [_preprocess_one(np.asarray(x), data_config) for x in batch]
    return outputs[0] if single else np.stack(outputs)
