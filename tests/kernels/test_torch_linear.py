"""`keras_gmlp.kernels.torch_linear`: the float32 products on oneDNN
against numpy, and where they are taken."""

import keras
import numpy as np
import pytest

from keras_gmlp.kernels import reference_only
from keras_gmlp.kernels.dense import dense_call
from keras_gmlp.kernels.direct_call import direct_call

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="torch's kernels"
)


@pytest.fixture
def onednn_calls(monkeypatch):
    """The shapes of the products `torch_linear` hands to oneDNN, with
    autograd off (as the torch block kernel runs)."""
    import torch

    from keras_gmlp.kernels import torch_linear

    calls = []
    original = torch_linear._onednn

    def counted(a, b, bias=None):
        calls.append((tuple(a.shape), tuple(b.shape)))
        return original(a, b, bias)

    monkeypatch.setattr(torch_linear, "_onednn", counted)
    with torch.no_grad():
        yield calls


def tensor(rng, shape, dtype="float32"):
    import torch

    return torch.tensor(rng.normal(size=shape), dtype=getattr(torch, dtype))


def wide(tensor):
    return tensor.detach().double().numpy()


@pytest.mark.parametrize("use_bias", [True, False])
@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 4, 5), (2, 3, 4, 5)])
def test_linear_matches_numpy(shape, use_bias, amd, rng, onednn_calls):
    from keras_gmlp.kernels.torch_linear import linear

    x, weight = tensor(rng, shape), tensor(rng, (6, shape[-1]))
    bias = tensor(rng, (6,)) if use_bias else None
    outputs = linear(x, weight, bias)
    assert bool(onednn_calls) == amd
    expected = wide(x) @ wide(weight).T
    if use_bias:
        expected = expected + wide(bias)
    assert outputs.shape == expected.shape
    np.testing.assert_allclose(wide(outputs), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "leading", [(), (3,), (2, 3)], ids=["no batch", "batch", "two axes"]
)
@pytest.mark.parametrize("tokens", [(5, 5), (4, 6)], ids=["square", "wide"])
def test_token_product_matches_numpy(tokens, leading, amd, rng, onednn_calls):
    from keras_gmlp.kernels.torch_linear import over_tokens

    (n, m), c = tokens, 7
    weight, x = tensor(rng, (n, m)), tensor(rng, (*leading, m, c))
    outputs = over_tokens(weight, x)
    assert bool(onednn_calls) == amd
    expected = np.einsum("nm,...mc->...nc", wide(weight), wide(x))
    assert outputs.shape == expected.shape
    np.testing.assert_allclose(wide(outputs), expected, rtol=1e-5, atol=1e-5)


def test_products_recorded_by_autograd_take_torchs_own(amd, rng):
    import torch

    from keras_gmlp.kernels.torch_linear import linear
    from keras_gmlp.kernels.torch_linear import over_tokens

    x = tensor(rng, (3, 4, 5)).requires_grad_()
    weight = tensor(rng, (6, 5)).requires_grad_()
    outputs = linear(x, weight)
    mixed = over_tokens(tensor(rng, (4, 4)), x)
    by_x, by_weight = torch.autograd.grad(outputs.sum(), (x, weight))
    np.testing.assert_allclose(
        wide(by_x), np.tile(wide(weight).sum(0), (3, 4, 1)), rtol=1e-5
    )
    np.testing.assert_allclose(
        wide(by_weight),
        np.tile(wide(x).reshape(-1, 5).sum(0), (6, 1)),
        rtol=1e-5,
    )
    assert mixed.requires_grad


def test_token_products_too_small_or_not_float32_take_the_batched_matmul(
    monkeypatch, rng, onednn_calls
):
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import MIN_MULTIPLY_ADDS
    from keras_gmlp.kernels.torch_linear import over_tokens

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    monkeypatch.setattr(cpu_features, "cpu_family", lambda: 26)
    weight = tensor(rng, (64, 64))
    channels = MIN_MULTIPLY_ADDS // (64 * 64 * 4)
    over_tokens(weight, tensor(rng, (4, 64, channels - 1)))
    assert not onednn_calls
    over_tokens(weight, tensor(rng, (4, 64, channels)))
    assert len(onednn_calls) == 1
    x = tensor(rng, (4, 64, channels), "bfloat16")
    over_tokens(weight.to(x.dtype), x)
    assert len(onednn_calls) == 1


