"""The block's exact GELU (an XLA function under TensorFlow) against the
normal CDF in float64 numpy: outputs, gradients, dtypes; the projection
and GELU `dense_gelu` (one oneDNN kernel in TensorFlow's inference
graphs) and its halves as two products (`split_dense_gelu`, and before
the GELU `split_dense`); the GELU of a biased input (`biased_gelu`,
whose TensorFlow gradient function sums the bias gradient); and exports
of the XLA functions' kernels (GELU, `layer_norm`) that hold none."""

import math

import keras
import numpy as np
import pytest

from keras_gmlp.kernels import reference_only
from keras_gmlp.kernels.gelu import biased_gelu
from keras_gmlp.kernels.gelu import dense_gelu
from keras_gmlp.kernels.gelu import gelu
from keras_gmlp.kernels.gelu import split_dense
from keras_gmlp.kernels.gelu import split_dense_gelu
from tests.gradients import gradients

BACKEND = keras.config.backend()
ERF = np.vectorize(math.erf)


def reference(x):
    x = x.astype("float64")
    return 0.5 * x * (1.0 + ERF(x / math.sqrt(2.0)))


def reference_derivative(x):
    x = x.astype("float64")
    cdf = 0.5 * (1.0 + ERF(x / math.sqrt(2.0)))
    return cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


class GELU(keras.layers.Layer):
    def call(self, inputs):
        return gelu(inputs)


def inputs(shape=(3, 7, 16), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=3.0, size=shape).astype("float32")
    x.flat[:4] = [0.0, -12.0, 12.0, 1e-4]  # the tails and the origin
    return x


def test_outputs_are_the_normal_cdf_times_x():
    x = inputs()
    outputs = keras.ops.convert_to_numpy(gelu(x))
    assert outputs.dtype == np.float32
    np.testing.assert_allclose(outputs, reference(x), rtol=2e-6, atol=1e-6)


