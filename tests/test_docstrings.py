"""Every `>>>` example in the package's docstrings runs as a doctest.

The examples see only `keras`, `keras_gmlp` and `np`, as a user who
copies one does. The default suite runs each example under one backend,
the backends taking the examples in turn (`-m large` runs every example
under every backend); the models' numerics are tested on each backend
elsewhere. An
example that cannot run here (it needs a download, a dataset or a
cluster) is a plain ```python block, not `>>>`.
"""

import doctest
import importlib
import inspect
import pkgutil
import re

import keras
import numpy as np
import pytest

import keras_gmlp
from tests.backends import BACKENDS

# A shape prints as a tuple under JAX and numpy, as `TensorShape([2, 3])`
# under TensorFlow and `torch.Size([2, 3])` under torch: the examples show
# the tuple, and the check reads the other two as tuples too.
BACKEND_SHAPE = re.compile(r"(?:TensorShape|torch\.Size)\(\[([^\]]*)\]\)")


def as_tuple(match):
    dimensions = [d.strip() for d in match.group(1).split(",") if d.strip()]
    if len(dimensions) == 1:
        return f"({dimensions[0]},)"
    return f"({', '.join(dimensions)})"


class ShapeChecker(doctest.OutputChecker):
    def check_output(self, want, got, optionflags):
        got = BACKEND_SHAPE.sub(as_tuple, got)
        return super().check_output(want, got, optionflags)


def package_modules():
    names = [keras_gmlp.__name__]
    for module in pkgutil.walk_packages(
        keras_gmlp.__path__, prefix=f"{keras_gmlp.__name__}."
    ):
        names.append(module.name)
    return sorted(names)


def examples():
    """Every docstring with examples: modules, classes, functions and
    methods, each found once (in the module that defines it)."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = []
    for name in package_modules():
        # An import failure fails the collection: nothing is left out.
        module = importlib.import_module(name)
        for test in finder.find(module, name):
            if test.examples:
                found.append(test)
    return sorted(found, key=lambda test: test.name)


EXAMPLES = examples()


def test_the_examples_are_found():
    names = {test.name for test in EXAMPLES}
    for expected in (
        "keras_gmlp.models.gmlp_text.masked_lm.masked_lm",
        "keras_gmlp.models.gmlp_text.causal_lm.causal_lm",
        "keras_gmlp.models.gmlp_text.text_classifier.text_classifier",
        "keras_gmlp.models.gmlp_image.image_classifier.image_classifier",
        "keras_gmlp.generation.generate",
        "keras_gmlp.optimizers.adamw",
        "keras_gmlp.layers.gmlp_block.GMLPBlock",
    ):
        assert expected in names


@pytest.mark.parametrize(
    "test",
    [
        pytest.param(
            test,
            id=test.name,
            marks=pytest.mark.one_backend(BACKENDS[index % len(BACKENDS)]),
        )
        for index, test in enumerate(EXAMPLES)
    ],
)
def test_docstring_example_runs(test, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes files writes here
    test.globs = {"keras": keras, "keras_gmlp": keras_gmlp, "np": np}
    runner = doctest.DocTestRunner(
        checker=ShapeChecker(),
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    output = []
    result = runner.run(test, out=output.append, clear_globs=True)
    assert result.failed == 0, "".join(output)


def public_objects():
    """Public classes and functions, each in the module that defines it."""
    for name in package_modules():
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if attribute.startswith("_"):
                continue
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            if getattr(value, "__module__", None) == name:
                yield f"{name}.{attribute}", value


def test_every_public_class_and_function_has_a_docstring():
    # A docstring built by concatenating strings is an expression: its
    # `__doc__` is `None` and its example never runs.
    missing = [name for name, value in public_objects() if not value.__doc__]
    assert not missing, missing
