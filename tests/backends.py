"""The backends a fresh-process test loads a saved model in, and the XLA
flags of a test's JAX processes."""

import os

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


def in_turn(values, ids=None):
    """Test parameters that the backends take in turn.

    Each value runs in the default suite under one backend (tensorflow,
    jax, torch, tensorflow, ...), so every backend runs some of the cases
    and each case runs once; `-m large` runs them all under every backend.
    For cases that differ in what they build (a preset, a task, a format),
    not in the backend code they exercise.
    """
    values = list(values)
    ids = ids or [None] * len(values)
    return [
        pytest.param(
            value,
            id=case_id,
            marks=pytest.mark.one_backend(BACKENDS[index % len(BACKENDS)]),
        )
        for index, (value, case_id) in enumerate(zip(values, ids, strict=True))
    ]


def xla_flags(cpu_devices=None):
    """The tests' `XLA_FLAGS` (tests/conftest.py: LLVM at -O0) for a fresh
    process, with `cpu_devices` host devices forced, or none forced."""
    flags = [
        flag
        for flag in os.environ["XLA_FLAGS"].split()
        if not flag.startswith("--xla_force_host_platform_device_count")
    ]
    if cpu_devices:
        flags.append(f"--xla_force_host_platform_device_count={cpu_devices}")
    return " ".join(flags)
