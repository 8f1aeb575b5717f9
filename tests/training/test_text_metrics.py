import numpy as np
import pytest
from sklearn.metrics import f1_score

from keras_gmlp.training.text_metrics import binary_f1


def test_binary_f1_matches_scikit_learn(rng):
    labels = rng.integers(0, 2, 200)
    predictions = rng.integers(0, 2, 200)
    assert binary_f1(labels, predictions) == pytest.approx(
        f1_score(labels, predictions)
    )
    assert binary_f1(np.array([1, 0]), np.array([0, 0])) == 0.0
