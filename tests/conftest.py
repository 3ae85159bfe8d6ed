import importlib.util
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

# TFX installs on the primary stack only; elsewhere its tests are not even collected.
# tests/reliability/test_tfx_*.py likewise.
HAS_TFX = importlib.util.find_spec("tfx") is not None
collect_ignore = [] if HAS_TFX else ["components"]
collect_ignore_glob = [] if HAS_TFX else ["reliability/test_tfx_*.py"]


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: slower end-to-end test on real data (still runs in CI)")
    config.addinivalue_line("markers", "tfx: needs the primary stack (TFX 1.16); tests under tests/components get it")


@pytest.fixture(scope="session")
def data_root():
    """The shared datasets: $TFSEQREC_DATA, else ../shared/data beside the repo.

    Missing data skips the test on a workstation but fails it in CI, where the data
    is always present and a skip would hide a broken path.
    """
    root = pathlib.Path(os.environ.get("TFSEQREC_DATA", REPO.parent / "shared" / "data"))
    if not root.is_dir():
        message = f"dataset folder {root} not found (set TFSEQREC_DATA)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return root


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = str(item.fspath).replace("\\", "/")
        if "tests/components/" in path or "tests/reliability/test_tfx_" in path:
            item.add_marker(pytest.mark.tfx)
