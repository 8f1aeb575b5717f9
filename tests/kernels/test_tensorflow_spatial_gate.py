"""The spatial gating unit's training gates (the default one and the
recomputing one) and bfloat16 inference gate under TensorFlow."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_gmlp.kernels import gmlp_block
from keras_gmlp.layers import GMLPBlock
from keras_gmlp.layers import SpatialGatingUnit
from tests.gradients import assert_gradients_close
from tests.layer_test import randomize_weights

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "tensorflow", reason="TensorFlow's gradients"
)


def rematerialized_block(**kwargs):
    """A `GMLPBlock` made under `keras.RematScope(mode="activations")`,
    which turns the recomputing gate on under TensorFlow."""
    with keras.RematScope(mode="activations"):
        return GMLPBlock(**kwargs)


def block_gradients(block, x, upstream):
    """`(loss, gradients of x and the trainable variables)` of
    `sum(block(x, training=True) * upstream)`, traced in a `tf.function`
    as Keras' training step is."""
    import tensorflow as tf

    x = tf.constant(x)
    upstream = tf.constant(upstream, "float32")

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = block(x, training=True)
            loss = tf.reduce_sum(tf.cast(outputs, "float32") * upstream)
        return loss, tape.gradient(loss, [x] + block.trainable_variables)

    loss, gradients = gradients()
    return float(loss), [tf.convert_to_tensor(g).numpy() for g in gradients]


def training_gradient_graph(block, x):
    """The graph of the gradients of `sum(block(x, training=True))` for `x`
    and the block's weights, traced as Keras' training step is."""
    import tensorflow as tf

    x = tf.constant(x)

    @tf.function
    def gradients():
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(block(x, training=True))
        return tape.gradient(loss, [x] + block.trainable_variables)

    return gradients.get_concrete_function().graph


def with_autograd(function):
    """`function()` with the block kernel's usual call of the unit under
    TensorFlow's own differentiation, not the recomputing gate: for a
    block made under the scope (which takes no training gate), no gate's
    `(batch, tokens, channels)` inputs are taken as recomputable."""
    original = gmlp_block._recomputable_3d
    gmlp_block._recomputable_3d = lambda unit, hidden, length: False
    try:
        return function()
    finally:
        gmlp_block._recomputable_3d = original


def counting_built(name, function):
    """`(function(), how many gates it built with
    `tensorflow_spatial_gate.<name>`)`."""
    from keras_gmlp.kernels import tensorflow_spatial_gate

    original = getattr(tensorflow_spatial_gate, name)
    built = []

    def counted(*args, **kwargs):
        built.append(1)
        return original(*args, **kwargs)

    setattr(tensorflow_spatial_gate, name, counted)
    try:
        return function(), len(built)
    finally:
        setattr(tensorflow_spatial_gate, name, original)


def counting_gates(function):
    """`(function(), how many recomputing gates it built)`."""
    return counting_built("recomputed_spatial_gate", function)


def assert_gradients_match(block, x, rng, counting, reference, gates):
    """Checks that `block`'s loss and gradients for `x` (random weights and
    upstream gradient) equal those traced under `reference`, a function
    that calls its argument with TensorFlow's own differentiation, and
    that `counting` counted `gates` built with and without it."""
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    upstream = rng.normal(size=x.shape)

    def gradients():
        return block_gradients(block, x, upstream)

    (loss, got), built = counting(gradients)
    (expected_loss, expected), reference_built = counting(
        lambda: reference(gradients)
    )
    assert (built, reference_built) == gates
    low_precision = block.compute_dtype != "float32"
    tolerance = 2e-2 if low_precision else 1e-5
    np.testing.assert_allclose(loss, expected_loss, rtol=tolerance)
    assert len(got) == len(block.trainable_variables) + 1
    assert_gradients_close(got, expected, tolerance)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("attention_dim", [None, 4])
