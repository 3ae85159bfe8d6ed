"""Every user to a file (``tfseqrec.bulk``, ``tfseqrec recommend --histories``): the top-k against a
NumPy ranking of the model's scores, both output forms, resuming a killed run, and the command line."""

import csv
import json

import numpy as np
import pyarrow.parquet
import pytest

from tests.test_cli import _tfseqrec
from tfseqrec import bulk
from tfseqrec.data import ItemVocabulary, readers, vocab
from tfseqrec.models import SASRec

ITEMS = [f"i{n}" for n in range(12)]
HISTORIES = [
    bulk.History("u1", ["i1", "i2", "i3"]),
    bulk.History("u2", ["i5"]),
    bulk.History("u3", ["nope"]),  # nothing known: the most popular items
    bulk.History("u4", ["i3", "nope", "i7", "i3"]),
    bulk.History("u5", ["i0", "i11"]),
]


@pytest.fixture(scope="module")
def model_and_vocabulary():
    vocabulary = ItemVocabulary(ITEMS, list(range(12, 0, -1)))
    return SASRec(num_items=12, max_sequence_length=4, hidden_dim=8, num_layers=1), vocabulary


def oracle(model, vocabulary, history, k, excluded=()):
    """The top-k by NumPy: the model's scores of the known items' window, the history and
    ``excluded`` removed, ties by column; popularity for a history with nothing known."""
    ids = [int(i) for i in vocabulary.lookup(history.items) if i != vocab.OOV_ID]
    if ids:
        window = np.zeros((1, model.max_sequence_length), np.int32)
        newest = ids[-model.max_sequence_length :]
        window[0, -len(newest) :] = newest
        scores = np.asarray(model.score(window))[0].astype(np.float64)
    else:
        scores = vocabulary.popularity().astype(np.float64)
    out = [c + vocab.NUM_RESERVED for c in np.argsort(-scores, kind="stable")]
    out = [i for i in out if i not in ids and vocabulary.to_raw([i])[0] not in excluded]
    return vocabulary.to_raw(out[:k])


def test_jsonl_holds_each_users_top_k_without_history_or_excluded_items(model_and_vocabulary, tmp_path):
    model, vocabulary = model_and_vocabulary
    out = tmp_path / "recs.jsonl"
    done = bulk.recommend_file(
        model, vocabulary, HISTORIES, out, k=3, exclude=["i0", "unknown"], batch_size=2
    )
    assert done == {"output": str(out), "users": 5, "resumed_users": 0, "excluded_items": 1}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["user_id"] for r in rows] == ["u1", "u2", "u3", "u4", "u5"]
    for history, row in zip(HISTORIES, rows):
        assert row["item_ids"] == oracle(model, vocabulary, history, 3, {"i0"}), history.user_id
        assert row["scores"] == sorted(row["scores"], reverse=True)


