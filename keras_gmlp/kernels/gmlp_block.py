"""Kernels of the `"gmlp_block"` operation: `GMLPBlock.call`, faster on a
CPU under each backend.

The same weights and outputs as `GMLPBlock.reference_call` (up to float
rounding), computed so:

- the sublayers are called through `direct_call` (under eager torch
  `Layer.__call__`'s bookkeeping costs about 150 us a call), their norms
  and Dense layers by the kernels `layer_norm` and `dense_call`;
- the first projection is two products, one per half (`split_dense`,
  `split_dense_gelu`), where that is faster;
- in training under JAX and torch the spatial gate is one function that
  keeps only the GELU's input and the token product for the backward pass
  and recomputes the GELU and the norm there (`jax_spatial_gate`,
  `torch_spatial_gate`); under TensorFlow its
  gated half and its gradient are XLA functions (`tensorflow_spatial_gate`),
  recomputing more for a block made under
  `keras.RematScope(mode="activations")`;
- the token product is a batched product without layout copies
  (`token_product`);
- under torch on an AMD CPU the float32 products and their gradients run
  on oneDNN, not MKL (`torch_linear`).
"""

import functools

import keras
from keras import ops

from keras_gmlp.kernels import cpu_features
from keras_gmlp.kernels.bias_add import bias_add
from keras_gmlp.kernels.dense import dense_call
from keras_gmlp.kernels.dense import is_affine
from keras_gmlp.kernels.direct_call import direct_call
from keras_gmlp.kernels.gelu import _KERAS_GELU
from keras_gmlp.kernels.gelu import biased_gelu
from keras_gmlp.kernels.gelu import dense_gelu
from keras_gmlp.kernels.gelu import gelu
from keras_gmlp.kernels.gelu import split_dense
from keras_gmlp.kernels.gelu import split_dense_gelu
from keras_gmlp.kernels.gelu import split_products
from keras_gmlp.kernels.layer_normalization import jax_layer_norm
from keras_gmlp.kernels.layer_normalization import layer_norm
from keras_gmlp.kernels.matmul import jax_dot
from keras_gmlp.kernels.matmul import matmul
from keras_gmlp.kernels.registry import dispatch
from keras_gmlp.kernels.xla_functions import xla_functions_enabled
from keras_gmlp.layers.toeplitz_matrix import is_static
from keras_gmlp.layers.toeplitz_matrix import leading


def gmlp_block(block, inputs, padding_mask=None, training=None):
    """`GMLPBlock.call` of `inputs`; `NotImplemented` for symbolic
    inputs (a functional model's construction), which the reference
    traces. Under TensorFlow, on the halves of the batch as two chains
    (the `"batch_chains"` operation)."""
    if isinstance(inputs, keras.KerasTensor) or not block.built:
        return NotImplemented
    return dispatch(
        "batch_chains",
        on_the_whole_batch,
        one_chain,
        block,
        inputs,
        padding_mask,
        training,
    )


def torch_gmlp_block(block, inputs, padding_mask=None, training=None):
    """`gmlp_block` under torch; while gradients are recorded, on an AMD CPU
    only (`cpu_features.is_amd`), where its products and their gradients
    run on oneDNN (`torch_linear`) and its gate recomputes its activations
    (`torch_spatial_gate`: gMLP-Ti/16's steady training step at batch 32
    peaks at 1,484 MiB against 2,537 without, as fast,
    `benchmarks/memory.py`, `benchmarks/versions.py`). On an Intel CPU
    the reference path trains as fast (0.91-0.97x with this kernel,
    `benchmarks/kernels.py`)."""
    import torch

    if torch.is_grad_enabled() and not cpu_features.is_amd():
        return NotImplemented
    return gmlp_block(block, inputs, padding_mask, training)


def on_the_whole_batch(block_kernel, *args):
    """`block_kernel(*args)`: `"batch_chains"`' reference."""
    return block_kernel(*args)