@pytest.mark.parametrize("family", [25, 26, 27])
def test_token_products_take_onednn_from_amds_family_26(
    family, monkeypatch, rng, onednn_calls
):
    # Family 25 (Zen 4): MKL's batched product is as fast, without the
    # rows' copies. Its linear products still take oneDNN.
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import MIN_MULTIPLY_ADDS
    from keras_gmlp.kernels.torch_linear import linear
    from keras_gmlp.kernels.torch_linear import over_tokens

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    monkeypatch.setattr(cpu_features, "cpu_family", lambda: family)
    weight = tensor(rng, (64, 64))
    over_tokens(
        weight, tensor(rng, (4, 64, MIN_MULTIPLY_ADDS // (64 * 64 * 4)))
    )
    assert len(onednn_calls) == (family >= 26)
    linear(tensor(rng, (MIN_MULTIPLY_ADDS // 64, 64)), weight)
    assert len(onednn_calls) == (family >= 26) + 1


def test_products_too_small_for_onednn_take_torchs_linear(
    monkeypatch, rng, onednn_calls
):
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import MIN_MULTIPLY_ADDS
    from keras_gmlp.kernels.torch_linear import linear

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    weight = tensor(rng, (64, 64))
    rows = MIN_MULTIPLY_ADDS // (64 * 64)
    linear(tensor(rng, (rows - 1, 64)), weight)
    assert not onednn_calls
    linear(tensor(rng, (rows, 64)), weight)
    assert len(onednn_calls) == 1


def test_a_few_rows_by_a_large_weight_take_onednn(
    monkeypatch, rng, onednn_calls
):
    """A decoded token's logits, one row by a vocabulary's weight, are
    bound by reading the weight: oneDNN reads it on every thread."""
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import MIN_WEIGHT_ELEMENTS
    from keras_gmlp.kernels.torch_linear import linear

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    row = tensor(rng, (1, 1, 128))
    for outputs in (MIN_WEIGHT_ELEMENTS // 128 - 1, MIN_WEIGHT_ELEMENTS // 128):
        weight = tensor(rng, (outputs, 128))
        logits = linear(row, weight)
        expected = wide(row) @ wide(weight).T
        np.testing.assert_allclose(wide(logits), expected, rtol=1e-5, atol=1e-4)
        assert len(onednn_calls) == (outputs == MIN_WEIGHT_ELEMENTS // 128)
    # No rows: torch's own linear, whatever the weight.
    empty = linear(tensor(rng, (0, 128)), weight)
    assert len(onednn_calls) == 1
    assert tuple(empty.shape) == (0, outputs)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float64"])
def test_other_dtypes_take_torchs_linear(dtype, monkeypatch, rng, onednn_calls):
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import linear

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    x, weight = tensor(rng, (3, 4), dtype), tensor(rng, (2, 4), dtype)
    outputs = linear(x, weight)
    assert not onednn_calls
    assert outputs.dtype == x.dtype


def test_exports_and_empty_batches_take_torchs_linear(
    monkeypatch, rng, onednn_calls
):
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.torch_linear import linear

    monkeypatch.setattr(cpu_features, "is_amd", lambda: True)
    x, weight = tensor(rng, (3, 4)), tensor(rng, (2, 4))
    with reference_only():
        linear(x, weight)
    empty = linear(tensor(rng, (0, 4)), weight)
    assert tuple(empty.shape) == (0, 2)
    assert not onednn_calls


def test_dense_call_takes_it(amd, rng, onednn_calls):
    layer = keras.layers.Dense(6)
    layer.build((2, 3, 5))
    for weight in layer.weights:
        weight.assign(rng.normal(size=weight.shape))
    x = tensor(rng, (2, 3, 5))
    outputs = direct_call(layer, x, method=dense_call)
    assert bool(onednn_calls) == amd
    expected = wide(x) @ keras.ops.convert_to_numpy(layer.kernel) + (
        keras.ops.convert_to_numpy(layer.bias)
    )
    np.testing.assert_allclose(wide(outputs), expected, rtol=1e-5, atol=1e-5)


def test_the_package_matmul_takes_it(amd, rng, onednn_calls):
    from keras_gmlp.kernels.matmul import matmul

    x, y = tensor(rng, (2, 3, 5)), tensor(rng, (5, 4))
    outputs = matmul(x, y)
    assert len(onednn_calls) == amd
    np.testing.assert_allclose(
        wide(outputs), wide(x) @ wide(y), rtol=1e-5, atol=1e-5
    )
    # Operands of two dtypes: Keras' matmul, which promotes them.
    matmul(x, tensor(rng, (5, 4), "float64"))
    assert len(onednn_calls) == amd
