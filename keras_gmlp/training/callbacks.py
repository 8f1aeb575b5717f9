"""Callbacks of the recipes: crash-safe resume, history, checkpoints, logs."""

import importlib.util
import json
import os
import time
import warnings

import keras

from keras_gmlp.training import files
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
        files.write_json(self.path, self.epochs, indent=1)

    @property
    def history(self):
        """The history as `{metric: [value per epoch]}`, like Keras'."""
        return records_to_history(self.epochs)


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


class RunBackup(keras.callbacks.BackupAndRestore):
    """Keras' `BackupAndRestore`, its files written atomically.

    It keeps Keras' files in `backup_dir` (`latest.weights.h5` and
    `training_metadata.json`, the previous epoch's copies with `.bkp`
    appended) but writes each through a temporary file renamed into place
    (`keras_gmlp.training.files`), so a run killed while backing up leaves
    every file whole. The run is restored from `restore_from`, a
    `RestorePoint` that `restore_point` chose among the backups and the
    last checkpoint, instead of Keras' choice; the backup is deleted when
    the run finishes.

    Args:
        backup_dir: str. The backup folder.
        save_freq: `"epoch"` or int. Back up at every epoch end, or every
            this many steps too. Defaults to `"epoch"`.
        restore_from: `RestorePoint` or `None`. What the run starts from;
            `None` for a new run. Defaults to `None`.
    """

    def __init__(self, backup_dir, save_freq="epoch", restore_from=None):
        super().__init__(
            backup_dir, save_freq=save_freq, double_checkpoint=True
        )
        self.restore_from = restore_from

    def on_train_begin(self, logs=None):
        point = self.restore_from
        if point is None:
            return
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        if point.path.endswith((".keras", ".weights.h5")):
            self.model.load_weights(point.path)
        else:
            # Keras reads weights only from a `.weights.h5` name.
            copy = files.temporary_path(f"{point.path}.weights.h5")
            try:
                files.copy_file(point.path, copy)
                self.model.load_weights(copy)
            finally:
                if os.path.exists(copy):
                    os.remove(copy)
        self.model._initial_epoch = point.epoch

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        for path, previous in (
            (self._weights_path, self._prev_weights_path),
            (self._training_metadata_path, self._prev_training_metadata_path),
        ):
            if os.path.exists(path):
                files.copy_file(path, previous)
        files.save_weights(self.model, self._weights_path)
        files.write_json(
            self._training_metadata_path,
            {"epoch": self._current_epoch, "batch": self._last_batch_seen},
        )


class AtomicModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Keras' `ModelCheckpoint` of whole models, written atomically.

    The model goes to a temporary `.keras` file beside `filepath`, renamed
    over it when complete: a run killed while saving keeps the previous
    checkpoint whole. Takes `ModelCheckpoint`'s arguments.
    """

    def _save_model(self, epoch, batch, logs):
        path = self._get_file_path(epoch, batch, logs)
        if self._should_save_model(epoch, batch, logs, path):
            files.save_model(self.model, path)


class RestorePoint:
    """Where a run started again in its folder continues from.

    Attributes:
        path: str. A backup's weights file or a `.keras` checkpoint.
        epoch: int. The epochs completed by the weights in `path`.
        note: str. Which file was chosen, and why when it is a fallback.
    """

    def __init__(self, path, epoch, note):
        self.path = path
        self.epoch = epoch
        self.note = note

    def __repr__(self):
        return f"RestorePoint({self.path!r}, epoch={self.epoch})"


def restore_point(output_dir, worker_index=0):
    """Finds the state a run started again in `output_dir` resumes from.

    In order: the backup (`backup/latest.weights.h5` with its
    `training_metadata.json`), the backup's previous copy (`.bkp`), then
    `last.keras`, the model of the last completed epoch (as many epochs
    as `history.json` holds; a finished run keeps no backup). A file that
    cannot be read (truncated by a crash, say) is passed over, and the
    note says so.

    Args:
        output_dir: str. The run's folder.
        worker_index: int. The worker whose backup and history are read
            (workers other than the chief keep theirs in
            `output_dir/workers/<index>/`). Defaults to `0`.

    Returns:
        A `RestorePoint`, or `None` when the folder holds no completed
        epoch (a new run).

    Raises:
        RunFolderError: when the folder holds completed epochs but none of
            these files can be read.
    """
    state_dir = output_dir
    if worker_index:
        state_dir = os.path.join(output_dir, "workers", str(worker_index))
    backup_dir = os.path.join(state_dir, BACKUP_DIR)
    weights = os.path.join(backup_dir, "latest.weights.h5")
    metadata = os.path.join(backup_dir, "training_metadata.json")
    candidates = [
        (weights, metadata),
        (f"{weights}.bkp", f"{metadata}.bkp"),
    ]
    passed_over = []
    for weights_path, metadata_path in candidates:
        if not os.path.exists(weights_path):
            continue
        record = files.readable_json(metadata_path)
        if isinstance(record, dict) and files.readable_weights(weights_path):
            return RestorePoint(
                weights_path,
                int(record["epoch"]),
                _restore_note(output_dir, weights_path, passed_over),
            )
        passed_over.append(weights_path)
    records = files.readable_json(os.path.join(state_dir, HISTORY_FILE)) or []
    last = os.path.join(output_dir, LAST_CHECKPOINT)
    if records and files.readable_model_file(last):
        return RestorePoint(
            last, len(records), _restore_note(output_dir, last, passed_over)
        )
    if records or passed_over:
        if os.path.exists(last):
            passed_over.append(last)
        unreadable = ", ".join(
            os.path.relpath(path, output_dir) for path in passed_over
        )
        raise files.RunFolderError(
            f"{output_dir} holds {len(records)} completed epochs but no "
            f"readable backup or {LAST_CHECKPOINT} to resume them from "
            f"(unreadable: {unreadable or 'none'}): pass --overwrite to "
            "move it aside and train again, or a new --output-dir."
        )
    return None


def _restore_note(output_dir, path, passed_over):
    note = os.path.relpath(path, output_dir)
    if passed_over:
        unreadable = ", ".join(
            os.path.relpath(p, output_dir) for p in passed_over
        )
        note += f" ({unreadable} cannot be read)"
    return note


def training_callbacks(
    output_dir,
    monitor="val_accuracy",
    mode="max",
    tensorboard=True,
    is_chief=True,
    backup_every_steps=None,
    worker_index=0,
    restore_from=None,
):
    """The standard callbacks of a recipe, all writing under `output_dir`.

    - `RunBackup` (Keras' `BackupAndRestore`) in `output_dir/backup`: a
      killed run started again with the same command resumes from its
      last completed epoch (or step, with `backup_every_steps`), from the
      `RestorePoint` that `restore_point` finds. The backup is deleted
      when the run finishes.
    - `PersistentHistory` in `output_dir/history.json`.
    - `best.keras` (by `monitor`) and `last.keras` checkpoints
      (`AtomicModelCheckpoint`).

    Every file is written to a temporary name and renamed into place.
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
        restore_from: `RestorePoint` or `None`. What a resumed run starts
            from (`restore_point(output_dir, worker_index)`). Defaults to
            `None`: a new run.

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
        RunBackup(
            backup_dir,
            save_freq=backup_every_steps or "epoch",
            restore_from=restore_from,
        )
    ]
    best = None
    if is_chief:
        best = AtomicModelCheckpoint(
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
            AtomicModelCheckpoint(os.path.join(output_dir, LAST_CHECKPOINT))
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
