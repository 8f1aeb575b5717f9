"""The spatial gating unit's training call under JAX, with the activations
it keeps for the backward pass cut by recomputation.

Imported by the unit under the JAX backend only.
"""

import jax

from keras_gmlp.kernels.jax_backward import after_upstream


def recomputed_spatial_gate(
    gate_input, product, has_attention, projection=None
):
    """`u * (product(W, z, b) [+ attention])`, `(u, z) = gate_input(hidden,
    gamma, beta)`, and `projection` of that if given, as a JAX function
    that keeps only its inputs and the product for the backward pass.

    Under JAX's own differentiation, XLA keeps every elementwise
    intermediate of the gate that a gradient reads: the GELU's input, its
    gated half `u`, the normalised `v` (before and after the norm's scale
    and center), the product and the gated output (the block's second
    projection reads it for its kernel's gradient). This keeps the GELU's
    input and the product, and the backward pass recomputes the rest
    (elementwise work that XLA fuses into the gradient's own) and
    differentiates `gate_input`, `product` and `projection` with their
    own rules: the steady gMLP-Ti training step's peak RSS is 0.53x
    timm's so (`benchmarks/memory.py`).

    `jax.checkpoint` would say the same, but XLA:CPU drops the
    optimisation barriers that keep the recomputation apart, and merges it
    with the forward pass's identical computation (common subexpression
    elimination), which brings every intermediate back. So the
    recomputation reads the upstream gradient (`after_upstream`): its
    `hidden` and the norm's scale and center are the forward pass's plus
    `0 * g`, `g` the gradient's first element. (With a non-finite `g` the
    gate's gradients are all NaN instead of partly so; a loss-scale
    optimizer skips such a step either way.) The norm's weights are among
    them so that XLA does not write out their broadcasts to the
    activations' shape for the forward and backward fusions to share, and
    keep them in between.

    Args:
        gate_input: function of `(hidden, gamma, beta)` returning `(u, z)`,
            the gated half and the normalised gate input, made of
            differentiable JAX operations; `hidden` an array or a tuple of
            arrays (the projection, or its two halves), kept as given.
        product: function of `(weight, z, bias)` returning the token
            product `W @ z + b`.
        has_attention: bool. Whether an `attention` array is added to the
            product (aMLP).
        projection: `None` or a function of `(gated, kernel, bias)`, the
            block's second projection.

    Returns:
        A function of `(hidden, (gamma, beta), (weight, bias), projection
        weights, attention)`, the last two tuples (`(kernel, bias)` or
        `()`, `(attention,)` or `()`), with the gradients of every array.
        Reverse mode only (no `jax.jvp`).
    """

    def forward(
        hidden, norm_weights, product_weights, projection_weights, attention
    ):
        u, z = gate_input(hidden, *norm_weights)
        weight, bias = product_weights
        mixed = product(weight, z, bias)
        for added in attention:
            mixed = mixed + added
        output = u * mixed
        if projection is not None:
            output = projection(output, *projection_weights)
        residuals = (hidden, norm_weights, product_weights, projection_weights)
        return output, residuals + (mixed,)

    def backward(residuals, upstream):
        hidden, norm_weights, (weight, bias), projection_weights, mixed = (
            residuals
        )
        hidden, norm_weights = after_upstream((hidden, norm_weights), upstream)
        (u, z), input_gradients = jax.vjp(gate_input, hidden, *norm_weights)
        by_projection = ()
        if projection is not None:
            _, projection_gradients = jax.vjp(
                projection, u * mixed, *projection_weights
            )
            upstream, *by_projection = projection_gradients(upstream)
        # The product's value is not used: XLA drops it.
        _, product_gradients = jax.vjp(product, weight, z, bias)
        by_mixed = upstream * u
        by_weight, by_z, by_bias = product_gradients(by_mixed)
        by_hidden, *by_norm = input_gradients((upstream * mixed, by_z))
        return (
            by_hidden,
            tuple(by_norm),
            (by_weight, by_bias),
            tuple(by_projection),
            (by_mixed,) if has_attention else (),
        )

    @jax.custom_vjp
    def recomputed_gate(
        hidden, norm_weights, product_weights, projection_weights, attention
    ):
        return forward(
            hidden, norm_weights, product_weights, projection_weights, attention
        )[0]

    recomputed_gate.defvjp(forward, backward)
    return recomputed_gate
