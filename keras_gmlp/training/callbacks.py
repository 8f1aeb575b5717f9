"""Callbacks of the recipes: crash-safe resume, history, checkpoints, logs."""

import importlib.util
import json
import os
import time
import warnings

import keras

from keras_gmlp.training.keras_patches import install_saving_skipset_cache

BACKUP_DIR = "backup"
HISTORY_FILE = "history.json"
BEST_CHECKPOINT = "best.keras"
LAST_CHECKPOINT = "last.keras"
TENSORBOARD_DIR = "tensorboard"


class PersistentHistory(keras.callbacks.Callback):
    """Records every epoch's logs in a JSON file that survives a restart.

    A run resumed by `keras.callbacks.BackupAndRestore` starts at its last
    completed epoch, and Keras' own `History` of that run only sees the
    epochs after it. This callback keeps one record per epoch in `path`:
    when a run starts at epoch `e` it keeps the first `e` records and
    overwrites the rest, so the finished run's history covers every epoch
    exactly once, however often it was interrupted. Each record also has
    `train_seconds`: the wall time of the epoch's training steps, without
    its evaluation.

    Args:
        path: str. The JSON file.
        best_checkpoint: `keras.callbacks.ModelCheckpoint` or `None`. A
            `save_best_only` checkpoint whose best value is restored from
            the earlier epochs when a run resumes.

    Example:

    >>> import os, tempfile
    >>> from keras_gmlp.training.callbacks import PersistentHistory
    >>> folder = tempfile.mkdtemp()
    >>> backup = keras.callbacks.BackupAndRestore(os.path.join(folder, "b"))
    >>> history = PersistentHistory(os.path.join(folder, "history.json"))
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> x, y = np.ones((4, 2)), np.ones((4, 1))
    >>> _ = model.fit(x, y, epochs=3, callbacks=[backup, history], verbose=0)
    >>> len(history.history["loss"])  # every epoch, even after a restart
    3
    """

    def __init__(self, path, best_checkpoint=None):
        super().__init__()
        self.path = path
        self.best_checkpoint = best_checkpoint
        self.epochs = []
        self._epoch_started = None
        self._train_seconds = None

    def on_train_begin(self, logs=None):
        initial_epoch = getattr(self.model, "_initial_epoch", None) or 0
        self.epochs = read_history_records(self.path)[:initial_epoch]
        checkpoint = self.best_checkpoint
        if checkpoint is not None:
            # A resumed run's best checkpoint must beat the earlier epochs.
            values = [
                e[checkpoint.monitor]
                for e in self.epochs
                if checkpoint.monitor in e
            ]
            if values:
                pick = max if checkpoint.mode == "max" else min
                checkpoint.best = pick(values)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_started = time.perf_counter()
        self._train_seconds = None

    def on_test_begin(self, logs=None):
        # Evaluation at the end of an epoch: its training steps are done.
        if self._epoch_started is not None and self._train_seconds is None:
            self._train_seconds = time.perf_counter() - self._epoch_started

    def on_epoch_end(self, epoch, logs=None):
        record = {"epoch": epoch}
        record.update({k: float(v) for k, v in (logs or {}).items()})
        if self._epoch_started is not None:
            seconds = self._train_seconds
            if seconds is None:
                seconds = time.perf_counter() - self._epoch_started
            record["train_seconds"] = seconds
        self.epochs = [e for e in self.epochs if e["epoch"] < epoch]
        self.epochs.append(record)
        _write_json_atomically(self.path, self.epochs)

    @property
    def history(self):
        """The history as `{metric: [value per epoch]}`, like Keras'."""
        return records_to_history(self.epochs)


def completed_epochs(output_dir, worker_index=0):
    """Epochs a run in `output_dir` has completed and backed up.

    A run started again resumes after these epochs (the epoch Keras'
    `BackupAndRestore` restores): 0 for a new run.

    Args:
        output_dir: str. The run's folder.
        worker_index: int. The worker whose backup is read.
    """
    state_dir = output_dir
    if worker_index:
        state_dir = os.path.join(output_dir, "workers", str(worker_index))
    path = os.path.join(state_dir, BACKUP_DIR, "training_metadata.json")
    if not os.path.exists(path):
        return 0
    with open(path) as file:
        return int(json.load(file)["epoch"])


