import keras
import numpy as np
import pytest

from keras_gmlp.layers import PatchEmbedding
from tests.layer_test import LayerTestCase


def test_row_major_tokens_match_numpy(rng):
    images = rng.normal(size=(2, 8, 12, 3)).astype("float32")
    layer = PatchEmbedding(5, patch_size=(4, 3))
    tokens = keras.ops.convert_to_numpy(layer(images))
    assert tokens.shape == (2, 2 * 4, 5)
    kernel = keras.ops.convert_to_numpy(layer.projection.kernel)
    bias = keras.ops.convert_to_numpy(layer.projection.bias)
    for row in range(2):
        for column in range(4):
            patch = images[
                :, row * 4 : row * 4 + 4, column * 3 : column * 3 + 3
            ]
            expected = np.einsum("bhwc,hwcd->bd", patch, kernel) + bias
            np.testing.assert_allclose(
                tokens[:, row * 4 + column], expected, rtol=1e-4, atol=1e-4
            )


def test_indivisible_image_raises_with_values():
    layer = PatchEmbedding(4, patch_size=16)
    with pytest.raises(
        ValueError, match="225 is not divisible by patch size 16"
    ):
        layer.build((None, 225, 224, 3))


@pytest.mark.parametrize("patch_size", [0, (4,), (4, -1), 2.5])
def test_invalid_patch_size(patch_size):
    with pytest.raises(ValueError, match="patch_size"):
        PatchEmbedding(4, patch_size=patch_size)


class PatchEmbeddingLayerTest(LayerTestCase):
    def test_layer_behaviors(self):
        rng = np.random.default_rng(0)
        self.run_layer_test(
            cls=PatchEmbedding,
            init_kwargs={"hidden_dim": 5, "patch_size": (2, 3)},
            input_data=rng.normal(size=(2, 4, 6, 3)).astype("float32"),
            expected_output_shape=(2, 4, 5),
            expected_num_trainable_weights=2,
        )
