"""The `"gmlp_block"` kernels against `GMLPBlock.reference_call`: outputs
and gradients, float32 and mixed_bfloat16, on each backend."""

import keras
import numpy as np
import pytest

from keras_gmlp import kernels
from keras_gmlp.kernels.gmlp_block import token_product
from keras_gmlp.layers import GMLPBlock
from tests.gradients import gradients
from tests.layer_test import randomize_weights

BLOCKS = {
    "dense": {},
    "toeplitz_causal": {"spatial": "toeplitz", "causal": True},
    "amlp_causal": {"attention_dim": 8, "causal": True},
    "amlp": {"attention_dim": 8},
    "additive": {"gating": "additive"},
    "multiplicative": {"gating": "multiplicative"},
}


def built_block(rng, **config):
    """A `GMLPBlock(ffn_dim=48, **config)` with random weights, built for
    an input `x` `(3, 12, 16)`: `(block, x, cotangent)`, random."""
    block = GMLPBlock(ffn_dim=48, **config)
    x = rng.normal(size=(3, 12, 16)).astype("float32")
    block.build(x.shape)
    randomize_weights(block, rng)
    cotangent = rng.normal(size=x.shape).astype("float32")
    return block, x, cotangent


def outputs_and_gradients(block, x, cotangent, training, mode):
    kernels.configure(mode)
    if keras.config.backend() == "torch" and not training:
        import torch

        with torch.no_grad():  # as `predict` runs (torch's kernel infers)
            outputs = block(x, training=training)
    else:
        outputs = block(x, training=training)
    outputs = keras.ops.convert_to_numpy(keras.ops.cast(outputs, "float32"))
    grads = gradients(
        block, x, cotangent, block.trainable_weights, training=training
    )
    return [outputs, *grads]


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_kernel_equals_the_reference(name, policy, training, rng, kernel_mode):
    block, x, cotangent = built_block(rng, dtype=policy, **BLOCKS[name])
    reference = outputs_and_gradients(block, x, cotangent, training, "off")
    kernel = outputs_and_gradients(block, x, cotangent, training, "on")
    tolerance = 2e-5 if policy == "float32" else 3e-2
    for got, want in zip(kernel, reference, strict=True):
        scale = max(np.abs(want).max(), 1e-3)
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * scale)


@pytest.mark.skipif(
    keras.config.backend() != "torch", reason="torch's block kernel"
)
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", ["dense", "amlp_causal"])
def test_torch_kernel_trains_on_amd_only(
    name, policy, amd, rng, kernel_mode, monkeypatch
):
    from keras_gmlp.kernels import gmlp_block

    taken = []
    monkeypatch.setattr(
        gmlp_block,
        "gmlp_block",
        lambda *args: taken.append(1) or NotImplemented,
    )
    block, x, cotangent = built_block(rng, dtype=policy, **BLOCKS[name])
    outputs_and_gradients(block, x, cotangent, True, "on")
    # While gradients are recorded the kernel runs on an AMD CPU only.
    assert bool(taken) == amd


@pytest.mark.skipif(
    keras.config.backend() != "torch", reason="torch's block kernel"
)
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("name", ["dense", "toeplitz_causal", "amlp"])
def test_torch_kernel_on_amd_trains_as_the_reference(
    name, policy, amd, rng, kernel_mode, monkeypatch
):
    from keras_gmlp.kernels import torch_linear
    from keras_gmlp.kernels import torch_spatial_gate

    onednn_calls, recomputed = [], []
    onednn = torch_linear._onednn
    monkeypatch.setattr(
        torch_linear,
        "_onednn",
        lambda *args: onednn_calls.append(1) or onednn(*args),
    )
    gate = torch_spatial_gate.recomputed_spatial_gate
    monkeypatch.setattr(
        torch_spatial_gate,
        "recomputed_spatial_gate",
        lambda *args: recomputed.append(1) or gate(*args),
    )
    block, x, cotangent = built_block(rng, dtype=policy, **BLOCKS[name])
    reference = outputs_and_gradients(block, x, cotangent, True, "off")
    assert not onednn_calls and not recomputed
    kernel = outputs_and_gradients(block, x, cotangent, True, "on")
    # float32 products and their gradients on oneDNN, on an AMD CPU only;
    # there the gate recomputes its activations in the backward pass.
    assert bool(onednn_calls) == (amd and policy == "float32")
    assert bool(recomputed) == amd
    tolerance = 2e-5 if policy == "float32" else 3e-2
    for got, want in zip(kernel, reference, strict=True):
        scale = max(np.abs(want).max(), 1e-3)
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * scale)