@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_gradients_match_tensorflow_differentiation(
    spatial, attention_dim, policy, rng
):
    block = rematerialized_block(
        ffn_dim=12, attention_dim=attention_dim, spatial=spatial, dtype=policy
    )
    # The recomputing gate is the one traced by default.
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    assert_gradients_match(block, x, rng, counting_gates, with_autograd, (1, 0))


def test_inference_exports_and_default_blocks_take_the_usual_call(rng):
    from keras_gmlp.kernels import reference_only

    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = rematerialized_block(ffn_dim=12)
    block.build(x.shape)
    _, gates = counting_gates(lambda: block(x, training=True))
    assert gates == 1
    _, gates = counting_gates(lambda: block(x, training=False))
    assert gates == 0
    with reference_only():
        _, gates = counting_gates(lambda: block(x, training=True))
    assert gates == 0
    # Without the scope, the training gate (which keeps more), not this.
    default = GMLPBlock(ffn_dim=12)
    default.build(x.shape)
    _, gates = counting_gates(lambda: default(x, training=True))
    assert gates == 0


def without_training_gate(function):
    """`function()` with the default blocks' training call under
    TensorFlow's own differentiation, not the training gate's functions."""
    original = gmlp_block.takes_tensorflow_training_gate
    gmlp_block.takes_tensorflow_training_gate = lambda unit, hidden, remat: (
        False
    )
    try:
        return function()
    finally:
        gmlp_block.takes_tensorflow_training_gate = original


def counting_training_gates(function):
    """`(function(), how many of the training gate's gated halves and
    normalised gate inputs it built)`."""
    (result, halves), inputs = counting_built(
        "training_normalized_gelu",
        lambda: counting_built("training_gelu_gate", function),
    )
    return result, (halves, inputs)


@pytest.mark.parametrize(
    "policy", ["float32", "mixed_bfloat16", "mixed_float16"]
)
@pytest.mark.parametrize("attention_dim", [None, 4])
@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_training_gate_matches_tensorflow_differentiation(
    spatial, attention_dim, policy, rng
):
    # A block made without the scope trains through the training gate's
    # functions; in float32 its gate input is the GELU's and the norm's
    # functions.
    block = GMLPBlock(
        ffn_dim=12, attention_dim=attention_dim, spatial=spatial, dtype=policy
    )
    inputs = 0 if policy == "float32" else 1
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    assert_gradients_match(
        block,
        x,
        rng,
        counting_training_gates,
        without_training_gate,
        ((1, inputs), (0, 0)),
    )


def test_training_gate_in_default_training_only(rng):
    from keras_gmlp.kernels import reference_only

    x = rng.normal(size=(2, 6, 8)).astype("float32")

    def gates(training=True, method=None, **kwargs):
        block = GMLPBlock(ffn_dim=12, **kwargs)
        block.build(x.shape)
        if method is not None:
            block.spatial_gating_unit.toeplitz_method = method
        return counting_training_gates(lambda: block(x, training=training))[1]

    # The gate input as one function in bfloat16 and float16 only.
    assert gates() == (1, 0)
    assert gates(dtype="mixed_bfloat16") == (1, 1)
    assert gates(dtype="mixed_float16") == (1, 1)
    assert gates(spatial="toeplitz", method="matmul") == (1, 0)
    assert gates(training=False) == (0, 0)
    # The FFT product and the gatings without halves take the usual call.
    assert gates(spatial="toeplitz", method="fft") == (0, 0)
    assert gates(gating="multiplicative") == (0, 0)
    with reference_only():
        assert gates() == (0, 0)
    # A block made under the scope takes the recomputing gate instead.
    with keras.RematScope(mode="activations"):
        assert gates() == (0, 0)