def test_gradient_is_the_closed_form():
    x = inputs()
    cotangent = np.random.default_rng(1).normal(size=x.shape)
    layer = GELU()
    layer.build(x.shape)
    (by_input,) = gradients(layer, x, cotangent.astype("float32"), [])
    np.testing.assert_allclose(
        by_input, cotangent * reference_derivative(x), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_keeps_its_dtype_and_rounds_once(dtype):
    x = keras.ops.cast(inputs(), dtype)
    outputs = gelu(x)
    assert keras.backend.standardize_dtype(outputs.dtype) == dtype
    exact = reference(keras.ops.convert_to_numpy(keras.ops.cast(x, "float32")))
    # One rounding to the half type: 2^-8 (bfloat16) or 2^-11 relative.
    relative = 2.0**-8 if dtype == "bfloat16" else 2.0**-11
    actual = keras.ops.convert_to_numpy(keras.ops.cast(outputs, "float32"))
    np.testing.assert_allclose(actual, exact, rtol=relative, atol=1e-3)


@pytest.mark.skipif(BACKEND == "jax", reason="JAX runs without float64")
def test_float64_stays_float64():
    x = inputs().astype("float64") * 1.1
    outputs = keras.ops.convert_to_numpy(gelu(x))
    assert outputs.dtype == np.float64
    np.testing.assert_allclose(outputs, reference(x), rtol=1e-12, atol=1e-14)


@pytest.mark.skipif(BACKEND != "jax", reason="JAX's x64 mode")
def test_jax_float64_stays_float64_and_exact():
    import jax

    x = inputs().astype("float64") * 1.1
    with jax.enable_x64(True):
        outputs = np.asarray(gelu(jax.numpy.asarray(x)))
    assert outputs.dtype == np.float64
    np.testing.assert_allclose(outputs, reference(x), rtol=1e-12, atol=1e-14)


def test_a_replaced_keras_gelu_runs_instead():
    original = keras.activations.gelu
    keras.activations.gelu = lambda x, approximate=False: x * 0 + 7.0
    try:
        outputs = keras.ops.convert_to_numpy(gelu(np.ones((2,), "float32")))
    finally:
        keras.activations.gelu = original
    np.testing.assert_array_equal(outputs, [7.0, 7.0])


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's graphs")
def test_reference_only_traces_no_xla_function():
    import tensorflow as tf

    from keras_gmlp.kernels.layer_normalization import layer_norm
    from keras_gmlp.layers import GMLPBlock

    def xla_functions(function, shape=(None, 16)):
        graph = function.get_concrete_function(
            tf.TensorSpec(shape, "float32")
        ).graph
        names = []
        for definition in graph.as_graph_def().library.function:
            attribute = definition.attr.get("_XlaMustCompile")
            if attribute is not None and attribute.b:
                names.append(definition.signature.name)
        return names

    norm = keras.layers.LayerNormalization()
    norm.build((None, 16))
    block = GMLPBlock(ffn_dim=32)
    block.build((None, 4, 16))
    assert xla_functions(tf.function(gelu))
    assert xla_functions(tf.function(lambda x: layer_norm(norm, x)))
    assert xla_functions(tf.function(block), (None, 4, 16))
    with reference_only():
        assert not xla_functions(tf.function(gelu))
        # The block takes its reference call, with Keras' own norms.
        assert not xla_functions(tf.function(block), (None, 4, 16))
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(gelu(inputs())),
            reference(inputs()),
            rtol=2e-6,
            atol=1e-6,
        )
    assert xla_functions(tf.function(gelu))


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's graphs")
def test_task_export_holds_no_xla_function(tmp_path):
    import tensorflow as tf

    from keras_gmlp import models
    from keras_gmlp.export import export_saved_model

    task = models.image_classifier(
        num_classes=3,
        image_size=(8, 8),
        patch_size=4,
        num_layers=1,
        hidden_dim=8,
        ffn_dim=16,
    )
    images = inputs((2, 8, 8, 3))
    # Keras' own export traces the XLA function; the task's does not.
    keras.Model.export(task, str(tmp_path / "keras"), verbose=False)
    assert (
        b"_XlaMustCompile" in (tmp_path / "keras/saved_model.pb").read_bytes()
    )
    task.export(str(tmp_path / "model"), verbose=False)
    saved = (tmp_path / "model" / "saved_model.pb").read_bytes()
    assert b"_XlaMustCompile" not in saved
    export_saved_model(task, str(tmp_path / "run"))
    saved = (tmp_path / "run" / "saved_model.pb").read_bytes()
    assert b"_XlaMustCompile" not in saved
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    served = loaded.serve(images)
    np.testing.assert_allclose(
        served.numpy(), task.predict(images, verbose=0), rtol=1e-5, atol=1e-6
    )


class BiasedGELU(keras.layers.Layer):
    """`biased_gelu` of the inputs and the layer's bias."""

    def build(self, input_shape):
        self.bias = self.add_weight(shape=input_shape[-1:], initializer="zeros")

    def call(self, inputs):
        return biased_gelu(
            inputs, keras.ops.cast(self.bias, self.compute_dtype)
        )


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("traced", [False, True])
def test_biased_gelu_and_its_gradients_are_those_of_the_sum(policy, traced):
    x = inputs((3, 7, 16))
    bias = np.random.default_rng(3).normal(size=16).astype("float32")
    cotangent = inputs((3, 7, 16), seed=1) / 3.0
    layer = BiasedGELU(dtype=policy)
    layer.build(x.shape)
    layer.bias.assign(bias)
    if traced:
        if BACKEND != "tensorflow":
            pytest.skip("a TensorFlow graph")
        import tensorflow as tf

        # The form of a Keras training step: a graph.
        @tf.function
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                outputs = layer(x)
                loss = tf.reduce_sum(tf.cast(outputs, "float32") * cotangent)
            return outputs, tape.gradient(loss, [x, layer.bias.value])

        outputs, got = step(tf.constant(x))
        got = [keras.ops.convert_to_numpy(g).astype("float64") for g in got]
    else:
        outputs = layer(x)
        got = gradients(layer, x, cotangent, [layer.bias])
    hidden = rounded(rounded(x, policy) + rounded(bias, policy), policy)
    by_hidden = cotangent * reference_derivative(hidden)
    assert_near_dense_gelu(outputs, reference(hidden), policy)
    by_input, by_bias = got
    if policy == "float32":
        np.testing.assert_allclose(by_input, by_hidden, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            by_bias, by_hidden.sum((0, 1)), rtol=1e-5, atol=1e-5
        )
    else:
        # Each gradient rounded to bfloat16 once, the bias's sum of the
        # 21 rounded rows accumulated in float32.
        np.testing.assert_allclose(
            by_input, by_hidden, rtol=2.0**-7, atol=2.0**-7 * 0.3
        )
        scale = 2.0**-7 * np.abs(by_hidden).sum((0, 1))
        np.testing.assert_array_less(
            np.abs(by_bias - by_hidden.sum((0, 1))), scale + 1e-3
        )


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's graph")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_biased_gelu_gradient_sums_the_bias_in_its_xla_function(dtype):
    # No TensorFlow `Sum` over the GELU's input gradient: the XLA gradient
    # function gives the bias's.
    import tensorflow as tf

    x = tf.constant(inputs((3, 7, 16)), dtype)
    bias = tf.constant(np.ones(16), dtype)

    @tf.function
    def gradient(x, bias):
        with tf.GradientTape() as tape:
            tape.watch([x, bias])
            y = biased_gelu(x, bias)
        return tape.gradient(y, [x, bias])

    graph = gradient.get_concrete_function(x, bias).graph
    kinds = {op.type for op in graph.get_operations()}
    assert "Sum" not in kinds, sorted(kinds)
    by_x, by_bias = gradient(x, bias)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(tf.cast(by_bias, "float32")),
        keras.ops.convert_to_numpy(
            tf.reduce_sum(tf.cast(by_x, "float32"), axis=(0, 1))
        ),
        rtol=1e-6 if dtype == "float32" else 2.0**-8,  # rounded once
        atol=1e-6,
    )


