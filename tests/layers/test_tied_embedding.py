import keras
import numpy as np

from keras_gmlp.layers import TiedEmbedding


def test_reverse_uses_transposed_embeddings(rng):
    layer = TiedEmbedding(11, 4)
    ids = np.array([[1, 2, 3]], "int32")
    vectors = keras.ops.convert_to_numpy(layer(ids))
    table = keras.ops.convert_to_numpy(layer.embeddings)
    np.testing.assert_array_equal(vectors[0], table[[1, 2, 3]])
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    logits = keras.ops.convert_to_numpy(layer(x, reverse=True))
    np.testing.assert_allclose(logits, x @ table.T, rtol=1e-5, atol=1e-5)


def test_mask_for_ids_passes_through_reverse():
    layer = TiedEmbedding(5, 2, mask_zero=True)
    ids = keras.ops.convert_to_tensor([[3, 0]], "int32")
    mask = keras.ops.convert_to_numpy(layer.compute_mask(ids))
    np.testing.assert_array_equal(mask, [[True, False]])
    vectors = keras.ops.zeros((1, 2, 2))
    assert layer.compute_mask(vectors, None) is None