def read_history_records(path):
    """Returns the list of per-epoch records in a history file, or `[]`."""
    if not os.path.exists(path):
        return []
    with open(path) as file:
        return json.load(file)


def records_to_history(records):
    """Turns per-epoch records into `{metric: [value per epoch]}`."""
    history = {}
    for record in records:
        for key, value in record.items():
            if key != "epoch":
                history.setdefault(key, []).append(value)
    return history


class EpochEndHook(keras.callbacks.Callback):
    """Calls `function(epoch, logs)` at the end of every epoch.

    Args:
        function: callable. Called with the epoch index and its logs.
    """

    def __init__(self, function):
        super().__init__()
        self.function = function

    def on_epoch_end(self, epoch, logs=None):
        self.function(epoch, logs)


def training_callbacks(
    output_dir,
    monitor="val_accuracy",
    mode="max",
    tensorboard=True,
    is_chief=True,
    backup_every_steps=None,
    worker_index=0,
):
    """The standard callbacks of a recipe, all writing under `output_dir`.

    - `keras.callbacks.BackupAndRestore` in `output_dir/backup`: a killed
      run started again with the same command resumes from its last
      completed epoch (or step, with `backup_every_steps`). The backup is
      deleted when the run finishes.
    - `PersistentHistory` in `output_dir/history.json`.
    - `best.keras` (by `monitor`) and `last.keras` checkpoints.
    - TensorBoard logs in `output_dir/tensorboard`.

    Only the chief writes checkpoints and logs; every worker backs up its
    state, as `BackupAndRestore` needs under multi-worker training.

    Args:
        output_dir: str. The run's folder.
        monitor: str. Metric of the best checkpoint. Defaults to
            `"val_accuracy"`.
        mode: str. `"max"` or `"min"` for `monitor`. Defaults to `"max"`.
        tensorboard: bool. Whether to write TensorBoard logs. Defaults to
            `True`.
        is_chief: bool. Whether this process writes checkpoints and logs.
            Defaults to `True`.
        backup_every_steps: int or `None`. Back up every this many steps as
            well as at epoch ends. Defaults to `None` (epochs only).
        worker_index: int. This worker's index; a non-chief worker keeps
            its backup and history in `output_dir/workers/<index>/`.
            Defaults to `0`.

    Returns:
        A tuple `(callbacks, history)`: the list for `model.fit` and the
        `PersistentHistory` among them.
    """
    # Each epoch saves the model two or three times.
    install_saving_skipset_cache()
    os.makedirs(output_dir, exist_ok=True)
    state_dir = output_dir
    if not is_chief:
        state_dir = os.path.join(output_dir, "workers", str(worker_index))
    backup_dir = os.path.join(state_dir, BACKUP_DIR)
    callbacks = [
        keras.callbacks.BackupAndRestore(
            backup_dir,
            save_freq=backup_every_steps or "epoch",
            double_checkpoint=True,
        )
    ]
    best = None
    if is_chief:
        best = keras.callbacks.ModelCheckpoint(
            os.path.join(output_dir, BEST_CHECKPOINT),
            monitor=monitor,
            mode=mode,
            save_best_only=True,
        )
    history = PersistentHistory(os.path.join(state_dir, HISTORY_FILE), best)
    callbacks.append(history)
    if is_chief:
        callbacks.append(best)
        callbacks.append(
            keras.callbacks.ModelCheckpoint(
                os.path.join(output_dir, LAST_CHECKPOINT)
            )
        )
        if tensorboard and importlib.util.find_spec("tensorboard") is None:
            warnings.warn(
                "TensorBoard logs are off: the tensorboard package is not "
                "installed (pip install tensorboard).",
                stacklevel=2,
            )
        elif tensorboard:
            callbacks.append(
                keras.callbacks.TensorBoard(
                    os.path.join(output_dir, TENSORBOARD_DIR),
                    update_freq="epoch",
                )
            )
    return callbacks, history


def _write_json_atomically(path, value):
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    temporary = f"{path}.tmp"
    with open(temporary, "w") as file:
        json.dump(value, file, indent=1)
    os.replace(temporary, path)