def one_chain(block, inputs, padding_mask=None, training=None):
    """`gmlp_block` on the whole batch."""
    normalized = direct_call(block.norm, inputs, method=layer_norm)
    attention = None
    if block.tiny_attention is not None:
        attention = block.tiny_attention(normalized, padding_mask=padding_mask)
    hidden = gated_mlp(block, normalized, attention, training)
    return inputs + direct_call(block.drop_path, hidden, training=training)


def rematerializes_activations(block):
    """Whether the block or its unit was made under
    `keras.RematScope(mode="activations")`."""
    unit = block.spatial_gating_unit
    modes = (getattr(layer, "_remat_mode", None) for layer in (block, unit))
    return any(getattr(mode, "mode", None) == "activations" for mode in modes)


def gated_mlp(block, normalized, attention, training):
    """The block's residual branch before its stochastic depth:
    `Dense(SGU(gelu(Dense(normalized)), attention))`."""
    unit = block.spatial_gating_unit
    projection_in = block.channel_projection_in
    projection_out = block.channel_projection_out
    backend = keras.config.backend()
    remat = rematerializes_activations(block)
    split = unit.gating == "split"
    recomputes_tensorflow = training and xla_functions_enabled() and remat
    infers_tensorflow = (
        not training
        and split
        and takes_tensorflow_inference_gate(unit, normalized)
    )
    trains_tensorflow = (
        training
        and split
        and takes_tensorflow_training_gate(unit, normalized, remat)
    )
    if split and (
        backend == "torch"
        or (backend == "jax" and training)
        or recomputes_tensorflow
        or infers_tensorflow
        or trains_tensorflow
    ):
        # The projection before its GELU, which the gate recomputes in
        # training; TensorFlow's gates add the halves' biases themselves.
        biases = None
        if recomputes_tensorflow or infers_tensorflow or trains_tensorflow:
            projected, biases = split_products(projection_in, normalized)
        elif backend != "torch":
            projected = split_dense(projection_in, normalized)
        else:
            projected = direct_call(
                projection_in, normalized, method=dense_call
            )
        return direct_call(
            unit,
            projected,
            method=call_on_projection,
            attention=attention,
            output_projection=projection_out,
            hidden_biases=biases,
            training=bool(training),
            remat=remat,
        )
    if split:
        u, v = split_dense_gelu(projection_in, normalized, training=training)
    else:
        u = v = dense_gelu(projection_in, normalized, training=training)
    hidden = direct_call(
        unit, u, method=call_on_halves, v=v, attention=attention
    )
    return direct_call(projection_out, hidden, method=dense_call)


def call_on_halves(unit, u, v, attention=None):
    """The unit's call on its input already split into `u` and `v`."""
    length = v.shape[-2]
    static = is_static(length)
    if static:
        unit.check_length(length)
    else:
        length = ops.shape(v)[-2]
    z = direct_call(unit.norm, v, method=layer_norm)
    if unit.uses_fft(length if static else None):
        mixed = unit.token_product(z)
    else:
        weight = ops.cast(unit.spatial_weight(length), z.dtype)
        bias = ops.cast(leading(unit.bias, length, 0), z.dtype)
        mixed = token_product(weight, z, bias)
    return unit.gate(u, mixed, attention)


