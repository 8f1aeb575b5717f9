"""Kernels of the decoding operations, each computing its reference's
outputs and cache up to float rounding:

- `"gmlp_block_with_cache"` (torch, outside autograd):
  `GMLPBlock.call_with_cache` of one token, the sublayers called through
  `direct_call` (under eager torch `Layer.__call__`'s bookkeeping costs
  more than a decoded token's `(1, 1, 128)` Dense or LayerNormalization,
  and the block calls 4 sublayers a token) and the token's row of the
  spatial weights spanning the `i + 1` positions it sees (`decoded_row`;
  a compiled loop needs `max_length` entries, those after `i` zero).
  `gmlp_tiny` generates 384 tokens 1.74x as fast so
  (`benchmarks/versions.py --rows generate` against a checkout without
  it, `versions_xeon_torch_decoding.json`).
- `"causal_lm_with_cache"` (torch, outside autograd):
  `GMLPCausalLM.call_with_cache`, the embedding, the final norm and the
  tied output projection through `direct_call`: 1.16x on a family-26 AMD
  EPYC (`benchmarks/kernels.py --rows generate`,
  `kernels_generate_epyc26_torch.json`).
- `"cache_update"` (torch, outside autograd, within `owned_caches()`):
  `ops.slice_update` of a decoding cache written into the cache itself.
  Keras' torch `slice_update` copies the whole cache, `(batch, max_length,
  channels)` a block, to write one position: `gmlp_tiny` generates 1.35x
  and `amlp_tiny` 1.29x as fast so (the same benchmark and file).
- `"generate_function"` (TensorFlow): `generate` as one XLA function.
"""

import numbers

from keras import ops

from keras_gmlp.kernels.dense import dense_call
from keras_gmlp.kernels.direct_call import direct_call
from keras_gmlp.kernels.layer_normalization import layer_norm
from keras_gmlp.kernels.registry import owns_caches
from keras_gmlp.layers.toeplitz_matrix import write_cache


def torch_cache_update(cache, start_indices, updates):
    """`ops.slice_update(cache, start_indices, updates)` written into
    `cache` itself, which is returned, within `owned_caches()`, outside
    autograd and with Python int starts; `NotImplemented` elsewhere (the
    reference writes into a copy)."""
    import torch

    if (
        not owns_caches()
        or torch.is_grad_enabled()
        or not isinstance(cache, torch.Tensor)
        or not all(isinstance(i, numbers.Integral) for i in start_indices)
    ):
        return NotImplemented
    region = tuple(
        slice(int(start), int(start) + size)
        for start, size in zip(start_indices, updates.shape, strict=True)
    )
    cache[region] = updates
    return cache


def torch_gmlp_block_with_cache(
    block, inputs, cache, cache_update_index, padding_mask=None
):
    """`GMLPBlock.call_with_cache` of one new token, or of the prompt
    from position 0, outside autograd; `NotImplemented` elsewhere (the
    reference computes it)."""
    import torch

    unit = block.spatial_gating_unit
    if torch.is_grad_enabled() or not isinstance(inputs, torch.Tensor):
        return NotImplemented
    start = cache_update_index
    if isinstance(start, torch.Tensor) and start.ndim == 0:
        start = int(start)
    length = inputs.shape[-2]
    if not isinstance(start, numbers.Integral):
        return NotImplemented
    start = int(start)
    if not (start == 0 or length == 1):
        return NotImplemented
    cache = dict(cache)
    inputs = ops.cast(inputs, block.compute_dtype)
    normalized = direct_call(block.norm, inputs, method=layer_norm)
    hidden = direct_call(
        block.channel_projection_in, normalized, method=dense_call
    )
    hidden = torch.nn.functional.gelu(hidden)
    attention = None
    if block.tiny_attention is not None:
        attention, cache["tiny_attention"] = tiny_attention_with_cache(
            block.tiny_attention,
            normalized,
            cache["tiny_attention"],
            start,
            padding_mask,
        )
    u, v = unit.halves(hidden)
    z = direct_call(unit.norm, v, method=layer_norm)
    gate_cache = cache["spatial_gating_unit"]
    gate_cache = write_cache(gate_cache, [0, start, 0], z.to(gate_cache.dtype))
    if start == 0:
        mixed = unit.token_product(z)
    else:
        mixed = decoded_row(unit, gate_cache, start)
    if attention is not None:
        attention = attention.to(mixed.dtype)
    gated = unit.gate(u, mixed, attention)
    cache["spatial_gating_unit"] = gate_cache
    outputs = direct_call(
        block.channel_projection_out, gated, method=dense_call
    )
    return inputs + outputs, cache


