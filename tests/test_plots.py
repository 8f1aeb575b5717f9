import os

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
