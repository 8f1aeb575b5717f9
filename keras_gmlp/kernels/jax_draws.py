"""Keras' eager JAX draws through one compiled function per distribution.

Under JAX, each Keras initializer draws its values with a `jax.random`
function that XLA compiles once per shape: building the digits quick-start's
model (ten shapes) takes several times longer under JAX than under
TensorFlow, nearly all of it those compilations.
With JAX's partitionable Threefry (its default), the bits of element `i`
of a draw depend on the key and on `i`, the element's row-major index,
alone. So a draw of any shape is the same as consecutive fixed-size chunks
of a flat draw, each from the counters of its indices: one compilation per
distribution serves every shape, and the values are the same bits as
`jax.random`'s own (`tests/training/test_jax_draws.py` checks them against
it, shape by shape and initializer by initializer).
"""

import inspect
import math
import os

import keras
import numpy as np

from keras_gmlp.training import keras_patches

# Set to "0", it turns `compile_jax_draws_once` off.
ENV_VARIABLE = "KERAS_GMLP_JAX_DRAWS"
# Elements a compiled chunk draws: a draw of n elements makes
# ceil(n / CHUNK_SIZE) calls.
CHUNK_SIZE = 1 << 16
# The Keras functions replaced, with the parameters each must have.
REPLACED = {
    "uniform": ("shape", "minval", "maxval", "dtype", "seed"),
    "normal": ("shape", "mean", "stddev", "dtype", "seed"),
    "truncated_normal": ("shape", "mean", "stddev", "dtype", "seed"),
}
# Keras' JAX truncated normal cuts at two standard deviations.
TRUNCATION = 2.0

_INSTALLED = False
_CHUNK_FUNCTIONS = {}


def compile_jax_draws_once():
    """Makes Keras' eager JAX draws compile once per distribution, not once
    per shape, with the same values.

    Replaces `uniform`, `normal` and `truncated_normal` of Keras' JAX
    backend (what `keras.random` and the initializers call) with functions
    that draw float32 values in chunks of `CHUNK_SIZE` elements through
    one compiled function per distribution. A call inside a traced
    function (a traced key or bound), of another dtype, or with a key of
    another generator goes to Keras' own function. Building the digits
    quick-start's model under JAX takes a third of the time so.

    It does nothing under TensorFlow and torch, when JAX's Threefry is not
    partitionable (`jax_threefry_partitionable`) or not its default
    generator, on a Keras version outside
    `keras_patches.PATCHED_KERAS_VERSIONS` or whose functions take other
    parameters, or with `KERAS_GMLP_JAX_DRAWS=0` in the environment. The
    `keras-gmlp` command and the recipes call it first. Installing twice
    is a no-op.

    Returns:
        bool. Whether Keras' draws are (now) the compiled-once ones.

    Example:

    >>> from keras_gmlp.kernels import compile_jax_draws_once
    >>> installed = compile_jax_draws_once()
    >>> installed == (keras.config.backend() == "jax")
    True
    """
    global _INSTALLED
    if _INSTALLED:
        return True
    if not _can_install():
        return False
    from keras.src.backend.jax import random as keras_jax_random

    for name, replacement in _replacements(keras_jax_random).items():
        setattr(keras_jax_random, name, replacement)
    _INSTALLED = True
    return True


def _can_install():
    if keras.config.backend() != "jax" or os.environ.get(ENV_VARIABLE) == "0":
        return False
    if not keras_patches.needs_patches():
        return False
    import jax
    from keras.src.backend.jax import random as keras_jax_random

    if not jax.config.jax_threefry_partitionable:
        return False
    if jax.config.jax_default_prng_impl != "threefry2x32":
        return False
    for name, parameters in REPLACED.items():
        function = getattr(keras_jax_random, name, None)
        if function is None:
            return False
        if tuple(inspect.signature(function).parameters) != parameters:
            return False
    return True


def _replacements(keras_jax_random):
    """The drop-in functions for Keras' JAX `uniform`, `normal` and
    `truncated_normal`, each falling back to Keras' own (captured here)."""
    keras_uniform = keras_jax_random.uniform
    keras_normal = keras_jax_random.normal
    keras_truncated_normal = keras_jax_random.truncated_normal

    def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
        dtype = dtype or keras.config.floatx()
        key = keras_jax_random.jax_draw_seed(seed)
        key_data = _concrete_threefry_key(key, dtype, minval, maxval)
        if key_data is None:
            return keras_uniform(shape, minval, maxval, dtype, key)
        bounds = (np.float32(minval), np.float32(maxval))
        return _as_jax(_draw("uniform", key_data, shape, bounds))

    def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
        dtype = dtype or keras.config.floatx()
        key = keras_jax_random.jax_draw_seed(seed)
        key_data = _concrete_threefry_key(key, dtype, mean, stddev)
        if key_data is None:
            return keras_normal(shape, mean, stddev, dtype, key)
        sample = _draw("normal", key_data, shape, ())
        # Keras scales the standard draw as two float32 operations.
        return _as_jax(sample * np.float32(stddev) + np.float32(mean))

    def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
        dtype = dtype or keras.config.floatx()
        key = keras_jax_random.jax_draw_seed(seed)
        key_data = _concrete_threefry_key(key, dtype, mean, stddev)
        if key_data is None:
            return keras_truncated_normal(shape, mean, stddev, dtype, key)
        bounds = (np.float32(-TRUNCATION), np.float32(TRUNCATION))
        sample = _draw("truncated_normal", key_data, shape, bounds)
        return _as_jax(sample * np.float32(stddev) + np.float32(mean))

    return {
        "uniform": uniform,
        "normal": normal,
        "truncated_normal": truncated_normal,
    }


