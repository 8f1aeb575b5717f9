import keras
import numpy as np

from keras_gmlp.training.optimizers import adamw


def tiny_model():
    inputs = keras.Input((4, 3))
    x = keras.layers.Dense(5, name="dense")(inputs)
    x = keras.layers.LayerNormalization(name="norm")(x)
    return keras.Model(inputs, x)


def test_weight_decay_skips_biases_and_norms():
    model = tiny_model()
    optimizer = adamw(0.1, weight_decay=0.5, clipnorm=None, model=model)
    before = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
    # Zero gradients: only the decoupled weight decay moves the variables.
    zeros = [keras.ops.zeros(v.shape) for v in model.trainable_variables]
    optimizer.apply_gradients(
        zip(zeros, model.trainable_variables, strict=True)
    )
    for variable, old in zip(model.trainable_variables, before, strict=True):
        new = keras.ops.convert_to_numpy(variable)
        if len(variable.shape) <= 1:
            np.testing.assert_array_equal(new, old)
        else:
            # AdamW: w <- w - lr * wd * w.
            np.testing.assert_allclose(new, old * (1 - 0.1 * 0.5), rtol=1e-6)


def test_clipnorm_and_defaults():
    optimizer = adamw(1e-3)
    assert optimizer.clipnorm == 1.0
    assert optimizer.weight_decay == 0.05
    assert adamw(1e-3, clipnorm=0).clipnorm is None