def call_on_projection(
    unit,
    hidden,
    attention=None,
    output_projection=None,
    hidden_biases=None,
    training=None,
    remat=False,
):
    """The unit's call of `gelu(hidden)`, then `output_projection`.

    Args:
        unit: the built `SpatialGatingUnit`.
        hidden: the first projection before its GELU, or for the split
            gating the pair of its halves' projections.
        attention: `None` or the tiny attention's output.
        output_projection: the block's second Dense.
        hidden_biases: `None` or the halves' biases, `hidden` then the
            products before them (TensorFlow's gates add them).
        training: bool.
        remat: bool. Whether the block was made under
            `keras.RematScope(mode="activations")`.
    """
    pair = isinstance(hidden, (tuple, list))
    first = hidden[0] if pair else hidden
    length = first.shape[-2]
    recomputes_tensorflow = (
        training is not False
        and remat
        and xla_functions_enabled()
        and _recomputable_3d(unit, first, length)
    )
    infers_tensorflow = (
        not training
        and not recomputes_tensorflow
        and hidden_biases is not None
        and takes_tensorflow_inference_gate(unit, first)
    )
    trains_tensorflow = (
        training
        and not recomputes_tensorflow
        and hidden_biases is not None
        and takes_tensorflow_training_gate(unit, first, remat)
    )
    if hidden_biases is not None and not (
        recomputes_tensorflow or infers_tensorflow or trains_tensorflow
    ):
        hidden = tuple(map(bias_add, hidden, hidden_biases))
        hidden_biases = None
    if _recomputes_jax(unit, first, length):
        unit.check_length(length)
        return _jax_recomputed_gate(
            unit,
            tuple(hidden) if pair else hidden,
            length,
            attention,
            output_projection,
        )
    recomputes_torch = not pair and _recomputes_torch(unit, hidden, length)
    if recomputes_torch or recomputes_tensorflow:
        unit.check_length(length)
        if recomputes_torch:
            from keras_gmlp.kernels.torch_spatial_gate import (
                recomputed_spatial_gate,
            )
        else:
            from keras_gmlp.kernels import tensorflow_spatial_gate

            recomputed_spatial_gate = functools.partial(
                tensorflow_spatial_gate.recomputed_spatial_gate,
                hidden_biases=hidden_biases,
            )
        first = ops.convert_to_tensor(first)
        if not pair:
            hidden = first
        if attention is not None:
            attention = ops.cast(attention, first.dtype)
        product_weights, projection_weights = _recomputed_operands(
            unit, length, first.dtype, output_projection
        )
        gated = recomputed_spatial_gate(
            hidden,
            unit.norm.gamma.value,
            unit.norm.beta.value,
            unit.norm.epsilon,
            *product_weights,
            attention,
            *projection_weights,
        )
        if projection_weights:
            return gated
    elif infers_tensorflow:
        from keras_gmlp.kernels import tensorflow_spatial_gate

        unit.check_length(length)
        product_weights, _ = _recomputed_operands(
            unit, length, first.dtype, None
        )
        if attention is not None:
            attention = ops.cast(attention, first.dtype)
        gated = tensorflow_spatial_gate.inference_spatial_gate(
            hidden,
            hidden_biases,
            unit.norm.gamma.value,
            unit.norm.beta.value,
            unit.norm.epsilon,
            *product_weights,
            attention,
        )
    elif trains_tensorflow:
        from keras_gmlp.kernels import tensorflow_spatial_gate

        unit.check_length(length)
        hidden_u, hidden_v = hidden
        bias_u, bias_v = hidden_biases
        if keras.backend.standardize_dtype(hidden_v.dtype) == "float32":
            # In float32 the GELU and norm as one function are slower; in
            # bfloat16 and float16 as fast, keeping less.
            z = direct_call(
                unit.norm, biased_gelu(hidden_v, bias_v), method=layer_norm
            )
        else:
            z = tensorflow_spatial_gate.training_normalized_gelu(
                hidden_v,
                bias_v,
                unit.norm.gamma.value,
                unit.norm.beta.value,
                unit.norm.epsilon,
            )
        (weight, bias), projection_weights = _recomputed_operands(
            unit, length, z.dtype, output_projection
        )
        if attention is not None:
            attention = ops.cast(attention, z.dtype)
        gated = tensorflow_spatial_gate.training_gelu_gate(
            hidden_u,
            bias_u,
            ops.matmul(weight, z),
            bias,
            attention,
            *projection_weights,
        )
        if projection_weights:
            return gated
    else:
        if pair:
            u, v = map(gelu, hidden)
        elif unit.gating == "split":
            u, v = ops.split(gelu(hidden), 2, axis=-1)
        else:
            u = v = gelu(hidden)
        gated = call_on_halves(unit, u, v, attention=attention)
    if output_projection is None:
        return gated
    return direct_call(output_projection, gated, method=dense_call)


