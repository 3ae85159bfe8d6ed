"""Examples in the README and in docstrings run as written."""

import doctest
import importlib
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def _python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


def test_readme_python_examples_run(data_root, monkeypatch, capsys):
    monkeypatch.setenv("TFSEQREC_DATA", str(data_root))
    blocks = _python_blocks(REPO / "README.md")
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
        # Each print in the examples states its expected output in a trailing comment.
        printed = capsys.readouterr().out.split("\n")
        expected = [m.strip() for m in re.findall(r"print\(.*\)\s*#\s*(.*)", block)]
        assert [line.strip() for line in printed if line.strip()] == expected


def _modules_with_examples():
    """Every package module whose source holds a ``>>>`` example."""
    modules = []
    for path in sorted((REPO / "tfseqrec").rglob("*.py")):
        if ">>>" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_examples_are_found():
    assert {"tfseqrec.kinds", "tfseqrec.losses", "tfseqrec.models.recformer.tasks"} <= set(
        _modules_with_examples()
    )


@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
