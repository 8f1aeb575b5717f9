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
