import keras
import numpy as np
import pytest

from keras_gmlp.layers import DropPath


def test_inference_is_identity(rng):
    x = rng.normal(size=(8, 3, 4)).astype("float32")
    output = DropPath(0.7)(x, training=False)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(output), x)


def test_drops_whole_samples_and_rescales():
    x = np.ones((2000, 3, 4), "float32")
    output = keras.ops.convert_to_numpy(
        DropPath(0.25, seed=3)(x, training=True)
    )
    per_sample = output.reshape(2000, -1)
    # Each sample is all zero or all 1 / (1 - rate).
    assert np.all(per_sample.min(1) == per_sample.max(1))
    np.testing.assert_allclose(
        np.unique(per_sample), [0.0, 1.0 / 0.75], rtol=1e-6
    )
    dropped = np.mean(per_sample[:, 0] == 0.0)
    assert abs(dropped - 0.25) < 0.04
    assert abs(output.mean() - 1.0) < 0.06


@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_invalid_rate(rate):
    with pytest.raises(ValueError, match=f"rate={rate}"):
        DropPath(rate)
