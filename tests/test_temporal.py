"""The temporal split through the command line: train, evaluate, and what training may see."""

import datetime
import json

import pytest

from tests.test_cli import _tfseqrec

TINY = ["--epochs", "1", "--hidden-dim", "8", "--num-heads", "1", "--num-layers", "1", "--quiet"]


def _seconds(day):
    return datetime.datetime.fromisoformat(day).replace(tzinfo=datetime.timezone.utc).timestamp()


@pytest.fixture(scope="module")
def temporal_run(data_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("temporal") / "model"
    done = _tfseqrec(
        "train", "--data", data_root / "ml-100k", "--split", "temporal", "--test-start", "1998-03-01",
        "--valid-start", "1998-02-01", "--output", out, *TINY,
    )  # fmt: skip
    return out, json.loads(done.stdout)


def test_training_sees_only_the_events_before_the_validation_period(data_root, temporal_run):
    out, _ = temporal_run
    recorded = json.loads((out / "train_config.json").read_text())
    config, report = recorded["config"], recorded["report"]
    assert (config["split"], config["test_start"]) == ("temporal", _seconds("1998-03-01"))
    # Counted from the raw file, apart from the library: events before 1998-02-01, and the test period's.
    stamps = [
        int(line.split("\t")[3]) for line in (data_root / "ml-100k" / "u.data").read_text().splitlines()
    ]
    assert report["train_interactions"] == sum(t < _seconds("1998-02-01") for t in stamps)
    assert report["test_events"] == sum(t >= _seconds("1998-03-01") for t in stamps)


def test_evaluate_splits_as_training_did(data_root, temporal_run):
    out, trained = temporal_run
    result = json.loads(_tfseqrec("evaluate", "--model-dir", out, "--data", data_root / "ml-100k").stdout)
    assert result["ndcg@10"] == pytest.approx(trained["ndcg@10"])
    assert result["temporal"]["test_start"] == _seconds("1998-03-01")
    assert result["temporal"]["test_users"] > result["temporal"]["test_users_without_history"] > 0
    first = json.loads(
        _tfseqrec(
            "evaluate", "--model-dir", out, "--data", data_root / "ml-100k", "--targets", "first"
        ).stdout
    )
    assert first["num_users"] < result["num_users"]  # one case a user instead of one an event


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--split", "temporal", "--test-start", "2001-01-01"], "test_start 2001-01-01T00:00:00Z"),
        (["--split", "temporal"], "split 'temporal' needs test_start"),
        (["--test-start", "yesterday"], "argument --test-start"),
    ],
)
def test_bad_split_options_are_refused(data_root, tmp_path, flags, message):
    done = _tfseqrec(
        "train", "--data", data_root / "ml-100k", "--output", tmp_path / "m", *flags, *TINY, check=False
    )
    assert done.returncode in (1, 2) and message in done.stderr, done.stderr
    assert not (tmp_path / "m").exists()


def test_a_log_without_times_cannot_be_split_in_time(data_root, tmp_path):
    done = _tfseqrec(
        "train", "--data", data_root / "ml-1m" / "ml-1m.txt", "--split", "temporal", "--test-start", "100",
        "--output", tmp_path / "m", *TINY, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "the temporal split needs event times" in done.stderr


def test_data_stats_counts_each_period(data_root):
    stats = json.loads(
        _tfseqrec(
            "data", "stats", data_root / "ml-100k", "--split", "temporal", "--test-start", "1998-03-01",
            "--valid-start", "1998-02-01", "--json",
        ).stdout
    )  # fmt: skip
    # The oracle: the raw file in plain Python.
    events = [line.split("\t") for line in (data_root / "ml-100k" / "u.data").read_text().splitlines()]
    valid, test = _seconds("1998-02-01"), _seconds("1998-03-01")
    first_seen = {}
    for _, item, _, stamp in sorted(events, key=lambda e: int(e[3])):
        first_seen.setdefault(item, int(stamp))
    users_before = {user for user, _, _, stamp in events if int(stamp) < test}
    test_users = {user for user, _, _, stamp in events if int(stamp) >= test}
    assert stats["periods"]["test"] == {
        "start": test,
        "events": sum(int(e[3]) >= test for e in events),
        "users": len(test_users),
        "users_without_history": len(test_users - users_before),
        "new_items": sum(t >= test for t in first_seen.values()),
    }
    assert stats["periods"]["valid"]["events"] == sum(valid <= int(e[3]) < test for e in events)
    assert stats["periods"]["valid"]["new_items"] == sum(valid <= t < test for t in first_seen.values())
