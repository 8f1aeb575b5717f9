import json
import os

import keras
import numpy as np
import pytest

from keras_gmlp.training import fit
from keras_gmlp.training.callbacks import PersistentHistory
from keras_gmlp.training.callbacks import read_history_records
from keras_gmlp.training.results import write_results


class Interrupt(Exception):
    pass


class InterruptAfterEpoch(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise Interrupt()


def make_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype("float32")
    y = (x[:, :1] > 0).astype("float32")
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((x, y)).batch(8)


def make_model():
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")]
    )
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    return model


def test_interrupted_fit_resumes_with_full_history(tmp_path):
    data = make_data()
    output_dir = str(tmp_path / "run")
    with pytest.raises(Interrupt):
        fit(
            make_model(),
            data,
            data,
            epochs=4,
            output_dir=output_dir,
            tensorboard=False,
            callbacks=[InterruptAfterEpoch(1)],
            verbose=0,
        )
    assert len(read_history_records(f"{output_dir}/history.json")) == 2
    backup = json.load(open(f"{output_dir}/backup/training_metadata.json"))
    assert backup["epoch"] == 2

    epochs_run = []
    model = make_model()
    history, wall_time = fit(
        model,
        data,
        data,
        epochs=4,
        output_dir=output_dir,
        tensorboard=False,
        callbacks=[
            keras.callbacks.LambdaCallback(
                on_epoch_begin=lambda epoch, logs: epochs_run.append(epoch)
            )
        ],
        verbose=0,
    )
    assert epochs_run == [2, 3]
    assert len(history["loss"]) == 4
    assert len(history["val_accuracy"]) == 4
    assert wall_time > 0
    # The backup is removed when the run completes.
    assert not os.path.exists(f"{output_dir}/backup/latest.weights.h5")
    for name in ("best.keras", "last.keras"):
        keras.saving.load_model(f"{output_dir}/{name}")


def test_results_json(tmp_path):
    history = {"loss": [1.0, 0.5], "val_accuracy": [0.5, np.float32(0.75)]}
    results = write_results(
        str(tmp_path),
        {"epochs": 2, "dataset": "digits"},
        history,
        {"val_accuracy": np.float32(0.75)},
        wall_time=3.21,
        counts={"skipped_train": 1},
    )
    written = json.load(open(tmp_path / "results.json"))
    assert written == results
    assert written["epochs"] == 2
    assert written["metrics"]["val_accuracy"] == 0.75
    assert written["backend"] == keras.config.backend()
    assert written["device_count"] >= 1
    assert written["counts"] == {"skipped_train": 1}


def test_resumed_best_checkpoint_must_beat_earlier_epochs(tmp_path):
    path = tmp_path / "history.json"
    records = [
        {"epoch": 0, "val_accuracy": 0.5},
        {"epoch": 1, "val_accuracy": 0.9},
        {"epoch": 2, "val_accuracy": 0.7},
    ]
    path.write_text(json.dumps(records))
    best = keras.callbacks.ModelCheckpoint(
        str(tmp_path / "best.keras"),
        monitor="val_accuracy",
        mode="max",
        save_best_only=True,
    )
    history = PersistentHistory(str(path), best)
    model = make_model()
    model._initial_epoch = 2  # As BackupAndRestore sets it.
    history.set_model(model)
    history.on_train_begin()
    assert best.best == 0.9
    # Epoch 2 is run again: its old record is dropped.
    assert [e["epoch"] for e in history.epochs] == [0, 1]


def test_resumed_endless_stream_continues_where_it_stopped(tmp_path):
    import tensorflow as tf

    # Batch k holds the value k; with a zero-initialised linear model,
    # targets far below every prediction, the absolute error and SGD at
    # learning rate 1, every step subtracts its batch's value from the
    # kernel.
    stream = tf.data.Dataset.range(1000).map(
        lambda k: (
            tf.fill((2, 1), tf.cast(k, "float32")),
            tf.fill((2, 1), -1e6),
        )
    )

    def model():
        model = keras.Sequential(
            [
                keras.Input((1,)),
                keras.layers.Dense(
                    1, use_bias=False, kernel_initializer="zeros"
                ),
            ]
        )
        model.compile(keras.optimizers.SGD(1.0), loss="mean_absolute_error")
        return model

    def run(model, callbacks=()):
        return fit(
            model,
            stream,
            None,
            epochs=3,
            steps_per_epoch=2,
            output_dir=str(tmp_path),
            tensorboard=False,
            callbacks=list(callbacks),
            verbose=0,
            endless_stream=True,
        )

    with pytest.raises(Interrupt):
        run(model(), [InterruptAfterEpoch(0)])
    resumed = model()
    history, _ = run(resumed)
    # Epochs 2 and 3 trained on batches 2 to 5, not on 0 to 3 again.
    kernel = keras.ops.convert_to_numpy(resumed.layers[0].kernel)
    assert kernel.item() == -sum(range(6))
    assert len(history["loss"]) == 3
    assert all(seconds > 0 for seconds in history["train_seconds"])
