"""Faults of a production loop, with real files: an export a server polls, a bulk run that fills
its disk, a warm start onto another catalogue or a log whose items were renamed. (Two ``train``
runs into one ``--output``: ``test_training_faults.test_a_second_run_into_the_same_output_at_once_is_refused``.)"""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.reliability.test_wrong_data_and_full_disk import _tmpfs
from tfseqrec import bulk, kinds, training
from tfseqrec.data import ItemVocabulary
from tfseqrec.models import SASRec

# Run on the primary stack only (CI time): file handling of the command line's own Python, the same on both stacks.
pytestmark = pytest.mark.primary

TINY = {"epochs": 1, "hidden_dim": 8, "num_layers": 1, "max_sequence_length": 8}


def _log(path, items):
    """A log of 60 users, 6 events each, over ``items``."""
    rng = np.random.default_rng(0)
    rows = ["user_id,item_id,timestamp"]
    rows += [f"u{u},{items[rng.integers(len(items))]},{t}" for u in range(60) for t in range(6)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("loop")
    data = _log(root / "log.csv", [f"i{n}" for n in range(20)])
    kinds.get("sasrec").train(data, root / "model", TINY, verbose=0)
    return root / "model"


def test_an_export_appears_whole_to_a_server_polling_its_base_path(trained, tmp_path):
    base = tmp_path / "served"
    export = subprocess.Popen(
        [sys.executable, "-m", "tfseqrec", "export", "--model-dir", str(trained), "--output", str(base)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    seen, polls = [], 0
    while export.poll() is None:  # as TF Serving's file system poller lists the base path
        polls += 1
        for name in os.listdir(base) if base.exists() else []:
            if name.isdigit():
                version = base / name
                seen.append(sorted(os.listdir(version)))
                assert (version / "saved_model.pb").exists() and (
                    version / "variables" / "variables.index"
                ).exists()
        time.sleep(0.01)
    assert export.returncode == 0, export.stderr.read().decode()
    final = sorted(os.listdir(base / "1"))
    assert polls > 10 and all(listing == final for listing in seen)  # never a version half there
    assert os.listdir(base) == ["1"]  # the hidden staging directory is gone


def test_a_full_disk_in_a_bulk_run_keeps_whole_batches_and_the_rerun_goes_on(tmp_path):
    vocabulary = ItemVocabulary([f"i{n}" for n in range(30)], list(range(30, 0, -1)))
    model = SASRec(num_items=30, max_sequence_length=4, hidden_dim=8, num_layers=1)
    histories = [bulk.History(f"user-{n:05d}", [f"i{n % 30}", f"i{(n * 7) % 30}"]) for n in range(1500)]
    whole = tmp_path / "whole.jsonl"
    bulk.recommend_file(model, vocabulary, histories, whole, k=10, batch_size=100)
    with _tmpfs(tmp_path / "disk", "64k") as disk:
        out = disk / "recs.jsonl"
        with pytest.raises(
            OSError, match=r"recs.jsonl: No space left on device after [\d,]+ users; the file holds"
        ):
            bulk.recommend_file(model, vocabulary, histories, out, k=10, batch_size=100)
        lines = out.read_bytes().splitlines(keepends=True)
        assert lines and len(lines) % 100 == 0  # whole batches only, each line whole
        assert b"".join(lines) == whole.read_bytes()[: len(b"".join(lines))]
        subprocess.run(["mount", "-o", "remount,size=2m", str(disk)], check=True)
        done = bulk.recommend_file(model, vocabulary, histories, out, k=10, batch_size=100)
        # The batch of the last user written is redone, as after a kill (its last line could be cut).
        assert done["resumed_users"] == len(lines) - 100 and out.read_bytes() == whole.read_bytes()


def test_a_warm_start_counts_renamed_items_and_refuses_another_catalogue(trained, tmp_path, capsys):
    renamed = [f"r{n}" for n in range(5)] + [f"i{n}" for n in range(5, 20)]  # i0..i4 renamed r0..r4
    grown = _log(tmp_path / "renamed.csv", renamed)
    training.train(kinds.get("sasrec"), grown, tmp_path / "m2", {"epochs": 1}, verbose=0, warm_start=trained)
    assert "warm start: 5 new items beside the trained 20; 5 trained items are not in this log" in (
        capsys.readouterr().err
    )
    with open(tmp_path / "m2" / "train_config.json") as f:
        record = json.load(f)
    assert record["warm_start"]["items"] == 5 and record["warm_start"]["vanished_items"] == 5
    other = _log(tmp_path / "other.csv", [f"x{n}" for n in range(20)])
    with pytest.raises(ValueError, match="include none of the trained model's 20"):
        training.train(
            kinds.get("sasrec"), other, tmp_path / "m3", {"epochs": 1}, verbose=0, warm_start=trained
        )
    assert not (tmp_path / "m3").exists()
