"""The tiny attention's core under torch as one fused kernel.

`softmax(q k^T / sqrt(d), masked) v` for the single head of aMLP's tiny
attention, written as `torch.nn.functional.scaled_dot_product_attention`
(on a CPU its flash-attention kernel, forward and backward), instead of
two batched products around a masked softmax and the `where`s over
`(batch, n, n)` of the mask and its gradient: the `amlp_tiny` masked-LM
training step runs 1.1-1.2x faster so at 128-512 tokens
(`benchmarks/masked_lm_speed.py`).

A query that sees no key (a padded token before the first real one under
the causal mask, or a row of padding only) attends to nothing, as in the
layer's other form: torch's kernel gives such a row zeros and passes it
no gradient (`tests/layers/test_tiny_attention.py` checks both).
"""

import keras

from keras_gmlp.layers.xla_functions import tracing_portable_ops


def takes_fused_attention():
    """Whether the tiny attention's core runs as `fused_attention`: under
    torch outside `portable_ops()` (exports see the plain ops)."""
    return keras.config.backend() == "torch" and not tracing_portable_ops()


def fused_attention(query, key, value, allowed, padding_mask, scale):
    """`softmax(scale * q k^T, masked) v`, a query without a visible key
    giving zeros.

    Args:
        query: torch tensor `(batch, queries, d)`.
        key: torch tensor `(batch, keys, d)`.
        value: torch tensor `(batch, keys, d)`.
        allowed: `None` or a boolean tensor `(queries, keys)`, `True`
            where query `i` may see key `j` (the causal mask).
        padding_mask: `None` or a tensor `(batch, keys)`, true for real
            tokens: padded keys are hidden.
        scale: float, the scores' factor.

    Returns:
        Torch tensor `(batch, queries, d)` in `value`'s dtype.
    """
    import torch

    mask = None
    if padding_mask is not None:
        mask = torch.as_tensor(padding_mask, device=query.device).bool()
        mask = mask[:, None, None, :]
    if allowed is not None:
        allowed = torch.as_tensor(allowed, device=query.device).bool()
        mask = allowed if mask is None else mask & allowed
    heads = [x[:, None] for x in (query, key, value)]
    attended = torch.nn.functional.scaled_dot_product_attention(
        *heads, attn_mask=mask, scale=scale
    )
    return attended[:, 0]
