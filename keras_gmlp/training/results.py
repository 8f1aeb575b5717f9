"""The `results.json` of a run: what ran, where, how long and how well."""

import dataclasses
import json
import os
import platform
import subprocess
import sys
import time

import keras

from keras_gmlp.training import files

RESULTS_FILE = "results.json"


def write_results(
    output_dir,
    arguments,
    history,
    metrics,
    wall_time,
    distribution=None,
    counts=None,
    extra=None,
):
    """Writes `output_dir/results.json` (atomically); returns what it wrote.

    Args:
        output_dir: str. The run's folder.
        arguments: dict or dataclass. The run's configuration (a
            `keras_gmlp.training.run_config` object), recorded as
            `"arguments"`.
        history: dict. `{metric: [value per epoch]}` of the whole run.
        metrics: dict. Final metrics, e.g. `{"val_accuracy": 0.98}`.
        wall_time: float. Seconds of this process's training (a resumed run
            adds the seconds recorded by earlier attempts; see
            `WallClock`).
        distribution: `Distribution` or `None`. The run's distribution.
        counts: dict or `None`. Record counts, e.g. examples and skipped
            corrupt records.
        extra: dict or `None`. Anything else to record.

    Returns:
        The dict written.
    """
    if dataclasses.is_dataclass(arguments):
        arguments = dataclasses.asdict(arguments)
    if not isinstance(arguments, dict):
        raise ValueError(
            f"Received arguments of type {type(arguments).__name__}; "
            "expected a dict or a run configuration (dataclass)."
        )
    epochs = len(next(iter(history.values()), []))
    results = {
        "arguments": _jsonable(arguments),
        "backend": keras.config.backend(),
        "keras_version": keras.__version__,
        "python": platform.python_version(),
        "commit": _git_commit(),
        "command": " ".join(sys.argv),
        "device_count": _device_count(),
        "distribution": distribution.describe() if distribution else None,
        "epochs": epochs,
        "wall_time_seconds": round(float(wall_time), 2),
        "metrics": _jsonable(metrics),
        "counts": _jsonable(counts or {}),
        "history": _jsonable(history),
    }
    results.update(_jsonable(extra or {}))
    files.write_json(os.path.join(output_dir, RESULTS_FILE), results, indent=2)
    return results


class WallClock:
    """Wall time of a run, summed over its interrupted attempts.

    Each attempt adds its elapsed seconds to `output_dir/wall_time.json`
    at every `update()`, so a run resumed after `kill -9` reports the time
    of all its attempts.

    Args:
        output_dir: str. The run's folder.
        resume: bool. Whether this attempt continues an interrupted run
            (else earlier records are discarded). Defaults to `True`.
    """

    def __init__(self, output_dir, resume=True):
        self.path = os.path.join(output_dir, "wall_time.json")
        self.previous = 0.0
        if resume and os.path.exists(self.path):
            with open(self.path) as file:
                self.previous = json.load(file)["completed_seconds"]
        self.start = time.perf_counter()

    def elapsed(self):
        """Seconds of this attempt plus those of earlier attempts."""
        return self.previous + time.perf_counter() - self.start

    def update(self, *args):
        """Records the elapsed time; usable as an epoch-end hook."""
        files.write_json(self.path, {"completed_seconds": self.elapsed()})


def _device_count():
    backend = keras.config.backend()
    if backend == "jax":
        import jax

        return jax.device_count()
    if backend == "torch":
        import torch

        return max(torch.cuda.device_count(), 1)
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    return len(gpus) or len(tf.config.list_logical_devices("CPU"))


def _git_commit():
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)