def _jax_recomputed_gate(unit, hidden, length, attention, projection):
    from keras_gmlp.kernels.jax_spatial_gate import recomputed_spatial_gate

    epsilon = unit.norm.epsilon
    dtype = (hidden[0] if isinstance(hidden, tuple) else hidden).dtype

    def gate_input(hidden, gamma, beta):
        if isinstance(hidden, tuple):
            u, v = map(gelu, hidden)
        else:
            u, v = ops.split(gelu(hidden), 2, axis=-1)
        return u, jax_layer_norm(v, gamma, beta, epsilon, dtype)

    def project(gated, kernel, bias):
        return bias_add(matmul(gated, kernel), bias)

    product_weights, projection_weights = _recomputed_operands(
        unit, length, dtype, projection
    )
    gate = recomputed_spatial_gate(
        gate_input,
        token_product,
        has_attention=attention is not None,
        projection=project if projection_weights else None,
    )
    gated = gate(
        hidden,
        (unit.norm.gamma.value, unit.norm.beta.value),
        product_weights,
        projection_weights,
        () if attention is None else (ops.cast(attention, dtype),),
    )
    if projection is None or projection_weights:
        return gated
    return direct_call(projection, gated, method=dense_call)


def _recomputed_operands(unit, length, dtype, projection):
    """`((W, b), projection weights)` for a recomputing gate, in `dtype`:
    the projection's `(kernel, bias)` where it is a plain Dense to fold
    in, else `()`."""
    product_weights = (
        ops.cast(unit.spatial_weight(length), dtype),
        ops.cast(leading(unit.bias, length, 0), dtype),
    )
    if projection is None or not is_affine(projection):
        return product_weights, ()
    return product_weights, tuple(
        ops.cast(w.value, dtype) for w in (projection.kernel, projection.bias)
    )


def _recomputes_jax(unit, hidden, length):
    """Whether `call_on_projection` takes the recomputing JAX gate."""
    return keras.config.backend() == "jax" and _recomputable_3d(
        unit, hidden, length
    )


def _recomputes_torch(unit, hidden, length):
    """Whether `call_on_projection` takes the recomputing torch gate
    (`torch_spatial_gate`): under autograd, a floating tensor on a CPU."""
    if keras.config.backend() != "torch":
        return False
    import torch

    return (
        torch.is_grad_enabled()
        and isinstance(hidden, torch.Tensor)
        and hidden.device.type == "cpu"
        and hidden.dtype in (torch.float32, torch.bfloat16, torch.float16)
        and _recomputable(unit, hidden, length)
    )


def takes_tensorflow_training_gate(unit, hidden, remat):
    """Whether TensorFlow's training gate computes the gated half
    (`tensorflow_spatial_gate.training_gelu_gate`): XLA functions on,
    `(batch, tokens, channels)`, a block not made under
    `keras.RematScope(mode="activations")` (that one recomputes more)."""
    return (
        xla_functions_enabled()
        and not remat
        and _recomputable_3d(unit, hidden, hidden.shape[-2])
    )


def takes_tensorflow_inference_gate(unit, hidden):
    """Whether TensorFlow's bfloat16 inference gate runs: XLA functions
    on, bfloat16 `(batch, tokens, channels)`, a CPU with AMX
    (`cpu_features.has_amx`). Without AMX, oneDNN's fused product, bias
    and GELU are faster."""
    return (
        xla_functions_enabled()
        and _recomputable_3d(unit, hidden, hidden.shape[-2])
        and keras.backend.standardize_dtype(hidden.dtype) == "bfloat16"
        and cpu_features.has_amx()
    )


def _recomputable_3d(unit, hidden, length):
    """`_recomputable`, for a floating `(batch, tokens, channels)`
    tensor."""
    return (
        _recomputable(unit, hidden, length)
        and len(hidden.shape) == 3
        and keras.backend.standardize_dtype(hidden.dtype)
        in ("float32", "bfloat16", "float16")
    )


