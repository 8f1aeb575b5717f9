"""The recipes are thin entries into the library, and nothing imports them.

The check anyone can run by hand: `wc -l recipes/*.py` (each at most 200
lines) and `grep -rn "recipes" --include=*.py keras_gmlp benchmarks tests`.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUTSIDE_RECIPES = ("keras_gmlp", "benchmarks", "tests")
MAX_RECIPE_LINES = 200
# Ways to run a file's code without an import statement.
FILE_LOADERS = ("spec_from_file_location", "run_path", "SourceFileLoader")


def recipe_imports(tree):
    """Yields `(line, what)` for each way `tree` loads code of `recipes`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "recipes":
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] == "recipes":
                yield node.lineno, f"from {node.module} import ..."
        elif isinstance(node, ast.Call):
            function = node.func
            name = getattr(function, "attr", getattr(function, "id", ""))
            if name in FILE_LOADERS or (
                name == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and str(node.args[0].value).startswith("recipes")
            ):
                yield node.lineno, f"{name}(...)"


def test_the_check_finds_recipe_imports():
    code = (
        "import recipes.masked_lm\n"
        "from recipes import image_classification\n"
        "import importlib\n"
        "importlib.import_module('recipes.masked_lm')\n"
        "spec = importlib.util.spec_from_file_location('m', 'recipes/m.py')\n"
        "import recipes_of_grandma\n"
    )
    found = [line for line, _ in recipe_imports(ast.parse(code))]
    assert found == [1, 2, 4, 5]


@pytest.mark.parametrize(
    "path",
    sorted(
        path
        for folder in OUTSIDE_RECIPES
        for path in (ROOT / folder).rglob("*.py")
    ),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_nothing_outside_recipes_imports_them(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    found = [f"line {line}: {what}" for line, what in recipe_imports(tree)]
    assert not found, f"{path.relative_to(ROOT)} loads recipe code: {found}"


def test_recipes_are_short_scripts():
    recipes = sorted((ROOT / "recipes").glob("*.py"))
    assert recipes, "no recipe found"
    assert not (ROOT / "recipes" / "__init__.py").exists()
    for path in recipes:
        lines = len(path.read_text().splitlines())
        assert lines <= MAX_RECIPE_LINES, f"{path.name}: {lines} lines"
