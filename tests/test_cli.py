"""The ``tfseqrec`` console script, run as users run it (a subprocess)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from tfseqrec.data import tfrecord


def _tfseqrec(*args, check=True):
    exe = shutil.which("tfseqrec", path=os.path.dirname(sys.executable)) or shutil.which("tfseqrec")
    result = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"tfseqrec {args} failed ({result.returncode}):\n{result.stderr}")
    return result


@pytest.mark.parametrize(
    "relative, users, items, interactions",
    [
        ("ml-1m/ml-1m.txt", 6040, 3416, 999_611),
        ("ml-1m/ml-1m_full_sequences.txt.gz", 6040, 3706, 1_000_209),
        ("ml-100k", 943, 1682, 100_000),
        ("amazon-scientific-text", 8317, 4344, 58_492),
    ],
)
def test_data_stats_every_shared_dataset(data_root, relative, users, items, interactions):
    out = json.loads(_tfseqrec("data", "stats", data_root / relative, "--json").stdout)
    assert (out["num_users"], out["num_items"], out["num_interactions"]) == (users, items, interactions)
    splits = out["splits"]
    assert splits["test_cases"] == splits["valid_cases"] == users
    assert splits["train_interactions"] == interactions - 2 * users


def test_data_stats_k_core_reports_removals(data_root):
    out = json.loads(
        _tfseqrec("data", "stats", data_root / "ml-100k", "--min-item-interactions", 20, "--json").stdout
    )
    removed = out["removed"]
    assert removed["removed_items"] > 0 and removed["removed_interactions"] > 0
    assert out["num_interactions"] + removed["removed_interactions"] == 100_000


def test_data_stats_csv_with_named_columns(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("uid,iid,ts\na,x,3\na,y,1\na,z,2\nb,x,1\n")
    out = json.loads(
        _tfseqrec("data", "stats", path, "--user-col", "uid", "--item-col", "iid", "--time-col", "ts", "--json").stdout
    )
    assert out["num_users"] == 2 and out["splits"]["train_only_users"] == 1


def test_bad_input_exits_1_naming_file_and_line(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("user_id,item_id,timestamp\na,x,1\na,y,later\n")
    result = _tfseqrec("data", "stats", path, check=False)
    assert result.returncode == 1
    assert f"{path}:3: column 'timestamp'" in result.stderr
    missing = _tfseqrec("data", "stats", tmp_path / "nope.txt", check=False)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_data_tfrecord_round_trip(data_root, tmp_path):
    out = json.loads(_tfseqrec("data", "tfrecord", data_root / "ml-100k", "--output", tmp_path).stdout)
    assert out["records"] == {"train": 943, "valid": 943, "test": 943}
    test = tfrecord.read_examples(tmp_path / "test.tfrecord.gz", compression="GZIP")
    assert len(test) == 943
    assert test.histories.num_events == 100_000 - 943  # every event but each user's last
