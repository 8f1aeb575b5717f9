import math
import os

import keras
import numpy as np
import pytest

from keras_gmlp import models
from keras_gmlp import plots


def tiny_classifier():
    return models.image_classifier(
        num_classes=3,
        image_size=(8, 12),
        patch_size=4,
        num_layers=3,
        hidden_dim=8,
        ffn_dim=16,
    )


def test_plot_history_draws_each_metric_once(tmp_path):
    history = {
        "loss": [1.0, 0.6, 0.4],
        "accuracy": [0.3, 0.6, 0.8],
        "val_loss": [1.1, 0.8, 0.7],
        "val_accuracy": [0.2, 0.5, 0.7],
        "val_top5_accuracy": [0.9, 1.0, 1.0],
    }
    path = tmp_path / "curves.png"
    drawn = plots.plot_history(history, str(path), title="run")
    assert drawn == ["loss", "accuracy", "top5_accuracy"]
    assert path.stat().st_size > 1000


def test_plot_history_rejects_an_empty_history(tmp_path):
    with pytest.raises(ValueError, match="no metrics"):
        plots.plot_history({}, str(tmp_path / "x.png"))


def test_spatial_filters_are_rows_of_w_on_the_grid(rng):
    model = tiny_classifier()
    unit = model.get_layer("block_1").spatial_gating_unit
    weight = rng.normal(size=(6, 6)).astype("float32")
    unit.kernel.assign(weight)
    filters = plots.spatial_filters(unit, (2, 3), [4, 0])
    # Token 4 sits at row 1, column 1 of the 2 x 3 grid; its filter is row
    # 4 of W laid out row-major on the grid.
    np.testing.assert_array_equal(filters[0], weight[4].reshape(2, 3))
    np.testing.assert_array_equal(filters[1], weight[0].reshape(2, 3))
    assert filters[1][0, 2] == weight[0, 2]


def test_spatial_filters_check_grid_and_tokens():
    unit = tiny_classifier().get_layer("block_0").spatial_gating_unit
    with pytest.raises(ValueError, match=r"grid_shape \(3, 3\) has 9 cells"):
        plots.spatial_filters(unit, (3, 3), [0])
    with pytest.raises(ValueError, match=r"tokens \[6\] are outside"):
        plots.spatial_filters(unit, (2, 3), [6])


def test_plot_spatial_filters_of_first_middle_last_block(tmp_path):
    model = tiny_classifier()
    path = tmp_path / "filters.png"
    filters = plots.plot_spatial_filters(model, (2, 3), str(path))
    assert sorted(filters) == [0, 1, 2]
    assert filters[0].shape == (len(plots.default_tokens((2, 3))), 2, 3)
    assert os.path.getsize(path) > 1000


