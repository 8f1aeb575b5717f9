"""Fits a tiny model under a strategy; run by test_distribution.py.

Usage: python distributed_fit.py STRATEGY OUTPUT_JSON [NUM_DEVICES]
"""

import json
import sys

import keras
import numpy as np

from keras_gmlp.training.distribution import get_distribution
from keras_gmlp.training.distribution import split_cpu_for_tests


def main(strategy, output_path, num_devices=2):
    devices = None
    if strategy in ("mirrored", "data_parallel"):
        devices = split_cpu_for_tests(num_devices)
    distribution = get_distribution(strategy, devices=devices)
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x[:, :1] > 0).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16, True)
    data = distribution.prepare_dataset(data)
    keras.utils.set_random_seed(0)
    with distribution.scope():
        model = keras.Sequential(
            [keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")]
        )
        model.compile("sgd", "binary_crossentropy", metrics=["accuracy"])
    history = model.fit(data, epochs=2, verbose=0)
    with open(output_path, "w") as file:
        json.dump(
            {
                "name": distribution.name,
                "num_replicas": distribution.num_replicas,
                "loss": history.history["loss"],
                "accuracy": history.history["accuracy"],
            },
            file,
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
