"""The command's errors: one line, exit status 2, a traceback on demand;
its help: no backend imported, every option's default shown."""

import json
import os
import subprocess
import sys

import pytest

from keras_gmlp import cli
from tests.test_cli import COMMANDS

# Each case runs the command in a fresh process, whatever the backend:
# the error handling does not depend on it.
pytestmark = pytest.mark.one_backend("jax")


def run_command(argv, debug=False):
    """Runs `keras-gmlp ARGV` in a fresh process; returns it."""
    env = dict(os.environ)
    env.pop("KERAS_GMLP_DEBUG", None)
    if debug:
        env["KERAS_GMLP_DEBUG"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "keras_gmlp.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def assert_one_line_error(argv, *fragments):
    """The command fails with one `keras-gmlp: error:` line naming
    `fragments`, and shows the traceback under `KERAS_GMLP_DEBUG=1`."""
    process = run_command(argv)
    assert process.returncode == 2, process.stderr[-3000:]
    lines = process.stderr.strip().splitlines()
    assert lines[0].startswith("keras-gmlp: error: "), process.stderr[-3000:]
    assert len(lines) == 1, process.stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    debug = run_command(argv, debug=True)
    assert debug.returncode not in (0, 2)
    assert "Traceback (most recent call last)" in debug.stderr


@pytest.mark.large
def test_a_missing_run_folder_is_one_line(tmp_path):
    missing = str(tmp_path / "missing")
    assert_one_line_error(["evaluate", missing], missing, "run_config.json")


@pytest.mark.large
def test_an_unknown_preset_is_one_line():
    assert_one_line_error(["info", "gmlp_huge"], "'gmlp_huge'", "preset")


@pytest.mark.large
def test_a_file_that_is_no_image_is_named(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_config.json").write_text(
        json.dumps({"job": "image_classification", "config": {}})
    )
    text = tmp_path / "notes.txt"
    text.write_text("not an image\n")
    assert_one_line_error(
        ["predict", str(run), "--image", str(text)], str(text), "image"
    )


@pytest.mark.large
def test_an_unwritable_export_folder_is_named(tmp_path):
    model = tmp_path / "model.keras"
    model.write_bytes(b"")
    assert_one_line_error(
        ["export", str(model), "/proc/x", "--format", "onnx"],
        "/proc",
        "writ",
    )


def test_help_imports_no_backend():
    # Each command's --help in a fresh process: no Keras, no backend.
    code = (
        "import contextlib, io, sys\n"
        "from keras_gmlp import cli\n"
        f"for command in [[], *([name] for name in {list(COMMANDS)!r})]:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            cli.main([*command, '--help'])\n"
        "        except SystemExit:\n"
        "            pass\n"
        "names = ('keras', 'tensorflow', 'jax', 'torch', 'keras_hub')\n"
        "print([name for name in names if name in sys.modules])\n"
    )
    process = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert process.stdout.strip() == "[]"


def test_every_option_shows_its_default():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert set(commands) == set(COMMANDS)
    for name, sub in [("", parser), *commands.items()]:
        text = sub.format_help()
        for action in sub._actions:
            if not action.option_strings or action.dest == "help":
                continue
            if action.dest == "version":
                continue
            assert action.help and "default" in action.help, (
                name,
                action.option_strings,
            )
            expanded = action.help % {"default": action.default}
            first_words = " ".join(expanded.split()[:3])
            assert first_words in " ".join(text.split()), (name, first_words)
