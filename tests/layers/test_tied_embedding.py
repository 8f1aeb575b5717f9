import keras
import numpy as np

from keras_gmlp.layers import TiedEmbedding
from tests.layer_test import LayerTestCase
from tests.layer_test import randomize_weights


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


class TiedEmbeddingLayerTest(LayerTestCase):
    def test_layer_behaviors(self):
        rng = np.random.default_rng(0)
        self.run_layer_test(
            cls=TiedEmbedding,
            init_kwargs={
                "input_dim": 11,
                "output_dim": 4,
                "embeddings_initializer": "he_normal",
                "mask_zero": True,
            },
            input_data=rng.integers(0, 11, size=(2, 6)).astype("int32"),
            expected_output_shape=(2, 6, 4),
            expected_num_trainable_weights=1,
        )

    def test_saved_logits_use_the_same_matrix(self):
        rng = np.random.default_rng(0)
        embedding = TiedEmbedding(11, 4, name="embedding")
        ids = keras.Input(batch_shape=(2, 6), dtype="int32")
        logits = embedding(embedding(ids), reverse=True)
        model = keras.Model(ids, logits)
        randomize_weights(model, rng)
        data = keras.ops.convert_to_tensor(rng.integers(0, 11, size=(2, 6)))
        restored = self.run_saving_round_trip(model, data)
        self.assertLen(restored.weights, 1)
        self.assertEqual(restored.output.shape, (2, 6, 11))
