"""The `"toeplitz_matrix"` kernel (torch's tiled taps) against the
reference gather and numpy: taken while gradients are recorded on a CPU
other than AMD's, declined elsewhere."""

import keras
import numpy as np
import pytest

from keras_gmlp.kernels import toeplitz_matrix as kernel_module
from keras_gmlp.layers.toeplitz_matrix import toeplitz_matrix
from tests.layers.test_toeplitz_matrix import as_numpy
from tests.layers.test_toeplitz_matrix import reference_gradient
from tests.layers.test_toeplitz_matrix import reference_matrix

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="torch's kernel"
)

TOKENS = 9


@pytest.fixture
def tiled_calls(monkeypatch):
    """The lengths `tiled_matrix` was called with."""
    calls = []
    tiled = kernel_module.tiled_matrix

    def spy(taps, length):
        calls.append(length)
        return tiled(taps, length)

    monkeypatch.setattr(kernel_module, "tiled_matrix", spy)
    return calls


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("length", [1, 5, TOKENS])
@pytest.mark.parametrize("mode", ["auto", "off"])
def test_matrix_and_gradient_equal_numpy_and_the_kernel_runs_off_amd(
    mode, length, dtype, amd, kernel_mode, tiled_calls, rng
):
    import torch

    kernel_mode(mode)
    values = rng.normal(size=2 * TOKENS - 1).astype("float32")
    upstream = rng.normal(size=(length, length)).astype("float32")
    taps = torch.tensor(values, dtype=getattr(torch, dtype))
    values = as_numpy(taps)
    taps.requires_grad_(True)
    weight = toeplitz_matrix(taps, length)
    (weight.float() * torch.tensor(upstream)).sum().backward()
    assert tiled_calls == ([length] if mode == "auto" and not amd else [])
    np.testing.assert_array_equal(
        as_numpy(weight), reference_matrix(values, length)
    )
    want = reference_gradient(upstream, len(values))
    tolerance = 1e-5 if dtype == "float32" else 2e-2 * np.abs(want).max()
    np.testing.assert_allclose(
        as_numpy(taps.grad), want, rtol=1e-5, atol=tolerance
    )


def test_the_kernel_declines_without_gradients_and_for_symbolic_lengths(
    kernel_mode, tiled_calls, monkeypatch, rng
):
    import torch

    from keras_gmlp.kernels import cpu_features

    monkeypatch.setattr(cpu_features, "is_amd", lambda: False)
    taps = torch.tensor(rng.normal(size=2 * TOKENS - 1), dtype=torch.float32)
    with torch.no_grad():
        weight = toeplitz_matrix(taps, 4)
    np.testing.assert_array_equal(
        as_numpy(weight), reference_matrix(as_numpy(taps), 4)
    )
    assert kernel_module.torch_toeplitz_matrix(taps, torch.tensor(4)) is (
        NotImplemented
    )
    assert tiled_calls == []
