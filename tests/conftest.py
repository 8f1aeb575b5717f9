import os

# The tests compile hundreds of tiny models, whose XLA compilation costs
# more than their run: LLVM's -O0 makes the JAX suite about a quarter
# faster. XLA's graph passes (fusion, layouts) and numerics are unchanged.
# Set before any XLA client starts; the tests' subprocesses inherit it.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")

# Then the backends' import-time settings (`TF_ENABLE_ONEDNN_OPTS`,
# `OMP_WAIT_POLICY`) as the command and the recipes make them, before Keras
# imports its backend (torch too, under torch).
import keras_gmlp  # noqa: E402, I001

keras_gmlp.set_backend_environment()

# Importing torch after TensorFlow can crash the torch backend; import it
# before anything imports TensorFlow when it is the backend under test.
if os.environ.get("KERAS_BACKEND") == "torch":
    import torch  # noqa: F401

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def reset_keras_state():
    """Each test starts from float32 and a fixed seed."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Marks `one_backend(name)` tests `large` on the other backends.

    A slow end-to-end case whose logic is backend independent runs in the
    default suite under one backend only (different tests choose different
    backends); `-m large` runs it under every backend.
    """
    backend = keras.config.backend()
    for item in items:
        marker = item.get_closest_marker("one_backend")
        if marker is not None and marker.args[0] != backend:
            item.add_marker(pytest.mark.large)
