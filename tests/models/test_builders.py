import keras
import numpy as np
import pytest

from keras_gmlp import layers
from keras_gmlp import models

TINY_IMAGE = dict(
    num_classes=5,
    image_size=(8, 12),
    patch_size=(2, 4),
    num_layers=2,
    hidden_dim=8,
    ffn_dim=16,
)
TINY_TEXT = dict(
    vocabulary_size=50,
    sequence_length=12,
    num_layers=2,
    hidden_dim=8,
    ffn_dim=16,
    attention_dim=4,
)


def array(x):
    return keras.ops.convert_to_numpy(x)


def encode(model, ids):
    """The hidden states of the text backbone of `model`."""
    backbone = models.text_encoder(model)
    return backbone({"token_ids": ids, "padding_mask": ids != 0})


def test_image_classifier_non_square_images_and_patches():
    model = models.image_classifier(**TINY_IMAGE)
    images = np.random.default_rng(0).normal(size=(3, 8, 12, 3))
    assert model(images).shape == (3, 5)
    block = model.get_layer("block_0")
    assert block.spatial_gating_unit.sequence_length == 4 * 3


def test_image_drop_path_rises_linearly():
    model = models.image_classifier(
        **dict(TINY_IMAGE, num_layers=5), drop_path_rate=0.2
    )
    rates = [model.get_layer(f"block_{i}").drop_path_rate for i in range(5)]
    np.testing.assert_allclose(rates, [0.0, 0.05, 0.1, 0.15, 0.2])


def test_preset_keywords_override_the_table():
    model = models.image_classifier("gmlp_s16_224", num_layers=2, num_classes=7)
    assert model.output_shape == (None, 7)
    blocks = [
        x for x in model.backbone.layers if isinstance(x, layers.GMLPBlock)
    ]
    assert len(blocks) == 2


@pytest.mark.parametrize(
    "builder, kwargs, message",
    [
        (
            models.image_classifier,
            {"image_size": 225},
            "225 is not divisible by patch size 16",
        ),
        (
            models.image_classifier,
            {"ffn_dim": 15, "num_layers": 1},
            "ffn_dim=15",
        ),
        (
            models.image_classifier,
            {"preset": "gmlp_xl"},
            "Unknown preset 'gmlp_xl'",
        ),
        (models.image_classifier, {"preset": "gmlp_base"}, "text model"),
        (
            models.image_classifier,
            {"spatial": "fft", "num_layers": 1},
            "spatial='fft'",
        ),
        (
            models.image_classifier,
            {"hidden_size": 3},
            r"Unknown configuration keys \['hidden_size'\]",
        ),
        (models.masked_lm, {"preset": "gmlp_s16_224"}, "image model"),
        (
            models.masked_lm,
            {"spatial": "banded", "num_layers": 1},
            "spatial='banded'",
        ),
        (models.masked_lm, {"gating": "max", "num_layers": 1}, "gating='max'"),
        (
            models.causal_lm,
            {"causal": False},
            r"Unknown configuration keys \['causal'\]",
        ),
    ],
)
def test_invalid_configurations_raise_at_construction(builder, kwargs, message):
    with pytest.raises(ValueError, match=message):
        builder(**kwargs)


def test_masked_lm_accepts_shorter_sequences_and_rejects_longer():
    model = models.masked_lm(**TINY_TEXT)
    for length in (3, 12):
        assert model(np.ones((2, length), "int32")).shape == (2, length, 50)
    with pytest.raises(ValueError, match="13 tokens.*at most 12"):
        model(np.ones((1, 13), "int32"))


@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_causal_lm_shorter_sequence_uses_the_leading_block_of_w(spatial):
    # In a causal model a prefix's outputs do not depend on what follows,
    # so running the prefix alone (the leading block of W) must agree.
    model = models.causal_lm(**dict(TINY_TEXT, spatial=spatial))
    rng = np.random.default_rng(0)
    for weight in model.weights:  # W far from its near-zero start
        weight.assign(rng.normal(0.0, 0.5, weight.shape).astype("float32"))
    ids = np.random.default_rng(1).integers(1, 50, size=(2, 12)).astype("int32")
    full = array(model(ids))
    prefix = array(model(ids[:, :5]))
    np.testing.assert_allclose(prefix, full[:, :5], rtol=1e-4, atol=1e-5)
    if spatial == "toeplitz":
        return  # shift-invariant: its trailing block equals its leading one
    # The comparison can fail: with the trailing block of each W in place of
    # the leading one, the prefix's outputs move.
    for index in range(TINY_TEXT["num_layers"]):
        kernel = model.get_layer(f"block_{index}").spatial_gating_unit.kernel
        weight = array(kernel)
        weight[:5, :5] = weight[-5:, -5:]
        kernel.assign(weight)
    trailing = array(model(ids[:, :5]))
    assert np.abs(trailing - full[:, :5]).max() > 1e-2


