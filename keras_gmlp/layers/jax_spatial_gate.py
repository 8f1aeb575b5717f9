"""The spatial gating unit's training call under JAX, with the activations
it keeps for the backward pass cut by recomputation.

Imported by the unit under the JAX backend only.
"""

import jax


def recomputed_spatial_gate(gate_input, product, has_attention):
    """`u * (product(W, z, b) [+ attention])`, `(u, z) = gate_input(hidden,
    gamma, beta)`, as a JAX function that keeps only its inputs and the
    product for the backward pass.

    Under JAX's own differentiation, XLA keeps every elementwise
    intermediate of the gate that a gradient reads: the GELU's input, its
    gated half `u`, the normalised `v` (before and after the norm's scale
    and center) and the product. This keeps the GELU's input and the
    product, and the backward pass recomputes `gate_input` (elementwise
    work that XLA fuses into the gradient's own) and differentiates it
    and `product` with their own rules: a gMLP-Ti training step (batch 8)
    peaks at 0.64x timm's RSS instead of 1.31x and runs 1.12x (float32)
    and 1.19x (bfloat16) faster (`benchmarks/jax_spatial_gate.py`).

    `jax.checkpoint` would say the same, but XLA:CPU drops the
    optimisation barriers that keep the recomputation apart, and merges it
    with the forward pass's identical computation (common subexpression
    elimination), which brings every intermediate back. So the
    recomputation reads the upstream gradient: `hidden + 0 * g`, `g` the
    gradient's first element, is `hidden` for any finite `g` and cannot be
    computed before the backward pass. (With a non-finite `g` the block's
    gradients are all NaN instead of partly so; a loss-scale optimizer
    skips such a step either way.)

    Args:
        gate_input: function of `(hidden, gamma, beta)` returning `(u, z)`,
            the gated half and the normalised gate input, made of
            differentiable JAX operations.
        product: function of `(weight, z, bias)` returning the token
            product `W @ z + b`.
        has_attention: bool. Whether the function takes an `attention`
            array, added to the product (aMLP).

    Returns:
        A function of `(hidden, gamma, beta, weight, bias[, attention])`
        with the gradients of every argument. Reverse mode only (no
        `jax.jvp`).
    """

    def forward(hidden, gamma, beta, weight, bias, *attention):
        u, z = gate_input(hidden, gamma, beta)
        mixed = product(weight, z, bias)
        if attention:
            mixed = mixed + attention[0]
        return u * mixed, (hidden, gamma, beta, weight, bias, mixed)

    def backward(residuals, upstream):
        hidden, gamma, beta, weight, bias, mixed = residuals
        first = upstream[(0,) * upstream.ndim]
        hidden = hidden + (0 * first).astype(hidden.dtype)
        (u, z), input_gradients = jax.vjp(gate_input, hidden, gamma, beta)
        # The product's value is not used: XLA drops it.
        _, product_gradients = jax.vjp(product, weight, z, bias)
        by_mixed = upstream * u
        by_weight, by_z, by_bias = product_gradients(by_mixed)
        by_hidden, by_gamma, by_beta = input_gradients((upstream * mixed, by_z))
        gradients = (by_hidden, by_gamma, by_beta, by_weight, by_bias)
        return gradients + (by_mixed,) * has_attention

    @jax.custom_vjp
    def recomputed_gate(hidden, gamma, beta, weight, bias, *attention):
        return forward(hidden, gamma, beta, weight, bias, *attention)[0]

    recomputed_gate.defvjp(forward, backward)
    return recomputed_gate
