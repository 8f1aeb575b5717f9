"""The environment variables the backends read when they are imported.

Standard library only: importing this module imports no backend, so a
program can call `set_backend_environment()` before it imports one.
"""

import os
import sys

# Variable -> (the module that reads it when imported, the value set).
# TensorFlow turns its oneDNN kernels on by default on Intel CPUs only; on
# an AMD CPU they make a gMLP training step 1.2-1.3x faster
# (`benchmarks/vision.py`). PyTorch's OpenMP threads spin while they wait;
# beside tf.data's threads (the recipes' and the tasks' input pipelines)
# that makes the torch backend's training steps 30 times slower on a
# 2-core host: libgomp reads the policy once, when torch loads it.
BACKEND_ENVIRONMENT = {
    "TF_ENABLE_ONEDNN_OPTS": ("tensorflow", "1"),
    "OMP_WAIT_POLICY": ("torch", "PASSIVE"),
}


def set_backend_environment():
    """Sets the environment variables the backends read at import.

    `TF_ENABLE_ONEDNN_OPTS=1` (TensorFlow's oneDNN kernels, which it
    enables by itself on Intel CPUs only) unless TensorFlow is already
    imported, and `OMP_WAIT_POLICY=PASSIVE` (PyTorch's OpenMP threads
    sleep while they wait instead of spinning against tf.data's threads)
    unless torch is; a value the environment already has wins. The
    `keras-gmlp` command, the recipes and the test suite call it before
    the backend is imported; call it first in a program of your own for
    the same speed. `import keras_gmlp` alone changes nothing.

    Returns:
        dict. The variables set, with their values.

    Example:

    ```python
    import keras_gmlp

    keras_gmlp.set_backend_environment()  # first: before importing keras
    import keras
    ```
    """
    changed = {}
    for name, (module, value) in BACKEND_ENVIRONMENT.items():
        if module not in sys.modules and name not in os.environ:
            os.environ[name] = changed[name] = value
    return changed
