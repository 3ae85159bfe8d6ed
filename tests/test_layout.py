"""The package's shape: short functions, and the model kind decided only in ``tfseqrec.kinds``."""

import ast
import pathlib

import pytest

from tfseqrec import kinds

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.joinpath("tfseqrec").rglob("*.py"), *ROOT.joinpath("components").rglob("*.py")])
MAX_FUNCTION_LINES = 60


def _tree(path):
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_sources_were_found():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"tfseqrec/kinds.py", "tfseqrec/cli.py", "components/trainer_module.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_function_is_longer_than_60_lines(path):
    long = [
        f"{node.name} (line {node.lineno}): {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(_tree(path))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{path.name}: {long}"


def _kind_tests(tree):
    """Comparisons with a kind's name, and duck-typing on attributes that tell kinds apart."""
    names = set(kinds.KINDS)
    found = []
    for node in ast.walk(tree):
        # "sasrec" is also a file format (readers: the SASRec repository's ml-1m.txt).
        if isinstance(node, ast.Compare) and getattr(node.left, "id", None) != "format":
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in names for o in operands):
                found.append(f"line {node.lineno}: compares with a model name")
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("hasattr", "getattr"):
            args = node.args
            if (
                len(args) >= 2
                and isinstance(args[1], ast.Constant)
                and args[1].value in ("tokenizer", "masking")
            ):
                found.append(f"line {node.lineno}: {node.func.id}(..., {args[1].value!r})")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_only_the_registry_tells_model_kinds_apart(path):
    if path.name == "kinds.py":
        return
    assert not _kind_tests(_tree(path)), f"{path.name}: {_kind_tests(_tree(path))}"


def test_the_kind_check_finds_what_it_forbids():
    tree = ast.parse('if args.model == "recformer": pass\nx = hasattr(model, "tokenizer")\n')
    assert len(_kind_tests(tree)) == 2
