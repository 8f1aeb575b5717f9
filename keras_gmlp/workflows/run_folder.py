"""A run's folder: what a training job leaves behind, and reading it back.

Every job writes `run_config.json` in its `output_dir` when it starts:
`{"job": ..., "config": {field: value}, ...}` plus what the job adds
(labels, class names, the model's description). `evaluate`, `predict`,
`fill-mask`, `generate`, `export` and `info` find the model and its
settings there. Runs written before `run_config.json` had a `"config"`
are read from the `"arguments"` of their `results.json`.
"""

import json
import os

RUN_CONFIG_FILE = "run_config.json"
RESULTS_FILE = "results.json"
JOBS = ("image_classification", "pretraining", "text_classification")


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
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, RUN_CONFIG_FILE)
    temporary = f"{path}.tmp"
    with open(temporary, "w") as file:
        json.dump(record, file, indent=1, default=str)
    os.replace(temporary, path)
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
