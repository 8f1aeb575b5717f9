"""Kernel of the `"attention"` operation: the tiny attention's core,
`TinyAttention.reference_attend`, under torch as one fused
`torch.nn.functional.scaled_dot_product_attention`.

The reference computes the scores, the masked softmax and the weighted sum
in five Keras ops, each with its own buffer and, under eager torch, its own
dispatch; a decoded token of `amlp_tiny` spends more on those than on
their arithmetic. Fused, `amlp_tiny` generates 1.36x as fast on a
family-26 AMD EPYC (`benchmarks/kernels.py --rows generate_amlp`,
`kernels_generate_amlp_epyc26_torch.json`).
"""

import math

from keras_gmlp.kernels.dense import dense_call
from keras_gmlp.kernels.direct_call import direct_call


def torch_attention(layer, query, key, value, allowed=None, padding_mask=None):
    """`TinyAttention.reference_attend` by torch's fused attention; the
    same outputs up to float rounding, and gradients by autograd. A query
    with no visible key gets zeros before the output projection, as in the
    reference. `NotImplemented` outside eager float32 torch tensors: under
    a mixed policy the reference rounds the scores to the compute dtype
    before its float32 softmax, where the fused attention does not.

    Args:
        layer: a built `keras_gmlp.layers.TinyAttention`.
        query: torch tensor `(batch, queries, attention_dim)`.
        key, value: torch tensors `(batch, keys, attention_dim)`.
        allowed: `None` or a boolean tensor `(queries, keys)`.
        padding_mask: `None` or a tensor `(batch, keys)`, true for real
            tokens.
    """
    import torch

    if (
        not isinstance(query, torch.Tensor)
        or query.dtype != torch.float32
        or torch.compiler.is_compiling()
        or torch.jit.is_tracing()
    ):
        return NotImplemented
    mask = None
    if padding_mask is not None:
        mask = torch.as_tensor(padding_mask, device=query.device).bool()
        mask = mask[:, None, None, :]
    if allowed is not None:
        allowed = torch.as_tensor(allowed, device=query.device).bool()
        mask = allowed if mask is None else mask & allowed
    attended = torch.nn.functional.scaled_dot_product_attention(
        query[:, None],
        key[:, None],
        value[:, None],
        attn_mask=mask,
        scale=1 / math.sqrt(layer.attention_dim),
    )[:, 0]
    return direct_call(layer.output_projection, attended, method=dense_call)
