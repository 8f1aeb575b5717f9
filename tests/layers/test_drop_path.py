import keras
import numpy as np
import pytest

from keras_gmlp.layers import DropPath
from tests.layer_test import LayerTestCase


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


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("rate", [0.0017, 0.0259, 0.1])
def test_drop_rate_in_every_policy(policy, rate):
    # 0.0017 and 0.0259 are gMLP-S's rates in its first and last blocks.
    samples = 200_000
    layer = DropPath(rate, seed=7, dtype=policy)
    output = layer(np.ones((samples, 1), "float32"), training=True)
    output = keras.ops.convert_to_numpy(keras.ops.cast(output, "float32"))
    dropped = int(np.sum(output == 0.0))
    # Five standard deviations of the binomial count.
    tolerance = 5.0 * np.sqrt(samples * rate * (1.0 - rate))
    assert abs(dropped - samples * rate) < tolerance, (
        f"dropped {dropped} of {samples} samples at rate {rate}; expected "
        f"{samples * rate:.0f} +- {tolerance:.0f}"
    )
    # Survivors are scaled by 1 / (1 - rate), rounded to the compute dtype.
    scale = keras.ops.cast(1.0 / (1.0 - rate), layer.compute_dtype)
    scale = float(keras.ops.convert_to_numpy(keras.ops.cast(scale, "float32")))
    np.testing.assert_array_equal(np.unique(output), [0.0, scale])


class DropPathLayerTest(LayerTestCase):
    def test_layer_behaviors(self):
        rng = np.random.default_rng(0)
        self.run_layer_test(
            cls=DropPath,
            init_kwargs={"rate": 0.2, "seed": 5},
            input_data=rng.normal(size=(4, 3, 2)).astype("float32"),
            expected_output_shape=(4, 3, 2),
            expected_num_non_trainable_variables=1,  # the seed
        )