@pytest.mark.one_backend("tensorflow")
def test_remat_scope_block_equals_the_reference(rng, kernel_mode):
    with keras.RematScope(mode="activations"):
        block = GMLPBlock(ffn_dim=48)
    x = rng.normal(size=(3, 12, 16)).astype("float32")
    block.build(x.shape)
    randomize_weights(block, rng)
    cotangent = rng.normal(size=x.shape).astype("float32")
    reference = outputs_and_gradients(block, x, cotangent, True, "off")
    kernel = outputs_and_gradients(block, x, cotangent, True, "on")
    for got, want in zip(kernel, reference, strict=True):
        scale = np.abs(want).max()
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * scale)


@pytest.mark.skipif(
    keras.config.backend() != "torch", reason="dispatch on torch tensors"
)
def test_auto_runs_torchs_kernel_on_cpu_tensors_only(kernel_mode, monkeypatch):
    import torch

    from keras_gmlp.kernels import registry

    monkeypatch.setitem(
        registry.KERNELS, "probe", {"torch": f"{__name__}:probe_kernel"}
    )
    monkeypatch.setattr(registry, "_loaded", {})

    def reference(x):
        return "reference"

    kernel_mode("auto")
    on_meta = torch.zeros((1, 4), device="meta")
    assert kernels.dispatch("probe", reference, on_meta) == "reference"
    assert kernels.dispatch("probe", reference, torch.zeros((1, 4))) == "kernel"
    kernel_mode("on")
    assert kernels.dispatch("probe", reference, on_meta) == "kernel"


def probe_kernel(x):
    return "kernel"


class TokenProduct(keras.layers.Layer):
    """`token_product(W, v, b)` of its weights, `v` cast to `dtype`."""

    def __init__(self, n, product_dtype, **kwargs):
        super().__init__(**kwargs)
        self.n, self.product_dtype = n, product_dtype

    def build(self, input_shape):
        self.weight = self.add_weight((self.n, input_shape[-2]), name="w")
        self.bias_weight = self.add_weight((self.n,), name="b")

    def call(self, v):
        v = keras.ops.cast(v, self.product_dtype)
        weight = keras.ops.cast(self.weight, self.product_dtype)
        bias = keras.ops.cast(self.bias_weight, self.product_dtype)
        return token_product(weight, v, bias)


# Under JAX a hand-written gradient for a 3-D `v`, `W`'s as one dot per
# example up to 32, above as one dot; a 4-D `v` broadcasts over two axes.
@pytest.mark.parametrize("shape", [(3, 7, 5), (33, 7, 5), (2, 3, 7, 5)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_token_product_and_gradients_match_numpy(dtype, shape, rng):
    layer = TokenProduct(6, dtype)
    layer.build(shape)
    randomize_weights(layer, rng)
    v = rng.normal(size=shape).astype("float32")
    cotangent = rng.normal(size=(*shape[:-2], 6, shape[-1]))
    weight, bias = (keras.ops.convert_to_numpy(w) for w in layer.weights)
    if dtype == "bfloat16":  # what the product sees
        v, weight, bias = (
            keras.ops.convert_to_numpy(
                keras.ops.cast(keras.ops.cast(a, dtype), "float32")
            )
            for a in (v, weight, bias)
        )
    v64, weight64 = v.astype("float64"), weight.astype("float64")
    expected = np.einsum("ij,...jc->...ic", weight64, v64) + bias[:, None]
    by_input = np.einsum("ij,...ic->...jc", weight64, cotangent)
    by_weight = np.einsum(
        "bic,bjc->ij",
        cotangent.reshape(-1, *cotangent.shape[-2:]),
        v64.reshape(-1, *shape[-2:]),
    )
    by_bias = cotangent.sum(axis=tuple(range(len(shape) - 2)) + (-1,))
    actual = keras.ops.convert_to_numpy(keras.ops.cast(layer(v), "float32"))
    tolerance = 1e-5 if dtype == "float32" else 2e-2
    grads = gradients(layer, v, cotangent.astype("float32"), layer.weights)
    for got, want in zip(
        [actual, *grads],
        [expected, by_input, by_weight, by_bias],
        strict=True,
    ):
        assert got.shape == want.shape
        scale = np.abs(want).max()
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * scale)


def test_a_quantized_block_equals_the_reference(rng, kernel_mode):
    inputs = keras.Input((12, 16))
    model = keras.Model(inputs, GMLPBlock(ffn_dim=32)(inputs))
    randomize_weights(model, rng)
    model.quantize("int8")
    x = rng.normal(size=(2, 12, 16)).astype("float32")
    outputs = {}
    for mode in ("off", "on"):
        kernel_mode(mode)
        outputs[mode] = keras.ops.convert_to_numpy(model(x))
    np.testing.assert_allclose(outputs["on"], outputs["off"], atol=1e-4)


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="TensorFlow's graph"
)
def test_batch_chains_equal_one_chain_in_a_graph(rng, kernel_mode, monkeypatch):
    import tensorflow as tf

    from keras_gmlp.kernels import batch_chains

    monkeypatch.setattr(batch_chains, "chains_fit_the_cores", lambda: True)
    block = GMLPBlock(ffn_dim=48, attention_dim=8)
    x = rng.normal(size=(5, 12, 16)).astype("float32")
    mask = np.ones((5, 12), bool)
    mask[:, -3:] = False
    block.build(x.shape)
    randomize_weights(block, rng)
    splits = []
    original = batch_chains.split_batch

    def counted(tensor):
        splits.append(tensor.shape)
        return original(tensor)

    outputs = {}
    for operations in (None, {"gmlp_block"}):
        kernel_mode("on", operations)
        batch_chains.split_batch = counted
        try:
            graph = tf.function(lambda x, m: block(x, padding_mask=m))
            outputs[operations is None] = graph(x, mask).numpy()
        finally:
            batch_chains.split_batch = original
    assert len(splits) == 2  # the inputs and the mask, with the chains only
    np.testing.assert_allclose(outputs[True], outputs[False], atol=1e-5)