class DenseGELU(keras.layers.Layer):
    """`dense_gelu` of a Dense, as the gMLP block calls it."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(units, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.dense.build(input_shape)

    def call(self, inputs, training=None):
        return dense_gelu(self.dense, inputs, training=training)


class SplitDenseGELU(DenseGELU):
    """`split_dense_gelu` of a Dense, its halves concatenated again."""

    def call(self, inputs, training=None):
        u, v = split_dense_gelu(self.dense, inputs, training=training)
        half = self.dense.units // 2
        assert tuple(u.shape)[-1] == tuple(v.shape)[-1] == half
        return keras.ops.concatenate([u, v], axis=-1)


class SplitDense(DenseGELU):
    """`split_dense` of a Dense, its halves concatenated again."""

    def call(self, inputs, training=None):
        u, v = split_dense(self.dense, inputs)
        assert tuple(u.shape)[-1] == tuple(v.shape)[-1] == self.dense.units // 2
        return keras.ops.concatenate([u, v], axis=-1)


def dense_gelu_model(policy, layer_class=DenseGELU, units=24, shape=(7, 16)):
    inputs = keras.Input(shape)
    model = keras.Model(inputs, layer_class(units, dtype=policy)(inputs))
    rng = np.random.default_rng(2)
    for weight in model.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    return model


def rounded(x, policy):
    """`x` as the policy computes with it, in float64."""
    if policy == "mixed_bfloat16":
        x = keras.ops.convert_to_numpy(
            keras.ops.cast(keras.ops.cast(x, "bfloat16"), "float32")
        )
    return np.asarray(x, "float64")


def dense_gelu_reference(model, x, policy):
    dense = model.layers[-1].dense
    kernel = rounded(keras.ops.convert_to_numpy(dense.kernel), policy)
    bias = rounded(keras.ops.convert_to_numpy(dense.bias), policy)
    return reference(rounded(x, policy) @ kernel + bias)


def assert_near_dense_gelu(outputs, expected, policy):
    outputs = keras.ops.convert_to_numpy(keras.ops.cast(outputs, "float32"))
    if policy == "float32":
        np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)
    else:
        # The product, the bias and the GELU rounded to bfloat16, at most
        # once each.
        scale = 2.0**-7 * np.abs(expected).max()
        np.testing.assert_allclose(outputs, expected, rtol=2.0**-7, atol=scale)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("call", ["predict", "eager", "training"])
@pytest.mark.parametrize("layer_class", [DenseGELU, SplitDenseGELU])
def test_dense_gelu_is_the_gelu_of_the_projection(policy, call, layer_class):
    # `predict` runs the backend's compiled inference step: under
    # TensorFlow (with oneDNN, the package's default) the fused kernel.
    # `SplitDenseGELU`: the first half of the columns is `u`, the second
    # `v`, as the spatial gating unit splits them.
    model = dense_gelu_model(policy, layer_class)
    x = inputs((3, 7, 16))
    if call == "predict":
        outputs = model.predict_on_batch(x)
    else:
        outputs = model(x, training=call == "training")
    assert outputs.shape == (3, 7, 24)
    assert keras.backend.standardize_dtype(outputs.dtype) == (
        "float32" if policy == "float32" else "bfloat16"
    )
    assert_near_dense_gelu(
        outputs, dense_gelu_reference(model, x, policy), policy
    )


@pytest.mark.skipif(BACKEND != "tensorflow", reason="TensorFlow's graphs")
def test_dense_gelu_inference_graph_is_one_fused_kernel_with_gradients():
    import tensorflow as tf

    from keras_gmlp.kernels.gelu import _onednn_enabled

    model = dense_gelu_model("float32")
    layer = model.layers[-1]
    x = tf.constant(inputs((3, 7, 16)))
    spec = tf.TensorSpec((None, 7, 16), "float32")
    inference = fused_products(lambda x: layer(x, training=False), spec)
    training = fused_products(lambda x: layer(x, training=True), spec)
    # Grappler's `_FusedMatMul`, a `_MklNativeFusedMatMul` once TensorFlow
    # places it with oneDNN on (the package's default).
    assert inference == (
        [["BiasAdd", "GeluExact"]] if _onednn_enabled() else []
    )
    # Training keeps the GELU's input for its gradient: no GELU fused.
    assert all("GeluExact" not in fused for fused in training), training

    # Gradients through the inference graph (a custom loop calling the
    # model without `training=True`) are TensorFlow's, and right.
    @tf.function
    def input_gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = layer(x, training=False)
        return tape.gradient(outputs, x)

    dense = layer.dense
    kernel = keras.ops.convert_to_numpy(dense.kernel).astype("float64")
    before = x.numpy().astype("float64") @ kernel + dense.bias.numpy()
    expected = reference_derivative(before) @ kernel.T
    np.testing.assert_allclose(
        input_gradient(x).numpy(), expected, rtol=1e-4, atol=1e-4
    )


def fused_products(function, spec):
    """The `fused_ops` of each fused product in `function`'s graph after
    TensorFlow's graph optimiser (Grappler), as a step's graph runs."""
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2
    from tensorflow.core.protobuf import meta_graph_pb2
    from tensorflow.python.grappler import tf_optimizer

    concrete = tf.function(function).get_concrete_function(spec)
    graph_def = concrete.graph.as_graph_def()
    for node in graph_def.node:  # where the runtime places them
        node.device = "/job:localhost/replica:0/task:0/device:CPU:0"
    meta_graph = tf.compat.v1.train.export_meta_graph(
        graph_def=graph_def, graph=concrete.graph
    )
    fetches = meta_graph_pb2.CollectionDef()
    fetches.node_list.value.extend(t.name for t in concrete.outputs)
    meta_graph.collection_def["train_op"].CopyFrom(fetches)
    optimized = tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), meta_graph)
    return [
        [op.decode() for op in node.attr["fused_ops"].list.s]
        for node in optimized.node
        if node.op == "_FusedMatMul"
    ]


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_split_dense_gelu_gradients_are_those_of_the_projection(policy):
    model = dense_gelu_model(policy, SplitDenseGELU)
    layer = model.layers[-1]
    x = inputs((3, 7, 16))
    cotangent = inputs((3, 7, 24), seed=1) / 3.0
    dense = layer.dense
    kernel = keras.ops.convert_to_numpy(dense.kernel).astype("float64")
    bias = keras.ops.convert_to_numpy(dense.bias).astype("float64")
    rows = x.reshape(-1, 16).astype("float64")
    upstream = cotangent.reshape(-1, 24) * reference_derivative(
        rows @ kernel + bias
    )
    got = gradients(layer, x, cotangent, [dense.kernel, dense.bias])
    want = [
        (upstream @ kernel.T).reshape(x.shape),
        rows.T @ upstream,
        upstream.sum(0),
    ]
    for value, expected in zip(got, want, strict=True):
        if policy == "float32":
            np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-4)
        else:
            # Inputs, weights, products and gradients rounded to bfloat16.
            scale = 3e-2 * np.abs(expected).max()
            np.testing.assert_allclose(value, expected, rtol=0, atol=scale)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("lora", [False, True])
def test_split_dense_halves_are_the_projection_with_gradients(lora, policy):
    # The gMLP block's first projection in JAX training, before the
    # recomputing gate's GELU: the first half of the columns is `u`'s, the
    # second `v`'s. A LoRA Dense runs its own call, then the split.
    model = dense_gelu_model(policy, SplitDense)
    layer = model.layers[-1]
    dense = layer.dense
    if lora:
        dense.enable_lora(2)
        rng = np.random.default_rng(5)
        for weight in (dense.lora_kernel_a, dense.lora_kernel_b):
            weight.assign(rng.normal(size=weight.shape).astype("float32"))
    x = inputs((3, 7, 16))
    # A LoRA Dense's `kernel` is the sum with its low-rank update.
    kernel = keras.ops.convert_to_numpy(dense.kernel).astype("float64")
    bias = keras.ops.convert_to_numpy(dense.bias).astype("float64")
    expected = rounded(x, policy) @ rounded(kernel, policy) + bias
    assert_near_dense_gelu(layer(x), expected, policy)
    if policy != "float32":
        return
    cotangent = inputs((3, 7, 24), seed=1) / 3.0
    weights = [] if lora else [dense.kernel, dense.bias]
    got = gradients(layer, x, cotangent, weights)
    rows, upstream = x.reshape(-1, 16), cotangent.reshape(-1, 24)
    want = [(upstream @ kernel.T).reshape(x.shape)]
    if not lora:
        want += [rows.T @ upstream, upstream.sum(0)]
    for value, expected_value in zip(got, want, strict=True):
        np.testing.assert_allclose(value, expected_value, rtol=1e-4, atol=1e-4)


def test_split_dense_gelu_of_a_lora_dense_is_the_split_of_dense_gelu():
    dense = keras.layers.Dense(24)
    dense.build((None, 16))
    dense.enable_lora(2)
    rng = np.random.default_rng(4)
    for weight in dense.weights:
        weight.assign(rng.normal(size=weight.shape).astype("float32"))
    x = inputs((3, 7, 16))
    u, v = split_dense_gelu(dense, x)
    whole = keras.ops.convert_to_numpy(dense_gelu(dense, x))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(u), whole[..., :12])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(v), whole[..., 12:])


def test_split_dense_gelu_runs_one_product_per_half_except_under_torch():
    # JAX (outside training) and TensorFlow: one product per half, no
    # product of all the columns. torch: one product, its halves views of
    # it; JAX in training: one product (memory), but `split_dense` two.
    dense = keras.layers.Dense(24)
    dense.build((None, 16))
    x = inputs((3, 7, 16))
    if BACKEND == "jax":
        import jax

        def product_widths(function, **kwargs):
            return [
                equation.outvars[0].aval.shape[-1]
                for equation in jax.make_jaxpr(
                    lambda x: function(dense, x, **kwargs)
                )(x).eqns
                if equation.primitive.name == "dot_general"
            ]

        assert product_widths(split_dense_gelu) == [12, 12]
        assert product_widths(split_dense_gelu, training=False) == [12, 12]
        assert product_widths(split_dense_gelu, training=True) == [24]
        # Before the GELU (the block's recomputing gate in training).
        assert product_widths(split_dense) == [12, 12]
    elif BACKEND == "tensorflow":
        import tensorflow as tf

        graph = (
            tf.function(lambda x: split_dense_gelu(dense, x, training=True))
            .get_concrete_function(tf.TensorSpec((3, 7, 16), "float32"))
            .graph
        )
        products = [
            operation.outputs[0].shape[-1]
            for operation in graph.get_operations()
            if operation.type in ("MatMul", "BatchMatMulV2", "Einsum")
        ]
        assert products == [12, 12]
        spec = tf.TensorSpec((None, 7, 16), "float32")
        inference = fused_products(
            lambda x: split_dense_gelu(dense, x, training=False), spec
        )
        from keras_gmlp.kernels.gelu import _onednn_enabled

        assert len(inference) == (2 if _onednn_enabled() else 0)
    else:
        u, v = split_dense_gelu(dense, x)
        assert u.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()
