"""benchmarks/peers/side_by_side.py's steps that need no RecTools: a score matrix ranked by
tfseqrec's evaluation (against a NumPy oracle), and the fitted interactions it writes for
the runner."""

import json
import math
import os

import numpy as np
import pytest

from tests.test_case import benchmark_script
from tfseqrec import evaluation
from tfseqrec.data import splits, vocab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")


@pytest.fixture(scope="module")
def side_by_side():
    return benchmark_script("side_by_side", "peers/side_by_side.py")


R = vocab.NUM_RESERVED
# Three users over five items (vocabulary ids R..R+4, score columns 0..4).
HISTORIES = [[R + 0, R + 1, R + 2], [R + 3], [R + 4, R + 1]]
TARGETS = [R + 1, R + 4, R + 0]  # the first repeats a history item: it stays a candidate
SCORES = np.array(
    [
        [0.9, 0.5, 0.7, 0.5, 0.1],  # target column 1 ties with column 3
        [0.2, 0.3, 0.1, 0.9, 0.8],
        [0.4, 0.6, 0.4, 0.1, 0.9],  # target column 0 ties with column 2
    ],
    np.float32,
)


def _cases():
    return splits.Cases(splits.Sequences.from_list(["a", "b", "c"], HISTORIES), np.array(TARGETS))


def _oracle_ranks(exclude):
    """Rank by hand: other candidates scoring at least the target's, the excluded ones left out."""
    ranks = []
    for history, target, row in zip(exclude, TARGETS, SCORES):
        column = target - R
        out = {i - R for i in history} - {column}
        ranks.append(sum(1 for j, s in enumerate(row) if j != column and j not in out and s >= row[column]))
    return np.array(ranks)


def _oracle(ranks):
    return {
        "ndcg@10": float(np.mean([1 / math.log2(r + 2) for r in ranks])),
        "hr@10": float(np.mean(ranks < 10)),
        "mrr": float(np.mean(1 / (ranks + 1))),
    }


@pytest.mark.parametrize(
    "exclude_seen, excluded",
    [
        (True, HISTORIES),  # the whole history
        ("window", [h[-2:] for h in HISTORIES]),  # the last max_sequence_length=2 items
        (False, [[], [], []]),
    ],
)
def test_score_matrix_ranked_as_numpy_ranks_it(side_by_side, exclude_seen, excluded):
    got = side_by_side.rank(SCORES, _cases(), exclude_seen, max_sequence_length=2)
    want = _oracle(_oracle_ranks(excluded))
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-6), key
    assert got["num_users"] == 3


def test_hand_ranks_of_the_oracle():
    # Whole history: row 0 keeps columns 1 (target), 3, 4 -> column 3 ties -> rank 1; row 1 drops
    # column 3 -> rank 0; row 2 keeps 0, 2, 3 -> column 2 ties -> rank 1.
    assert _oracle_ranks(HISTORIES).tolist() == [1, 0, 1]


def test_score_rows_out_of_step_with_the_ranked_cases_fail(side_by_side):
    # Rows laid out for the cases in reverse order, ranked against the cases in order.
    rows = side_by_side.ScoreRows(SCORES[::-1].copy(), _cases().select([2, 1, 0]), max_sequence_length=2)
    with pytest.raises(ValueError, match="out of step"):
        evaluation.evaluate(rows, _cases(), ks=(10,), progress=False)


def test_fit_arrays_hold_each_test_history_and_mark_validation_users(side_by_side):
    # User a: 6 items (train 4, validation 1, test 1); user b: 2 items, too short to evaluate.
    train = splits.Sequences.from_list(["a", "b"], [[3, 4, 5, 6], [7, 8]])
    valid = splits.Cases(splits.Sequences.from_list(["a"], [[3, 4, 5, 6]]), np.array([9]))
    test = splits.Cases(splits.Sequences.from_list(["a"], [[3, 4, 5, 6, 9]]), np.array([10]))
    split = splits.Split(train, valid, test, {})

    class Vocabulary:
        num_items = 8

    fit = side_by_side.fit_arrays(split, Vocabulary, validates=True)
    assert fit["users"].tolist() == [0, 0, 0, 0, 0, 1, 1]
    assert fit["items"].tolist() == [3, 4, 5, 6, 9, 7, 8]
    assert fit["val_users"].tolist() == [0]
    assert fit["test_users"].tolist() == [0]
    assert int(fit["num_items"]) == 8 and int(fit["num_reserved"]) == vocab.NUM_RESERVED
    assert side_by_side.fit_arrays(split, Vocabulary, validates=False)["val_users"].tolist() == []


def test_minutes_to_98_percent_of_the_best_validation(side_by_side):
    # Best 0.2 at epoch 3 (3 minutes); 98% of it is 0.196, first reached at epoch 2.
    got = side_by_side.curve_summary([0.1, 0.197, 0.2, 0.18], [60.0, 120.0, 180.0, 240.0], validates=True)
    assert got == {
        "best_epoch": 3,
        "best_val_ndcg@10": 0.2,
        "minutes_to_best": 3.0,
        "minutes_to_98pct_of_best": 2.0,
    }
    # Without a validation split the last epoch is the model, and there is no curve.
    got = side_by_side.curve_summary([], [60.0, 90.0], validates=False)
    assert got["best_epoch"] == 2 and got["minutes_to_best"] == 1.5
    assert got["best_val_ndcg@10"] is None and got["minutes_to_98pct_of_best"] is None


def test_a_stored_record_is_joined_only_by_a_run_made_alike(side_by_side, tmp_path):
    stored = {"protocol": {"name": "rectools"}, "data": "d", "minutes": 30.0, "seed": 0}
    side_by_side.check_same_run(stored, dict(stored, models={}))
    with pytest.raises(ValueError, match="the stored record's minutes is 30.0, this run's 10.0"):
        side_by_side.check_same_run(stored, dict(stored, minutes=10.0))
    with pytest.raises(ValueError, match="the stored record's protocol"):
        side_by_side.check_same_run(stored, dict(stored, protocol={"name": "hstu-paper"}))
    # The anchor words a published figure; a record whose anchor was worded otherwise joins.
    worded = dict(stored, protocol={"name": "rectools", "anchor": "RecTools: 0.2164"})
    side_by_side.check_same_run(worded, dict(stored, protocol={"name": "rectools", "anchor": "0.1745"}))
    path = str(tmp_path / "peers-rectools.json")
    side_by_side.write_record({"models": {"sasrec": []}}, path)
    with open(path) as f:
        assert json.load(f) == {"models": {"sasrec": []}}
    assert not os.path.exists(path + ".partial")
