"""`keras_gmlp.kernels.compile_jax_draws_once`: Keras' eager JAX draws
through one compiled chunk function per distribution, checked bit for bit
against Keras' own draws (`jax.random`'s) with the same seeds."""

import keras
import numpy as np
import pytest

from keras_gmlp.kernels import jax_draws

jax_only = pytest.mark.skipif(
    keras.config.backend() != "jax", reason="the draws replaced are JAX's"
)

# Multi-dimensional and odd shapes, one chunk exactly, one element over
# it, and three chunks with a ragged end.
SHAPES = [
    (1,),
    (7,),
    (64, 10),
    (4, 4, 1, 64),
    (3, 5, 7),
    (196, 196),
    (jax_draws.CHUNK_SIZE,),
    (jax_draws.CHUNK_SIZE + 1,),
    (3, jax_draws.CHUNK_SIZE - 5),
    (0, 4),
]


@pytest.fixture
def keras_and_chunked(monkeypatch):
    """`(keras_functions, chunked_functions)`: Keras' JAX draws, and the
    replacements `compile_jax_draws_once` installs (undone afterwards)."""
    from keras.src.backend.jax import random as keras_jax_random

    originals = {
        name: getattr(keras_jax_random, name) for name in jax_draws.REPLACED
    }
    for name, function in originals.items():
        monkeypatch.setattr(keras_jax_random, name, function)
    monkeypatch.setattr(jax_draws, "_INSTALLED", False)
    monkeypatch.delenv(jax_draws.ENV_VARIABLE, raising=False)
    assert jax_draws.compile_jax_draws_once()
    chunked = {
        name: getattr(keras_jax_random, name) for name in jax_draws.REPLACED
    }
    assert all(chunked[name] is not originals[name] for name in originals)
    return originals, chunked


def same_bits(first, second):
    first, second = np.asarray(first), np.asarray(second)
    return (
        first.shape == second.shape
        and first.dtype == second.dtype
        and (first.tobytes() == second.tobytes())
    )


@jax_only
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "name, arguments",
    [
        ("uniform", dict(minval=-0.37, maxval=0.91)),
        ("uniform", dict()),
        ("normal", dict(mean=0.5, stddev=1e-6)),
        ("normal", dict()),
        ("truncated_normal", dict(mean=-1.0, stddev=0.02)),
    ],
)
def test_draws_are_keras_own_bits(keras_and_chunked, name, arguments, shape):
    keras_functions, chunked = keras_and_chunked
    for seed in (0, 12345, 2**32 - 1):
        expected = keras_functions[name](shape, seed=seed, **arguments)
        assert same_bits(chunked[name](shape, seed=seed, **arguments), expected)


@jax_only
@pytest.mark.parametrize(
    "initializer",
    [
        keras.initializers.GlorotUniform,
        keras.initializers.GlorotNormal,
        keras.initializers.HeNormal,
        keras.initializers.LecunUniform,
        lambda seed: keras.initializers.RandomNormal(stddev=1e-6, seed=seed),
        lambda seed: keras.initializers.TruncatedNormal(stddev=0.02, seed=seed),
        lambda seed: keras.initializers.RandomUniform(-0.05, 0.05, seed=seed),
    ],
)
def test_initializers_draw_the_same_values(
    keras_and_chunked, monkeypatch, initializer
):
    from keras.src.backend.jax import random as keras_jax_random

    keras_functions, chunked = keras_and_chunked
    values = {}
    for label, functions in (("keras", keras_functions), ("chunked", chunked)):
        for name, function in functions.items():
            monkeypatch.setattr(keras_jax_random, name, function)
        # A SeedGenerator-seeded initializer, as the layers' defaults are.
        keras.utils.set_random_seed(3)
        values[label] = [initializer(seed=None)((256, 96)) for _ in range(2)]
        values[label].append(initializer(seed=7)((5, 3, 2)))
    for ours, theirs in zip(values["chunked"], values["keras"], strict=True):
        assert same_bits(ours, theirs)
    assert not same_bits(values["keras"][0], values["keras"][1])


