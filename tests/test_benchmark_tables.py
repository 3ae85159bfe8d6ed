"""The committed benchmark tables are what ``benchmarks/tables.py`` prints from the stored runs (no training)."""

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")


def _tables():
    # tables.py imports its sibling scripts as a script run from benchmarks/ would.
    if BENCHMARKS not in sys.path:
        sys.path.append(BENCHMARKS)
    spec = importlib.util.spec_from_file_location("tables", os.path.join(BENCHMARKS, "tables.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_tables_equal_the_stored_runs():
    for path, wanted in _tables().outputs().items():
        name = os.path.relpath(path, ROOT)
        assert not isinstance(wanted, Exception), f"{name}: {wanted}"
        with open(path) as f:
            assert f.read() == wanted, f"{name} differs from its stored runs: run python benchmarks/tables.py"


def test_headline_row_and_markers_by_hand():
    tables = _tables()
    row = tables.headline_row(
        "BERT4Rec", "ML-1M", "sasrec-plus", "0.1537", 0.16434, 0.29316, 60.2, 3, ["a", "b"]
    )
    assert row == (
        "| BERT4Rec (mean of 3 seeds) | ML-1M | [`sasrec-plus`](benchmarks/README.md#protocols) | 0.1643 | "
        "0.2932 | 0.1537 | 60 | [a](benchmarks/results/a.json), [b](benchmarks/results/b.json) |"
    )
    replaced = tables.front_readme(f"intro\n{tables.BEGIN}\nold row\n{tables.END}\nrest\n").split("\n")
    assert replaced[:2] == ["intro", tables.BEGIN] and replaced[-3:] == [tables.END, "rest", ""]
    assert "old row" not in replaced
    with pytest.raises(ValueError, match="results-table:begin"):
        tables.front_readme("a README without the markers\n")