def _concrete_threefry_key(key, dtype, *bounds):
    """The key's two uint32 words, or `None` where Keras' own function must
    draw: a traced key or bound, a dtype other than float32, or a typed key
    of another generator."""
    import jax

    if keras.backend.standardize_dtype(dtype) != "float32":
        return None
    if any(isinstance(value, jax.core.Tracer) for value in (key, *bounds)):
        return None
    if jax.dtypes.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key):
        if str(jax.random.key_impl(key)) != "threefry2x32":
            return None
        key = jax.random.key_data(key)
    words = np.asarray(key)
    if words.shape != (2,) or words.dtype.kind not in "iu":
        return None
    return words.astype(np.uint32)


def _draw(distribution, key_data, shape, bounds):
    """A numpy float32 array of `shape`: the flat draw's consecutive chunks,
    each from the 64-bit row-major indices of its elements."""
    shape = tuple(int(dimension) for dimension in shape)
    size = math.prod(shape)
    chunk = _chunk_function(distribution)
    parts = []
    for start in range(0, size, CHUNK_SIZE):
        index = np.arange(start, start + CHUNK_SIZE, dtype=np.uint64)
        high = (index >> np.uint64(32)).astype(np.uint32)
        low = (index & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        parts.append(
            np.asarray(chunk(key_data[0], key_data[1], high, low, *bounds))
        )
    if not parts:
        return np.zeros(shape, np.float32)
    return np.concatenate(parts)[:size].reshape(shape)


def _as_jax(values):
    import jax.numpy as jnp

    return jnp.asarray(values)


def _chunk_function(distribution):
    """The jitted chunk of one distribution, built on first use: the same
    operations as `jax.random`'s `uniform`, `normal` and
    `truncated_normal` on float32, after Threefry-2x32 of the counters."""
    if distribution in _CHUNK_FUNCTIONS:
        return _CHUNK_FUNCTIONS[distribution]
    import jax
    from jax import lax
    from jax.extend.random import threefry2x32_p

    float32 = np.float32
    sqrt2 = np.array(np.sqrt(2), float32)

    def bits(key_high, key_low, high, low):
        first, second = threefry2x32_p.bind(key_high, key_low, high, low)
        return first ^ second

    def unit_to_range(random_bits, minval, maxval):
        # 23 random mantissa bits under the exponent of 1.0: [1, 2) - 1.
        mantissa = lax.shift_right_logical(random_bits, np.uint32(32 - 23))
        one = np.array(1.0, float32).view(np.uint32)
        float_bits = lax.bitwise_or(mantissa, one)
        floats = lax.bitcast_convert_type(float_bits, float32) - float32(1.0)
        return lax.max(minval, floats * (maxval - minval) + minval)

    def uniform(key_high, key_low, high, low, minval, maxval):
        random_bits = bits(key_high, key_low, high, low)
        return unit_to_range(random_bits, minval, maxval)

    def normal(key_high, key_low, high, low):
        random_bits = bits(key_high, key_low, high, low)
        lowest = np.nextafter(float32(-1.0), float32(0.0), dtype=float32)
        unit = unit_to_range(random_bits, lowest, float32(1.0))
        return lax.mul(sqrt2, lax.erf_inv(unit))

    def truncated_normal(key_high, key_low, high, low, lower, upper):
        random_bits = bits(key_high, key_low, high, low)
        unit = unit_to_range(
            random_bits, lax.erf(lower / sqrt2), lax.erf(upper / sqrt2)
        )
        values = sqrt2 * lax.erf_inv(unit)
        # jax.random's clamp to the open interval (lower, upper).
        return lax.clamp(
            lax.nextafter(lower, float32(np.inf)),
            values,
            lax.nextafter(upper, float32(-np.inf)),
        )

    functions = {
        "uniform": uniform,
        "normal": normal,
        "truncated_normal": truncated_normal,
    }
    _CHUNK_FUNCTIONS[distribution] = jax.jit(functions[distribution])
    return _CHUNK_FUNCTIONS[distribution]