def torch_causal_lm_with_cache(causal_lm, token_ids, cache, cache_update_index):
    """`GMLPCausalLM.call_with_cache` outside autograd, its backbone's
    layers called through `direct_call` (the blocks through their own
    operation); `NotImplemented` under autograd."""
    import torch

    if torch.is_grad_enabled() or not isinstance(token_ids, torch.Tensor):
        return NotImplemented
    backbone = causal_lm.backbone
    embedding = backbone.token_embedding
    x = direct_call(embedding, token_ids)
    caches = []
    for block, block_cache in zip(backbone.blocks, cache, strict=True):
        x, block_cache = block.call_with_cache(
            x, block_cache, cache_update_index
        )
        caches.append(block_cache)
    hidden = direct_call(backbone.final_norm, x, method=layer_norm)
    logits = direct_call(embedding, hidden, reverse=True)
    return logits, hidden, tuple(caches)


def tiny_attention_with_cache(layer, inputs, cache, start, padding_mask):
    """`TinyAttention.call_with_cache` of the positions from the int
    `start` in torch's ops, the projection through `direct_call`: under
    eager torch a Keras op costs more than a decoded token's arithmetic,
    and through the layer's method `amlp_tiny` generated 5 % slower (0.91x
    against 0.96x of the commit before `"cache_update"`, `benchmarks/
    versions.py --rows generate_amlp`, one run each)."""
    import torch

    max_length = cache.shape[-2]
    layer.check_cache(max_length)
    length = inputs.shape[-2]
    projected = direct_call(layer.qkv, inputs, method=dense_call)
    query, key, value = projected.chunk(3, dim=-1)
    update = torch.stack([key, value], dim=1).to(cache.dtype)
    cache = write_cache(cache, [0, 0, start, 0], update)
    rows = start + torch.arange(length, device=cache.device)
    columns = torch.arange(max_length, device=cache.device)
    allowed = columns[None, :] <= rows[:, None]
    outputs = layer.attend(
        query, cache[:, 0], cache[:, 1], allowed, padding_mask
    )
    return outputs, cache


def decoded_row(unit, cache, index):
    """Row `index` of `W @ cache + b` for a causal unit, from the
    `index + 1` positions it sees: `sum_{j <= index} W[index, j] z_j +
    b[index]`, shape `(batch, 1, channels)`. The positions after `index`
    are never read."""
    kernel = unit.kernel.value
    if unit.spatial == "dense":
        row = kernel[index, : index + 1]
    else:
        # W[i, j] = taps[i - j + n - 1]: the taps n - 1 + i down to n - 1.
        first = unit.sequence_length - 1
        row = kernel[first : first + index + 1].flip(0)
    seen = cache[:, : index + 1]
    mixed = row.to(cache.dtype) @ seen + unit.bias.value[index].to(cache.dtype)
    return mixed[:, None]


def tensorflow_generate_function(causal_lm):
    """keras-hub's `generate_step` as one XLA function.

    Keras resolves `jit_compile="auto"` to no XLA for TensorFlow on a
    CPU, so keras-hub's `generate` runs a graph of TensorFlow's kernels:
    compiled by XLA, `gmlp_tiny` generates 2.4x as fast, the same greedy
    tokens (`benchmarks/kernels.py --rows generate --process plain`; 1.2x
    to 1.6x in a process set up for training). `NotImplemented`
    (keras-hub's function) for a model compiled with `jit_compile` given,
    run eagerly or under a distribution strategy, where Keras also leaves
    XLA off.
    """
    import tensorflow as tf

    if (
        getattr(causal_lm, "_jit_compile_requested", None) != "auto"
        or causal_lm.run_eagerly
        or causal_lm.jit_compile
        or getattr(causal_lm, "_distribute_strategy", None) is not None
    ):
        return NotImplemented
    return tf.function(causal_lm.generate_step, jit_compile=True)
