import keras
from keras import ops


def pair(value, name):
    """Returns `value` as a `(height, width)` tuple of positive ints."""
    if isinstance(value, int):
        value = (value, value)
    if isinstance(value, (list, tuple)):
        value = tuple(value)
    if (
        not isinstance(value, tuple)
        or len(value) != 2
        or not all(isinstance(v, int) and v > 0 for v in value)
    ):
        raise ValueError(
            f"Received {name}={value}; expected a positive int or a "
            "(height, width) pair of positive ints."
        )
    return value


@keras.saving.register_keras_serializable(package="keras_gmlp")
class PatchEmbedding(keras.layers.Layer):
    """Cuts images into patches and embeds each one as a token.

    A Conv2D with kernel size and stride equal to the patch size, followed
    by a reshape to tokens in row-major order (token `r * columns + c` is
    the patch in row `r` and column `c`).

    Args:
        hidden_dim: int. Channels of each token.
        patch_size: int or `(height, width)` tuple. Size of the patches.
        kernel_initializer: initializer of the convolution.
            Defaults to `"glorot_uniform"`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: images of shape `(batch, height, width, channels)`, with
            height and width divisible by the patch size.

    Example:

    >>> images = keras.random.uniform((2, 32, 48, 3))
    >>> tuple(keras_gmlp.layers.PatchEmbedding(64, (8, 16))(images).shape)
    (2, 12, 64)

    References:
        - [Dosovitskiy et al., 2020](https://arxiv.org/abs/2010.11929)
        - [Liu et al., 2021](https://arxiv.org/abs/2105.08050)
    """

    def __init__(
        self,
        hidden_dim,
        patch_size,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.patch_size = pair(patch_size, "patch_size")
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _grid(self, input_shape):
        height, width = input_shape[1], input_shape[2]
        patch_height, patch_width = self.patch_size
        for size, patch, axis in (
            (height, patch_height, "height"),
            (width, patch_width, "width"),
        ):
            if size is not None and size % patch:
                raise ValueError(
                    f"Image {axis} {size} is not divisible by patch size "
                    f"{patch}: received image shape "
                    f"{tuple(input_shape[1:3])}, patch_size "
                    f"{self.patch_size}."
                )
        rows = None if height is None else height // patch_height
        columns = None if width is None else width // patch_width
        return rows, columns

    def build(self, input_shape):
        self._grid(input_shape)
        self.projection = keras.layers.Conv2D(
            self.hidden_dim,
            kernel_size=self.patch_size,
            strides=self.patch_size,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="projection",
        )
        self.projection.build(input_shape)
        self.built = True

    def call(self, inputs):
        patches = self.projection(inputs)
        shape = ops.shape(patches)
        return ops.reshape(patches, (shape[0], -1, self.hidden_dim))

    def compute_output_shape(self, input_shape):
        rows, columns = self._grid(input_shape)
        tokens = None if rows is None or columns is None else rows * columns
        return (input_shape[0], tokens, self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "patch_size": self.patch_size,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
