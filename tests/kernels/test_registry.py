"""The kernels' switch and dispatch point."""

import os

import pytest

from keras_gmlp import kernels
from keras_gmlp.kernels import registry
from tests.fresh_python import last_line_of


@pytest.fixture
def restored():
    yield
    kernels.configure("auto")


def reference(x):
    return ("reference", x)


def kernel(x):
    return ("kernel", x) if x >= 0 else NotImplemented


@pytest.fixture
def operation(monkeypatch):
    """A `"doubling"` operation with `kernel` under this backend."""
    import keras

    monkeypatch.setitem(
        registry.KERNELS,
        "doubling",
        {keras.config.backend(): f"{__name__}:kernel"},
    )
    monkeypatch.setattr(registry, "_loaded", {})
    return "doubling"


@pytest.mark.parametrize(
    "mode, expected",
    [("on", "kernel"), ("auto", "kernel"), ("off", "reference")],
)
def test_modes(mode, expected, operation, restored):
    # This machine computes on its CPU: "auto" takes the kernel.
    kernels.configure(mode)
    assert kernels.dispatch(operation, reference, 2) == (expected, 2)


def test_a_declining_kernel_falls_back_to_the_reference(operation, restored):
    kernels.configure("on")
    assert kernels.dispatch(operation, reference, -1) == ("reference", -1)


def test_reference_only_and_operations_turn_kernels_off(operation, restored):
    kernels.configure("on")
    with kernels.reference_only():
        assert kernels.mode() == "off"
        assert kernels.dispatch(operation, reference, 1)[0] == "reference"
    assert kernels.dispatch(operation, reference, 1)[0] == "kernel"
    kernels.configure("on", operations=["gmlp_block"])
    assert kernels.dispatch(operation, reference, 1)[0] == "reference"


def test_an_operation_without_kernels_runs_its_reference(restored):
    kernels.configure("on")
    assert kernels.dispatch("no_such_operation", reference, 3)[0] == "reference"


def test_bad_settings_raise_one_line_naming_them(restored):
    with pytest.raises(ValueError, match=r"mode='fast'; expected one of"):
        kernels.configure("fast")
    with pytest.raises(ValueError, match=r"operations=\['gelu'\]"):
        kernels.configure("on", operations=["gelu"])


def test_the_environment_variable_sets_the_mode():
    code = "from keras_gmlp import kernels; print(kernels.mode())"
    env = dict(os.environ, KERAS_GMLP_KERNELS="off")
    assert last_line_of(code, env) == "off"
