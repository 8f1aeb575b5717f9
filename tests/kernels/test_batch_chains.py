"""A backbone's blocks on the halves of the batch under TensorFlow and,
the text backbone's, under JAX (`keras_gmlp.kernels.batch_chains`)."""

import contextlib

import keras
import numpy as np
import pytest

from keras_gmlp.kernels import batch_chains
from keras_gmlp.models.gmlp_image.gmlp_image_backbone import GMLPImageBackbone
from tests.models.gmlp_image.test_gmlp_image_backbone import TINY
from tests.models.gmlp_image.test_gmlp_image_backbone import numpy_backbone

TENSORFLOW = keras.config.backend() == "tensorflow"
JAX = keras.config.backend() == "jax"


def randomized(backbone, seed=0):
    rng = np.random.default_rng(seed)
    for weight in backbone.weights:
        weight.assign(rng.normal(size=weight.shape) * 0.3)
    return backbone


@contextlib.contextmanager
def counted_cuts(module):
    """Counts, in a list, the calls of `module.split_batch` inside."""
    cuts = []
    original = module.split_batch

    def counted(x):
        cuts.append(1)
        return original(x)

    module.split_batch = counted
    try:
        yield cuts
    finally:
        module.split_batch = original


def assert_all_close(found, expected, tolerance=1e-5):
    """Each of the arrays `found` close to its own in `expected`."""
    for got, want in zip(found, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=tolerance, rtol=tolerance)


def traced(function, shape):
    """`function` as a `tf.function` of one float32 tensor of `shape` (a
    `None` batch: one trace for every batch size), and how many times it
    cut the batch."""
    import tensorflow as tf

    from keras_gmlp.models.gmlp_image import gmlp_image_backbone

    graph_function = tf.function(
        function, input_signature=[tf.TensorSpec(shape, "float32")]
    )
    with counted_cuts(gmlp_image_backbone) as cuts:
        graph_function.get_concrete_function()
    return graph_function, len(cuts)


@pytest.mark.skipif(not TENSORFLOW, reason="TensorFlow's executor")
@pytest.mark.parametrize("pooling", [None, "avg"])
def test_traced_call_runs_two_chains_with_the_same_outputs(pooling):
    backbone = randomized(GMLPImageBackbone(**TINY, pooling=pooling))
    call, cuts = traced(
        lambda images: backbone(images, training=False), (None, 8, 8, 3)
    )
    assert cuts == 1
    rng = np.random.default_rng(1)
    # Odd sizes leave the parts uneven; one image, one part empty.
    for batch in (1, 2, 5):
        images = rng.uniform(-1, 1, size=(batch, 8, 8, 3)).astype("float32")
        outputs = call(images)
        tokens = numpy_backbone(backbone, images)
        if pooling is None:
            np.testing.assert_allclose(outputs, tokens, atol=1e-4, rtol=1e-4)
        else:
            np.testing.assert_allclose(
                outputs["sequence_output"], tokens, atol=1e-4, rtol=1e-4
            )
            np.testing.assert_allclose(
                outputs["pooled_output"], tokens.mean(1), atol=1e-4, rtol=1e-4
            )


@pytest.mark.skipif(not TENSORFLOW, reason="TensorFlow's executor")
def test_traced_gradients_match_the_functional_call():
    import tensorflow as tf

    backbone = randomized(GMLPImageBackbone(**TINY))
    images = np.random.default_rng(2).uniform(-1, 1, size=(3, 8, 8, 3))
    images = tf.constant(images, "float32")
    upstream = tf.constant(
        np.random.default_rng(3).normal(size=(3, 4, 8)), "float32"
    )

    def gradients(images):
        with tf.GradientTape() as tape:
            tape.watch(images)
            loss = tf.reduce_sum(backbone(images, training=True) * upstream)
        return tape.gradient(loss, [images] + backbone.trainable_variables)

    chained, cuts = traced(gradients, (3, 8, 8, 3))
    assert cuts == 1
    # Eager, the backbone runs its functional graph.
    assert_all_close(chained(images), gradients(images))


def test_eager_calls_exports_and_compiled_steps_run_one_chain():
    from keras_gmlp.kernels import reference_only

    images = keras.ops.ones((2, 8, 8, 3))
    if not TENSORFLOW:
        assert not batch_chains.runs_batch_chains(images)
        return
    import tensorflow as tf

    assert not batch_chains.runs_batch_chains(images)
    backbone = GMLPImageBackbone(**TINY)
    with reference_only():
        _, cuts = traced(lambda x: backbone(x), (2, 8, 8, 3))
    assert cuts == 0

    @tf.function(jit_compile=True)
    def compiled(x):
        return tf.constant(batch_chains.runs_batch_chains(x))

    assert not bool(compiled(images))


