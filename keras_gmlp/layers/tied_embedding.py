import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_gmlp")
class TiedEmbedding(keras.layers.Embedding):
    """Token embedding whose transpose also gives the output logits.

    Called normally it maps token ids to vectors. Called with
    `reverse=True` it maps vectors of size `output_dim` to logits over the
    vocabulary with the same matrix, as in BERT, which is how the paper's
    language-model parameter counts add up.

    Args:
        input_dim: int. Vocabulary size.
        output_dim: int. Embedding size.
        **kwargs: arguments of `keras.layers.Embedding`.

    Call arguments:
        inputs: token ids, or vectors when `reverse=True`.
        reverse: bool. Whether to compute logits. Defaults to `False`.

    Example:

    >>> embedding = keras_gmlp.layers.TiedEmbedding(100, 8)
    >>> vectors = embedding(keras.ops.ones((2, 5), "int32"))
    >>> tuple(embedding(vectors, reverse=True).shape)
    (2, 5, 100)

    References:
        - [Press and Wolf, 2017](https://arxiv.org/abs/1608.05859)
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    def call(self, inputs, reverse=False):
        if not reverse:
            return super().call(inputs)
        kernel = ops.cast(self.embeddings, inputs.dtype)
        return ops.matmul(inputs, ops.transpose(kernel))

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero:
            return None
        dtype = keras.backend.standardize_dtype(inputs.dtype)
        if mask is not None or "int" not in dtype:
            return mask
        return ops.not_equal(inputs, 0)

    def compute_output_shape(self, input_shape, reverse=False):
        if reverse:
            return tuple(input_shape[:-1]) + (self.input_dim,)
        return super().compute_output_shape(input_shape)

    def compute_output_spec(self, inputs, reverse=False):
        shape = self.compute_output_shape(inputs.shape, reverse=reverse)
        dtype = self.compute_dtype
        return keras.KerasTensor(shape, dtype=dtype)
