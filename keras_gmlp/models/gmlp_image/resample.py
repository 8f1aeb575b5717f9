"""Dense spatial weights of an image gMLP at another image size.

A gMLP image model's spatial gating units hold an `n x n` weight and an
`n` bias over the `n = grid_height * grid_width` patch tokens, so the image
size is fixed when the model is built. As ViT resamples its position
embeddings, the weight is resampled here as a function of the token grid:
the weight `W[(y, x), (y', x')]` on the four grid axes, the bias `b[(y, x)]`
on two. Each input token of the larger grid then stands for fewer pixels,
so the weight is scaled by `n / n_new` to keep the sum over input tokens
(the response to a smooth input) unchanged. At the same grid size the
interpolation matrices are the identity and so is the result.
"""

import numpy as np

from keras_gmlp.layers.patch_embedding import pair


def _cubic(x):
    # Keys' cubic convolution, a = -0.5 (as bicubic image resizing).
    a = -0.5
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = a * (((x - 5.0) * x + 8.0) * x - 4.0)
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _linear(x):
    return np.maximum(1.0 - np.abs(x), 0.0)


KERNELS = {"bicubic": (_cubic, 2), "bilinear": (_linear, 1)}


def interpolation_matrix(source_size, target_size, interpolation="bicubic"):
    """The `(target_size, source_size)` matrix of a 1-D resampling.

    Sample centres are aligned (`(i + 0.5) * source / target - 0.5`) and
    the edges repeat their values; each row sums to 1.

    Args:
        source_size: int. Points of the input.
        target_size: int. Points of the output.
        interpolation: str. `"bicubic"` or `"bilinear"`. Defaults to
            `"bicubic"`.

    Returns:
        A float64 numpy array.

    Example:

    >>> from keras_gmlp.models.gmlp_image.resample import interpolation_matrix
    >>> bool((interpolation_matrix(4, 4) == np.eye(4)).all())
    True
    """
    if interpolation not in KERNELS:
        raise ValueError(
            f"Received interpolation={interpolation!r}; expected one of "
            f"{sorted(KERNELS)}."
        )
    kernel, support = KERNELS[interpolation]
    matrix = np.zeros((target_size, source_size))
    for row in range(target_size):
        centre = (row + 0.5) * source_size / target_size - 0.5
        base = int(np.floor(centre))
        for tap in range(base - support + 1, base + support + 1):
            weight = float(kernel(centre - tap))
            if weight:
                matrix[row, min(max(tap, 0), source_size - 1)] += weight
    return matrix / matrix.sum(axis=1, keepdims=True)


def resample_spatial_weights(
    kernel, bias, source_grid, target_grid, interpolation="bicubic"
):
    """Resamples a dense spatial weight and bias to another token grid.

    Args:
        kernel: array `(n, n)`, `n = source_grid[0] * source_grid[1]`, the
            output tokens along the first axis (timm's and keras-gmlp's
            layout), tokens in row-major grid order.
        bias: array `(n,)`.
        source_grid: int or `(rows, columns)`. The token grid of `kernel`.
        target_grid: int or `(rows, columns)`. The new token grid.
        interpolation: str. `"bicubic"` or `"bilinear"`. Defaults to
            `"bicubic"`.

    Returns:
        `(kernel, bias)` float32 arrays of the target grid's size.

    Example:

    >>> from keras_gmlp.models.gmlp_image.resample import (
    ...     resample_spatial_weights,
    ... )
    >>> kernel, bias = resample_spatial_weights(
    ...     np.eye(4), np.ones(4), (2, 2), (3, 3))
    >>> kernel.shape, bias.shape
    ((9, 9), (9,))
    """
    source = pair(source_grid, "source_grid")
    target = pair(target_grid, "target_grid")
    kernel = np.asarray(kernel, "float64")
    bias = np.asarray(bias, "float64")
    count = source[0] * source[1]
    if kernel.shape != (count, count) or bias.shape != (count,):
        raise ValueError(
            f"Received a kernel of shape {kernel.shape} and a bias of shape "
            f"{bias.shape}; expected ({count}, {count}) and ({count},) for "
            f"the token grid {source}."
        )
    rows = interpolation_matrix(source[0], target[0], interpolation)
    columns = interpolation_matrix(source[1], target[1], interpolation)
    grid = kernel.reshape(source + source)
    grid = np.einsum(
        "ai,bj,ck,dl,ijkl->abcd", rows, columns, rows, columns, grid
    )
    scale = count / (target[0] * target[1])
    new_count = target[0] * target[1]
    new_kernel = (grid * scale).reshape(new_count, new_count)
    new_bias = np.einsum(
        "ai,bj,ij->ab", rows, columns, bias.reshape(source)
    ).reshape(new_count)
    return new_kernel.astype("float32"), new_bias.astype("float32")


