"""Trains a small model with `FusedAdamW` under TensorFlow's
`MirroredStrategy` on two CPU devices and without a strategy under Keras'
`AdamW`; run by test_fused_adamw.py. Prints the weights' largest relative
difference as JSON.

Usage: python fused_adamw_mirrored.py
"""

import json
import os

os.environ["KERAS_BACKEND"] = "tensorflow"

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_gmlp.kernels.fused_adamw import FusedAdamW  # noqa: E402
from keras_gmlp.training.distribution import get_distribution  # noqa: E402
from keras_gmlp.training.distribution import split_cpu_for_tests  # noqa: E402


def trained_weights(optimizer_class, distribution, x, y):
    keras.utils.set_random_seed(0)
    with distribution.scope():
        model = keras.Sequential(
            [keras.Input((5,)), keras.layers.Dense(8), keras.layers.Dense(2)]
        )
        schedule = keras.optimizers.schedules.PolynomialDecay(1e-2, 8, 1e-3)
        optimizer = optimizer_class(schedule, weight_decay=0.3)
        optimizer.exclude_from_weight_decay(var_names=["bias"])
        model.compile(optimizer=optimizer, loss="mse")
    model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return [keras.ops.convert_to_numpy(w) for w in model.weights]


def main():
    devices = split_cpu_for_tests(2)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 5)).astype("float32")
    y = rng.normal(size=(32, 2)).astype("float32")
    mirrored = get_distribution("mirrored", devices=devices)
    fused = trained_weights(FusedAdamW, mirrored, x, y)
    reference = trained_weights(keras.optimizers.AdamW, mirrored, x, y)
    alone = get_distribution("none")
    unmoved = trained_weights(FusedAdamW, alone, x[:0], y[:0])
    alone = trained_weights(keras.optimizers.AdamW, alone, x, y)

    def difference(weights, others):
        return max(
            float(np.max(np.abs(w - o) / (np.abs(o) + 1e-3)))
            for w, o in zip(weights, others, strict=True)
        )

    moved = min(
        float(np.max(np.abs(f - u)))
        for f, u in zip(fused, unmoved, strict=True)
    )
    print(
        json.dumps(
            {
                "replicas": mirrored.num_replicas,
                "from_keras_mirrored": difference(fused, reference),
                "from_keras_alone": difference(fused, alone),
                "smallest_move": moved,
            }
        )
    )


if __name__ == "__main__":
    main()
