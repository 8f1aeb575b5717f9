"""The spatial gating unit's recomputing training call under torch."""

import keras
import numpy as np
import pytest

from benchmarks.common import saved_tensor_storages
from keras_gmlp.kernels import gmlp_block
from keras_gmlp.layers import GMLPBlock
from keras_gmlp.layers import SpatialGatingUnit
from tests.layer_test import randomize_weights

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="torch's autograd"
)


def formula(
    hidden,
    gamma,
    beta,
    weight,
    bias,
    attention=None,
    kernel=None,
    projection_bias=None,
):
    """The gate (and the second projection) in plain torch ops, for
    autograd to differentiate."""
    import torch

    u, v = torch.nn.functional.gelu(hidden).chunk(2, dim=-1)
    z = torch.nn.functional.layer_norm(v, v.shape[-1:], gamma, beta, 1e-5)
    product = torch.matmul(weight, z) + bias[:, None]
    if attention is not None:
        product = product + attention
    if kernel is None:
        return u * product
    return (u * product) @ kernel + projection_bias


def operands(rng, batch_shape, dtype, attention, projection=False):
    import torch

    tokens, channels = 5, 4
    shapes = {
        "hidden": (*batch_shape, tokens, 2 * channels),
        "gamma": (channels,),
        "beta": (channels,),
        "weight": (tokens, tokens),
        "bias": (tokens,),
    }
    if attention:
        shapes["attention"] = (*batch_shape, tokens, channels)
    if projection:
        shapes["kernel"] = (channels, 3)
        shapes["projection_bias"] = (3,)
    values = {name: rng.normal(size=shape) for name, shape in shapes.items()}
    # The norm's scale and center stay float32, as a mixed policy has them.
    return {
        name: torch.tensor(
            value,
            dtype=torch.float32 if name in ("gamma", "beta") else dtype,
            requires_grad=True,
        )
        for name, value in values.items()
    }


def gate_of(tensors):
    """`recomputed_spatial_gate` of `operands`' tensors."""
    from keras_gmlp.kernels.torch_spatial_gate import recomputed_spatial_gate

    return recomputed_spatial_gate(
        tensors["hidden"],
        tensors["gamma"],
        tensors["beta"],
        1e-5,
        tensors["weight"],
        tensors["bias"],
        tensors.get("attention"),
        tensors.get("kernel"),
        tensors.get("projection_bias"),
    )


@pytest.fixture(params=["gelu of halves", "one gelu"])
def gelu_form(request, monkeypatch):
    """Each form of the gate's GELU, whatever the dtype would choose."""
    from keras_gmlp.kernels import torch_spatial_gate

    of_halves = request.param == "gelu of halves"
    monkeypatch.setattr(
        torch_spatial_gate, "takes_gelu_of_halves", lambda dtype: of_halves
    )
    return request.param


