"""Checks on the source itself that ruff's stable rules do not make."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE_FOLDERS = ("keras_gmlp", "recipes", "benchmarks", "tests")
TERMINATORS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def source_files():
    for folder in SOURCE_FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.py"))


def unreachable_statements(tree):
    """Yields `(line, terminator line)` of statements after a terminator.

    A statement that follows a `return`, `raise`, `continue` or `break` in
    the same block can never run.
    """
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for before, after in zip(block, block[1:], strict=False):
                if isinstance(before, TERMINATORS):
                    yield after.lineno, before.lineno


def test_unreachable_statements_are_found():
    code = "def f():\n    return 1\n    x = 2\n"
    assert list(unreachable_statements(ast.parse(code))) == [(3, 2)]
    code = "for i in x:\n    if i:\n        continue\n    y = i\n"
    assert list(unreachable_statements(ast.parse(code))) == []


@pytest.mark.parametrize(
    "path", list(source_files()), ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_unreachable_code(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    found = [
        f"{path.relative_to(ROOT)}:{line} follows the terminator on line "
        f"{terminator}"
        for line, terminator in unreachable_statements(tree)
    ]
    assert not found, "unreachable code:\n" + "\n".join(found)


# What each part of the package may not import (keras_gmlp.<part>): the
# layers know nothing above them; models build on layers, optimizers and
# kernels, and the timm converter, the baselines and the jobs build on
# models, never the reverse.
FORBIDDEN_IMPORTS = {
    "layers": (
        "baselines",
        "cli",
        "convert",
        "data",
        "models",
        "optimizers",
        "training",
        "workflows",
    ),
    "models": ("baselines", "cli", "convert", "data", "training", "workflows"),
    "optimizers": ("cli", "models", "training", "workflows"),
    "kernels": ("cli", "models", "workflows"),
}


def imported_modules(tree):
    """Yields `(line, module)` of every import in `tree`, nested ones too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def test_imports_are_found_nested_and_by_name():
    code = "def f():\n    from keras_gmlp import training\n"
    assert (2, "keras_gmlp.training") in imported_modules(ast.parse(code))


@pytest.mark.parametrize("part", sorted(FORBIDDEN_IMPORTS))
def test_each_part_imports_only_what_it_builds_on(part):
    forbidden = tuple(f"keras_gmlp.{name}" for name in FORBIDDEN_IMPORTS[part])
    forbidden += ("recipes", "benchmarks")
    found = []
    for path in sorted((ROOT / "keras_gmlp" / part).rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, module in imported_modules(tree):
            if any(
                module == f or module.startswith(f"{f}.") for f in forbidden
            ):
                found.append(f"{path.relative_to(ROOT)}:{line} {module}")
    assert found == []


# Backend-specific code is the kernels' (and the preprocessors', which
# feed tf.data): the layers and models are plain Keras ops.
PREPROCESSING = (
    "models/gmlp_image/gmlp_image_converter.py",
    "models/gmlp_text/gmlp_tokenizer.py",
)
BACKENDS = ("jax", "tensorflow", "torch")
HAND_WRITTEN_GRADIENTS = ("custom_gradient", "custom_vjp", "Function")


def backend_specific_code(source):
    """Yields `line what` for each backend check, backend import or
    hand-written gradient in the Python `source`."""
    tree = ast.parse(source)
    for line, module in imported_modules(tree):
        if module.split(".")[0] in BACKENDS or module.startswith("keras.src"):
            yield f"{line} import {module}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr == "backend" and ast.unparse(node.value) in (
                "keras.config",
                "keras.backend",
            ):
                yield f"{node.lineno} {ast.unparse(node)}"
            if node.attr in HAND_WRITTEN_GRADIENTS:
                yield f"{node.lineno} {ast.unparse(node)}"


def test_backend_specific_code_is_found():
    code = (
        "import keras\nimport jax\n"
        "def f():\n    return keras.config.backend() == 'jax'\n"
    )
    assert list(backend_specific_code(code)) == [
        "2 import jax",
        "4 keras.config.backend",
    ]


@pytest.mark.parametrize("part", ["layers", "models"])
def test_layers_and_models_are_plain_keras(part):
    found = []
    for path in sorted((ROOT / "keras_gmlp" / part).rglob("*.py")):
        relative = path.relative_to(ROOT / "keras_gmlp").as_posix()
        if relative in PREPROCESSING:
            continue
        found += [
            f"{relative}:{what}"
            for what in backend_specific_code(path.read_text())
        ]
    assert found == []
