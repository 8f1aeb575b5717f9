"""The worker processes of the image benchmarks (`benchmarks/common.py`:
`Worker` and its other side, `serve`; `run_json`)."""

import subprocess
import sys

import pytest

from benchmarks import common

# Subprocesses of plain Python: the backend makes no difference.
pytestmark = pytest.mark.one_backend("torch")

# A worker as `vision.py`'s and `timm_worker.py`'s: handlers served on
# stdin, one of which prints (as the libraries do), one fails and one
# ends the process. With `START=fail` it exits before serving.
WORKER = """
import os, sys
from benchmarks import common

if os.environ.get("START") == "fail":
    sys.exit(1)


def add(a, b):
    print("a library's chatter")
    return {"sum": a + b}


def fail():
    raise ValueError("no such variant")


common.serve({"add": add, "fail": fail, "die": lambda: os._exit(3)})
"""


def start(tmp_path, **env):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    environment = dict(common.worker_env(None, 1), **env)
    return common.Worker(
        [sys.executable, str(script)], environment, subprocess.DEVNULL
    )


def test_a_worker_answers_its_commands_in_turn(tmp_path):
    worker = start(tmp_path)
    try:
        assert worker.ask("add", a=1, b=2) == {"sum": 3}
        # A failing command is answered and the worker goes on.
        assert worker.ask("fail") == {"error": "ValueError: no such variant"}
        assert worker.ask("add", a=2, b=3) == {"sum": 5}
    finally:
        worker.close()
    assert worker.process.returncode == 0


def test_a_worker_that_dies_or_never_starts_answers_an_error(tmp_path):
    worker = start(tmp_path)
    try:
        assert worker.ask("die") == {"error": "worker died (see the log)"}
    finally:
        worker.close()
    worker = start(tmp_path, START="fail")
    try:
        assert worker.ask("add", a=1, b=2) == {
            "error": "worker failed to start (see the log)"
        }
    finally:
        worker.close()


def test_run_json_reads_the_last_json_line_or_the_error(tmp_path):
    env = common.worker_env(None, 1)
    printed = "print('warming up'); print('{\"a\": 1}'); print('{\"a\": 2}')"
    assert common.run_json([sys.executable, "-c", printed], env) == {"a": 2}
    failed = "import sys; sys.exit('out of memory')"
    answer = common.run_json([sys.executable, "-c", failed], env)
    assert answer == {"error": "out of memory\n"}


def test_keras_workers_get_the_package_environment_and_timm_the_users(
    monkeypatch,
):
    # The comparison against timm stays fair: each side as its users run
    # it, and a value the environment sets holds for both.
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    keras_side = common.worker_env("torch", 1)
    assert keras_side["OMP_WAIT_POLICY"] == "PASSIVE"
    assert keras_side["TF_ENABLE_ONEDNN_OPTS"] == "1"
    assert "OMP_WAIT_POLICY" not in common.worker_env(None, 1, timm=True)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    for timm in (False, True):
        env = common.worker_env(None, 1, timm=timm)
        assert env["OMP_WAIT_POLICY"] == "ACTIVE"


def test_memory_rows_compare_with_the_baseline_checkouts():
    from benchmarks.memory import compare_with_baseline

    def row(backend, version, peak):
        return {
            "backend": backend,
            "version": version,
            "jit_compile": "auto",
            "steady_step_peak_mib": peak / 2,
            "step_peak_mib": None,
            "peak_mib": peak,
        }

    rows = [
        row("torch", "this", 300.0),
        row("torch", "baseline", 400.0),
        row("jax", "this", 100.0),
    ]
    compare_with_baseline(rows)
    assert rows[0]["peak_x_baseline"] == 0.75
    assert rows[0]["steady_step_peak_x_baseline"] == 0.75
    assert rows[0]["step_peak_x_baseline"] is None
    assert "peak_x_baseline" not in rows[1]  # the baseline's own row
    assert "peak_x_baseline" not in rows[2]  # no baseline measured
    rows.append(row("jax", "without_kernels", 400.0))
    compare_with_baseline(rows, "without_kernels")
    assert rows[2]["peak_x_without_kernels"] == 0.25
    assert "peak_x_without_kernels" not in rows[0]


def test_memory_knows_every_kernel_operation():
    from benchmarks.memory import KERNEL_OPERATIONS
    from keras_gmlp.kernels.registry import KERNELS

    assert sorted(KERNEL_OPERATIONS) == sorted(KERNELS)


def test_versions_rows_compare_each_checkout_with_the_reference():
    from benchmarks.versions import against_reference

    times = {
        "this": [2.0, 1.0, 3.0],
        "baseline": [4.0, None, 4.0],
        "reference": [3.0, 3.0, 1.0],
    }
    assert against_reference(times) == {
        "reference_s": 3.0,
        "this_x_reference": 1.5,
        "baseline_x_reference": 0.75,
    }


def test_versions_rows_compare_the_kernels_off_worker_too():
    from benchmarks.versions import against_kernels_off
    from benchmarks.versions import against_reference

    times = {
        "this": [2.0, 1.0, 3.0],
        "baseline": [4.0, None, 4.0],
        "off": [3.0, 5.0, 4.0],
        "reference": [3.0, 3.0, 1.0],
    }
    assert against_kernels_off(times) == {
        "off_s": 4.0,
        "this_x_off": 2.0,
        "off_x_baseline": 1.0,
    }
    assert against_reference(times)["off_x_reference"] == 0.75
    assert versions_arguments(["--kernels-off"]).kernels_off
    assert not versions_arguments([]).kernels_off


def versions_arguments(argv):
    from benchmarks.versions import parse_args

    return parse_args(argv)


def test_versions_sets_each_row_up_as_the_command_that_runs_it():
    # Training rows as a training job; generate as `keras-gmlp generate`,
    # which applies no training settings (TensorFlow's one thread an op
    # made XLA's decoding loop 1.6x slower).
    from benchmarks import versions
    from keras_gmlp import kernels

    for setup in versions.PROCESSES.values():
        assert callable(getattr(kernels, setup))
    assert versions.PROCESSES["training"] == "configure_training_process"
    assert set(versions.ROW_PROCESSES) == set(versions.EXTRA_ROWS)
    assert set(versions.ROW_PROCESSES.values()) == {"command"}
    assert versions.parse_args(["--worker"]).process == "training"


def test_versions_refuses_a_baseline_that_is_not_a_checkout(
    tmp_path, monkeypatch
):
    # A missing folder on PYTHONPATH is skipped: the "baseline" workers
    # would import this checkout's keras_gmlp and compare it with itself.
    from benchmarks import versions

    measured = []
    monkeypatch.setattr(
        versions, "measure", lambda backend, args: measured.append(backend)
    )
    monkeypatch.setattr(versions.common, "write_results", lambda *a: "")
    for baseline in (tmp_path / "missing", tmp_path):
        with pytest.raises(SystemExit, match="expected a checkout folder"):
            versions.main(["--baseline", str(baseline), "--backends", "jax"])
    assert measured == []


def test_memory_refuses_a_baseline_that_is_not_a_checkout(
    tmp_path, monkeypatch
):
    from benchmarks import memory

    monkeypatch.setattr(memory.common, "run_json", lambda *a: {})
    monkeypatch.setattr(memory.common, "write_results", lambda *a: "")
    monkeypatch.setattr(
        sys,
        "argv",
        ["memory.py", "--baseline", str(tmp_path / "missing")]
        + ["--backends", "torch", "--timm-python", "none"],
    )
    with pytest.raises(SystemExit, match="expected a checkout folder"):
        memory.main()
