"""A run's folder: what a training job leaves behind, and reading it back.

Every job writes `run_config.json` in its `output_dir` when it starts:
`{"job": ..., "config": {field: value}, ...}` plus what the job adds
(labels, class names, the model's description). `evaluate`, `predict`,
`fill-mask`, `generate`, `export` and `info` find the model and its
settings there. Runs written before `run_config.json` had a `"config"`
are read from the `"arguments"` of their `results.json`.

A folder holds one run. `claim` checks a new run against the one in the
folder (`run_state`: the same configuration resumes or is complete,
another is refused unless `overwrite` moves the old run aside) and takes
the folder's lock (`RunLock`), so that one process writes it at a time.
"""

import datetime
import json
import os
import socket

from keras_gmlp.training import files
from keras_gmlp.training.callbacks import BACKUP_DIR
from keras_gmlp.training.files import RunFolderError

RUN_CONFIG_FILE = "run_config.json"
RESULTS_FILE = "results.json"
LOCK_FILE = "run.lock"
JOBS = ("image_classification", "pretraining", "text_classification")
# Fields that change neither the model nor its data: a run started again
# with other values of these resumes. `epochs` may grow (the run goes on
# to the new count); it may not shrink.
IGNORED_FIELDS = (
    "output_dir",  # The folder may have been moved.
    "data_dir",  # Where the same data is found.
    "verbose",
    "tensorboard",
    "export",
    "plots",
    "overwrite",
    "jit_compile",  # How the same steps are compiled.
    "remat",  # Recomputes the same values in the backward pass.
    "unigram_tokens",  # Only the reported unigram baseline.
)
NEW = "new"
RESUME = "resume"
COMPLETE = "complete"


def write_run_config(output_dir, job, config, **extra):
    """Writes `output_dir/run_config.json`; returns what it wrote.

    Args:
        output_dir: str. The run's folder (created if missing).
        job: str. One of `JOBS`.
        config: a `keras_gmlp.training.run_config` object.
        **extra: more JSON-serialisable entries.
    """
    if job not in JOBS:
        raise ValueError(f"Received job={job!r}; expected one of {JOBS}.")
    record = {"job": job, "config": config.to_dict(), **extra}
    path = os.path.join(output_dir, RUN_CONFIG_FILE)
    files.write_json(path, record, indent=1, default=str)
    return record


def read_run_config(run_dir):
    """Reads a run's `run_config.json` (or its `results.json`).

    Args:
        run_dir: str. The `output_dir` of a training run.

    Returns:
        A dict with at least `"job"` and `"config"`.

    Raises:
        FileNotFoundError: when `run_dir` holds neither file.
        ValueError: when the job cannot be told from the files.
    """
    record = {}
    path = os.path.join(run_dir, RUN_CONFIG_FILE)
    if os.path.exists(path):
        with open(path) as file:
            record = json.load(file)
    if "config" not in record:
        results_path = os.path.join(run_dir, RESULTS_FILE)
        if not os.path.exists(results_path):
            if not record:
                raise FileNotFoundError(
                    f"No {RUN_CONFIG_FILE} or {RESULTS_FILE} in {run_dir!r}; "
                    "expected the --output-dir of a training run."
                )
        else:
            with open(results_path) as file:
                record["config"] = json.load(file).get("arguments", {})
    record.setdefault("config", {})
    if "job" not in record:
        record["job"] = _guess_job({**record, **record["config"]}, run_dir)
    return record


def _guess_job(settings, run_dir):
    if "dataset" in settings:
        return "image_classification"
    if "objective" in settings:
        return "pretraining"
    if "label_column" in settings:
        return "text_classification"
    raise ValueError(
        f"Cannot tell which job wrote {run_dir!r}; expected a "
        f"{RUN_CONFIG_FILE} with a 'job' entry, one of {JOBS}."
    )