def _recomputable(unit, hidden, length):
    """What the recomputing gates need: the split gating, the matmul
    product of a static length, a norm with a scale and a center, Keras'
    GELU."""
    return (
        unit.gating == "split"
        and keras.activations.gelu is _KERAS_GELU
        and is_static(length)
        and not unit.uses_fft(length)
        and unit.norm.scale
        and unit.norm.center
        and not unit.norm.rms_scaling
        and not isinstance(hidden, keras.KerasTensor)
    )


def token_product(weight, v, bias):
    """`W @ v + b` over the token axis of `v` `(..., m, c)`, `W` `(n, m)`,
    as a batched product with no layout copies of `v`: under JAX one dot
    over the token axis and a transpose with a hand-written gradient
    (`_jax_batched_product`); under TensorFlow `tf.matmul` of the 2-D `W`;
    under torch `torch_linear.over_tokens`."""
    backend = keras.config.backend()
    if backend == "jax" and len(v.shape) == 3:
        product = _jax_batched_product()(weight, v)
    elif backend == "tensorflow":
        product = ops.matmul(weight, v)
    elif backend == "torch":
        from keras_gmlp.kernels.torch_linear import over_tokens

        product = over_tokens(weight, v)
    else:
        product = ops.einsum("ij,...jc->...ic", weight, v)
    return bias_add(product, bias, axis=-2)


@functools.cache
def _jax_batched_product():
    """`W @ v[b]` for every `b` of `v` `(batch, m, c)`, as one dot of `W`
    with `v`'s token axis transposed to `(batch, n, c)`, with a
    hand-written gradient: a batched dot would need `W` broadcast to
    `(batch, n, m)`, a copy XLA:CPU makes at about 1 ms a block for
    gMLP-Ti at batch 8. The gradient of `W` is accumulated in float32
    (`jax_weight_gradient`)."""
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def product(weight, v):
        return jnp.transpose(jax_dot(weight, v, ((1,), (1,))), (1, 0, 2))

    def forward(weight, v):
        return product(weight, v), (weight, v)

    def backward(residuals, upstream):
        weight, v = residuals
        if upstream.dtype == jnp.bfloat16:
            # In bfloat16 into float32, the dot contracting `W`'s first
            # axis fails at run time (`jax_dot`).
            by_channel = jax_dot(upstream, weight, ((1,), (0,)))
            v_gradient = jnp.swapaxes(by_channel, 1, 2)
        else:
            by_token = jax.lax.dot_general(
                weight, upstream, (((0,), (1,)), ((), ()))
            )
            v_gradient = jnp.transpose(by_token, (1, 0, 2))
        return jax_weight_gradient(upstream, v, weight.dtype), v_gradient

    product.defvjp(forward, backward)
    return product


# Batches up to this many examples take `W`'s gradient as one 2-D dot per
# example, larger or symbolic ones as one dot (`jax_weight_gradient`).
PER_EXAMPLE_DOTS_UP_TO = 32


def jax_weight_gradient(upstream, v, dtype):
    """`sum_b upstream[b] @ v[b]^T` in `dtype`, accumulated in float32.

    Up to `PER_EXAMPLE_DOTS_UP_TO` examples one 2-D dot per example, each
    reading its rows in place; above (or for a symbolic batch) one dot
    over the batch and the channels, since XLA's compile time grows with
    the unrolled batch.
    """
    import jax
    import jax.numpy as jnp

    batch_size = v.shape[0]
    if isinstance(batch_size, int) and batch_size <= PER_EXAMPLE_DOTS_UP_TO:
        gradient = sum(
            jax.lax.dot_general(
                upstream[b],
                v[b],
                (((1,), (1,)), ((), ())),
                preferred_element_type=jnp.float32,
            )
            for b in range(batch_size)
        )
    else:
        gradient = jax.lax.dot_general(
            upstream,
            v,
            (((0, 2), (0, 2)), ((), ())),
            preferred_element_type=jnp.float32,
        )
    return gradient.astype(dtype)
