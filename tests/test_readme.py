"""The Python examples of README.md and docs/ run as written.

Each fenced `python` block runs in a fresh namespace in a temporary
folder, unless the line before its fence is `<!-- not run: REASON -->`
(a block that needs the network).
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^([^\n]*\n)?```python\n(.*?)```", re.MULTILINE | re.DOTALL)


def python_blocks():
    for document in DOCUMENTS:
        text = document.read_text()
        for match in FENCE.finditer(text):
            before, code = match.group(1) or "", match.group(2)
            if before.startswith("<!-- not run"):
                continue
            line = text[: match.start(2)].count("\n") + 1
            name = f"{document.relative_to(ROOT)}:{line}"
            yield pytest.param(code, id=name)


def test_the_documents_have_examples_to_run():
    assert len(list(python_blocks())) >= 3


@pytest.mark.one_backend("jax")
@pytest.mark.parametrize("code", list(python_blocks()))
def test_a_documented_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "<example>", "exec"), {"__name__": "__example__"})