TEXT = {
    "gmlp": {},
    "amlp": {"attention_dim": 4},
    "amlp_causal": {"attention_dim": 4, "causal": True},
    "gmlp_dense_causal": {"spatial": "dense", "causal": True},
}


def text_inputs(batch, seed):
    """Token ids and a padding mask of `batch` sequences of 8 tokens:
    right-padded, left-padded, unpadded and all padding in turn."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, 20, size=(batch, 8)).astype("int32")
    padding_mask = np.ones((batch, 8), "int32")
    for row in range(batch):
        kind = row % 4
        if kind == 0:
            padding_mask[row, 5:] = 0
        elif kind == 1:
            padding_mask[row, :3] = 0
        elif kind == 3:
            padding_mask[row] = 0
    token_ids[padding_mask == 0] = 0
    return {"token_ids": token_ids, "padding_mask": padding_mask}


def traced_text(function, batch=None):
    """`function` as a `tf.function` of the text inputs (a `None` batch:
    one trace for every batch size), and how many tensors it cut."""
    import tensorflow as tf

    from keras_gmlp.models.gmlp_text import gmlp_text_backbone

    spec = tf.TensorSpec((batch, 8), "int32")
    graph_function = tf.function(
        function,
        input_signature=[{"token_ids": spec, "padding_mask": spec}],
    )
    with counted_cuts(gmlp_text_backbone) as cuts:
        graph_function.get_concrete_function()
    return graph_function, len(cuts)


@pytest.fixture
def cores_shared(monkeypatch):
    """The text backbone's chains on, as where the cores are shared."""
    monkeypatch.setattr(batch_chains, "chains_fit_the_cores", lambda: True)


@pytest.mark.skipif(not TENSORFLOW, reason="TensorFlow's executor")
@pytest.mark.parametrize("config", list(TEXT))
def test_text_traced_call_runs_two_chains_with_the_same_outputs(
    config, cores_shared
):
    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
    from tests.models.gmlp_text.test_gmlp_text_backbone import TINY as TEXT_TINY

    backbone = randomized(GMLPTextBackbone(**TEXT_TINY, **TEXT[config]))
    call, cuts = traced_text(lambda inputs: backbone(inputs, training=False))
    assert cuts == 2  # the token ids and the padding mask
    # Odd sizes leave the parts uneven; one sequence, one part empty.
    for batch in (1, 2, 5):
        inputs = text_inputs(batch, seed=batch)
        # Eager, the backbone runs its functional graph.
        expected = backbone(inputs, training=False)
        np.testing.assert_allclose(call(inputs), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not TENSORFLOW, reason="TensorFlow's executor")
def test_text_traced_gradients_match_the_functional_call(cores_shared):
    import tensorflow as tf

    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
    from tests.models.gmlp_text.test_gmlp_text_backbone import TINY as TEXT_TINY

    backbone = randomized(GMLPTextBackbone(**TEXT_TINY, attention_dim=4))
    inputs = text_inputs(3, seed=4)
    upstream = tf.constant(
        np.random.default_rng(5).normal(size=(3, 8, 8)), "float32"
    )

    def gradients(inputs):
        with tf.GradientTape() as tape:
            outputs = backbone(inputs, training=True)
            loss = tf.reduce_sum(outputs * upstream)
        found = tape.gradient(loss, backbone.trainable_variables)
        # The embedding's is an `IndexedSlices`.
        return [tf.convert_to_tensor(gradient) for gradient in found]

    chained, cuts = traced_text(gradients, batch=3)
    assert cuts == 2
    assert_all_close(chained(inputs), gradients(inputs))


@pytest.mark.skipif(not TENSORFLOW, reason="TensorFlow's executor")
def test_text_backbone_runs_one_chain_unless_the_cores_are_shared():
    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
    from tests.models.gmlp_text.test_gmlp_text_backbone import TINY as TEXT_TINY

    # This process's ops take every core (TensorFlow's default).
    assert not batch_chains.chains_fit_the_cores()
    backbone = GMLPTextBackbone(**TEXT_TINY)
    _, cuts = traced_text(lambda inputs: backbone(inputs))
    assert cuts == 0


@pytest.mark.skipif(not TENSORFLOW, reason="TensorFlow's threads")
@pytest.mark.parametrize(
    "threads, cores, fit",
    [(0, 2, False), (1, 2, True), (2, 2, False), (4, 8, True), (1, 1, False)],
)
def test_chains_fit_the_cores_when_each_op_has_its_share(
    threads, cores, fit, monkeypatch
):
    import tensorflow as tf

    monkeypatch.setattr(
        tf.config.threading,
        "get_intra_op_parallelism_threads",
        lambda: threads,
    )
    monkeypatch.setattr(batch_chains, "usable_cores", lambda: cores)
    assert batch_chains.chains_fit_the_cores() == fit


