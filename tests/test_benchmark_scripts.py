"""Every benchmark script answers `--help` (`benchmarks/README.md`)."""

import os
import pathlib
import subprocess
import sys

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
# Every script in benchmarks/ but the shared helpers.
SCRIPTS = sorted(
    path.stem
    for path in (REPOSITORY / "benchmarks").glob("*.py")
    if path.stem not in ("__init__", "common")
)


def test_the_scripts_are_found():
    assert {"vision", "timm_worker", "masked_lm_speed", "sweep"} <= set(SCRIPTS)


# `--help` does not depend on the backend (two scripts import Keras first).
@pytest.mark.one_backend("jax")
@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_answers_help(name):
    result = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--help"],
        cwd=REPOSITORY,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    usage = result.stdout.splitlines()[0] if result.stdout else ""
    assert usage.startswith("usage: ") and name in usage, result.stdout[:500]