def find_file(run_dir, names, what="model"):
    """The path of the first of `names` that exists in `run_dir`.

    Raises:
        FileNotFoundError: naming the files looked for.
    """
    for name in names:
        path = os.path.join(run_dir, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(
        f"No {what} ({', '.join(names)}) in {run_dir!r}; expected the "
        "--output-dir of a finished training run."
    )


def load_preset(task_class, folder):
    """`task_class.from_preset(folder)`: a run's saved task or backbone.

    The gMLP classes' `from_preset` keeps a preset's mixed-precision
    policy, which keras-hub 0.32's own loader cannot resolve.

    Args:
        task_class: a gMLP task or backbone class, such as `GMLPMaskedLM`,
            or `keras_hub.models.Backbone`.
        folder: str. A folder written by `save_to_preset`.
    """
    return task_class.from_preset(folder)


def load_checkpoint(run_dir, names):
    """Loads the first readable `.keras` file of `names` in `run_dir`.

    A checkpoint that a crash truncated is passed over for the next one,
    and a printed line says which was loaded instead.

    Args:
        run_dir: str. The run's folder.
        names: sequence of str. Checkpoint names, preferred first, such as
            `("best.keras", "last.keras")`.

    Returns:
        The model, uncompiled.

    Raises:
        FileNotFoundError: when none of `names` exists.
        RunFolderError: when they exist but none can be read.
    """
    import keras

    find_file(run_dir, names)
    unreadable = []
    for name in names:
        path = os.path.join(run_dir, name)
        if not os.path.exists(path):
            continue
        if not files.readable_model_file(path):
            unreadable.append(name)
            continue
        if unreadable:
            print(
                f"Loading {path}: {', '.join(unreadable)} cannot be read "
                "(a truncated file).",
                flush=True,
            )
        return keras.saving.load_model(path, compile=False)
    raise RunFolderError(
        f"No readable checkpoint in {run_dir} ({', '.join(unreadable)} "
        "cannot be read: truncated files): train the run again, with the "
        "same command and --overwrite."
    )


def differing_fields(recorded, config):
    """The fields in which a new run differs from a recorded one.

    Fields of `IGNORED_FIELDS` do not count, nor fields only one of the
    two has (a field added or removed by another version); `epochs`
    counts only when the new run has fewer.

    Args:
        recorded: dict. The `"config"` of a run's `run_config.json`.
        config: dict. The new run's `to_dict()`.

    Returns:
        A list of `(field, recorded value, new value)`, in the recorded
        order.
    """
    # As the JSON file holds them: tuples as lists, other values as text.
    config = json.loads(json.dumps(config, default=str))
    differing = []
    for name, old in recorded.items():
        if name in IGNORED_FIELDS or name not in config:
            continue
        new = config[name]
        if name == "epochs":
            if old is not None and new is not None and new < old:
                differing.append((name, old, new))
        elif new != old:
            differing.append((name, old, new))
    return differing


def run_state(output_dir, job, config):
    """What `output_dir` holds, for a new run of `config`.

    Args:
        output_dir: str. The run's folder.
        job: str. One of `JOBS`.
        config: a `keras_gmlp.training.run_config` object.

    Returns:
        `NEW` when the folder holds no run, `RESUME` when it holds this
        run (the same configuration) unfinished or with fewer epochs than
        `config.epochs`, `COMPLETE` when it holds this run finished.

    Raises:
        RunFolderError: when the folder holds another run (another job,
            or other values of fields that change the model or its data),
            naming the differing fields.
    """
    holds_run = any(
        os.path.exists(os.path.join(output_dir, name))
        for name in (RUN_CONFIG_FILE, RESULTS_FILE)
    )
    if not holds_run:
        return NEW
    try:
        record = read_run_config(output_dir)
    except ValueError as error:
        raise RunFolderError(
            f"{output_dir} holds files of a run that cannot be read "
            f"({error}): pass --overwrite to move it aside, or a new "
            "--output-dir."
        ) from error
    if record["job"] != job:
        raise RunFolderError(
            f"{output_dir} holds a run of job={record['job']}; this one "
            f"has job={job}: pass --overwrite to move that run aside, or a "
            "new --output-dir."
        )
    differing = differing_fields(record["config"], config.to_dict())
    if differing:
        old = ", ".join(f"{name}={value}" for name, value, _ in differing)
        new = ", ".join(f"{name}={value}" for name, _, value in differing)
        raise RunFolderError(
            f"{output_dir} holds a run with {old}; this one has {new}: "
            "pass --overwrite to move that run aside, or a new --output-dir."
        )
    results = files.readable_json(os.path.join(output_dir, RESULTS_FILE))
    if isinstance(results, dict) and results.get("epochs", 0) >= config.epochs:
        return COMPLETE
    return RESUME


def move_aside(output_dir):
    """Renames `output_dir` to a new sibling folder; returns its path.

    The sibling is `<output_dir>.replaced-<UTC time>` (with `-2`, `-3`,
    ... when that exists): nothing is deleted.

    Args:
        output_dir: str. The run's folder.
    """
    folder = os.path.normpath(output_dir)
    stamp = datetime.datetime.now(datetime.timezone.utc)
    target = f"{folder}.replaced-{stamp:%Y%m%d-%H%M%S}"
    candidate, count = target, 1
    while os.path.exists(candidate):
        count += 1
        candidate = f"{target}-{count}"
    os.rename(folder, candidate)
    return candidate


class RunLock:
    """The lock file of a run's folder: one writer at a time.

    `acquire()` creates `output_dir/run.lock` holding this process's PID,
    host and start time as JSON, or refuses when another live process
    holds it. A lock left by a dead process of this host (a run killed
    with `kill -9`) is taken over, with a printed line saying so; one of
    another host is not (the refusal says to remove it if its process is
    gone, as after a restart that reused its PID). The
    file is created whole (a complete temporary file hard-linked to the
    lock's name), so a reader never sees half a lock. `release()` removes
    it. As a context manager it holds the lock (taking it unless held
    already) for the `with` block, and releases it on exceptions too.

    Args:
        output_dir: str. The run's folder (created if missing).

    Example:

    >>> import os, tempfile
    >>> from keras_gmlp.workflows.run_folder import RunLock
    >>> folder = tempfile.mkdtemp()
    >>> with RunLock(folder) as lock:
    ...     lock.holder()["pid"] == os.getpid()
    True
    """

    def __init__(self, output_dir):
        self.output_dir = output_dir
        self.path = os.path.join(output_dir, LOCK_FILE)
        self.held = False

    def holder(self):
        """The lock file's record (`pid`, `host`, `started`), or `None`."""
        return files.readable_json(self.path)

    def acquire(self):
        """Takes the lock.

        Raises:
            RunFolderError: when another live process holds it.
        """
        os.makedirs(self.output_dir, exist_ok=True)
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now(datetime.timezone.utc)
            .isoformat(timespec="seconds")
            .replace("+00:00", "Z"),
        }
        # Not a `files.temporary_path`: `remove_temporaries` keeps it.
        temporary = f"{self.path}.{os.getpid()}"
        with open(temporary, "w") as file:
            json.dump(record, file)
        try:
            if not self._link(temporary):
                holder = self.holder()
                if not _is_stale(holder):
                    raise RunFolderError(_held_message(self.path, holder))
                print(
                    f"Taking over {self.path}: its holder, PID "
                    f"{holder['pid']} on {holder['host']}, is gone.",
                    flush=True,
                )
                os.remove(self.path)
                if not self._link(temporary):
                    raise RunFolderError(
                        _held_message(self.path, self.holder())
                    )
        finally:
            os.remove(temporary)
        self.held = True
        return self

    def release(self):
        """Removes the lock file if this process holds it."""
        if not self.held:
            return
        holder = self.holder()
        if holder and holder.get("pid") == os.getpid():
            os.remove(self.path)
        self.held = False

    def _link(self, temporary):
        """Creates the lock file from `temporary`; `False` if it exists."""
        try:
            os.link(temporary, self.path)
        except FileExistsError:
            return False
        except OSError:
            # A file system without hard links: create it exclusively.
            flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
            try:
                descriptor = os.open(self.path, flags)
            except FileExistsError:
                return False
            with open(temporary) as source:
                content = source.read()
            with os.fdopen(descriptor, "w") as file:
                file.write(content)
        return True

    def __enter__(self):
        return self if self.held else self.acquire()

    def __exit__(self, *exception):
        self.release()


