"""A Dense layer's call with its product and bias fused."""

import keras
from keras import ops

from keras_gmlp.kernels.bias_add import bias_add
from keras_gmlp.kernels.matmul import matmul


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


def dense_call(layer, inputs, training=None):
    """`keras.layers.Dense.call(layer, inputs)`, with the bias fused.

    Under torch a plain Dense (a bias, not quantized, no LoRA) is one
    `torch.nn.functional.linear`, one `addmm` for the product and the
    bias, where Keras' call is a matmul and an add
    (`keras_gmlp.kernels.torch_linear.linear`). Under JAX the bias is
    added by `keras_gmlp.kernels.bias_add.bias_add`, whose gradient sums
    in float32 under a mixed policy. Other cases run Keras' own call.

    Args:
        layer: a built `keras.layers.Dense`.
        inputs: tensor.
    """
    if getattr(layer, "quantization_mode", None) is not None:
        return layer.quantized_call(inputs, training=training)
    backend = keras.config.backend()
    if not is_affine(layer) or backend not in ("jax", "torch"):
        return keras.layers.Dense.call(layer, inputs, training=training)
    if backend == "jax":
        return bias_add(matmul(inputs, layer.kernel), layer.bias)
    from keras_gmlp.kernels.torch_linear import linear

    # Reading the variables casts them to the compute dtype under a mixed
    # policy (the autocast scope `direct_call` enters).
    kernel = ops.convert_to_tensor(layer.kernel)
    return linear(inputs, kernel.T, ops.convert_to_tensor(layer.bias))