def _grid(backbone):
    return tuple(
        size // patch
        for size, patch in zip(
            backbone.image_size, backbone.patch_size, strict=True
        )
    )


def resize_image_model(model, image_size, interpolation="bicubic"):
    """A copy of a gMLP image backbone or classifier for another image size.

    Every weight is copied; the dense spatial weights and biases are
    resampled with `resample_spatial_weights` from the model's token grid
    to the new one. A classifier's image converter is given the new size.

    Args:
        model: `GMLPImageBackbone` or `GMLPImageClassifier` with dense
            spatial weights.
        image_size: int or `(height, width)`, divisible by the patch size.
        interpolation: str. `"bicubic"` or `"bilinear"`. Defaults to
            `"bicubic"`.

    Returns:
        A new model of the same class.

    Example:

    >>> from keras_gmlp.models.gmlp_image.resample import resize_image_model
    >>> backbone = keras_gmlp.models.GMLPImageBackbone(
    ...     image_size=8, patch_size=4, num_layers=1, hidden_dim=4,
    ...     ffn_dim=8)
    >>> resize_image_model(backbone, 12).output_shape
    (None, 9, 4)
    """
    from keras_gmlp.models.gmlp_image.gmlp_image_backbone import (
        GMLPImageBackbone,
    )
    from keras_gmlp.models.gmlp_image.gmlp_image_classifier import (
        GMLPImageClassifier,
    )

    if isinstance(model, GMLPImageClassifier):
        backbone = resize_image_model(model.backbone, image_size, interpolation)
        config = model.get_config()
        config["backbone"] = backbone
        config["preprocessor"] = None
        preprocessor = model.preprocessor
        if preprocessor is not None:
            preprocessor = preprocessor.__class__.from_config(
                preprocessor.get_config()
            )
            converter = getattr(preprocessor, "image_converter", None)
            if converter is not None and converter.image_size is not None:
                converter.image_size = backbone.image_size
        config["preprocessor"] = preprocessor
        resized = model.__class__.from_config(config)
        for layer in model.layers:
            if layer is model.backbone or layer.name in ("images",):
                continue
            if layer.weights:
                resized.get_layer(layer.name).set_weights(layer.get_weights())
        return resized
    if not isinstance(model, GMLPImageBackbone):
        raise ValueError(
            f"Received a {type(model).__name__}; expected a "
            "GMLPImageBackbone or GMLPImageClassifier."
        )
    if model.spatial != "dense":
        raise ValueError(
            f"Received a backbone with spatial={model.spatial!r}; only "
            "dense spatial weights are resampled over the token grid."
        )
    config = model.get_config()
    config["image_size"] = pair(image_size, "image_size")
    resized = model.__class__.from_config(config)
    source, target = _grid(model), _grid(resized)
    for old, new in zip(model.layers, resized.layers, strict=True):
        if not old.weights:
            continue
        if old.name.startswith("block_"):
            old_unit = old.spatial_gating_unit
            kernel, bias = resample_spatial_weights(
                keras_value(old_unit.kernel),
                keras_value(old_unit.bias),
                source,
                target,
                interpolation,
            )
            values = {id(old_unit.kernel): kernel, id(old_unit.bias): bias}
            for old_weight, new_weight in zip(
                old.weights, new.weights, strict=True
            ):
                value = values.get(id(old_weight))
                if value is None:
                    value = keras_value(old_weight)
                new_weight.assign(value.astype(new_weight.dtype))
        else:
            new.set_weights(old.get_weights())
    return resized


def keras_value(variable):
    """A Keras variable's value as a numpy array."""
    import keras

    return np.asarray(keras.ops.convert_to_numpy(keras.ops.copy(variable)))