@pytest.mark.parametrize("projection", [False, True])
@pytest.mark.parametrize("attention", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("batch_shape", [(), (3,), (2, 3)])
def test_matches_autograd_of_the_formula(
    batch_shape, dtype, attention, projection, gelu_form, amd, rng
):
    import torch

    tensors = operands(
        rng, batch_shape, getattr(torch, dtype), attention, projection
    )
    names = list(tensors)
    output = gate_of(tensors)
    upstream = torch.tensor(rng.normal(size=output.shape))
    got = torch.autograd.grad(
        output, [tensors[n] for n in names], upstream.to(output.dtype)
    )
    # The reference: autograd of the formula in float64, from the same
    # (rounded) values.
    wide = {
        n: t.detach().double().requires_grad_(True) for n, t in tensors.items()
    }
    expected = formula(**wide)
    want = torch.autograd.grad(expected, [wide[n] for n in names], upstream)
    tolerance = 1e-5 if dtype == "float32" else 3e-2
    for name, value, reference in zip(
        ["output", *names], [output, *got], [expected, *want], strict=True
    ):
        assert value.dtype == tensors.get(name, output).dtype, name
        reference = reference.detach().numpy()
        np.testing.assert_allclose(
            value.detach().double().numpy(),
            reference,
            rtol=0,
            atol=tolerance * np.abs(reference).max(),
            err_msg=name,
        )


def test_keeps_the_gelu_input_and_the_product_only(gelu_form, rng):
    import torch

    tensors = operands(rng, (3,), torch.float32, attention=False)
    hidden = tensors["hidden"]
    _, storages = saved_tensor_storages(lambda: gate_of(tensors))
    for name in ("gamma", "beta", "weight"):
        storages.pop(tensors[name].untyped_storage().data_ptr())
    assert storages.pop(hidden.untyped_storage().data_ptr()) == hidden.nbytes
    # The product (half the channels), then the norm's mean and inverse
    # deviation, a float32 per token each.
    tokens = hidden.shape[0] * hidden.shape[1]
    expected = [4 * tokens, 4 * tokens, hidden.nbytes // 2]
    assert sorted(storages.values()) == expected


@pytest.mark.parametrize(
    "dtype, gelus", [("float32", 2), ("bfloat16", 1), ("float16", 1)]
)
def test_gelu_of_halves_in_float32_only(dtype, gelus, rng):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class CountGelus(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.count = {"forward": 0, "backward": 0}

        def __torch_dispatch__(self, op, types, args=(), kwargs=None):
            if op.overloadpacket is torch.ops.aten.gelu:
                self.count["forward"] += 1
            if op.overloadpacket is torch.ops.aten.gelu_backward:
                self.count["backward"] += 1
            return op(*args, **(kwargs or {}))

    tensors = operands(rng, (3,), getattr(torch, dtype), attention=False)
    with CountGelus() as counter:
        output = gate_of(tensors)
        assert counter.count == {"forward": gelus, "backward": 0}
        output.sum().backward()
    # The backward pass recomputes the GELU as the forward took it.
    assert counter.count == {"forward": 2 * gelus, "backward": gelus}


def without_recomputing(function):
    """`function()` with the block kernel's usual call of the unit under
    autograd, not the recomputing gate."""
    original = gmlp_block._recomputes_torch
    gmlp_block._recomputes_torch = lambda unit, hidden, length: False
    try:
        return function()
    finally:
        gmlp_block._recomputes_torch = original


def block_saved_bytes(block, x, recomputes):
    def saved():
        return saved_tensor_storages(lambda: block(x, training=True))

    output, storages = saved() if recomputes else without_recomputing(saved)
    for weight in block.weights:  # the activations alone
        storages.pop(weight.value.untyped_storage().data_ptr(), None)
    return output, sum(storages.values())


@pytest.mark.parametrize("attention_dim", [None, 4])
def test_block_keeps_less_for_the_backward_pass(attention_dim, rng):
    import torch

    x = torch.tensor(rng.normal(size=(2, 6, 8)), dtype=torch.float32)
    x.requires_grad_(True)
    block = GMLPBlock(ffn_dim=32, attention_dim=attention_dim)
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    recomputed, kept = block_saved_bytes(block, x, recomputes=True)
    plain, kept_by_autograd = block_saved_bytes(block, x, recomputes=False)
    np.testing.assert_allclose(
        recomputed.detach().numpy(), plain.detach().numpy(), atol=1e-6
    )
    # Autograd keeps, per token, the GELU's input and output (32 values
    # each), the normalised `v`, the product and the second projection's
    # input (16 each), 132 values with the block's others (without
    # attention); the recomputing gate, into which the projection is
    # folded, keeps no GELU output, normalised `v` or projection input.
    assert kept_by_autograd - kept == 4 * 12 * (32 + 16 + 16)


def backward_names(output):
    """The names of the autograd nodes `output` was computed through."""
    names, pending, seen = set(), [output.grad_fn], set()
    while pending:
        node = pending.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        pending.extend(parent for parent, _ in node.next_functions)
    return names


def test_recomputes_only_where_it_applies(rng):
    import torch

    x = torch.tensor(rng.normal(size=(2, 6, 8)), dtype=torch.float32)
    block = GMLPBlock(ffn_dim=12)
    block.build(x.shape)
    assert "RecomputedGateBackward" in backward_names(block(x, training=True))
    with torch.no_grad():
        assert block(x).grad_fn is None
    # The FFT product and the other gatings take the unit's usual call.
    for kwargs in [
        {"spatial": "toeplitz", "toeplitz_method": "fft"},
        {"gating": "additive"},
    ]:
        unit = SpatialGatingUnit(**kwargs)
        hidden = torch.tensor(rng.normal(size=(2, 6, 12)), dtype=torch.float32)
        unit.build(hidden.shape)
        hidden.requires_grad_(True)
        output = gmlp_block.call_on_projection(unit, hidden)
        assert "RecomputedGateBackward" not in backward_names(output)
        expected = unit(keras.activations.gelu(hidden, approximate=False))
        np.testing.assert_allclose(
            output.detach().numpy(), expected.detach().numpy(), atol=1e-6
        )


def test_output_projection_with_lora_is_applied_after_the_gate(rng):
    # Only a plain Dense is folded into the recomputing gate; one with
    # LoRA runs its own call on the gate's output.
    import torch

    x = torch.tensor(rng.normal(size=(2, 6, 8)), dtype=torch.float32)
    block = GMLPBlock(ffn_dim=12)
    block.build(x.shape)
    block.channel_projection_out.enable_lora(2)
    randomize_weights(block, rng, scale=0.3)
    weights = [v.value for v in block.trainable_variables]

    def gradients():
        output = block(x, training=True)
        assert "RecomputedGateBackward" in backward_names(output)
        return torch.autograd.grad(output.square().sum(), weights)

    def plain_gradients():
        output = block(x, training=True)
        assert "RecomputedGateBackward" not in backward_names(output)
        return torch.autograd.grad(output.square().sum(), weights)

    recomputed = gradients()
    expected = without_recomputing(plain_gradients)
    assert len(recomputed) == len(block.trainable_variables)
    for got, want in zip(recomputed, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
