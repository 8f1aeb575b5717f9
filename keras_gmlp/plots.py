"""Plots of a run: training curves and learned spatial filters (Figure 3).

Also measures how local the learned spatial filters are
(`spatial_locality`, `block_locality`). Uses matplotlib's non-interactive
Agg backend; imports nothing else heavy.
"""

import math

import keras
import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_history(history, path, title=None):
    """Draws training curves: one panel per metric, train and validation.

    Args:
        history: dict. `{metric: [value per epoch]}`, as Keras' `History`
            (`val_` keys are drawn on their metric's panel).
        path: str. The image file to write (e.g. `curves.png`).
        title: str or `None`. A figure title.

    Returns:
        The list of metric names drawn, one per panel.

    Example:

    >>> import os, tempfile
    >>> from keras_gmlp.plots import plot_history
    >>> path = os.path.join(tempfile.mkdtemp(), "curves.png")
    >>> history = {"loss": [1.0, 0.5], "val_loss": [1.1, 0.7]}
    >>> plot_history(history, path)
    ['loss']
    >>> os.path.exists(path)
    True
    """
    metrics = [
        k
        for k in history
        if not k.startswith("val_")
        and k not in ("learning_rate", "train_seconds")
    ]
    metrics += [
        k[4:] for k in history if k.startswith("val_") and k[4:] not in metrics
    ]
    if not metrics:
        raise ValueError(f"history has no metrics to plot: {history!r}")
    plt = _pyplot()
    columns = min(len(metrics), 3)
    rows = math.ceil(len(metrics) / columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(4.5 * columns, 3.4 * rows), squeeze=False
    )
    for axis, metric in zip(axes.flat, metrics, strict=False):
        for key, label in ((metric, "train"), (f"val_{metric}", "validation")):
            if key in history:
                values = history[key]
                axis.plot(range(1, len(values) + 1), values, label=label)
        axis.set_title(metric)
        axis.set_xlabel("epoch")
        axis.grid(alpha=0.3)
        axis.legend()
    for axis in list(axes.flat)[len(metrics) :]:
        axis.axis("off")
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return metrics


def spatial_filters(spatial_gating_unit, grid_shape, tokens):
    """Rows of a spatial weight `W`, reshaped to the patch grid.

    Row `i` of `W` holds the weights with which token `i` mixes every
    token: drawn on the image's grid of patches it is the token's learned
    spatial filter.

    Args:
        spatial_gating_unit: `SpatialGatingUnit`, built.
        grid_shape: `(rows, columns)` of the patch grid, with
            `rows * columns == sequence_length`.
        tokens: list of int. Token indices (row-major on the grid).

    Returns:
        A numpy array `(len(tokens), rows, columns)`.
    """
    rows, columns = grid_shape
    length = spatial_gating_unit.sequence_length
    if rows * columns != length:
        raise ValueError(
            f"grid_shape {grid_shape} has {rows * columns} cells; the "
            f"spatial gating unit has {length} tokens."
        )
    weight = _spatial_weight(spatial_gating_unit)
    bad = [t for t in tokens if not 0 <= t < length]
    if bad:
        raise ValueError(f"tokens {bad} are outside [0, {length}).")
    return weight[list(tokens)].reshape(len(tokens), rows, columns)


def _spatial_weight(spatial_gating_unit):
    """The unit's full `(n, n)` `W` (dense or Toeplitz) as numpy."""
    return keras.ops.convert_to_numpy(
        spatial_gating_unit.spatial_weight(spatial_gating_unit.sequence_length)
    ).astype("float32")


def _block_layers(model):
    # A classifier's blocks live in its backbone.
    model = getattr(model, "backbone", model)
    layers = [
        layer for layer in model.layers if layer.name.startswith("block_")
    ]
    if not layers:
        raise ValueError(f"Model {model.name!r} has no layers named block_i.")
    return layers