def _is_stale(holder):
    """Whether a lock's holder is a dead process of this host."""
    if not isinstance(holder, dict) or "pid" not in holder:
        return False
    if holder.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _held_message(path, holder):
    if not isinstance(holder, dict):
        return (
            f"{path} is held by another process: wait for its run to end, "
            f"or pass another --output-dir; if it is gone, remove {path}."
        )
    where = f"PID {holder.get('pid')} on {holder.get('host')}"
    return (
        f"{os.path.dirname(path)} is being written by {where} since "
        f"{holder.get('started')}: wait for that run to end, or pass "
        f"another --output-dir; if that process is gone, remove {path}."
    )


def claim(output_dir, job, config, overwrite=False):
    """Takes `output_dir` for a run of `config`, with its lock.

    The lock is taken first, so that no other process writes the folder;
    then the folder's run is checked (`run_state`). With `overwrite`, a
    folder that holds a run has it moved aside (`move_aside`, printed)
    and the new run starts in a fresh folder. Temporary files that
    interrupted writes left (in the folder and its `backup/`) are removed.

    Args:
        output_dir: str. The run's folder.
        job: str. One of `JOBS`.
        config: a `keras_gmlp.training.run_config` object.
        overwrite: bool. Whether to move an earlier run aside. Defaults
            to `False`.

    Returns:
        `(lock, state)`: the held `RunLock` (release it when the run ends)
        and `NEW`, `RESUME` or `COMPLETE`.

    Raises:
        RunFolderError: when another process holds the lock, or the
            folder holds another run and `overwrite` is `False`.
    """
    lock = RunLock(output_dir).acquire()
    try:
        if overwrite:
            state = NEW
            if os.path.exists(os.path.join(output_dir, RUN_CONFIG_FILE)) or (
                os.path.exists(os.path.join(output_dir, RESULTS_FILE))
            ):
                # The lock moves with the run, and is removed there.
                lock.held = False
                moved = move_aside(output_dir)
                os.remove(os.path.join(moved, LOCK_FILE))
                print(f"Moved the run in {output_dir} to {moved}.", flush=True)
                lock = RunLock(output_dir).acquire()
        else:
            state = run_state(output_dir, job, config)
        for folder in (output_dir, os.path.join(output_dir, BACKUP_DIR)):
            files.remove_temporaries(folder)
    except BaseException:
        lock.release()
        raise
    return lock, state
