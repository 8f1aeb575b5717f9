"""The spatial gating unit's recomputing training call under JAX."""

import keras
import numpy as np
import pytest

from keras_gmlp import kernels
from keras_gmlp.kernels import gmlp_block
from keras_gmlp.kernels import registry
from keras_gmlp.layers import GMLPBlock
from tests.gradients import assert_gradients_close
from tests.layer_test import randomize_weights


@pytest.fixture(autouse=True)
def one_chain():
    """The block's kernel on the whole batch: these tests read the programs
    of its gate, which the batch chains would repeat per half."""
    kernels.configure("auto", set(registry.KERNELS) - {"batch_chains"})
    yield
    kernels.configure("auto")


pytestmark = pytest.mark.skipif(
    keras.config.backend() != "jax", reason="JAX's differentiation"
)


def block_loss(block, x, upstream):
    """`(loss, trainable values)`: `sum(block(x, training=True) *
    upstream)` as a pure function of the block's (or model's) trainable
    values."""
    import jax.numpy as jnp

    non_trainable = [v.value for v in block.non_trainable_variables]

    def loss(trainable, x):
        outputs, _ = block.stateless_call(
            trainable, non_trainable, x, training=True
        )
        return jnp.sum(outputs.astype("float32") * upstream)

    return loss, [v.value for v in block.trainable_variables]


def with_autograd(function):
    """`function()` with the block kernel's usual call of the unit under
    JAX's own differentiation, not the recomputing one."""
    original = gmlp_block._recomputes_jax
    gmlp_block._recomputes_jax = lambda unit, hidden, length: False
    try:
        return function()
    finally:
        gmlp_block._recomputes_jax = original


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("attention_dim", [None, 4])
def test_gradients_match_jax_differentiation(attention_dim, policy, rng):
    import jax

    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=12, attention_dim=attention_dim, dtype=policy)
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    loss, trainable = block_loss(block, x, rng.normal(size=x.shape))

    def gradients():
        gradient = jax.grad(lambda *a: loss(*a), argnums=(0, 1))
        return jax.tree.leaves(jax.jit(gradient)(trainable, x))

    def traced():
        # A new function each time: JAX caches a function's traces.
        return str(jax.make_jaxpr(lambda *a: loss(*a))(trainable, x))

    # The recomputing call is the one traced by default.
    assert "name=recomputed_gate" in traced()
    assert "name=recomputed_gate" not in with_autograd(traced)
    recomputed, expected = gradients(), with_autograd(gradients)
    tolerance = 1e-5 if policy == "float32" else 2e-2
    assert_gradients_close(recomputed, expected, tolerance)


def test_block_projects_each_half_apart_in_training(rng):
    # The block's first projection feeds the recomputing gate as two
    # products, one per half (`split_dense`), not one split in two.
    # The gate's own products (the
    # token product, the folded second projection) are inside its
    # `custom_vjp`, not among the top level's.
    import jax

    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=12)
    block.build(x.shape)
    loss, trainable = block_loss(block, x, rng.normal(size=x.shape))
    jaxpr = jax.make_jaxpr(lambda *a: loss(*a))(trainable, x)
    widths = [
        equation.outvars[0].aval.shape[-1]
        for equation in jaxpr.eqns
        if equation.primitive.name == "dot_general"
    ]
    assert widths == [6, 6]
    assert "name=recomputed_gate" in str(jaxpr)


def test_training_program_does_not_grow_with_the_batch(rng):
    # `W`'s gradient as one dot per example unrolls the batch into the
    # program, and XLA's compile time grows with it (a 2-block classifier's
    # first step at batch 512 takes 17 s): above `PER_EXAMPLE_DOTS_UP_TO`
    # images it is one dot.
    import jax

    from keras_gmlp.kernels.gmlp_block import PER_EXAMPLE_DOTS_UP_TO

    block = GMLPBlock(ffn_dim=12)
    block.build((None, 6, 8))

    def dots(batch_size):
        x = rng.normal(size=(batch_size, 6, 8)).astype("float32")
        loss, trainable = block_loss(block, x, rng.normal(size=x.shape))
        gradient = jax.jit(jax.grad(lambda *a: loss(*a)))
        return gradient.lower(trainable, x).as_text().count("dot_general")

    larger = dots(PER_EXAMPLE_DOTS_UP_TO + 1)
    assert dots(4 * PER_EXAMPLE_DOTS_UP_TO) == larger < 16
    # Up to the bound, one dot per example.
    assert dots(PER_EXAMPLE_DOTS_UP_TO) - dots(1) == PER_EXAMPLE_DOTS_UP_TO - 1


def test_training_program_writes_out_no_weight_broadcast(rng):
    # Under JAX's own gradients XLA:CPU shares a norm's scale (and, in
    # the gate's recomputation, its center) broadcast to the activations'
    # shape between the forward and backward passes, and writes it out
    # as an array between them; the backward passes here read the weights
    # apart (`after_upstream`) and every broadcast stays in its fusion.
    # The masked LM's `gmlp_tiny` sizes: XLA:CPU does not share them at
    # smaller ones.
    import re

    import jax

    x = rng.normal(size=(32, 128, 128)).astype("float32")
    stack = keras.Sequential([GMLPBlock(ffn_dim=512) for _ in range(2)])
    stack.build(x.shape)
    loss, trainable = block_loss(stack, x, rng.normal(size=x.shape))
    gradient = jax.jit(jax.grad(lambda *a: loss(*a)))
    program = gradient.lower(trainable, x).compile().as_text()
    entry = program.split("\nENTRY")[1]
    parameters = set(re.findall(r"%([\w.]+) = \S+ parameter\(", entry))
    broadcasts = re.findall(
        r"%wrapped_broadcast[\w.]* = \S+ fusion\(%([\w.]+)\)", entry
    )
    assert len(parameters) >= len(trainable)
    assert [p for p in broadcasts if p in parameters] == []


def test_keeps_less_for_the_backward_pass(rng):
    # XLA's temporaries for the gradient of a stack of blocks, whose
    # kept activations add up: the recomputation must not be merged back
    # into the forward pass.
    import jax

    x = rng.normal(size=(4, 32, 16)).astype("float32")
    stack = keras.Sequential([GMLPBlock(ffn_dim=128) for _ in range(6)])
    stack.build(x.shape)
    loss, trainable = block_loss(stack, x, rng.normal(size=x.shape))

    def temporaries():
        gradient = jax.jit(jax.grad(lambda *a: loss(*a)))
        compiled = gradient.lower(trainable, x).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    recomputed, kept_by_autograd = temporaries(), with_autograd(temporaries)
    assert recomputed < 0.8 * kept_by_autograd


def test_output_projection_with_lora_is_applied_after_the_gate(rng):
    # Only a plain Dense is folded into the recomputing gate; one with
    # LoRA runs its own call on the gate's output.
    import jax

    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=12)
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    block.channel_projection_out.enable_lora(2)
    randomize_weights(block.channel_projection_out, rng, scale=0.3)
    loss, trainable = block_loss(block, x, rng.normal(size=x.shape))

    def gradients():
        gradient = jax.grad(lambda *a: loss(*a))
        return jax.tree.leaves(jax.jit(gradient)(trainable, x))

    recomputed, expected = gradients(), with_autograd(gradients)
    assert len(recomputed) == len(block.trainable_variables)
    for got, want in zip(recomputed, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
