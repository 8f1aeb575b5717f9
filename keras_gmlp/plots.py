"""Plots of a run: training curves and learned spatial filters (Figure 3).

Uses matplotlib's non-interactive Agg backend; imports nothing else heavy.
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

    >>> plot_history({"loss": [1.0, 0.5], "val_loss": [1.1, 0.7]}, "c.png")
    ['loss']
    """
    metrics = [
        k for k in history if not k.startswith("val_") and k != "learning_rate"
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
    weight = keras.ops.convert_to_numpy(
        spatial_gating_unit.spatial_weight(length)
    ).astype("float32")
    bad = [t for t in tokens if not 0 <= t < length]
    if bad:
        raise ValueError(f"tokens {bad} are outside [0, {length}).")
    return weight[list(tokens)].reshape(len(tokens), rows, columns)


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
    block_layers = [
        layer for layer in model.layers if layer.name.startswith("block_")
    ]
    if not block_layers:
        raise ValueError(f"Model {model.name!r} has no layers named block_i.")
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
