"""The worker processes of the process-per-form benchmarks
(`benchmarks/common.py`, `worker_report`)."""

import json

import pytest

from benchmarks import common

# Subprocesses of plain Python: the backend makes no difference.
pytestmark = pytest.mark.one_backend("torch")

# A worker that counts its runs in a file and, until its `DIES` runs are
# used up, ends as `HOW` says: killed by SIGSEGV or with exit status 3.
WORKER = """
import json, os, signal, sys
runs = os.environ["RUNS"]
count = int(open(runs).read()) + 1 if os.path.exists(runs) else 1
open(runs, "w").write(str(count))
if count <= int(os.environ["DIES"]):
    if os.environ["HOW"] == "signal":
        os.kill(os.getpid(), signal.SIGSEGV)
    sys.exit(3)
print("warming up")
print(json.dumps({"seconds": 0.25, "argv": sys.argv[1:]}))
"""


def run_worker(tmp_path, dies, how, restarts=1):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    runs = tmp_path / "runs"
    env = {"RUNS": str(runs), "DIES": str(dies), "HOW": how, "PATH": ""}
    restarted = []
    try:
        report = common.worker_report(
            script, "gmlp", "masked_lm 128", 2, env, restarts, restarted
        )
    finally:
        count = int(runs.read_text()) if runs.exists() else 0
    return report, count, restarted


def test_a_worker_that_finishes_reports_its_last_line(tmp_path):
    report, runs, restarted = run_worker(tmp_path, 0, "signal")
    expected = ["--worker", "gmlp", "--measure", "masked_lm 128"]
    assert report == {"seconds": 0.25, "argv": [*expected, "--steps", "2"]}
    assert (runs, restarted) == (1, [])


def test_a_worker_killed_by_a_signal_is_started_again_and_recorded(tmp_path):
    # One of about 30 keras-hub BERT workers died of a segmentation fault
    # under TensorFlow (stop 54): the run lost every measurement with it.
    report, runs, restarted = run_worker(tmp_path, 1, "signal")
    assert report["seconds"] == 0.25 and runs == 2
    assert restarted == [
        {"form": "gmlp", "measure": "masked_lm 128", "exit_status": -11}
    ]
    json.dumps(restarted)


def test_a_worker_that_keeps_dying_stops_the_run(tmp_path):
    with pytest.raises(
        RuntimeError, match="gmlp masked_lm 128: exit status -11"
    ):
        run_worker(tmp_path, 3, "signal", restarts=1)
    assert int((tmp_path / "runs").read_text()) == 2


def test_a_worker_that_fails_is_not_started_again(tmp_path):
    # An exception exits with a status of its own: it would fail again.
    with pytest.raises(RuntimeError, match="exit status 3"):
        run_worker(tmp_path, 1, "exit")
    assert int((tmp_path / "runs").read_text()) == 1