def test_training_gate_leaves_no_tensorflow_sum_over_the_gate(rng):
    # The gating and the token product's bias gradient are inside the
    # gated half's functions, the halves' bias gradients in theirs: no
    # TensorFlow `Mul` or `Sum` over a `(batch, tokens, gate channels)`
    # tensor is left (`v`'s bias is still TensorFlow's add in float32).
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=12)
    block.build(x.shape)
    graph = training_gradient_graph(block, x)
    gate_shape = [2, 5, 6]
    kinds = {
        op.type
        for op in graph.get_operations()
        if op.inputs
        and op.inputs[0].shape.as_list() == gate_shape
        # `BatchMatMulV2`'s gradient sums `v`'s over no axis.
        and op.outputs[0].shape.as_list() != gate_shape
    }
    kinds |= {
        op.type
        for op in graph.get_operations()
        if op.type == "Mul" and op.outputs[0].shape.as_list() == gate_shape
    }
    assert not {"Sum", "Mul"} & kinds, kinds


def counting_inference_gates(function):
    """`(function(), how many inference gates it built)`."""
    return counting_built("inference_spatial_gate", function)


@pytest.fixture
def amx(monkeypatch):
    """Runs a test as on a CPU with AMX, where the bfloat16 inference gate
    is taken (`keras_gmlp.kernels.cpu_features.has_amx`), whatever this
    machine's CPU."""
    from keras_gmlp.kernels import cpu_features

    monkeypatch.setattr(cpu_features, "has_amx", lambda: True)


def assert_matches_block_reference(block, x, outputs):
    """`outputs` are numpy's block of `x` (`block_reference`), to bfloat16's
    rounding."""
    from tests.layers.test_gmlp_block import block_reference

    expected = block_reference(block, x.astype("float64"))
    np.testing.assert_allclose(
        outputs.numpy().astype("float64"),
        expected,
        rtol=0,
        atol=2e-2 * np.abs(expected).max(),
    )


