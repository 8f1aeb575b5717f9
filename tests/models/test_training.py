import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

from keras_gmlp import models


def digits():
    """scikit-learn's 8 x 8 digits as (images in [0, 1], labels)."""
    data = load_digits()
    images = (data.images / 16.0).astype("float32")[..., None]
    return images[:512], data.target[:512].astype("int32")


def image_model():
    return models.image_classifier(
        num_classes=10,
        image_size=8,
        num_channels=1,
        patch_size=2,
        num_layers=2,
        hidden_dim=16,
        ffn_dim=32,
    )


def compile_model(model, jit_compile=False):
    model.compile(
        optimizer=keras.optimizers.AdamW(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )


def jit_modes():
    """TensorFlow runs both; JAX only compiled (its uncompiled step is an
    op-by-op debugging mode); torch's `jit_compile` is torch.compile, out of
    scope here."""
    return {"tensorflow": [False, True], "jax": [True]}.get(
        keras.config.backend(), [False]
    )


@pytest.mark.parametrize("jit_compile", jit_modes())
def test_fit_on_arrays_lowers_the_loss(jit_compile):
    images, labels = digits()
    model = image_model()
    compile_model(model, jit_compile)
    history = model.fit(images, labels, batch_size=32, epochs=5, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0], losses


def test_fit_on_tf_data_lowers_the_loss():
    images, labels = digits()
    dataset = (
        tf.data.Dataset.from_tensor_slices((images, labels))
        .shuffle(512, seed=0)
        .batch(32, drop_remainder=True)
    )
    model = image_model()
    compile_model(model, jit_compile=jit_modes()[-1])
    history = model.fit(dataset, epochs=5, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0], losses


@pytest.mark.parametrize("jit_compile", jit_modes())
def test_causal_lm_learns_a_repeating_sequence(jit_compile):
    # Next-token targets of a fixed cyclic sequence: learnable only by
    # looking back, so the loss falls only if the causal mixing works.
    period = np.array([3, 7, 1, 9, 4, 8])
    rng = np.random.default_rng(0)
    starts = rng.integers(0, 6, size=256)
    ids = np.stack([np.roll(np.tile(period, 3), -s)[:17] for s in starts])
    ids = ids.astype("int32")
    model = models.causal_lm(
        vocabulary_size=12,
        sequence_length=16,
        num_layers=2,
        hidden_dim=16,
        ffn_dim=32,
        padding_id=None,
    )
    compile_model(model, jit_compile)
    history = model.fit(
        ids[:, :-1], ids[:, 1:], batch_size=32, epochs=6, verbose=0
    )
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0], losses
