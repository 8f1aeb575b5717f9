import json
import os

import keras
import numpy as np
import pytest

from keras_gmlp.training import files


class Killed(Exception):
    """Stands for a process killed in the middle of a write."""


def half_write(content):
    def write(path):
        with open(path, "w") as file:
            file.write(content[: len(content) // 2])
        raise Killed()

    return write


def test_an_interrupted_write_keeps_the_earlier_file(tmp_path):
    path = tmp_path / "results.json"
    files.write_json(str(path), {"epochs": 12})
    with pytest.raises(Killed):
        files.write_file(str(path), half_write('{"epochs": 2}'))
    assert json.loads(path.read_text()) == {"epochs": 12}
    assert os.listdir(tmp_path) == ["results.json"]


def test_the_temporary_name_keeps_the_extension():
    path = files.temporary_path(os.path.join("runs", "a", "best.keras"))
    assert os.path.dirname(path) == os.path.join("runs", "a")
    assert os.path.basename(path) == f".tmp-{os.getpid()}-best.keras"


def test_an_interrupted_folder_write_keeps_the_earlier_folder(tmp_path):
    def write(content):
        def writer(folder):
            os.makedirs(folder)
            with open(os.path.join(folder, "config.json"), "w") as file:
                file.write(content)

        return writer

    path = str(tmp_path / "preset")
    files.write_folder(path, write("first"))

    def crash(folder):
        write("second")(folder)
        raise Killed()

    with pytest.raises(Killed):
        files.write_folder(path, crash)
    assert open(os.path.join(path, "config.json")).read() == "first"
    files.write_folder(path, write("third"))
    assert open(os.path.join(path, "config.json")).read() == "third"
    assert os.listdir(tmp_path) == ["preset"]


def test_remove_temporaries_clears_what_crashes_left(tmp_path):
    (tmp_path / ".tmp-123-best.keras").write_bytes(b"PK\x03")
    (tmp_path / ".tmp-123-preset").mkdir()
    (tmp_path / "best.keras").write_bytes(b"kept")
    removed = files.remove_temporaries(str(tmp_path))
    assert removed == [".tmp-123-best.keras", ".tmp-123-preset"]
    assert os.listdir(tmp_path) == ["best.keras"]


def test_truncated_model_files_are_told_from_whole_ones(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    model.fit(np.ones((4, 2)), np.ones((4, 1)), verbose=0)
    whole = str(tmp_path / "model.keras")
    files.save_model(model, whole)
    weights = str(tmp_path / "latest.weights.h5")
    files.save_weights(model, weights)
    assert files.readable_model_file(whole)
    assert files.readable_weights(weights)
    for path, name in ((whole, "cut.keras"), (weights, "cut.weights.h5")):
        data = open(path, "rb").read()
        (tmp_path / name).write_bytes(data[: len(data) // 2])
    assert not files.readable_model_file(str(tmp_path / "cut.keras"))
    assert not files.readable_weights(str(tmp_path / "cut.weights.h5"))
    assert not files.readable_weights(str(tmp_path / "missing.weights.h5"))
    assert sorted(os.listdir(tmp_path)) == [
        "cut.keras",
        "cut.weights.h5",
        "latest.weights.h5",
        "model.keras",
    ]