def test_causal_lm_no_future_leak():
    model = models.causal_lm(**dict(TINY_TEXT, spatial="dense"))
    for weight in model.weights:
        if "kernel" in weight.path and "spatial_gating_unit" in weight.path:
            weight.assign(np.random.default_rng(2).normal(size=weight.shape))
    ids = np.random.default_rng(3).integers(1, 50, size=(1, 12)).astype("int32")
    changed = ids.copy()
    changed[0, 7] = (ids[0, 7] % 49) + 1
    moved = np.abs(array(model(changed)) - array(model(ids))).max(axis=(0, 2))
    np.testing.assert_array_equal(moved[:7], 0.0)
    assert moved[7] > 0


def test_masked_lm_is_bidirectional():
    model = models.masked_lm(**TINY_TEXT)
    for weight in model.weights:
        if "spatial_gating_unit/kernel" in weight.path:
            weight.assign(np.random.default_rng(2).normal(size=weight.shape))
    ids = np.random.default_rng(3).integers(1, 50, size=(1, 12)).astype("int32")
    changed = ids.copy()
    changed[0, 7] = (ids[0, 7] % 49) + 1
    moved = np.abs(array(model(changed)) - array(model(ids))).max(axis=(0, 2))
    assert moved[:7].max() > 0


def test_masked_lm_logits_are_tied_to_the_embedding():
    model = models.masked_lm(**TINY_TEXT)
    table = array(model.get_layer("token_embedding").embeddings)
    ids = np.array([[5, 6, 7]], "int32")
    expected = array(encode(model, ids)) @ table.T
    np.testing.assert_allclose(
        array(model(ids)), expected, rtol=1e-4, atol=1e-4
    )


def test_text_classifier_reuses_the_encoder_weights():
    lm = models.masked_lm(**TINY_TEXT)
    lm.get_layer("block_1").norm.gamma.assign(np.full((8,), 3.0, "float32"))
    classifier = models.text_classifier(encoder=lm, num_classes=3)
    ids = np.array([[2, 9, 4, 4]], "int32")
    first = array(encode(lm, ids))[:, 0]
    head = classifier.get_layer("head")
    expected = first @ array(head.kernel) + array(head.bias)
    np.testing.assert_allclose(
        array(classifier(ids)), expected, rtol=1e-4, atol=1e-4
    )


def test_text_classifier_from_scratch():
    model = models.text_classifier(**TINY_TEXT, num_classes=4)
    assert model(np.ones((2, 6), "int32")).shape == (2, 4)


def test_text_encoder_rejects_other_models():
    model = models.image_classifier(**TINY_IMAGE)
    with pytest.raises(ValueError, match="has no GMLPTextBackbone"):
        models.text_encoder(keras.Sequential([model.get_layer("head")]))


@pytest.mark.parametrize("builder", ["image", "text"])
def test_mixed_bfloat16(builder):
    if builder == "image":
        model = models.image_classifier(**TINY_IMAGE, dtype="mixed_bfloat16")
        x = np.zeros((2, 8, 12, 3), "float32")
    else:
        model = models.masked_lm(**TINY_TEXT, dtype="mixed_bfloat16")
        x = np.ones((2, 5), "int32")
    output = model(x)
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert {w.dtype for w in model.weights} == {"float32"}


def test_global_mixed_policy_is_followed():
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = models.masked_lm(**TINY_TEXT)
    output = model(np.ones((1, 4), "int32"))
    assert keras.backend.standardize_dtype(output.dtype) == "bfloat16"
    assert {w.dtype for w in model.weights} == {"float32"}


@pytest.mark.skipif(
    keras.config.backend() != "tensorflow",
    reason="unknown sequence lengths exist only in TensorFlow graphs",
)
@pytest.mark.parametrize("spatial", ["dense", "toeplitz"])
def test_graph_with_unknown_sequence_length(spatial):
    import tensorflow as tf

    model = models.causal_lm(**dict(TINY_TEXT, spatial=spatial))
    graph = tf.function(
        model, input_signature=[tf.TensorSpec((None, None), tf.int32)]
    )
    ids = np.random.default_rng(4).integers(1, 50, size=(2, 7)).astype("int32")
    np.testing.assert_allclose(
        graph(ids).numpy(), array(model(ids)), rtol=1e-5, atol=1e-5
    )
