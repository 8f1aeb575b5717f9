"""A run's files, each written whole or not at all.

Every file a run writes goes to a temporary name in its own folder
(`.tmp-<pid>-<name>`, the name's extension kept, as Keras' savers need)
and is then renamed over the real name with `os.replace`, which is
atomic on one file system: a run killed while writing (even `kill -9`)
leaves the previous file whole, and at worst a stray temporary, which
`remove_temporaries` clears. Folders (presets, SavedModels) are written
under a temporary name too and swapped in when complete.

Example:

>>> import os, tempfile
>>> from keras_gmlp.training import files
>>> folder = tempfile.mkdtemp()
>>> files.write_json(os.path.join(folder, "a.json"), {"epoch": 1})
>>> sorted(os.listdir(folder))
['a.json']
"""

import json
import os
import shutil
import zipfile

TEMPORARY_PREFIX = ".tmp-"


class RunFolderError(ValueError):
    """A run's folder that cannot be used as asked.

    It holds another run, another process is writing it, or none of its
    checkpoints can be read. The message is one line saying what to do.
    """


def temporary_path(path):
    """A temporary name beside `path`, with the same extension.

    Args:
        path: str. The file (or folder) to be written.

    Returns:
        `folder/.tmp-<pid>-<name>` for `path = folder/name`.
    """
    folder, name = os.path.split(path)
    return os.path.join(folder, f"{TEMPORARY_PREFIX}{os.getpid()}-{name}")


def write_file(path, write):
    """Writes a file through `write(temporary)`, then renames it to `path`.

    Args:
        path: str. The file.
        write: callable. Writes the whole file at the path it is given.
    """
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    temporary = temporary_path(path)
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def write_json(path, value, **options):
    """Writes `value` as JSON to `path`, atomically.

    Args:
        path: str. The file.
        value: a JSON-serialisable value.
        **options: keywords of `json.dump`, such as `indent`.
    """

    def write(temporary):
        with open(temporary, "w") as file:
            json.dump(value, file, **options)

    write_file(path, write)


def save_model(model, path):
    """`model.save(path)` (a `.keras` file), atomically."""
    write_file(path, lambda temporary: model.save(temporary))


def save_weights(model, path):
    """`model.save_weights(path)` (a `.weights.h5` file), atomically."""
    write_file(path, lambda temporary: model.save_weights(temporary))


def copy_file(source, destination):
    """Copies `source` to `destination`, atomically."""
    write_file(
        destination, lambda temporary: shutil.copyfile(source, temporary)
    )


def write_folder(path, write):
    """Writes a folder through `write(temporary)`, then swaps it in.

    The folder appears under `path` only when `write` has returned; an
    earlier folder of that name is replaced.

    Args:
        path: str. The folder.
        write: callable. Writes the whole folder at the path it is given.

    Returns:
        `path`.
    """
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    temporary = temporary_path(os.path.abspath(path))
    old = f"{temporary}.old"
    for leftover in (temporary, old):
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        write(temporary)
        if os.path.exists(path):
            os.rename(path, old)
        os.rename(temporary, path)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return path


def save_to_preset(task, path):
    """`task.save_to_preset(path)`, the folder swapped in when complete."""
    return write_folder(path, task.save_to_preset)


def remove_temporaries(folder):
    """Removes what interrupted writes left in `folder` (not below it).

    Args:
        folder: str. A run's folder; call it only while holding its lock.

    Returns:
        The list of names removed.
    """
    if not os.path.isdir(folder):
        return []
    removed = []
    for name in sorted(os.listdir(folder)):
        if name.startswith(TEMPORARY_PREFIX):
            path = os.path.join(folder, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
            removed.append(name)
    return removed


def readable_weights(path):
    """Whether `path` is a whole HDF5 file (such as a `.weights.h5`)."""
    import h5py

    if not os.path.isfile(path):
        return False
    try:
        with h5py.File(path, "r") as file:
            file.visit(lambda name: None)
    except (OSError, RuntimeError, ValueError):
        return False
    return True


def readable_model_file(path):
    """Whether `path` is a whole `.keras` file (a zip whose files check)."""
    if not os.path.isfile(path) or not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError):
        return False


def readable_json(path):
    """The JSON value in `path`, or `None` when it is missing or broken."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as file:
            return json.load(file)
    except (OSError, ValueError):
        return None
