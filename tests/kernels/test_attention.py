"""The `"attention"` kernel (torch's fused attention) against
`TinyAttention.reference_attend`: outputs and gradients, causal or not,
padded on the left or the right, and while decoding with a cache; under
mixed_bfloat16 the kernel declines."""

import keras
import numpy as np
import pytest

from keras_gmlp import kernels
from keras_gmlp.layers import TinyAttention
from tests.gradients import assert_gradients_close
from tests.gradients import gradients
from tests.layer_test import randomize_weights

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "torch", reason="torch's kernel"
)

PADDING = {
    "none": None,
    # Real tokens on the right: with causal attention the padded queries
    # before the first real token see no key.
    "left": [[False, False, True, True, True, True]] * 2,
    "right": [[True, True, True, True, False, False]] * 2,
    # A row of padding only: no query sees a key.
    "empty_row": [[True] * 6, [False] * 6],
}


def built_attention(rng, policy, causal):
    layer = TinyAttention(8, output_dim=12, causal=causal, dtype=policy)
    layer.build((2, 6, 16))
    randomize_weights(layer, rng)
    return layer


def outputs_and_gradients(layer, x, cotangent, padding_mask, mode):
    kernels.configure(mode)
    if padding_mask is not None:
        padding_mask = keras.ops.convert_to_tensor(np.array(padding_mask))
    outputs = layer(x, padding_mask=padding_mask)
    outputs = keras.ops.convert_to_numpy(keras.ops.cast(outputs, "float32"))
    grads = gradients(
        layer, x, cotangent, layer.trainable_weights, padding_mask=padding_mask
    )
    return [outputs, *grads]


@pytest.mark.parametrize("padding", sorted(PADDING))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_kernel_equals_the_reference(
    policy, causal, padding, rng, kernel_mode, monkeypatch
):
    from keras_gmlp.kernels import attention

    calls = []  # the kernel's calls that it did not decline
    fused = attention.torch_attention

    def spied(*args):
        result = fused(*args)
        if result is not NotImplemented:
            calls.append(1)
        return result

    monkeypatch.setattr(attention, "torch_attention", spied)
    monkeypatch.setattr(kernels.registry, "_loaded", {})
    layer = built_attention(rng, policy, causal)
    x = rng.normal(size=(2, 6, 16)).astype("float32")
    cotangent = rng.normal(size=(2, 6, 12)).astype("float32")
    reference = outputs_and_gradients(
        layer, x, cotangent, PADDING[padding], "off"
    )
    assert not calls
    kernel = outputs_and_gradients(layer, x, cotangent, PADDING[padding], "on")
    # Under a mixed policy the reference rounds the scores before its
    # softmax: the kernel declines there.
    assert bool(calls) == (policy == "float32")
    assert_gradients_close(
        kernel, reference, 2e-5 if policy == "float32" else 3e-2
    )
    if padding == "empty_row" or (padding == "left" and causal):
        # Row 1's first query sees no real key: the output projection's
        # bias, on both paths.
        bias = keras.ops.convert_to_numpy(
            keras.ops.cast(layer.output_projection.bias, "float32")
        )
        rounding = 1e-6 if policy == "float32" else 1e-2
        for outputs in (reference[0], kernel[0]):
            np.testing.assert_allclose(outputs[1, 0], bias, atol=rounding)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_kernel_decodes_as_the_reference(policy, rng, kernel_mode):
    import torch

    layer = built_attention(rng, policy, causal=True)
    x = keras.ops.convert_to_tensor(rng.normal(size=(2, 6, 16)), "float32")
    padding_mask = keras.ops.convert_to_tensor(np.array(PADDING["left"]))
    decoded = {}
    for mode in ("off", "on"):
        kernels.configure(mode)
        cache = layer.empty_cache(2, 6)
        outputs = []
        with torch.no_grad():
            for index in range(6):
                output, cache = layer.call_with_cache(
                    x[:, index : index + 1], cache, index, padding_mask
                )
                outputs.append(keras.ops.cast(output, "float32"))
        decoded[mode] = [keras.ops.convert_to_numpy(o) for o in outputs]
    assert_gradients_close(
        decoded["on"], decoded["off"], 2e-5 if policy == "float32" else 3e-2
    )
