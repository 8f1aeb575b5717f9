"""The benchmarks' command lines: a script's own flags beside the shared
parser's (`benchmarks/common.py`, `image_benchmark_parser`)."""

import pathlib
import re

import pytest

from benchmarks import common
from benchmarks import quickstart

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
SHARED_PARSERS = {
    "image_benchmark_parser": lambda: common.image_benchmark_parser("a\n"),
}
# The scripts that build a parser from a shared one; not the file that
# defines it.
SCRIPTS = sorted(
    path
    for path in BENCHMARKS.glob("*.py")
    if any(f"{name}(" in path.read_text() for name in SHARED_PARSERS)
    and not any(f"def {name}(" in path.read_text() for name in SHARED_PARSERS)
)


def options(parser):
    return {
        option for action in parser._actions for option in action.option_strings
    }


def test_the_shared_parsers_are_found_in_scripts():
    # Guards the test below against a rename that would leave it nothing.
    assert len(SCRIPTS) >= 2


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.name)
def test_no_script_adds_a_flag_its_shared_parser_has(path):
    # argparse refuses a flag added twice when the parser is built, so
    # the script would stop before its first measurement, `--help` too.
    text = path.read_text()
    shared = set()
    for name, make in SHARED_PARSERS.items():
        if re.search(rf"\b{name}\(", text):
            shared |= options(make())
    own = set(re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", text))
    assert not own & shared, (
        f"{path.name} adds {sorted(own & shared)}, which its shared parser "
        "already has"
    )


@pytest.mark.parametrize("flag", ["--model", "--models"])
def test_the_image_benchmarks_take_a_model_flag_as_their_models(flag):
    # argparse takes `--model` for a prefix of `--models`: it must pick the
    # driver's models, not set the workers' own model, which the driver
    # ignores (the run would measure gMLP-Ti).
    parser = common.image_benchmark_parser("a\n")
    args = parser.parse_args([flag, "gmlp_s16_224"])
    assert args.models == ["gmlp_s16_224"]
    worker = parser.parse_args(["--worker-model", "gmlp_s16_224"])
    assert worker.model == "gmlp_s16_224"


@pytest.mark.parametrize(
    "form, expected",
    [
        ("jax", ("jax", {})),
        ("jax:KERAS_GMLP_JAX_DRAWS=0", ("jax", {"KERAS_GMLP_JAX_DRAWS": "0"})),
        ("torch:A=1,B=x=y", ("torch", {"A": "1", "B": "x=y"})),
    ],
)
def test_a_quickstart_form_names_its_backend_and_variables(form, expected):
    assert quickstart.parse_form(form) == expected


def test_a_quickstart_form_without_a_value_is_refused():
    with pytest.raises(ValueError, match="NAME=VALUE.*'KERAS_GMLP_JAX_DRAWS'"):
        quickstart.parse_form("jax:KERAS_GMLP_JAX_DRAWS")
