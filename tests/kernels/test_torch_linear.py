"""`keras_gmlp.kernels.torch_linear`: the float32 linear on oneDNN against
numpy, and where it is taken."""

import keras
import numpy as np
import pytest

from keras_gmlp.kernels import reference_only
from keras_gmlp.kernels.dense import dense_call
from keras_gmlp.kernels.direct_call import direct_call

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="torch's kernels"
)


def leaf(rng, shape, dtype="float32"):
    import torch

    values = torch.tensor(rng.normal(size=shape), dtype=getattr(torch, dtype))
    return values.requires_grad_()


def wide(tensor):
    return tensor.detach().double().numpy()


@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 4, 5), (2, 3, 4, 5)])
def test_linear_and_its_gradients_match_numpy(shape, use_bias, amd, rng):
    import torch

    from keras_gmlp.kernels.torch_linear import linear

    x, weight = leaf(rng, shape), leaf(rng, (6, shape[-1]))
    bias = leaf(rng, (6,)) if use_bias else None
    outputs = linear(x, weight, bias)
    upstream = torch.tensor(rng.normal(size=outputs.shape), dtype=torch.float32)
    leaves = [x, weight] + ([bias] if use_bias else [])
    got = torch.autograd.grad(outputs, leaves, upstream)
    assert ("OneDnnLinear" in type(outputs.grad_fn).__name__) == amd
    rows = wide(x).reshape(-1, shape[-1])
    by_rows = wide(upstream).reshape(-1, 6)
    expected = wide(x) @ wide(weight).T
    if use_bias:
        expected = expected + wide(bias)
    want = [(by_rows @ wide(weight)).reshape(shape), by_rows.T @ rows]
    if use_bias:
        want.append(by_rows.sum(axis=0))
    np.testing.assert_allclose(wide(outputs), expected, rtol=1e-5, atol=1e-5)
    for value, reference in zip(got, want, strict=True):
        assert value.shape == reference.shape
        np.testing.assert_allclose(wide(value), reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("inputs, outputs", [(5, 6), (6, 5)])
def test_gradient_helpers_match_numpy(inputs, outputs, amd, rng):
    from keras_gmlp.kernels.torch_linear import input_gradient
    from keras_gmlp.kernels.torch_linear import weight_gradient

    upstream, weight, x = (
        leaf(rng, (2, 7, outputs)),
        leaf(rng, (outputs, inputs)),
        leaf(rng, (14, inputs)),
    )
    np.testing.assert_allclose(
        wide(input_gradient(upstream, weight)),
        wide(upstream) @ wide(weight),
        rtol=1e-5,
        atol=1e-5,
    )
    rows = upstream.reshape(-1, outputs)
    np.testing.assert_allclose(
        wide(weight_gradient(rows, x)),
        wide(rows).T @ wide(x),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize(
    "leading", [(), (3,), (2, 3)], ids=["no batch", "batch", "two axes"]
)
@pytest.mark.parametrize("tokens", [(5, 5), (4, 6)], ids=["square", "wide"])
def test_token_product_and_its_gradients_match_numpy(tokens, leading, amd, rng):
    import torch

    from keras_gmlp.kernels.torch_linear import over_tokens

    (n, m), c = tokens, 7
    weight, x = leaf(rng, (n, m)), leaf(rng, (*leading, m, c))
    outputs = over_tokens(weight, x)
    upstream = torch.tensor(rng.normal(size=outputs.shape), dtype=torch.float32)
    by_weight, by_x = torch.autograd.grad(outputs, (weight, x), upstream)
    assert ("OneDnnTokenProduct" in type(outputs.grad_fn).__name__) == amd
    expected = np.einsum("nm,...mc->...nc", wide(weight), wide(x))
    want_weight = np.einsum(
        "bnc,bmc->nm",
        wide(upstream).reshape(-1, n, c),
        wide(x).reshape(-1, m, c),
    )
    want_x = np.einsum("nm,...nc->...mc", wide(weight), wide(upstream))
    for value, reference in [
        (outputs, expected),
        (by_weight, want_weight),
        (by_x, want_x),
    ]:
        assert value.shape == reference.shape
        np.testing.assert_allclose(wide(value), reference, rtol=1e-5, atol=1e-5)


def test_token_products_too_small_or_not_float32_take_the_batched_matmul(
    monkeypatch, rng
):
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import MIN_MULTIPLY_ADDS
    from keras_gmlp.kernels.torch_linear import over_tokens

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    monkeypatch.setattr(cpu_features, "cpu_family", lambda: 26)
    weight = leaf(rng, (64, 64))
    channels = MIN_MULTIPLY_ADDS // (64 * 64 * 4)
    taken = {
        count: type(over_tokens(weight, leaf(rng, (4, 64, count))).grad_fn)
        for count in (channels - 1, channels)
    }
    assert "OneDnnTokenProduct" not in taken[channels - 1].__name__
    assert "OneDnnTokenProduct" in taken[channels].__name__
    weight, x = leaf(rng, (64, 64), "bfloat16"), leaf(rng, (4, 64, channels))
    halves = over_tokens(weight, x.to(weight.dtype))
    assert "OneDnnTokenProduct" not in type(halves.grad_fn).__name__


@pytest.mark.parametrize("family", [25, 26, 27])
def test_token_products_take_onednn_from_amds_family_26(
    family, monkeypatch, rng
):
    # Family 25 (Zen 4): MKL's batched product is as fast, without the
    # rows' copies. Its linear products still take oneDNN.
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import MIN_MULTIPLY_ADDS
    from keras_gmlp.kernels.torch_linear import linear
    from keras_gmlp.kernels.torch_linear import over_tokens

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    monkeypatch.setattr(cpu_features, "cpu_family", lambda: family)
    weight = leaf(rng, (64, 64))
    x = leaf(rng, (4, 64, MIN_MULTIPLY_ADDS // (64 * 64 * 4)))
    taken = type(over_tokens(weight, x).grad_fn).__name__
    assert ("OneDnnTokenProduct" in taken) == (family >= 26)
    rows = leaf(rng, (MIN_MULTIPLY_ADDS // 64, 64))
    assert "OneDnnLinear" in type(linear(rows, weight).grad_fn).__name__


def test_products_too_small_for_onednn_take_torchs_linear(monkeypatch, rng):
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import MIN_MULTIPLY_ADDS
    from keras_gmlp.kernels.torch_linear import linear

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    weight = leaf(rng, (64, 64))
    rows = MIN_MULTIPLY_ADDS // (64 * 64)
    taken = {
        count: type(linear(leaf(rng, (count, 64)), weight).grad_fn).__name__
        for count in (rows - 1, rows)
    }
    assert "OneDnnLinear" not in taken[rows - 1]
    assert "OneDnnLinear" in taken[rows]


def test_a_few_rows_by_a_large_weight_take_onednn(monkeypatch, rng):
    """A decoded token's logits, one row by a vocabulary's weight, are
    bound by reading the weight: oneDNN reads it on every thread."""
    import torch

    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import MIN_WEIGHT_ELEMENTS
    from keras_gmlp.kernels.torch_linear import input_gradient
    from keras_gmlp.kernels.torch_linear import linear

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    row = leaf(rng, (1, 1, 128))
    taken = {}
    for outputs in (MIN_WEIGHT_ELEMENTS // 128 - 1, MIN_WEIGHT_ELEMENTS // 128):
        weight = leaf(rng, (outputs, 128))
        logits = linear(row, weight)
        taken[outputs] = type(logits.grad_fn).__name__
        expected = wide(row) @ wide(weight).T
        np.testing.assert_allclose(wide(logits), expected, rtol=1e-5, atol=1e-4)
    assert "OneDnnLinear" not in taken[MIN_WEIGHT_ELEMENTS // 128 - 1]
    assert "OneDnnLinear" in taken[MIN_WEIGHT_ELEMENTS // 128]
    # No rows: torch's own linear, whatever the weight.
    empty = linear(leaf(rng, (0, 128)), weight)
    assert "OneDnnLinear" not in type(empty.grad_fn).__name__
    assert tuple(empty.shape) == (0, outputs)
    # Its input gradient reads the same weight.
    upstream = torch.tensor(rng.normal(size=(1, outputs)), dtype=torch.float32)
    np.testing.assert_allclose(
        wide(input_gradient(upstream, weight)),
        wide(upstream) @ wide(weight),
        rtol=1e-5,
        atol=1e-4,
    )


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float64"])
def test_other_dtypes_take_torchs_linear(dtype, monkeypatch, rng):
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import linear

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    x, weight = leaf(rng, (3, 4), dtype), leaf(rng, (2, 4), dtype)
    outputs = linear(x, weight)
    assert "OneDnnLinear" not in type(outputs.grad_fn).__name__
    assert outputs.dtype == x.dtype


def test_exports_and_empty_batches_take_torchs_linear(monkeypatch, rng):
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import linear

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    x, weight = leaf(rng, (3, 4)), leaf(rng, (2, 4))
    with reference_only():
        outputs = linear(x, weight)
    assert "OneDnnLinear" not in type(outputs.grad_fn).__name__
    empty = linear(leaf(rng, (0, 4)), weight)
    assert tuple(empty.shape) == (0, 2)
    assert "OneDnnLinear" not in type(empty.grad_fn).__name__


def test_dense_call_takes_it_and_trains_the_same(amd, rng):
    import torch

    layer = keras.layers.Dense(6)
    layer.build((2, 3, 5))
    for weight in layer.weights:
        weight.assign(rng.normal(size=weight.shape))
    x = leaf(rng, (2, 3, 5))
    outputs = direct_call(layer, x, method=dense_call)
    assert ("OneDnnLinear" in type(outputs.grad_fn).__name__) == amd
    upstream = torch.tensor(rng.normal(size=(2, 3, 6)), dtype=torch.float32)
    by_kernel, by_bias = torch.autograd.grad(
        outputs, [layer.kernel.value, layer.bias.value], upstream
    )
    rows, by_rows = wide(x).reshape(-1, 5), wide(upstream).reshape(-1, 6)
    np.testing.assert_allclose(
        wide(by_kernel), rows.T @ by_rows, rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        wide(by_bias), by_rows.sum(axis=0), rtol=1e-5, atol=1e-5
    )


def test_the_package_matmul_takes_it(amd, rng):
    from keras_gmlp.kernels.matmul import matmul

    x, y = leaf(rng, (2, 3, 5)), leaf(rng, (5, 4))
    outputs = matmul(x, y)
    assert ("OneDnnLinear" in type(outputs.grad_fn).__name__) == amd
    np.testing.assert_allclose(
        wide(outputs), wide(x) @ wide(y), rtol=1e-5, atol=1e-5
    )
    # Operands of two dtypes: Keras' matmul, which promotes them.
    mixed = matmul(x, leaf(rng, (5, 4), "float64"))
    assert "OneDnnLinear" not in type(mixed.grad_fn).__name__
