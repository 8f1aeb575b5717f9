import keras
import numpy as np
import pytest

from keras_gmlp import models
from keras_gmlp.optimizers import adamw

TINY_TEXT = dict(
    vocabulary_size=20,
    sequence_length=6,
    num_layers=1,
    hidden_dim=4,
    ffn_dim=8,
    attention_dim=2,
)
# Every trainable variable of a one-block aMLP text model, by path, and
# whether weight decay applies to it: every bias and normalisation scale or
# offset is exempt, every matrix and spatial weight decays, whatever its rank.
EXPECTED_DECAY = {
    "token_embedding/embeddings": True,
    "block_0/norm/gamma": False,
    "block_0/norm/beta": False,
    "block_0/channel_projection_in/kernel": True,
    "block_0/channel_projection_in/bias": False,
    "block_0/spatial_gating_unit/kernel": True,
    "block_0/spatial_gating_unit/bias": False,
    "block_0/spatial_gating_unit/norm/gamma": False,
    "block_0/spatial_gating_unit/norm/beta": False,
    "block_0/tiny_attention/qkv/kernel": True,
    "block_0/tiny_attention/qkv/bias": False,
    "block_0/tiny_attention/output_projection/kernel": True,
    "block_0/tiny_attention/output_projection/bias": False,
    "block_0/channel_projection_out/kernel": True,
    "block_0/channel_projection_out/bias": False,
    "final_norm/gamma": False,
    "final_norm/beta": False,
}


def step_with_zero_gradients(optimizer, model):
    """One update with zero gradients: only the weight decay moves."""
    before = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
    zeros = [keras.ops.zeros(v.shape) for v in model.trainable_variables]
    optimizer.apply_gradients(
        zip(zeros, model.trainable_variables, strict=True)
    )
    after = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
    return before, after


@pytest.mark.parametrize("spatial", ["toeplitz", "dense"])
def test_weight_decay_by_role_not_by_rank(spatial):
    model = models.masked_lm(**TINY_TEXT, spatial=spatial)
    rng = np.random.default_rng(0)
    for variable in model.trainable_variables:
        variable.assign(rng.normal(size=variable.shape).astype("float32"))
    kernel = model.get_layer("block_0").spatial_gating_unit.kernel
    # The Toeplitz kernel has rank 1, the dense one rank 2: both decay.
    assert len(kernel.shape) == (1 if spatial == "toeplitz" else 2)
    optimizer = adamw(0.1, weight_decay=0.5, global_clipnorm=None, model=model)
    before, after = step_with_zero_gradients(optimizer, model)
    paths = [v.path for v in model.trainable_variables]
    assert sorted(paths) == sorted(EXPECTED_DECAY)
    for path, old, new in zip(paths, before, after, strict=True):
        if EXPECTED_DECAY[path]:
            # AdamW: w <- w - lr * wd * w.
            np.testing.assert_allclose(
                new, old * (1 - 0.1 * 0.5), rtol=1e-6, err_msg=path
            )
        else:
            np.testing.assert_array_equal(new, old, err_msg=path)


def test_image_model_exempts_the_patch_bias_and_norms():
    model = models.image_classifier(
        num_classes=3,
        image_size=8,
        patch_size=4,
        num_layers=1,
        hidden_dim=4,
        ffn_dim=8,
    )
    optimizer = adamw(0.1, weight_decay=0.5, global_clipnorm=None, model=model)
    before, after = step_with_zero_gradients(optimizer, model)
    for variable, old, new in zip(
        model.trainable_variables, before, after, strict=True
    ):
        name = variable.path.split("/")[-1]
        if name in ("bias", "gamma", "beta"):
            np.testing.assert_array_equal(new, old, err_msg=variable.path)
        else:
            assert name in ("kernel", "embeddings"), variable.path
            np.testing.assert_allclose(
                new, old * 0.95, rtol=1e-6, err_msg=variable.path
            )


def test_without_a_model_biases_and_norms_are_exempt_by_name():
    model = models.masked_lm(**TINY_TEXT)
    optimizer = adamw(0.1, weight_decay=0.5, global_clipnorm=None)
    before, after = step_with_zero_gradients(optimizer, model)
    for variable, old, new in zip(
        model.trainable_variables, before, after, strict=True
    ):
        if EXPECTED_DECAY[variable.path]:
            np.testing.assert_allclose(new, old * 0.95, rtol=1e-6)
        else:
            np.testing.assert_array_equal(new, old)


def test_clips_the_global_norm():
    # Two variables whose gradients have norms 3 and 4 (joint norm 5): each
    # is below the limit 4.5, their joint norm is above it.
    variables = [keras.Variable(np.zeros(2, "float32")) for _ in range(2)]
    gradients = [np.array([3.0, 0.0]), np.array([0.0, 4.0])]
    limit, learning_rate, epsilon = 4.5, 0.1, 1.0
    optimizer = adamw(
        learning_rate,
        weight_decay=0.0,
        global_clipnorm=limit,
        epsilon=epsilon,
    )
    optimizer.apply_gradients(
        zip(
            [keras.ops.convert_to_tensor(g, "float32") for g in gradients],
            variables,
            strict=True,
        )
    )
    # Numpy reference: scale every gradient by limit / global norm, then
    # Adam's first step, w = -lr * sqrt(1 - b2) / (1 - b1) * m / (sqrt(v)
    # + epsilon) with m = (1 - b1) g, v = (1 - b2) g^2. A large epsilon
    # keeps the gradient's scale in the update.
    scale = limit / np.sqrt(sum((g**2).sum() for g in gradients))
    for variable, gradient in zip(variables, gradients, strict=True):
        g = gradient * scale
        m, v = 0.1 * g, 0.001 * g**2
        expected = (
            -learning_rate * np.sqrt(0.001) / 0.1 * m / (np.sqrt(v) + epsilon)
        )
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(variable), expected, rtol=1e-5
        )


def test_defaults():
    optimizer = adamw(1e-3)
    assert optimizer.global_clipnorm == 1.0
    assert optimizer.clipnorm is None
    assert optimizer.weight_decay == 0.05
    assert adamw(1e-3, global_clipnorm=0).global_clipnorm is None