def test_csv_has_a_row_per_recommendation_ranked_from_one(model_and_vocabulary, tmp_path):
    model, vocabulary = model_and_vocabulary
    out = tmp_path / "recs.csv"
    bulk.recommend_file(model, vocabulary, HISTORIES[:2], out, k=2)
    with open(out, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["user_id", "rank", "item_id", "score"]
    assert [r[:2] for r in rows[1:]] == [["u1", "1"], ["u1", "2"], ["u2", "1"], ["u2", "2"]]
    assert [r[2] for r in rows[1:3]] == oracle(model, vocabulary, HISTORIES[0], 2)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_killed_run_resumes_to_the_same_file(model_and_vocabulary, tmp_path, suffix):
    model, vocabulary = model_and_vocabulary
    whole = tmp_path / f"whole{suffix}"
    bulk.recommend_file(model, vocabulary, HISTORIES, whole, k=3, batch_size=2)
    expected = whole.read_bytes()
    cut = tmp_path / f"cut{suffix}"
    # Killed inside a line: the fourth user's (jsonl), its second row (csv). The batch of the
    # last user written is redone: users 3 and 4.
    lines = expected.splitlines(keepends=True)
    keep = 4 if suffix == ".jsonl" else 1 + 3 * 3 + 2
    cut.write_bytes(b"".join(lines[: keep - 1]) + lines[keep - 1][:7])
    done = bulk.recommend_file(model, vocabulary, HISTORIES, cut, k=3, batch_size=2)
    assert cut.read_bytes() == expected
    assert done["users"] == 5 and done["resumed_users"] == 2
    # A finished file: the last batch is redone.
    again = bulk.recommend_file(model, vocabulary, HISTORIES, cut, k=3, batch_size=2)
    assert cut.read_bytes() == expected and again["resumed_users"] == 4


def test_a_log_gives_each_user_its_events_in_time_order(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("user_id,item_id,timestamp\nb,x,5\na,y,3\nb,z,1\na,y,3\n")
    histories = bulk.read_histories(log)
    assert histories.total == 2
    assert [(h.user_id, h.items, h.timestamps) for h in histories] == [
        ("b", ["z", "x"], [1, 5]),
        ("a", ["y"], [3]),
    ]
    lines = tmp_path / "histories.jsonl"
    lines.write_text('{"user_id": "u", "items": ["x", "y"]}\n\n{"items": ["x"]}\n')
    with pytest.raises(readers.DataError, match=r"histories.jsonl:3: expected"):
        list(bulk.read_histories(lines))


def test_bad_outputs_are_refused(model_and_vocabulary, tmp_path):
    model, vocabulary = model_and_vocabulary
    with pytest.raises(ValueError, match="ending in one of"):
        bulk.recommend_file(model, vocabulary, HISTORIES, tmp_path / "recs.txt")


def test_the_command_line_writes_every_user_of_a_log(data_root, tmp_path):
    model_dir = tmp_path / "model"
    _tfseqrec(
        "train", "--model", "sasrec", "--data", data_root / "ml-100k", "--output", model_dir, "--epochs", "1",
        "--hidden-dim", "8", "--num-layers", "1", "--max-sequence-length", "12", "--quiet",
    )  # fmt: skip
    exclude = tmp_path / "exclude.txt"
    exclude.write_text("50\n181\n")
    out = tmp_path / "recs.jsonl"
    done = _tfseqrec(
        "recommend", "--model-dir", model_dir, "--histories", data_root / "ml-100k" / "u.data", "--output", out,
        "--k", "5", "--exclude", exclude,
    )  # fmt: skip
    assert json.loads(done.stdout) == {
        "output": str(out),
        "users": 943,
        "resumed_users": 0,
        "excluded_items": 2,
    }
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 943 and all(len(r["item_ids"]) == 5 for r in rows)
    assert not {"50", "181"} & {i for r in rows for i in r["item_ids"]}
    # The first user's row is what `recommend --history` answers for that history.
    log = readers.read_interactions(data_root / "ml-100k" / "u.data")
    first = rows[0]["user_id"]
    order = np.argsort(log.timestamps[log.users == first], kind="stable")
    history = " ".join(log.items[log.users == first][order])
    single = _tfseqrec("recommend", "--model-dir", model_dir, "--history", history, "--k", "7", "--json")
    expected = [i for i in json.loads(single.stdout)["item_ids"] if i not in ("50", "181")][:5]
    assert rows[0]["item_ids"] == expected
    refused = _tfseqrec("recommend", "--model-dir", model_dir, "--histories", out, check=False)
    assert refused.returncode != 0 and "--histories needs --output" in refused.stderr


def test_parquet_is_written_in_parts_and_a_killed_run_goes_on_after_them(model_and_vocabulary, tmp_path):
    model, vocabulary = model_and_vocabulary
    whole = tmp_path / "whole.parquet"
    bulk.recommend_file(model, vocabulary, HISTORIES, whole, k=3, batch_size=2)
    expected = pyarrow.parquet.read_table(whole).to_pylist()
    assert [r["item_ids"] for r in expected] == [oracle(model, vocabulary, h, 3) for h in HISTORIES]

    def killed():  # the run dies while reading the fourth history: one part of two users is on disk
        for n, history in enumerate(HISTORIES):
            if n == 3:
                raise KeyboardInterrupt
            yield history

    out = tmp_path / "recs.parquet"
    with pytest.raises(KeyboardInterrupt):
        bulk.recommend_file(model, vocabulary, killed(), out, k=3, batch_size=2)
    assert not out.exists() and len(list((tmp_path / "recs.parquet.parts").iterdir())) == 1
    done = bulk.recommend_file(model, vocabulary, HISTORIES, out, k=3, batch_size=2)
    assert done["resumed_users"] == 2 and pyarrow.parquet.read_table(out).to_pylist() == expected
    assert not (tmp_path / "recs.parquet.parts").exists()
    with pytest.raises(FileExistsError, match="exists"):
        bulk.recommend_file(model, vocabulary, HISTORIES, out)
