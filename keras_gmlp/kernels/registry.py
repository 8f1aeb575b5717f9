"""The switch between the reference path and the fast kernels.

Each operation the layers and models hand to a kernel has one dispatch
point, `dispatch(operation, reference, *args, **kwargs)`: it calls the
kernel registered in `KERNELS` for the operation and the backend, or
`reference(*args, **kwargs)` when there is none, when the kernels are
off, or when the kernel declines (returns `NotImplemented`, for an input
it does not serve). A kernel takes the same arguments as its reference
and computes the same numbers, up to float rounding.

The mode, `configure(mode)` or the `KERAS_GMLP_KERNELS` environment
variable (read when first needed):

- `"auto"` (the default): a kernel runs only on a CPU, where it was
  measured faster (`benchmarks/kernels.py`); on a GPU or TPU the
  reference path runs;
- `"on"`: every kernel, on any device;
- `"off"`: the reference path only.
"""

import importlib
import os

import keras

from keras_gmlp.thread_flag import ThreadFlag

MODES = ("auto", "on", "off")

# Operation -> backend -> "module:function" of the kernel, imported on
# first use.
KERNELS = {
    "attention": {
        "torch": "keras_gmlp.kernels.attention:torch_attention",
    },
    "batch_chains": {
        "jax": "keras_gmlp.kernels.batch_chains:jax_batch_chains",
        "tensorflow": "keras_gmlp.kernels.batch_chains:tensorflow_batch_chains",
    },
    "gmlp_block": {
        "jax": "keras_gmlp.kernels.gmlp_block:gmlp_block",
        "tensorflow": "keras_gmlp.kernels.gmlp_block:gmlp_block",
        "torch": "keras_gmlp.kernels.gmlp_block:torch_gmlp_block",
    },
    "gmlp_block_with_cache": {
        "torch": "keras_gmlp.kernels.decoding:torch_gmlp_block_with_cache",
    },
    "cache_update": {
        "torch": "keras_gmlp.kernels.decoding:torch_cache_update",
    },
    "causal_lm_with_cache": {
        "torch": "keras_gmlp.kernels.decoding:torch_causal_lm_with_cache",
    },
    "generate_function": {
        "tensorflow": (
            "keras_gmlp.kernels.decoding:tensorflow_generate_function"
        ),
    },
    "toeplitz_matrix": {
        "torch": "keras_gmlp.kernels.toeplitz_matrix:torch_toeplitz_matrix",
    },
    "step_function": {
        "jax": "keras_gmlp.kernels.allocator:with_ready_inputs",
    },
    "token_cross_entropy": {
        "tensorflow": (
            "keras_gmlp.kernels.text_metrics:tensorflow_token_cross_entropy"
        ),
    },
}

_reference_only = ThreadFlag()
_owned_caches = ThreadFlag()
_settings = {"mode": None, "operations": None}
_loaded = {}


def _checked(mode, source):
    if mode not in MODES:
        raise ValueError(
            f"Received {source}={mode!r}; expected one of {MODES}."
        )
    return mode


def configure(mode, operations=None):
    """Sets which path the layers and models take.

    Args:
        mode: str. `"auto"`, `"on"` or `"off"` (see the module's
            docstring).
        operations: `None` (every operation) or a collection of the
            operations (keys of `KERNELS`) whose kernels may run; the
            others take the reference path. For A/B measurements.

    Example:

    >>> keras_gmlp.kernels.configure("off")
    >>> keras_gmlp.kernels.mode()
    'off'
    >>> keras_gmlp.kernels.configure("auto")
    """
    _checked(mode, "mode")
    if operations is not None:
        operations = frozenset(operations)
        unknown = sorted(operations - set(KERNELS))
        if unknown:
            raise ValueError(
                f"Received operations={unknown}; expected some of "
                f"{sorted(KERNELS)}."
            )
    _settings["mode"] = mode
    _settings["operations"] = operations


def mode():
    """The current mode: `configure`'s, else `KERAS_GMLP_KERNELS`, else
    `"auto"`; `"off"` inside `reference_only()`."""
    if _reference_only.is_set():
        return "off"
    if _settings["mode"] is None:
        value = os.environ.get("KERAS_GMLP_KERNELS", "auto") or "auto"
        _settings["mode"] = _checked(value, "KERAS_GMLP_KERNELS")
    return _settings["mode"]


def reference_only():
    """Traces and runs the reference path only, in this thread.

    The exports trace under it: a SavedModel, ONNX or LiteRT file holds
    the backend's plain ops, which every runtime and converter takes.

    Example:

    >>> with keras_gmlp.kernels.reference_only():
    ...     keras_gmlp.kernels.mode()
    'off'
    """
    return _reference_only.scope()


def owned_caches():
    """A scope whose decoding loop owns its caches, in this thread.

    For a loop that makes its decoding caches and threads each through one
    `call_with_cache` after another, never reading a cache it has passed
    on, as `GMLPCausalLM.generate_step` with keras-hub's samplers (beam and
    contrastive search copy the beams before a step and gather them after
    it) and `keras_gmlp.generation.generate` do. Within it the
    `"cache_update"` kernel may write a decoded token into the cache it is
    given instead of a copy of it. Outside it a cache given to
    `call_with_cache` is never changed.

    Example:

    >>> with keras_gmlp.kernels.owned_caches():
    ...     keras_gmlp.kernels.owns_caches()
    True
    >>> keras_gmlp.kernels.owns_caches()
    False
    """
    return _owned_caches.scope()


def owns_caches():
    """Whether this thread is within `owned_caches()`."""
    return _owned_caches.is_set()


def _kernel(operation, backend):
    key = (operation, backend)
    if key not in _loaded:
        target = KERNELS.get(operation, {}).get(backend)
        function = None
        if target is not None:
            module, name = target.split(":")
            function = getattr(importlib.import_module(module), name)
        _loaded[key] = function
    return _loaded[key]


def dispatch(operation, reference, *args, **kwargs):
    """`operation`'s kernel of `*args, **kwargs`, or its reference.

    Args:
        operation: str. A key of `KERNELS`.
        reference: the reference function, called with the same
            arguments.
        *args, **kwargs: the operation's arguments.
    """
    current = mode()
    if current != "off":
        allowed = _settings["operations"]
        if allowed is None or operation in allowed:
            backend = keras.config.backend()
            kernel = _kernel(operation, backend)
            if kernel is not None and (
                current == "on" or computes_on_cpu(backend, args)
            ):
                result = kernel(*args, **kwargs)
                if result is not NotImplemented:
                    return result
    return reference(*args, **kwargs)


def computes_on_cpu(backend, args=()):
    """Whether `backend` computes on a CPU: under torch, the device of the
    first torch tensor among `args` (else Keras' default device); under
    JAX and TensorFlow, whether the backend sees no accelerator."""
    if backend == "torch":
        import torch

        for arg in args:
            if isinstance(arg, torch.Tensor):
                return arg.device.type == "cpu"
        from keras.src.backend.torch.core import get_device

        return str(get_device()).startswith("cpu")
    return _backend_on_cpu(backend)


_backend_platforms = {}


def _backend_on_cpu(backend):
    if backend not in _backend_platforms:
        if backend == "jax":
            import jax

            on_cpu = jax.default_backend() == "cpu"
        elif backend == "tensorflow":
            import tensorflow as tf

            on_cpu = not tf.config.list_logical_devices("GPU") and not (
                tf.config.list_logical_devices("TPU")
            )
        else:
            on_cpu = False
        _backend_platforms[backend] = on_cpu
    return _backend_platforms[backend]
