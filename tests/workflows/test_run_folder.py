"""A run folder holds one run, written by one process, file by file whole.

The jobs run in this process on tiny models (the digits image job, a small
CSV text job) for one to three epochs of two steps. The module's finished
runs are trained once and copied into each test's folder.
"""

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys

import keras
import pytest

from keras_gmlp.training.run_config import ImageClassificationConfig
from keras_gmlp.training.run_config import PretrainingConfig
from keras_gmlp.workflows import image_classification
from keras_gmlp.workflows import run_folder
from keras_gmlp.workflows import text_classification
from keras_gmlp.workflows import training_job
from tests.data.corpus_helpers import write_task
from tests.training.test_callbacks import Interrupt
from tests.training.test_callbacks import InterruptAfterEpoch

TINY = [
    "--dataset", "digits",
    "--steps-per-epoch", "2",
    "--num-layers", "1",
    "--hidden-dim", "16",
    "--ffn-dim", "32",
    "--image-size", "8",
    "--patch-size", "4",
    "--verbose", "0",
    "--no-export", "--no-plots", "--no-tensorboard",
]  # fmt: skip
OUTPUTS = (
    "model.keras",
    "best.keras",
    "last.keras",
    "results.json",
    "history.json",
    "run_config.json",
)


def digits(output_dir, epochs=2, *extra):
    return [
        *TINY,
        "--epochs", str(epochs),
        "--output-dir", str(output_dir),
        *extra,
    ]  # fmt: skip


def train(argv, callbacks=None):
    config = image_classification.config_from_argv(argv)
    return image_classification.run(config, callbacks=callbacks)


class EpochsRun(keras.callbacks.Callback):
    """Records the epochs a fit trains."""

    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)