@pytest.mark.skipif(keras.config.backend() != "jax", reason="JAX's trace")
def test_jax_batch_chains_equal_one_chain_in_a_trace(rng, kernel_mode):
    import jax

    block = GMLPBlock(ffn_dim=48, attention_dim=8, causal=True)
    x = rng.normal(size=(5, 12, 16)).astype("float32")
    mask = np.ones((5, 12), bool)
    mask[:2, :3] = False  # left padding in two rows
    block.build(x.shape)
    randomize_weights(block, rng)
    outputs = {}
    for operations in (None, {"gmlp_block"}):
        kernel_mode("on", operations)

        def forward(trainable, x, mask):
            outputs, _ = block.stateless_call(
                trainable,
                [v.value for v in block.non_trainable_variables],
                x,
                padding_mask=mask,
                training=True,
            )
            return outputs

        trainable = [w.value for w in block.trainable_weights]
        text = str(jax.make_jaxpr(forward)(trainable, x, mask))
        assert ("concatenate" in text) == (operations is None)
        outputs[operations is None] = np.asarray(
            jax.jit(forward)(trainable, x, mask)
        )
    scale = np.abs(outputs[False]).max()
    np.testing.assert_allclose(
        outputs[True], outputs[False], rtol=0, atol=1e-5 * scale
    )


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="TensorFlow's graph"
)
@pytest.mark.parametrize(
    "training, taped, splits",
    [(True, True, 1), (False, True, 3), (False, False, 1)],
    ids=["fit", "saliency", "predict"],
)
def test_batch_chains_run_through_consecutive_blocks(
    training, taped, splits, rng, kernel_mode, monkeypatch
):
    import tensorflow as tf

    from keras_gmlp.kernels import batch_chains

    monkeypatch.setattr(batch_chains, "chains_fit_the_cores", lambda: True)
    inputs = keras.Input((12, 16))
    outputs = inputs
    for _ in range(3):
        outputs = GMLPBlock(ffn_dim=48)(outputs)
    model = keras.Model(inputs, outputs)
    randomize_weights(model, rng)
    x = rng.normal(size=(5, 12, 16)).astype("float32")
    split_shapes = []
    original = batch_chains.split_batch
    monkeypatch.setattr(
        batch_chains,
        "split_batch",
        lambda tensor: split_shapes.append(tensor.shape) or original(tensor),
    )
    results = {}
    for mode in ("off", "on"):
        kernel_mode(mode)

        @tf.function
        def step(x):
            if not taped:
                return [model(x, training=training)]
            with tf.GradientTape() as tape:
                y = model(x, training=training)
                loss = tf.reduce_sum(y * y)
            return [y, *tape.gradient(loss, model.trainable_weights)]

        results[mode] = [value.numpy() for value in step(x)]
    # The inputs split once and the halves carried through the blocks,
    # except under a tape outside training: each block splits its inputs.
    assert len(split_shapes) == splits
    for got, want in zip(results["on"], results["off"], strict=True):
        scale = max(np.abs(want).max(), 1e-3)
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * scale)