def jax_traced_text(function, batch):
    """`function` of the text inputs of `batch` sequences compiled with
    `jax.jit`, and how many tensors its trace cut."""
    import jax

    from keras_gmlp.models.gmlp_text import gmlp_text_backbone

    compiled = jax.jit(function)
    with counted_cuts(gmlp_text_backbone) as cuts:
        compiled.lower(text_inputs(batch, seed=0))
    return compiled, len(cuts)


@pytest.mark.skipif(not JAX, reason="XLA:CPU's thread pool under JAX")
@pytest.mark.parametrize("config", list(TEXT))
def test_jax_compiled_text_call_runs_two_chains_with_the_same_outputs(config):
    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
    from tests.models.gmlp_text.test_gmlp_text_backbone import TINY as TEXT_TINY

    backbone = randomized(GMLPTextBackbone(**TEXT_TINY, **TEXT[config]))
    # One sequence runs one chain; an odd batch leaves the parts uneven.
    for batch, expected_cuts in ((1, 0), (2, 2), (5, 2)):
        call, cuts = jax_traced_text(
            lambda inputs: backbone(inputs, training=False), batch
        )
        assert cuts == expected_cuts
        inputs = text_inputs(batch, seed=batch)
        # Eager, the backbone runs its functional graph.
        expected = backbone(inputs, training=False)
        np.testing.assert_allclose(call(inputs), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not JAX, reason="XLA:CPU's thread pool under JAX")
def test_jax_compiled_text_gradients_match_the_functional_call():
    import jax

    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
    from tests.models.gmlp_text.test_gmlp_text_backbone import TINY as TEXT_TINY

    backbone = randomized(GMLPTextBackbone(**TEXT_TINY, attention_dim=4))
    inputs = text_inputs(3, seed=4)
    upstream = np.random.default_rng(5).normal(size=(3, 8, 8))
    trainable = [variable.value for variable in backbone.trainable_variables]
    others = [variable.value for variable in backbone.non_trainable_variables]

    def loss(trainable, inputs):
        outputs, _ = backbone.stateless_call(
            trainable, others, inputs, training=True
        )
        return (outputs * upstream).sum()

    def gradients(inputs):
        return jax.grad(loss)(trainable, inputs)

    chained, cuts = jax_traced_text(gradients, 3)
    assert cuts == 2
    # Not compiled, the token ids stay arrays: one chain.
    assert_all_close(chained(inputs), gradients(inputs))


@pytest.mark.skipif(not JAX, reason="XLA:CPU's thread pool under JAX")
def test_jax_keras_compiled_step_runs_two_chains():
    from keras_gmlp.models.gmlp_text import gmlp_text_backbone
    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
    from tests.models.gmlp_text.test_gmlp_text_backbone import TINY as TEXT_TINY

    backbone = GMLPTextBackbone(**TEXT_TINY)
    with counted_cuts(gmlp_text_backbone) as cuts:
        backbone.predict_on_batch(text_inputs(4, seed=6))
    assert len(cuts) == 2


@pytest.mark.skipif(not JAX, reason="XLA:CPU's thread pool under JAX")
def test_jax_eager_calls_exports_and_other_devices_run_one_chain(monkeypatch):
    import jax

    from keras_gmlp.kernels import reference_only
    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
    from tests.models.gmlp_text.test_gmlp_text_backbone import TINY as TEXT_TINY

    backbone = GMLPTextBackbone(**TEXT_TINY)
    assert not batch_chains.runs_jax_chains(keras.ops.ones((2, 8)))
    with reference_only():
        _, cuts = jax_traced_text(lambda inputs: backbone(inputs), 2)
    assert cuts == 0
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    _, cuts = jax_traced_text(lambda inputs: backbone(inputs), 2)
    assert cuts == 0


@pytest.mark.skipif(not JAX, reason="XLA:CPU's thread pool under JAX")
def test_jax_distributed_steps_run_one_chain():
    # A `keras.distribution` lays the batch out over its devices already.
    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import GMLPTextBackbone
    from tests.models.gmlp_text.test_gmlp_text_backbone import TINY as TEXT_TINY

    backbone = GMLPTextBackbone(**TEXT_TINY)
    distribution = keras.distribution.DataParallel(
        devices=keras.distribution.list_devices()
    )
    with distribution.scope():
        _, cuts = jax_traced_text(lambda inputs: backbone(inputs), 2)
    assert cuts == 0
    _, cuts = jax_traced_text(lambda inputs: backbone(inputs), 2)
    assert cuts == 2


@pytest.mark.skipif(JAX, reason="the other backends")
def test_no_jax_chains_under_the_other_backends():
    assert not batch_chains.runs_jax_chains(keras.ops.ones((2, 8)))
