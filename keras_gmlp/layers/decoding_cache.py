"""Writes into the decoding caches of the causal layers, in place where a
decoding loop owns them."""

import contextlib
import numbers
import threading

import keras
from keras import ops

_OWNERSHIP = threading.local()


@contextlib.contextmanager
def owned_caches():
    """A scope in which `write_cache` may write a cache in place.

    For a decoding loop that threads every cache through one
    `call_with_cache` after another and never reads a cache it has passed
    on: keras-hub's samplers (greedy, top-k, top-p, random, beam and
    contrastive: beams are copies made before each step and gathered
    after it) and `keras_gmlp.generation.generate`. Outside it a cache
    given to `call_with_cache` is never changed.

    Example:

    >>> from keras_gmlp.layers.decoding_cache import owned_caches
    >>> from keras_gmlp.layers.decoding_cache import write_cache
    >>> cache = keras.ops.zeros((1, 4, 2))
    >>> with owned_caches():
    ...     cache = write_cache(cache, [0, 1, 0], keras.ops.ones((1, 1, 2)))
    >>> keras.ops.convert_to_numpy(cache)[0, :, 0].tolist()
    [0.0, 1.0, 0.0, 0.0]
    """
    previous = getattr(_OWNERSHIP, "owned", False)
    _OWNERSHIP.owned = True
    try:
        yield
    finally:
        _OWNERSHIP.owned = previous


def write_cache(cache, start_indices, update):
    """`keras.ops.slice_update(cache, start_indices, update)`, in place
    where it can be.

    Keras' torch `slice_update` clones its input before writing: a
    decoded token would copy every block's whole cache, `(batch,
    max_length, channels)`, to write one position (for `gmlp_tiny` at 512
    tokens about an eighth of a token's time, and the copies push the
    weights out of the CPU's caches). Under eager torch, within
    `owned_caches()`, with Python int starts and no gradient recorded,
    the update is written into `cache` itself, which is returned. Every
    other case is `slice_update`'s copy.

    Args:
        cache: tensor.
        start_indices: list of int or int scalar tensors, one per axis.
        update: tensor of `cache`'s dtype and rank.

    Returns:
        The updated cache.
    """
    if getattr(_OWNERSHIP, "owned", False) and _eager_torch_without_grad():
        if all(isinstance(i, numbers.Integral) for i in start_indices):
            region = tuple(
                slice(start, start + size)
                for start, size in zip(start_indices, update.shape, strict=True)
            )
            cache[region] = update
            return cache
    return ops.slice_update(cache, start_indices, update)


def _eager_torch_without_grad():
    if keras.config.backend() != "torch":
        return False
    import torch

    return not torch.is_grad_enabled() and not torch.compiler.is_compiling()
