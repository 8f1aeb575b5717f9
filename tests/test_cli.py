import dataclasses
import json
import os
import subprocess
import sys

import keras
import pytest

import keras_gmlp
from keras_gmlp import cli
from keras_gmlp import models
from keras_gmlp import workflows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMANDS = (
    "train-image-classifier",
    "pretrain",
    "finetune",
    "evaluate",
    "predict",
    "fill-mask",
    "generate",
    "export",
    "info",
)


def run_cli(argv, capsys):
    """Runs `keras-gmlp ARGV` in this process; returns its stdout."""
    capsys.readouterr()
    assert cli.main(argv) == 0
    return capsys.readouterr().out


def help_text(argv, capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_command(capsys):
    text = help_text([], capsys)
    for command in COMMANDS:
        assert f"\n    {command}" in text, command


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_complete_help(command, capsys):
    text = help_text([command], capsys)
    assert text.startswith(f"usage: keras-gmlp {command}")
    module = cli.TRAINING_COMMANDS.get(command)
    if module is None:
        return
    # A training command's help names every field of its configuration,
    # with its default.
    workflow = getattr(workflows, module)
    for field in dataclasses.fields(workflow.CONFIG_CLASS):
        flag = "--" + field.name.replace("_", "-")
        assert flag in text, flag
    assert "(default: 1.0)" in text  # --clipnorm


def test_info_on_a_preset_counts_its_parameters(capsys):
    summary = json.loads(run_cli(["info", "gmlp_tiny"], capsys))
    assert summary["backend"] == keras.config.backend()
    assert summary["family"] == "text"
    assert summary["config"] == keras_gmlp.PRESETS["gmlp_tiny"]["config"]
    expected = models.masked_lm("gmlp_tiny").count_params()
    assert summary["parameters"] == expected
    listing = json.loads(run_cli(["info"], capsys))
    assert set(listing["presets"]) == set(keras_gmlp.PRESETS)


def test_info_and_predict_name_what_they_expect(tmp_path, capsys):
    # An error a user can cause: one line on stderr, exit status 2.
    capsys.readouterr()
    assert cli.main(["info", "gmlp_huge"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("keras-gmlp: error: Received 'gmlp_huge'")
    assert "expected a preset" in error
    # A run folder of another job than the command needs.
    (tmp_path / "run_config.json").write_text(
        json.dumps({"job": "pretraining", "config": {"objective": "mlm"}})
    )
    assert cli.main(["predict", str(tmp_path), "--text", "a sentence"]) == 2
    assert "holds a pretraining run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["predict", str(tmp_path)])  # --image or --text needed
    assert "--image" in capsys.readouterr().err
    assert cli.main(["evaluate", str(tmp_path / "missing")]) == 2
    assert "run_config.json" in capsys.readouterr().err
    # --debug raises the error itself.
    with pytest.raises(FileNotFoundError, match="run_config.json"):
        cli.main(["--debug", "evaluate", str(tmp_path / "missing")])
    with pytest.raises(FileNotFoundError, match="run_config.json"):
        cli.main(["evaluate", str(tmp_path / "missing"), "--debug"])


@pytest.mark.one_backend("torch")
def test_console_script_and_module_entry():
    with open(os.path.join(ROOT, "pyproject.toml")) as file:
        pyproject = file.read()
    scripts = pyproject.split("[project.scripts]\n", 1)[1].split("\n\n")[0]
    assert scripts.strip() == 'keras-gmlp = "keras_gmlp.cli:main"'
    process = subprocess.run(
        [sys.executable, "-m", "keras_gmlp.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    assert process.stdout.strip() == f"keras-gmlp {keras_gmlp.__version__}"