@jax_only
def test_a_built_model_has_the_same_weights(keras_and_chunked, monkeypatch):
    from keras.src.backend.jax import random as keras_jax_random

    from keras_gmlp.models import GMLPImageClassifier

    keras_functions, chunked = keras_and_chunked
    weights = {}
    for label, functions in (("keras", keras_functions), ("chunked", chunked)):
        for name, function in functions.items():
            monkeypatch.setattr(keras_jax_random, name, function)
        keras.utils.set_random_seed(11)
        model = GMLPImageClassifier.from_preset(
            "gmlp_ti16_224",
            image_size=16,
            patch_size=4,
            num_layers=2,
            num_classes=5,
            load_weights=False,
        )
        weights[label] = [np.asarray(w.value) for w in model.weights]
    assert len(weights["chunked"]) == len(weights["keras"]) > 0
    for ours, theirs in zip(weights["chunked"], weights["keras"], strict=True):
        assert same_bits(ours, theirs)


@jax_only
def test_every_shape_shares_one_compilation(keras_and_chunked):
    _, chunked = keras_and_chunked
    for shape in [(3,), (64, 10), (4, 4, 1, 64), (130, 7)]:
        chunked["uniform"](shape, seed=1)
    assert jax_draws._chunk_function("uniform")._cache_size() == 1


@jax_only
def test_traced_and_other_dtype_draws_go_to_keras(keras_and_chunked):
    import jax

    keras_functions, chunked = keras_and_chunked

    def draw(functions, seed):
        return functions["normal"]((4, 3), stddev=2.0, seed=seed)

    seed = jax.numpy.array([5, 9], dtype="uint32")
    traced = jax.jit(lambda s: draw(chunked, s))(seed)
    assert same_bits(traced, draw(keras_functions, seed))
    for dtype in ("bfloat16", "float16"):
        ours = chunked["uniform"]((8, 2), seed=4, dtype=dtype)
        assert ours.dtype == dtype
        assert same_bits(
            ours, keras_functions["uniform"]((8, 2), seed=4, dtype=dtype)
        )
    typed_key = jax.random.key(8)
    assert same_bits(
        chunked["uniform"]((6,), seed=typed_key),
        keras_functions["uniform"]((6,), seed=typed_key),
    )
    other = jax.random.key(8, impl="rbg")
    assert same_bits(
        chunked["uniform"]((6,), seed=other),
        keras_functions["uniform"]((6,), seed=other),
    )


def test_it_does_nothing_outside_jax_or_opted_out(monkeypatch):
    monkeypatch.setattr(jax_draws, "_INSTALLED", False)
    monkeypatch.setenv(jax_draws.ENV_VARIABLE, "0")
    assert jax_draws.compile_jax_draws_once() is False
    monkeypatch.delenv(jax_draws.ENV_VARIABLE)
    if keras.config.backend() != "jax":
        assert jax_draws.compile_jax_draws_once() is False


@jax_only
def test_it_leaves_keras_alone_where_the_bits_would_differ(monkeypatch):
    import jax
    from keras.src.backend.jax import random as keras_jax_random

    originals = {
        name: getattr(keras_jax_random, name) for name in jax_draws.REPLACED
    }
    monkeypatch.setattr(jax_draws, "_INSTALLED", False)
    monkeypatch.delenv(jax_draws.ENV_VARIABLE, raising=False)
    monkeypatch.setattr(
        jax_draws.keras_patches, "keras_version", lambda: (3, 99, 0)
    )
    assert jax_draws.compile_jax_draws_once() is False
    monkeypatch.undo()
    monkeypatch.setattr(jax_draws, "_INSTALLED", False)
    jax.config.update("jax_threefry_partitionable", False)
    try:
        assert jax_draws.compile_jax_draws_once() is False
    finally:
        jax.config.update("jax_threefry_partitionable", True)
    assert {
        n: getattr(keras_jax_random, n) for n in jax_draws.REPLACED
    } == originals