def spatial_locality(weight, grid_shape, center="median"):
    """How close to its own token each row of a spatial weight `W` weighs.

    For token `i`: the mean Euclidean distance (in grid cells) from `i` to
    the tokens `j` of the grid (`j = i` included, at distance 0), weighted
    by `|W[i, j] - c_i|`, `c_i` the row's median (its background level);
    averaged over tokens. The reference is the same mean with uniform
    weights. A `ratio` below 1 means the filters concentrate near their
    token (local, convolution-like); about 1, no preference for distance
    (uniform or random weights); above 1, they favour far tokens.

    Args:
        weight: array `(n, n)`. A spatial weight, row `i` mixing into token
            `i` (see `SpatialGatingUnit.spatial_weight`).
        grid_shape: `(rows, columns)` of the token grid,
            `rows * columns == n`, tokens in row-major order; `(1, n)` for a
            sequence.
        center: `"median"`, `"mean"` or `None`. What `c_i` is subtracted
            from each row first, so a constant offset (a global average
            pooling component) does not count; `None` for `c_i = 0`. The
            mean spreads `-W[i, i] / n` over every token of a delta-like row,
            which holds its ratio above about 0.5; the median does not.
            Defaults to `"median"`.

    Returns:
        A dict: `distance` (the weighted mean distance), `uniform_distance`
        (its value for uniform weights) and `ratio` (the first over the
        second). Rows all equal to `c_i` (no preference) are left out of
        both means: `nan` distance and ratio if all are.

    Example:

    >>> from keras_gmlp.plots import spatial_locality
    >>> spatial_locality(np.eye(16), (4, 4))["ratio"]
    0.0
    """
    if center not in ("median", "mean", None):
        raise ValueError(
            f"Received center={center!r}; expected 'median', 'mean' or None."
        )
    weight = np.asarray(weight, dtype="float64")
    rows, columns = grid_shape
    length = rows * columns
    if weight.shape != (length, length):
        raise ValueError(
            f"weight of shape {weight.shape} does not match grid_shape "
            f"{tuple(grid_shape)}: expected ({length}, {length})."
        )
    mass = np.abs(weight)
    if center is not None:
        level = getattr(np, center)(weight, axis=1, keepdims=True)
        mass = np.abs(weight - level)
    total = mass.sum(axis=1)
    # A constant row centred on its mean leaves rounding errors: not mass.
    kept = total > 1e-9 * np.abs(weight).sum(axis=1)
    cells = np.stack(np.divmod(np.arange(length), columns), axis=-1)
    distance = np.linalg.norm(cells[:, None] - cells[None, :], axis=-1)
    if not kept.any():
        return {
            "distance": float("nan"),
            "uniform_distance": float(distance.mean()),
            "ratio": float("nan"),
        }
    weighted = (mass * distance).sum(axis=1)[kept] / total[kept]
    mean = float(weighted.mean())
    uniform = float(distance.mean(axis=1)[kept].mean())
    return {
        "distance": mean,
        "uniform_distance": uniform,
        "ratio": mean / uniform if uniform else float("nan"),
    }


def block_locality(model, grid_shape, center="median"):
    """`spatial_locality` ratio of every block's spatial weight.

    Args:
        model: a model whose gMLP blocks are layers named `block_{i}` (the
            image classifiers of `keras_gmlp.models`).
        grid_shape: `(rows, columns)` of the patch grid.
        center: `"median"`, `"mean"` or `None`. See `spatial_locality`.
            Defaults to `"median"`.

    Returns:
        A list of ratios, one per block in order: below 1 for local
        filters, about 1 at initialisation (random near-zero `W`).
    """
    return [
        spatial_locality(
            _spatial_weight(layer.spatial_gating_unit), grid_shape, center
        )["ratio"]
        for layer in _block_layers(model)
    ]


def patch_grid(model):
    """`(rows, columns)` of an image classifier's patch grid.

    Args:
        model: an image classifier of `keras_gmlp.models.image_classifier`
            (its patch embedding is the layer named `stem`).
    """
    height, width = model.inputs[0].shape[1:3]
    patch = model.get_layer("stem").patch_size
    return (height // patch[0], width // patch[1])


def default_tokens(grid_shape):
    """Four tokens spread over the grid: corners' insides and the centre."""
    rows, columns = grid_shape
    points = [
        (rows // 4, columns // 4),
        (rows // 4, (3 * columns) // 4),
        (rows // 2, columns // 2),
        ((3 * rows) // 4, (3 * columns) // 4),
    ]
    tokens = []
    for row, column in points:
        token = row * columns + column
        if token not in tokens:
            tokens.append(token)
    return tokens


def plot_spatial_filters(model, grid_shape, path, tokens=None, blocks=None):
    """Draws learned spatial weights as images (the paper's Figure 3).

    One row of panels per block, one panel per token: the token's row of
    the block's `W` on the patch grid, with the token marked. Trained gMLP
    vision models learn local, convolution-like filters.

    Args:
        model: an image classifier of `keras_gmlp.models.image_classifier`
            (its blocks are layers named `block_{i}`).
        grid_shape: `(rows, columns)` of the patch grid.
        path: str. The image file to write.
        tokens: list of int or `None`. Tokens to draw. Defaults to
            `default_tokens(grid_shape)`.
        blocks: list of int or `None`. Block indices. Defaults to the
            first, middle and last block.

    Returns:
        A dict `{block index: filters (tokens, rows, columns)}`.
    """
    block_layers = _block_layers(model)
    if blocks is None:
        count = len(block_layers)
        blocks = sorted({0, count // 2, count - 1})
    tokens = tokens or default_tokens(grid_shape)
    filters = {
        index: spatial_filters(
            block_layers[index].spatial_gating_unit, grid_shape, tokens
        )
        for index in blocks
    }
    plt = _pyplot()
    figure, axes = plt.subplots(
        len(blocks),
        len(tokens),
        figsize=(2.2 * len(tokens), 2.2 * len(blocks)),
        squeeze=False,
    )
    columns = grid_shape[1]
    for row, index in enumerate(blocks):
        for column, token in enumerate(tokens):
            axis = axes[row, column]
            image = filters[index][column]
            limit = float(np.abs(image).max()) or 1.0
            axis.imshow(image, cmap="RdBu_r", vmin=-limit, vmax=limit)
            axis.scatter(
                [token % columns], [token // columns], marker="x", c="k", s=12
            )
            axis.set_xticks([])
            axis.set_yticks([])
            if row == 0:
                axis.set_title(f"token {token}", fontsize=9)
            if column == 0:
                axis.set_ylabel(f"block {index}", fontsize=9)
    figure.suptitle("Spatial weights W[token, :] on the patch grid")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return filters
