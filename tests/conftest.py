import os

# Importing torch after TensorFlow can crash the torch backend; import it
# first when it is the backend under test.
if os.environ.get("KERAS_BACKEND") == "torch":
    import torch  # noqa: F401

import keras
import numpy as np
import pytest


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