def bfloat16_inference(block, x):
    """`(outputs, inference gates built, the graph's op types)` of
    `block(x, training=False)` traced as Keras' `predict` traces it."""
    import tensorflow as tf

    infer = tf.function(lambda x: block(x, training=False))
    outputs, gates = counting_inference_gates(lambda: infer(tf.constant(x)))
    graph = infer.get_concrete_function(tf.constant(x)).graph
    return outputs, gates, {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("attention_dim", [None, 4])
@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_bfloat16_inference_gate_matches_numpy(
    spatial, attention_dim, rng, amx
):
    # Traced as Keras' `predict` traces it: the projection's halves are
    # plain `MatMul`s, their biases and GELUs in the gate's XLA functions,
    # with no fused oneDNN kernel or TensorFlow GELU left.
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = GMLPBlock(
        ffn_dim=12,
        attention_dim=attention_dim,
        spatial=spatial,
        dtype="mixed_bfloat16",
    )
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    outputs, gates, kinds = bfloat16_inference(block, x)
    assert gates == 1
    # `tf.nn.gelu(approximate=False)` traces to an `Erfc` and products.
    assert not {"Gelu", "Erfc", "_FusedMatMul"} & kinds
    assert_matches_block_reference(block, x, outputs)


@pytest.mark.parametrize("attention_dim", [None, 4])
def test_without_amx_bfloat16_inference_keeps_the_fused_product(
    attention_dim, rng, monkeypatch
):
    # Without AMX, oneDNN's fused product, bias and GELU runs on the same
    # units as a plain product, and is faster than the gate.
    from keras_gmlp.kernels import cpu_features
    from keras_gmlp.kernels.gelu import _onednn_enabled

    monkeypatch.setattr(cpu_features, "has_amx", lambda: False)
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = GMLPBlock(
        ffn_dim=12, attention_dim=attention_dim, dtype="mixed_bfloat16"
    )
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    outputs, gates, kinds = bfloat16_inference(block, x)
    assert gates == 0
    if _onednn_enabled():
        # Grappler fuses the graph's `MatMul`, `BiasAdd` and exact
        # `tf.nn.gelu` (traced to an `Erfc` and products) later.
        assert {"MatMul", "BiasAdd", "Erfc"} <= kinds
    assert_matches_block_reference(block, x, outputs)


def test_inference_gate_in_bfloat16_inference_only(rng, amx):
    from keras_gmlp.kernels import reference_only

    x = rng.normal(size=(2, 6, 8)).astype("float32")

    def gates(policy="mixed_bfloat16", training=False, method=None, **kwargs):
        block = GMLPBlock(ffn_dim=12, dtype=policy, **kwargs)
        block.build(x.shape)
        if method is not None:
            block.spatial_gating_unit.toeplitz_method = method
        return counting_inference_gates(lambda: block(x, training=training))[1]

    assert gates() == 1
    assert gates(spatial="toeplitz", method="matmul") == 1
    assert gates(training=True) == 0
    assert gates(policy="float32") == 0
    assert gates(policy="mixed_float16") == 0
    # The FFT product takes the usual call.
    assert gates(spatial="toeplitz", method="fft") == 0
    with reference_only():
        assert gates() == 0
    # A block made under the scope recomputes in training only.
    with keras.RematScope(mode="activations"):
        assert gates() == 1
        assert gates(training=True) == 0


def test_call_on_projection_takes_the_gate_as_asked(rng, amx):
    # `training=None`, a direct call: the recomputing gate for a block
    # made under the scope (`remat`), else the inference gate.
    products = tuple(
        rng.normal(size=(2, 6, 5)).astype("bfloat16") for _ in range(2)
    )
    biases = tuple(rng.normal(size=(5,)).astype("bfloat16") for _ in range(2))
    unit = SpatialGatingUnit(dtype="mixed_bfloat16")
    unit.build((2, 6, 10))
    counts = {}
    for name, remat in (("default", False), ("remat", True)):
        for training in (None, False, True):

            def call(remat=remat, training=training):
                return gmlp_block.call_on_projection(
                    unit,
                    products,
                    hidden_biases=biases,
                    training=training,
                    remat=remat,
                )

            (_, inference), recomputing = counting_gates(
                lambda call=call: counting_inference_gates(call)
            )
            counts[name, training] = (inference, recomputing)
    assert counts == {
        ("default", None): (1, 0),
        ("default", False): (1, 0),
        ("default", True): (0, 0),
        ("remat", None): (0, 1),
        ("remat", False): (1, 0),
        ("remat", True): (0, 1),
    }


def folded_projections(function):
    """`(function(), for each gated half the training gate built, whether
    the block's second projection was folded into it)`."""
    import inspect

    from keras_gmlp.kernels import tensorflow_spatial_gate

    original = tensorflow_spatial_gate.training_gelu_gate
    signature = inspect.signature(original)
    folded = []

    def recorded(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs).arguments
        folded.append(arguments.get("kernel") is not None)
        return original(*args, **kwargs)

    tensorflow_spatial_gate.training_gelu_gate = recorded
    try:
        return function(), folded
    finally:
        tensorflow_spatial_gate.training_gelu_gate = original


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("lora", [False, True])
def test_training_gate_folds_a_plain_output_projection(lora, policy, rng):
    # A plain Dense second projection runs inside the training gate (its
    # input, the gated output, is recomputed, not kept); one with LoRA
    # runs its own call on the gate's output. Both give TensorFlow's own
    # differentiation's gradients.
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = GMLPBlock(ffn_dim=12, dtype=policy)
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    if lora:
        block.channel_projection_out.enable_lora(2)
        randomize_weights(block.channel_projection_out, rng, scale=0.3)
    upstream = rng.normal(size=x.shape)

    def gradients():
        return block_gradients(block, x, upstream)

    (loss, got), folded = folded_projections(gradients)
    expected_loss, expected = without_training_gate(gradients)
    assert folded == [not lora]
    tolerance = 1e-5 if policy == "float32" else 2e-2
    np.testing.assert_allclose(loss, expected_loss, rtol=tolerance)
    assert len(got) == len(block.trainable_variables) + 1
    assert_gradients_close(got, expected, tolerance)


@pytest.mark.parametrize("with_attention", [False, True])
def test_training_gate_with_projection_matches_numpy(with_attention, rng):
    # `gelu(hidden_u + bias_u) * (product + b [+ attention]) @ kernel +
    # projection_bias`: the outputs against numpy's formula, the gradients
    # against TensorFlow's differentiation of its own ops.
    import tensorflow as tf

    from keras_gmlp.kernels.tensorflow_spatial_gate import training_gelu_gate
    from tests import reference

    def normal(*shape):
        return tf.constant(rng.normal(size=shape), "float32")

    hidden_u, bias_u, product = normal(2, 5, 6), normal(6), normal(2, 5, 6)
    bias, kernel, projection_bias = normal(5), normal(6, 4), normal(4)
    attention = normal(2, 5, 6) if with_attention else None
    upstream = normal(2, 5, 4)
    inputs = [hidden_u, bias_u, product, bias, kernel, projection_bias]
    inputs += [attention] if with_attention else []

    def plain(hidden_u, bias_u, product, bias, kernel, projection_bias, *a):
        mixed = product + bias[:, None] + (a[0] if a else 0.0)
        gated = tf.nn.gelu(hidden_u + bias_u, approximate=False) * mixed
        return tf.einsum("btc,cd->btd", gated, kernel) + projection_bias

    def gate(hidden_u, bias_u, product, bias, kernel, projection_bias, *a):
        return training_gelu_gate(
            hidden_u,
            bias_u,
            product,
            bias,
            a[0] if a else None,
            kernel,
            projection_bias,
        )

    def value_and_gradients(function):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            outputs = function(*inputs)
            loss = tf.reduce_sum(outputs * upstream)
        return outputs.numpy(), [g.numpy() for g in tape.gradient(loss, inputs)]

    outputs, got = value_and_gradients(tf.function(gate))
    _, expected = value_and_gradients(plain)
    arrays = [t.numpy().astype("float64") for t in inputs]
    mixed = arrays[2] + arrays[3][:, None]
    if with_attention:
        mixed = mixed + arrays[6]
    numpy_outputs = (reference.gelu(arrays[0] + arrays[1]) * mixed) @ arrays[
        4
    ] + arrays[5]
    np.testing.assert_allclose(outputs, numpy_outputs, rtol=1e-5, atol=1e-5)
    assert len(got) == len(inputs)
    assert_gradients_close(got, expected, 1e-5)


def test_training_gate_takes_the_projection_kernel_and_bias_together():
    import tensorflow as tf

    from keras_gmlp.kernels.tensorflow_spatial_gate import training_gelu_gate

    x = tf.zeros((1, 2, 3))
    with pytest.raises(ValueError, match="projection_bias=None"):
        training_gelu_gate(
            x, tf.zeros(3), x, tf.zeros(2), None, tf.zeros((3, 4))
        )


def test_gate_sums_the_first_projection_bias_gradients_itself(rng):
    # The halves' bias gradients come out of the gate's gradient functions
    # (`hidden_biases`): the only TensorFlow `Sum` over a `(batch, tokens,
    # gate channels)` tensor left is the token bias's, inside the gate.
    x = rng.normal(size=(2, 5, 8)).astype("float32")
    block = rematerialized_block(ffn_dim=12)
    block.build(x.shape)
    graph = training_gradient_graph(block, x)
    sums = [
        op.name
        for op in graph.get_operations()
        if op.type == "Sum" and op.inputs[0].shape.as_list() == [2, 5, 6]
    ]
    assert len(sums) == 1, sums


def test_output_projection_with_lora_is_applied_after_the_gate(rng):
    # Only a plain Dense is folded into the recomputing gate; one with
    # LoRA runs its own call on the gate's output.
    x = rng.normal(size=(2, 6, 8)).astype("float32")
    block = rematerialized_block(ffn_dim=12)
    block.build(x.shape)
    randomize_weights(block, rng, scale=0.3)
    block.channel_projection_out.enable_lora(2)
    randomize_weights(block.channel_projection_out, rng, scale=0.3)
    upstream = rng.normal(size=x.shape)

    def gradients():
        return block_gradients(block, x, upstream)[1]

    recomputed, gates = counting_gates(gradients)
    expected = with_autograd(gradients)
    assert gates == 1
    assert len(recomputed) == len(block.trainable_variables) + 1
    for got, want in zip(recomputed, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


PEAK_SCRIPT = """
import json, sys
import keras
import numpy as np
import tensorflow as tf
from keras_gmlp.layers import GMLPBlock

x = tf.constant(np.random.default_rng(0).normal(size=(8, 64, 16)), "float32")
from keras_gmlp.kernels import gmlp_block

mode = "activations" if sys.argv[1] == "recomputed" else None
if sys.argv[1] == "autograd":
    gmlp_block.takes_tensorflow_training_gate = lambda unit, h, remat: False
with keras.RematScope(mode=mode):
    stack = keras.Sequential([GMLPBlock(ffn_dim=128) for _ in range(6)])
stack.build(x.shape)

@tf.function
def gradients():
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(stack(x, training=True) ** 2)
    return tape.gradient(loss, stack.trainable_variables)

gradients()
tf.config.experimental.reset_memory_stats("CPU:0")
gradients()
print(json.dumps(tf.config.experimental.get_memory_info("CPU:0")))
"""


def peak_bytes(form):
    """The peak bytes TensorFlow's allocator held during a training step
    of a stack of blocks in `form` (a fresh process: the BFC allocator,
    which counts, is chosen when TensorFlow starts)."""
    env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true")
    result = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, form],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])["peak"]


