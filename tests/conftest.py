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
    config.addinivalue_line(
        "markers", "tfx: needs the primary stack (TFX 1.16); tests under tests/components get it"
    )
    config.addinivalue_line(
        "markers",
        "primary: a long end-to-end run through code that is the same on both stacks; it runs on "
        "the primary stack only (the latest stack runs the unit and oracle tests: the Makefile's LATEST_TESTS)",
    )


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


COLOURS = ["red", "blue", "green", "black", "white"]
THINGS = ["pipette", "beaker", "flask", "magnet", "scale", "funnel"]


def _item(i):
    return {
        "title": f"{COLOURS[i % 5]} {THINGS[i % 6]} {i}",
        "brand": ["acme", "lab co"][i % 2],
        "categories": "Industrial & Scientific,Lab," + THINGS[i % 6],
    }


@pytest.fixture(scope="session")
def data(tmp_path_factory):
    """A tiny text dataset: 30 users over items 0..19 (walks of +1 or +2), item text for 0..19.

    ``Tiny.inter.json``, ``Tiny.item.json``, and ``New.item.json`` (a new item 20 and a
    known one, 3). Shared by the text models' tests.
    """
    import json

    root = tmp_path_factory.mktemp("text_data")
    users = {}
    for u in range(30):
        start, step = u % 20, 1 + u % 2
        users[str(u)] = [(start + step * t) % 20 for t in range(6)]
    (root / "Tiny.inter.json").write_text(json.dumps(users))
    (root / "Tiny.item.json").write_text(json.dumps({str(i): _item(i) for i in range(20)}))
    (root / "New.item.json").write_text(json.dumps({"20": _item(20), "3": _item(3)}))
    return root


# The longest test files, longest first (a CI run's --durations, 2026-12-07): with pytest-xdist's
# --dist loadfile a worker takes the next file in collection order when it is free, so a long
# file collected last would leave the other worker idle while it runs.
LONGEST_FIRST = (
    "tests/backends/test_jax.py",
    "tests/test_recformer_training.py",
    "tests/backends/test_gpu_script.py",
    "tests/components/test_trainer_and_evaluator.py",
    "tests/test_cli.py",
    "tests/test_training.py",
    "tests/components/test_pipeline.py",
    "tests/models/test_models.py",
    "tests/reliability/test_training_faults.py",
    "tests/test_event_context.py",
    "tests/test_pretrain.py",
    "tests/test_unisrec_training.py",
    "tests/test_export.py",
    "tests/test_item_features.py",
    "tests/test_docs.py",
    "tests/backends/test_recformer_on_jax.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = str(item.fspath).replace("\\", "/")
        if "tests/components/" in path or "tests/reliability/test_tfx_" in path:
            item.add_marker(pytest.mark.tfx)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def file_rank(item):
        path = pathlib.Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
        return rank.get(path, len(rank))

    items[:] = sorted(items, key=file_rank)  # stable: a file's tests keep their order
