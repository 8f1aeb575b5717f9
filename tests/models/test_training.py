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


def conditional_entropy(ids, targets):
    """Mean entropy (nats) of the target given the current token and its
    position: the lowest loss of a model that mixes no tokens."""
    total = 0.0
    for position in range(ids.shape[1]):
        for token in np.unique(ids[:, position]):
            nexts = targets[ids[:, position] == token, position]
            p = np.unique(nexts, return_counts=True)[1] / len(nexts)
            total += len(nexts) * -(p * np.log(p)).sum()
    return total / ids.size


def lm_loss_after_training(ids, targets, jit_compile, token_mixing):
    model = models.causal_lm(
        vocabulary_size=5,
        sequence_length=16,
        num_layers=2,
        hidden_dim=16,
        ffn_dim=32,
        padding_id=None,
    )
    if not token_mixing:
        # Spatial weights frozen at zero (and no attention): each position
        # sees its own token only (and, through the per-token bias, its
        # position).
        for index in range(2):
            unit = model.get_layer(f"block_{index}").spatial_gating_unit
            unit.kernel.assign(np.zeros(unit.kernel.shape, "float32"))
            unit.kernel.trainable = False
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    history = model.fit(ids, targets, batch_size=32, epochs=10, verbose=0)
    return history.history["loss"][-1]


@pytest.mark.parametrize("jit_compile", jit_modes())
def test_causal_lm_learns_a_sequence_that_needs_earlier_tokens(jit_compile):
    # The period 1 2 1 3: what follows a 1 (2 or 3) depends on the token
    # before it, so the next token is no function of the current one (nor
    # of the position: the rows start at random offsets).
    period = np.array([1, 2, 1, 3])
    starts = np.random.default_rng(0).integers(0, 4, size=256)
    rows = np.stack([np.roll(np.tile(period, 5), -s)[:17] for s in starts])
    ids, targets = rows[:, :-1].astype("int32"), rows[:, 1:].astype("int32")
    floor = conditional_entropy(ids, targets)
    assert floor > 0.3  # half the tokens are a 1: 0.5 * ln 2
    without_mixing = lm_loss_after_training(
        ids, targets, jit_compile, token_mixing=False
    )
    with_mixing = lm_loss_after_training(
        ids, targets, jit_compile, token_mixing=True
    )
    # Without token mixing the loss cannot fall below the floor; the real
    # model looks back and goes far below it.
    assert without_mixing > 0.95 * floor, (without_mixing, floor)
    assert with_mixing < 0.3 * floor, (with_mixing, floor)
