import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_gmlp")
class DropPath(keras.layers.Layer):
    """Stochastic depth: drops a whole residual branch per sample.

    In training, each sample's input is zeroed with probability `rate` and
    the survivors are scaled by `1 / (1 - rate)`; in inference the layer is
    the identity.

    Args:
        rate: float. Probability of dropping the branch, in `[0, 1)`.
            Defaults to `0.0`.
        seed: int. Seed of the random generator. Defaults to `None`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor of shape `(batch, ...)`.
        training: bool. Whether to drop. Defaults to `None` (inference).

    Example:

    >>> x = np.ones((4, 3, 2), "float32")
    >>> layer = keras_gmlp.layers.DropPath(0.5, seed=1)
    >>> float(keras.ops.sum(layer(x, training=False)))
    24.0
    >>> y = keras.ops.convert_to_numpy(layer(x, training=True))
    >>> bool(np.isin(y, [0.0, 2.0]).all())
    True

    References:
        - [Huang et al., 2016](https://arxiv.org/abs/1603.09382)
    """

    def __init__(self, rate=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(
                f"Received rate={rate}; expected a value in [0, 1)."
            )
        self.rate = rate
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True
        self.built = True

    def call(self, inputs, training=None):
        if not training or self.rate == 0.0:
            return inputs
        shape = (ops.shape(inputs)[0],) + (1,) * (len(inputs.shape) - 1)
        # Drawn in float32: a bfloat16 uniform has steps of 2**-8 or
        # coarser, which turns small rates into wrong ones (0.0017 into 0).
        noise = keras.random.uniform(
            shape, seed=self.seed_generator, dtype="float32"
        )
        keep = ops.cast(ops.greater_equal(noise, self.rate), "float32")
        scale = ops.cast(keep / (1.0 - self.rate), inputs.dtype)
        return inputs * scale

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config
