"""What the package's hand-written JAX backward passes share.

Imported under the JAX backend only.
"""

import jax


def after_upstream(tree, upstream):
    """`tree`'s arrays offset by `0 * upstream[0, ..., 0]`: the same values
    (for a finite first element), which XLA can neither compute before
    the backward pass nor merge with the forward pass's.

    A backward pass that reads a forward input again (to recompute from
    it, or a norm's scale to multiply the gradient by) gets XLA:CPU
    (jaxlib 0.10) to share the forward pass's work on it (common
    subexpression elimination): the recomputation comes back as kept
    activations (`jax_spatial_gate`), and the scale broadcast to the
    activations' shape is written out as an array that the forward and
    backward fusions both read, and kept between them, instead of being
    fused into each. Where the upstream gradient's first element is not
    finite the result is NaN throughout, so the gradients that read it
    are all NaN instead of partly so (a loss-scale optimizer skips such a
    step either way).

    Args:
        tree: a JAX array or a pytree of them.
        upstream: the backward pass's upstream gradient (a JAX array).

    Returns:
        `tree`, each array in its own dtype.
    """
    zero = 0 * upstream[(0,) * upstream.ndim]
    return jax.tree.map(lambda array: array + zero.astype(array.dtype), tree)