def test_keeps_less_for_the_backward_pass():
    # The kept activations of a stack of blocks add up: the recomputation
    # must not be merged back into the forward pass by Grappler. In
    # float32 the default training gate, with the block's second
    # projection folded in, keeps 2.5 values per expanded channel and
    # token where TensorFlow's own differentiation keeps 3.5; the
    # recomputing gate 1.5.
    recomputed, default, kept_by_autograd = (
        peak_bytes("recomputed"),
        peak_bytes("default"),
        peak_bytes("autograd"),
    )
    assert kept_by_autograd > 4_000_000
    assert default < 0.87 * kept_by_autograd
    assert recomputed < 0.85 * default


def test_a_classifier_made_under_the_scope_trains_through_the_gate(rng):
    import keras_gmlp

    def classifier():
        model = keras_gmlp.GMLPImageClassifier.from_preset(
            "gmlp_micro4_32", num_classes=10
        )
        model.compile(
            optimizer=keras.optimizers.SGD(0.0),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        return model

    default = classifier()
    with keras.RematScope(mode="activations"):
        rematerialized = classifier()
    rematerialized.set_weights(default.get_weights())
    images = rng.uniform(size=(4, 32, 32, 3)).astype("float32")
    labels = rng.integers(0, 10, size=(4,))
    loss, gates = counting_gates(
        lambda: rematerialized.train_on_batch(images, labels)
    )
    expected, default_gates = counting_gates(
        lambda: default.train_on_batch(images, labels)
    )
    assert gates > 0 and default_gates == 0
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_classifier_trains_through_the_training_gate(jit_compile, rng):
    # Keras' training step, traced by `fit` (and compiled whole by XLA
    # with `jit_compile=True`): the same loss and weights after a step as
    # TensorFlow's own differentiation gives.
    import keras_gmlp

    def trained(gate):
        keras.utils.set_random_seed(0)
        model = keras_gmlp.GMLPImageClassifier.from_preset(
            "gmlp_micro4_32", num_classes=10
        )
        model.compile(
            optimizer=keras.optimizers.SGD(0.1),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=jit_compile,
        )

        def step():
            return model.train_on_batch(images, labels)

        if gate:
            loss, gates = counting_training_gates(step)
        else:
            loss, gates = counting_training_gates(
                lambda: without_training_gate(step)
            )
        return loss, gates, model.get_weights()

    images = rng.uniform(size=(4, 32, 32, 3)).astype("float32")
    labels = rng.integers(0, 10, size=(4,))
    loss, gates, weights = trained(gate=True)
    expected, autograd_gates, expected_weights = trained(gate=False)
    assert gates[0] > 0 and autograd_gates == (0, 0)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    for got, want in zip(weights, expected_weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
