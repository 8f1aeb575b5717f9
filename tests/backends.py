"""The backends a fresh-process test loads a saved model in."""

import keras
import pytest

BACKENDS = ("tensorflow", "jax", "torch")


def next_backend(backend=None):
    """The backend after `backend` in tensorflow -> jax -> torch -> tf."""
    backend = backend or keras.config.backend()
    return BACKENDS[(BACKENDS.index(backend) + 1) % len(BACKENDS)]


def loading_backends():
    """Every backend as a test parameter, only the next one by default.

    Over the three backends' default runs, each backend's files are then
    loaded by another backend and each backend loads another's; the other
    pairs are `large`.
    """
    default = next_backend()
    return [
        backend
        if backend == default
        else pytest.param(backend, marks=pytest.mark.large)
        for backend in BACKENDS
    ]
