"""`direct_call` gives what `Layer.__call__` gives, in every dtype policy."""

import keras
import numpy as np
import pytest

from keras_gmlp.kernels import gmlp_block
from keras_gmlp.kernels.direct_call import direct_call
from keras_gmlp.layers import SpatialGatingUnit
from keras_gmlp.layers import TiedEmbedding

POLICIES = ["float32", "mixed_bfloat16", "mixed_float16", "bfloat16"]


def built(layer, inputs):
    layer(inputs)
    return layer


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", ["dense", "norm", "embedding", "reverse"])
def test_same_outputs_and_dtype_as_call(policy, name):
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(2, 3, 8)).astype("float32")
    ids = rng.integers(0, 11, (2, 3)).astype("int32")
    if name == "dense":
        layer = built(keras.layers.Dense(5, dtype=policy), vectors)
        inputs, kwargs = vectors, {}
    elif name == "norm":
        layer = built(keras.layers.LayerNormalization(dtype=policy), vectors)
        layer.gamma.assign(rng.normal(size=(8,)))
        inputs, kwargs = vectors, {}
    else:
        layer = built(TiedEmbedding(11, 8, dtype=policy), ids)
        if name == "embedding":
            inputs, kwargs = ids, {}
        else:
            inputs, kwargs = vectors, {"reverse": True}
    expected = layer(inputs, **kwargs)
    got = direct_call(layer, inputs, **kwargs)
    assert keras.backend.standardize_dtype(got.dtype) == (
        keras.backend.standardize_dtype(expected.dtype)
    )
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras.ops.cast(got, "float32")),
        keras.ops.convert_to_numpy(keras.ops.cast(expected, "float32")),
    )


def test_builds_an_unbuilt_layer():
    dense = keras.layers.Dense(4)
    outputs = direct_call(dense, np.ones((1, 3), "float32"))
    assert dense.built
    assert tuple(outputs.shape) == (1, 4)


def test_quantized_layer_goes_through_its_quantized_call():
    x = np.random.default_rng(1).normal(size=(2, 16)).astype("float32")
    dense = keras.layers.Dense(8)
    dense(x)
    dense.quantize("int8")
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(direct_call(dense, x)),
        keras.ops.convert_to_numpy(dense(x)),
    )


class KernelUnit(SpatialGatingUnit):
    """A spatial gating unit whose `call` is the kernel `call_on_halves`,
    for `Layer.__call__` to run as `direct_call` should."""

    def call(self, inputs, attention=None):
        if self.gating == "split":
            u, v = keras.ops.split(inputs, 2, axis=-1)
        else:
            u = v = inputs
        return gmlp_block.call_on_halves(self, u, v, attention=attention)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("gating", ["split", "additive"])
def test_a_function_runs_as_call_does(policy, gating):
    # The kernel `call_on_halves` of a spatial gating unit, as the gMLP
    # block's kernel calls it, against `Layer.__call__` of the unsplit
    # input through the same function.
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    unit = built(KernelUnit(gating=gating, dtype=policy), x)
    for weight in unit.weights:
        weight.assign(rng.normal(size=weight.shape) * 0.3)
    expected = unit(x)
    if gating == "split":
        u, v = x[..., :4], x[..., 4:]
    else:
        u = v = x
    got = direct_call(unit, u, method=gmlp_block.call_on_halves, v=v)
    assert keras.backend.standardize_dtype(got.dtype) == (
        keras.backend.standardize_dtype(expected.dtype)
    )
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(keras.ops.cast(got, "float32")),
        keras.ops.convert_to_numpy(keras.ops.cast(expected, "float32")),
    )