class InterruptAtStart(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        raise Interrupt()


def snapshot(folder):
    """Each output's bytes and modification time."""
    return {
        name: ((folder / name).read_bytes(), (folder / name).stat().st_mtime_ns)
        for name in OUTPUTS
    }


def history_epochs(folder):
    with open(folder / "history.json") as file:
        return [record["epoch"] for record in json.load(file)]


def truncate(path, size=100):
    """What a process killed while writing `path` would leave."""
    with open(path, "r+b") as file:
        file.truncate(size)


def dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def write_lock(folder, pid, host=None):
    record = {
        "pid": pid,
        "host": host or socket.gethostname(),
        "started": "2026-12-06T19:50:00Z",
    }
    (folder / "run.lock").write_text(json.dumps(record))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished 2-epoch digits run."""
    folder = tmp_path_factory.mktemp("finished") / "run"
    train(digits(folder))
    return folder


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory):
    """A 3-epoch digits run stopped after its second epoch: its backup
    holds epoch 2, the backup's previous copy epoch 1."""
    folder = tmp_path_factory.mktemp("interrupted") / "run"
    with pytest.raises(Interrupt):
        train(digits(folder, 3), callbacks=[InterruptAfterEpoch(1)])
    return folder


@pytest.fixture
def finished(finished_run, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(finished_run, folder)
    return folder


@pytest.fixture
def interrupted(interrupted_run, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(interrupted_run, folder)
    return folder


def test_other_model_flags_are_refused_naming_the_fields(finished):
    before = snapshot(finished)
    argv = digits(finished, 2, "--num-layers", "2", "--hidden-dim", "32")
    with pytest.raises(ValueError) as error:
        train(argv)
    message = str(error.value)
    assert "\n" not in message
    assert (
        f"{finished} holds a run with num_layers=1, hidden_dim=16; this one "
        "has num_layers=2, hidden_dim=32: pass --overwrite" in message
    )
    assert snapshot(finished) == before
    assert not (finished / "run.lock").exists()


def test_fewer_epochs_are_refused(finished):
    before = snapshot(finished)
    with pytest.raises(ValueError, match="epochs=2; this one has epochs=1"):
        train(digits(finished, 1))
    assert snapshot(finished) == before


def test_finished_run_asked_again_is_complete_and_not_trained(finished, capsys):
    before = snapshot(finished)
    with open(finished / "results.json") as file:
        expected = json.load(file)
    epochs = EpochsRun()
    # Settings that change neither the model nor its data do not count.
    results = train(digits(finished, 2, "--verbose", "2"), [epochs])
    assert results == expected
    assert epochs.epochs == []
    assert snapshot(finished) == before
    out = capsys.readouterr().out
    assert f"{finished} holds this run, complete after 2 epochs" in out
    assert str(finished / "results.json") in out
    assert not (finished / "run.lock").exists()


def test_more_epochs_continue_a_finished_run(finished, capsys):
    with open(finished / "history.json") as file:
        earlier = json.load(file)
    epochs = EpochsRun()
    results = train(digits(finished, 3), [epochs])
    assert epochs.epochs == [2]
    assert results["epochs"] == 3
    assert results["history"]["loss"][:2] == [e["loss"] for e in earlier]
    out = capsys.readouterr().out
    assert "Resuming the run in" in out
    assert f"Restoring epoch 2 of 3 from {finished / 'last.keras'}." in out


def test_overwrite_moves_the_old_run_aside(finished, capsys):
    before = snapshot(finished)
    argv = digits(finished, 1, "--num-layers", "2", "--overwrite")
    # The new run is stopped as its fit starts: the folder is claimed.
    with pytest.raises(Interrupt):
        train(argv, [InterruptAtStart()])
    moved = [
        path
        for path in finished.parent.iterdir()
        if path.name.startswith("run.replaced-")
    ]
    assert len(moved) == 1
    # The old run, whole, in its new folder; the new one in the old name.
    assert {name: content for name, (content, _) in before.items()} == {
        name: (moved[0] / name).read_bytes() for name in OUTPUTS
    }
    assert not (moved[0] / "run.lock").exists()
    with open(finished / "run_config.json") as file:
        assert json.load(file)["config"]["num_layers"] == 2
    assert not (finished / "results.json").exists()
    assert not (finished / "run.lock").exists()
    assert f"Moved the run in {finished} to {moved[0]}." in (
        capsys.readouterr().out
    )


@pytest.mark.large
def test_interrupted_run_resumes_and_releases_its_lock(interrupted, capsys):
    # The interrupted attempt released the lock when it raised.
    assert not (interrupted / "run.lock").exists()
    epochs = EpochsRun()
    results = train(digits(interrupted, 3), [epochs])
    assert epochs.epochs == [2]
    assert results["epochs"] == 3
    out = capsys.readouterr().out
    assert "Resuming the run in" in out
    backup = interrupted / "backup" / "latest.weights.h5"
    assert f"Restoring epoch 2 of 3 from {backup}." in out


def test_a_live_writer_refuses_a_second_one(finished):
    before = snapshot(finished)
    holder = os.getppid()  # A live process of this host.
    write_lock(finished, holder)
    with pytest.raises(ValueError) as error:
        train(digits(finished))
    message = str(error.value)
    assert f"is being written by PID {holder} on " in message
    assert "\n" not in message
    assert snapshot(finished) == before
    assert json.loads((finished / "run.lock").read_text())["pid"] == holder


def test_a_dead_writers_lock_is_taken_over(finished, capsys):
    gone = dead_pid()
    write_lock(finished, gone)
    train(digits(finished))
    out = capsys.readouterr().out
    assert f"Taking over {finished / 'run.lock'}: its holder, PID {gone}" in (
        out
    )
    assert "complete after 2 epochs" in out
    assert not (finished / "run.lock").exists()


def test_truncated_backup_falls_back_to_its_previous_copy(interrupted, capsys):
    backup = interrupted / "backup"
    truncate(backup / "latest.weights.h5")
    epochs = EpochsRun()
    results = train(digits(interrupted, 3), [epochs])
    # The previous copy holds epoch 1: epoch 2 is trained again.
    assert epochs.epochs == [1, 2]
    assert results["epochs"] == 3
    out = capsys.readouterr().out
    assert (
        f"Restoring epoch 1 of 3 from {backup / 'latest.weights.h5.bkp'} "
        "(backup/latest.weights.h5 cannot be read)." in out
    )


@pytest.mark.large
def test_truncated_backups_fall_back_to_the_last_checkpoint(
    interrupted, capsys
):
    backup = interrupted / "backup"
    truncate(backup / "latest.weights.h5")
    truncate(backup / "latest.weights.h5.bkp")
    epochs = EpochsRun()
    train(digits(interrupted, 3), [epochs])
    assert epochs.epochs == [2]
    assert f"Restoring epoch 2 of 3 from {interrupted / 'last.keras'}" in (
        capsys.readouterr().out
    )


def test_nothing_readable_left_says_what_to_do(interrupted):
    # The interrupted attempt released the lock when it raised.
    assert not (interrupted / "run.lock").exists()
    backup = interrupted / "backup"
    for path in (
        backup / "latest.weights.h5",
        backup / "latest.weights.h5.bkp",
        interrupted / "last.keras",
    ):
        truncate(path)
    with pytest.raises(ValueError) as error:
        train(digits(interrupted, 3))
    message = str(error.value)
    assert "\n" not in message
    assert message == (
        f"{interrupted} holds 2 completed epochs but no readable backup or "
        "last.keras to resume them from (unreadable: "
        "backup/latest.weights.h5, backup/latest.weights.h5.bkp, "
        "last.keras): pass --overwrite to move it aside and train again, "
        "or a new --output-dir."
    )
    assert not (interrupted / "run.lock").exists()


@pytest.mark.large
def test_a_crash_while_writing_a_checkpoint_keeps_the_last_one(interrupted):
    # `kill -9` while saving best.keras leaves a partial temporary beside
    # the whole earlier file, which the next attempt clears.
    partial = interrupted / ".tmp-99999-best.keras"
    shutil.copyfile(interrupted / "best.keras", partial)
    truncate(partial)
    results = train(digits(interrupted, 3))
    assert results["epochs"] == 3
    assert not partial.exists()
    keras.saving.load_model(interrupted / "best.keras")


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """A finished 1-epoch text classification run on a small CSV task."""
    folder = tmp_path_factory.mktemp("text")
    write_task(folder / "train.csv", 48, seed=0)
    write_task(folder / "valid.csv", 16, seed=1)
    output_dir = folder / "run"
    config = text_classification.config_from_argv(
        [
            "--train-file", str(folder / "train.csv"),
            "--validation-file", str(folder / "valid.csv"),
            "--epochs", "1",
            "--output-dir", str(output_dir),
            "--num-layers", "1",
            "--hidden-dim", "16",
            "--ffn-dim", "32",
            "--sequence-length", "16",
            "--vocabulary-size", "80",
            "--batch-size", "16",
            "--verbose", "0",
            "--no-tensorboard",
        ]
    )  # fmt: skip
    text_classification.run(config)
    return output_dir


@pytest.mark.large
def test_evaluate_passes_over_a_truncated_best_checkpoint(
    text_run, tmp_path, capsys
):
    run_dir = tmp_path / "run"
    shutil.copytree(text_run, run_dir)
    truncate(run_dir / "best.keras")
    scores = text_classification.evaluate_run(str(run_dir))
    assert 0 <= scores["val_accuracy"] <= 1
    out = capsys.readouterr().out
    assert f"Loading {run_dir / 'last.keras'}: best.keras cannot be read" in (
        out
    )

    truncate(run_dir / "last.keras")
    with pytest.raises(ValueError) as error:
        text_classification.evaluate_run(str(run_dir))
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"No readable checkpoint in {run_dir} ")
    assert "--overwrite" in message


def test_evaluate_passes_over_a_truncated_model_file(finished, capsys):
    # Without the preset, evaluate reads model.keras, then best.keras.
    shutil.rmtree(finished / "preset")
    truncate(finished / "model.keras")
    scores = image_classification.evaluate_run(str(finished))
    assert 0 <= scores["accuracy"] <= 1
    assert (
        f"Loading {finished / 'best.keras'}: model.keras cannot be read"
        in capsys.readouterr().out
    )


# The folder's helpers, without training.


def record_run(folder, epochs=2, finished_epochs=None, **fields):
    config = ImageClassificationConfig(epochs=epochs, **fields)
    run_folder.write_run_config(str(folder), "image_classification", config)
    if finished_epochs is not None:
        (folder / "results.json").write_text(
            json.dumps({"epochs": finished_epochs})
        )


def test_differing_fields_count_what_changes_the_model_or_data():
    recorded = {
        "epochs": 4,
        "num_layers": 4,
        "hidden_dim": 64,
        "verbose": 1,
        "output_dir": "runs/a",
        "tensorboard": True,
        "removed_field": 1,
    }
    config = {
        "epochs": 6,
        "num_layers": 2,
        "hidden_dim": 64,
        "verbose": 0,
        "output_dir": "runs/b",
        "tensorboard": False,
        "added_field": 2,
    }
    assert run_folder.differing_fields(recorded, config) == [
        ("num_layers", 4, 2)
    ]
    config["epochs"] = 3
    assert run_folder.differing_fields(recorded, config)[0] == ("epochs", 4, 3)
    # Tuples are recorded as JSON lists.
    assert run_folder.differing_fields({"size": [1, 2]}, {"size": (1, 2)}) == []


def test_run_state_of_a_folder(tmp_path):
    folder = tmp_path / "run"
    config = ImageClassificationConfig(epochs=2, output_dir=str(folder))
    job = "image_classification"
    assert run_folder.run_state(str(folder), job, config) == run_folder.NEW
    record_run(folder)
    assert run_folder.run_state(str(folder), job, config) == run_folder.RESUME
    record_run(folder, finished_epochs=2)
    assert run_folder.run_state(str(folder), job, config) == run_folder.COMPLETE
    more = dataclasses.replace(config, epochs=3)
    assert run_folder.run_state(str(folder), job, more) == run_folder.RESUME
    with pytest.raises(
        run_folder.RunFolderError,
        match="holds a run of job=image_classification; this one has "
        "job=pretraining",
    ):
        run_folder.run_state(
            str(folder), "pretraining", PretrainingConfig(epochs=2)
        )


def test_lock_holds_its_holder_and_refuses_a_second_writer(tmp_path):
    lock = run_folder.RunLock(str(tmp_path))
    with lock:
        holder = json.loads((tmp_path / "run.lock").read_text())
        assert holder["pid"] == os.getpid()
        assert holder["host"] == socket.gethostname()
        assert holder["started"].endswith("Z")
        with pytest.raises(run_folder.RunFolderError, match="is being written"):
            run_folder.RunLock(str(tmp_path)).acquire()
    assert not (tmp_path / "run.lock").exists()


def test_lock_is_released_on_exceptions(tmp_path):
    with pytest.raises(KeyError):
        with run_folder.RunLock(str(tmp_path)):
            raise KeyError("a failing run")
    assert not (tmp_path / "run.lock").exists()


def test_lock_of_a_dead_process_is_taken_over(tmp_path, capsys):
    gone = dead_pid()
    write_lock(tmp_path, gone)
    with run_folder.RunLock(str(tmp_path)):
        assert json.loads((tmp_path / "run.lock").read_text())["pid"] == (
            os.getpid()
        )
    assert f"its holder, PID {gone} on " in capsys.readouterr().out


def test_lock_of_another_host_is_not_taken_over(tmp_path):
    write_lock(tmp_path, dead_pid(), host="another-host")
    with pytest.raises(run_folder.RunFolderError) as error:
        run_folder.RunLock(str(tmp_path)).acquire()
    assert "on another-host" in str(error.value)
    assert f"remove {tmp_path / 'run.lock'}" in str(error.value)


def test_move_aside_keeps_every_earlier_run(tmp_path):
    first = tmp_path / "run"
    first.mkdir()
    (first / "a.txt").write_text("first")
    moved = run_folder.move_aside(str(first))
    first.mkdir()
    (first / "a.txt").write_text("second")
    moved_again = run_folder.move_aside(str(first))
    assert moved != moved_again
    assert os.path.basename(moved).startswith("run.replaced-")
    assert open(os.path.join(moved, "a.txt")).read() == "first"
    assert open(os.path.join(moved_again, "a.txt")).read() == "second"
    assert not first.exists()


class Distribution:
    def __init__(self, is_chief=True):
        self.is_chief = is_chief


def test_run_in_folder_trains_once_and_holds_the_lock_meanwhile(
    tmp_path, capsys
):
    folder = tmp_path / "run"
    config = ImageClassificationConfig(epochs=2, output_dir=str(folder))
    job = "image_classification"

    def train():
        assert json.loads((folder / "run.lock").read_text())["pid"] == (
            os.getpid()
        )
        record_run(folder, finished_epochs=2)
        return "trained"

    chief = Distribution()
    assert training_job.run_in_folder(job, config, chief, train) == "trained"
    assert not (folder / "run.lock").exists()
    assert training_job.run_in_folder(job, config, chief, train) == {
        "epochs": 2
    }
    assert "complete after 2 epochs" in capsys.readouterr().out
    # Another worker neither locks nor trains a complete run.
    worker = Distribution(is_chief=False)
    write_lock(folder, os.getppid())
    assert training_job.run_in_folder(job, config, worker, train) is None
    more = dataclasses.replace(config, epochs=3)
    assert training_job.run_in_folder(job, more, worker, lambda: 1) == 1


def test_run_in_folder_releases_the_lock_when_training_fails(tmp_path):
    folder = tmp_path / "run"
    config = ImageClassificationConfig(epochs=2, output_dir=str(folder))

    def train():
        raise Interrupt()

    with pytest.raises(Interrupt):
        training_job.run_in_folder(
            "image_classification", config, Distribution(), train
        )
    assert not (folder / "run.lock").exists()


def test_lock_without_hard_links_is_still_exclusive(tmp_path, monkeypatch):
    def no_links(source, target):
        raise PermissionError("hard links are not supported")

    monkeypatch.setattr(os, "link", no_links)
    with run_folder.RunLock(str(tmp_path)):
        holder = json.loads((tmp_path / "run.lock").read_text())
        assert holder["pid"] == os.getpid()
        with pytest.raises(run_folder.RunFolderError, match="being written"):
            run_folder.RunLock(str(tmp_path)).acquire()
    assert os.listdir(tmp_path) == []
