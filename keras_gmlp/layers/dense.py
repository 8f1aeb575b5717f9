"""A Dense layer whose product and bias are one kernel under PyTorch."""

import keras
from keras import ops

from keras_gmlp.layers.bias_add import bias_add
from keras_gmlp.layers.matmul import matmul


def is_affine(dense):
    """Whether a built `keras.layers.Dense` computes `inputs @ kernel +
    bias` and nothing more: a bias, a linear activation, neither quantized
    nor with LoRA."""
    return (
        dense.bias is not None
        and dense.activation in (None, keras.activations.linear)
        and getattr(dense, "quantization_mode", None) is None
        and not getattr(dense, "lora_enabled", False)
    )


@keras.saving.register_keras_serializable(package="keras_gmlp")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense`, with a fused bias under PyTorch.

    The same layer, arguments and weights. Under the torch backend, a
    plain (not quantized, no LoRA) Dense with a bias computes
    `torch.nn.functional.linear`, one `addmm` for the product and the bias,
    where Keras' own call is a matmul and then an add: one pass over the
    output less in each direction and one output-sized temporary less
    (`benchmarks/vision.py` and `benchmarks/memory.py` measure it), in
    float32 on an AMD CPU on oneDNN rather than MKL
    (`keras_gmlp.layers.torch_linear.linear`). Under
    JAX it adds the bias with `keras_gmlp.layers.bias_add.bias_add`, whose
    gradient sums in float32 under a mixed policy (reverse mode only,
    there). TensorFlow, which fuses
    the add itself (Grappler), and every other configuration run Keras'
    own call.

    Example:

    >>> dense = keras_gmlp.layers.Dense(3)
    >>> x = np.ones((2, 4), "float32")
    >>> dense(x).shape
    (2, 3)
    >>> expected = x @ dense.kernel.numpy() + dense.bias.numpy()
    >>> bool(np.allclose(keras.ops.convert_to_numpy(dense(x)), expected))
    True
    """

    def call(self, inputs, training=None):
        if (
            self.bias is None
            or self.quantization_mode is not None
            or self.lora_enabled
        ):
            return super().call(inputs, training=training)
        if keras.backend.backend() == "jax":
            # The bias gradient summed in float32 under a mixed policy.
            outputs = bias_add(matmul(inputs, self.kernel), self.bias)
            if self.activation is not None:
                outputs = self.activation(outputs)
            return outputs
        if keras.backend.backend() != "torch":
            return super().call(inputs, training=training)
        from keras_gmlp.layers.torch_linear import linear

        # Reading the variables converts them to the compute dtype under a
        # mixed policy (the autocast scope of `Layer.__call__`).
        kernel = ops.convert_to_tensor(self._kernel)
        bias = ops.convert_to_tensor(self.bias)
        outputs = linear(inputs, kernel.T, bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def quantize(self, mode=None, type_check=True, config=None):
        # Keras refuses to quantize a subclass of Dense, whose `call` it
        # cannot know; this one runs Keras' own call once quantized (and
        # `Layer.__call__` takes the quantized call then), so it quantizes
        # as a Dense does.
        super().quantize(mode, type_check=False, config=config)