def locality_by_loops(weight, grid_shape, center):
    """spatial_locality's ratio, token by token and cell by cell."""
    rows, columns = grid_shape
    length = rows * columns
    weighted, uniform = [], []
    for i in range(length):
        row = [float(w) for w in weight[i]]
        level = {"median": np.median(row), "mean": np.mean(row)}.get(center, 0)
        masses = [abs(w - level) for w in row]
        if sum(masses) == 0:
            continue
        distances = [
            math.hypot(i // columns - j // columns, i % columns - j % columns)
            for j in range(length)
        ]
        weighted.append(
            sum(m * d for m, d in zip(masses, distances, strict=True))
            / sum(masses)
        )
        uniform.append(sum(distances) / length)
    return np.mean(weighted) / np.mean(uniform)


@pytest.mark.parametrize("center", ["median", "mean", None])
@pytest.mark.parametrize("grid_shape", [(4, 4), (3, 5), (1, 7)])
def test_spatial_locality_matches_a_loop_computation(rng, center, grid_shape):
    length = grid_shape[0] * grid_shape[1]
    weight = rng.normal(size=(length, length)) ** 3
    measured = plots.spatial_locality(weight, grid_shape, center)
    np.testing.assert_allclose(
        measured["ratio"],
        locality_by_loops(weight, grid_shape, center),
        rtol=1e-10,
    )
    assert measured["ratio"] == pytest.approx(
        measured["distance"] / measured["uniform_distance"]
    )


def grid_distances(grid_shape):
    cells = np.indices(grid_shape).reshape(2, -1).T
    return np.linalg.norm(cells[:, None] - cells[None], axis=-1)


@pytest.mark.parametrize("center", ["median", "mean", None])
def test_spatial_locality_of_known_filters(rng, center):
    grid = (8, 8)
    distance = grid_distances(grid)
    # Identity and a 3 x 3 "convolution" plus an offset: local.
    identity = plots.spatial_locality(np.eye(64), grid, center)["ratio"]
    banded = np.where(distance < 1.5, 1.0, 0.0) + 0.3
    local = plots.spatial_locality(banded, grid, center)["ratio"]
    # Weight only on the tokens farthest from each token: anti-local.
    far = (distance >= distance.max(axis=1, keepdims=True) - 1).astype(float)
    far_ratio = plots.spatial_locality(far, grid, center)["ratio"]
    # Random weights, unrelated to the grid: no preference.
    noise = rng.normal(size=(64, 64))
    noise_ratio = plots.spatial_locality(noise, grid, center)["ratio"]
    if center == "median":
        assert identity == 0.0 and local < 0.35
    elif center is None:
        assert identity == 0.0 and local > 0.7  # the offset hides it
    else:  # the mean spreads the peak's -1/n over every token
        assert 0.5 < identity < 0.55 and local < 0.7
    assert far_ratio > 1.3
    assert noise_ratio == pytest.approx(1.0, abs=0.05)


def test_spatial_locality_of_constant_weights():
    constant = np.full((12, 12), 0.7)
    uncentred = plots.spatial_locality(constant, (3, 4), center=None)
    assert uncentred["ratio"] == pytest.approx(1.0, rel=1e-12)
    # Centred, a constant row has no mass: no preference, no number.
    for center in ("median", "mean"):
        centred = plots.spatial_locality(constant, (3, 4), center=center)
        assert math.isnan(centred["ratio"])
        assert centred["uniform_distance"] == pytest.approx(
            uncentred["uniform_distance"]
        )


def test_spatial_locality_checks_its_arguments():
    with pytest.raises(ValueError, match=r"expected \(6, 6\)"):
        plots.spatial_locality(np.eye(4), (2, 3))
    with pytest.raises(ValueError, match="center="):
        plots.spatial_locality(np.eye(6), (2, 3), center="max")


@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_block_locality_reads_each_blocks_full_w(rng, spatial):
    model = models.image_classifier(
        num_classes=3,
        image_size=(8, 12),
        patch_size=4,
        num_layers=2,
        hidden_dim=8,
        ffn_dim=16,
        spatial=spatial,
    )
    assert plots.patch_grid(model) == (2, 3)
    # Near-zero random W at initialisation: no preference for distance.
    for ratio in plots.block_locality(model, (2, 3)):
        assert 0.5 < ratio < 1.5
    units = [model.get_layer(f"block_{i}").spatial_gating_unit for i in (0, 1)]
    if spatial == "dense":
        kernel = rng.normal(size=(6, 6))
    else:
        # W[i, j] = w[i - j]: a peak at offset 0 is the identity.
        kernel = np.zeros(11)
        kernel[5] = 1.0
    units[0].kernel.assign(kernel.astype("float32"))
    weight = keras.ops.convert_to_numpy(units[0].spatial_weight())
    expected = plots.spatial_locality(weight, (2, 3))["ratio"]
    ratios = plots.block_locality(model, (2, 3))
    assert len(ratios) == 2
    assert ratios[0] == pytest.approx(expected, rel=1e-6)
    if spatial == "toeplitz":
        assert ratios[0] == 0.0
