"""The image backbone's blocks on the halves of the batch under
TensorFlow (`keras_gmlp.models.batch_chains`)."""

import keras
import numpy as np
import pytest

from keras_gmlp.models import batch_chains
from keras_gmlp.models.gmlp_image_backbone import GMLPImageBackbone
from tests.models.test_gmlp_image_backbone import TINY
from tests.models.test_gmlp_image_backbone import numpy_backbone

TENSORFLOW = keras.config.backend() == "tensorflow"


def randomized(backbone, seed=0):
    rng = np.random.default_rng(seed)
    for weight in backbone.weights:
        weight.assign(rng.normal(size=weight.shape) * 0.3)
    return backbone


def traced(function, shape):
    """`function` as a `tf.function` of one float32 tensor of `shape` (a
    `None` batch: one trace for every batch size), and how many times it
    cut the batch."""
    import tensorflow as tf

    cuts = []
    original = batch_chains.split_batch

    def counted(x):
        cuts.append(1)
        return original(x)

    graph_function = tf.function(
        function, input_signature=[tf.TensorSpec(shape, "float32")]
    )
    from keras_gmlp.models import gmlp_image_backbone

    saved = gmlp_image_backbone.split_batch
    gmlp_image_backbone.split_batch = counted
    try:
        graph_function.get_concrete_function()
    finally:
        gmlp_image_backbone.split_batch = saved
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
    expected = gradients(images)
    for got, want in zip(chained(images), expected, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_eager_calls_exports_and_compiled_steps_run_one_chain():
    from keras_gmlp.layers.xla_functions import portable_ops

    images = keras.ops.ones((2, 8, 8, 3))
    if not TENSORFLOW:
        assert not batch_chains.runs_batch_chains(images)
        return
    import tensorflow as tf

    assert not batch_chains.runs_batch_chains(images)
    backbone = GMLPImageBackbone(**TINY)
    with portable_ops():
        _, cuts = traced(lambda x: backbone(x), (2, 8, 8, 3))
    assert cuts == 0

    @tf.function(jit_compile=True)
    def compiled(x):
        return tf.constant(batch_chains.runs_batch_chains(x))

    assert not bool(compiled(images))
