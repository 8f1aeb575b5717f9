"""The kernels' tests' fixtures."""

import keras
import pytest


@pytest.fixture(params=[True, False], ids=["amd", "not amd"])
def amd(request, monkeypatch):
    """The CPU taken for an AMD one, or not, whatever it is (the torch
    kernels' float32 products take oneDNN on AMD's,
    `keras_gmlp.kernels.torch_linear`)."""
    from keras_gmlp.kernels import cpu_features

    monkeypatch.setattr(cpu_features, "is_amd", lambda: request.param)
    # A family whose token products take oneDNN too.
    monkeypatch.setattr(cpu_features, "cpu_family", lambda: 26)
    if keras.config.backend() == "torch":
        from keras_gmlp.kernels import torch_linear

        # The tests' products are small: oneDNN takes them all.
        monkeypatch.setattr(torch_linear, "MIN_MULTIPLY_ADDS", 0)
    return request.param


@pytest.fixture
def kernel_mode():
    """`keras_gmlp.kernels.configure`, set back to `"auto"` after the
    test."""
    from keras_gmlp import kernels

    yield kernels.configure
    kernels.configure("auto")
