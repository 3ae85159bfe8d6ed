"""Beyond-accuracy metrics against a hand-computed case and a plain-Python oracle."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.test_ranking import oracle_rank, oracle_top_k
from tfseqrec import beyond_accuracy, block_ranking, evaluation
from tfseqrec.data import pipeline, splits, vocab
from tfseqrec.models import SASRec
from tfseqrec.ranking import PAD_COLUMN

R = vocab.NUM_RESERVED

tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="evaluate ranks with TensorFlow"
)


def _hand_case():
    # Training: user a had columns 0, 0, 1; user b had 0, 2; column 3 was never trained on.
    train = splits.Sequences.from_list(["a", "b"], [[R, R, R + 1], [R, R + 2]])
    popularity = beyond_accuracy.ItemPopularity.of(train, 4)
    lists = np.array([[1, 0], [3, PAD_COLUMN]])  # case 1 recommends columns 1, 0; case 2 only 3
    targets = np.array([R + 1, R + 3])
    return popularity, lists, targets


def test_item_popularity_counts_events_users_and_ranks():
    popularity, _, _ = _hand_case()
    assert popularity.events.tolist() == [3, 1, 1, 0]
    assert popularity.users.tolist() == [2, 1, 1, 0]
    assert popularity.num_users == 2
    assert popularity.rank().tolist() == [1, 2, 2, 0]  # ties share; never trained on: 0
    # 5 events: column 0 holds the first three fifths (head), 1 and 2 what follows.
    assert popularity.groups().tolist() == [0, 1, 2, 2]


def test_hand_computed_case():
    popularity, lists, targets = _hand_case()
    vectors = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
    metric = beyond_accuracy.BeyondAccuracy((1, 2), popularity, beyond_accuracy.METRICS, vectors)
    metric.update(lists, targets)
    out = metric.result(beyond_accuracy.target_popularity(popularity, targets))
    assert out["coverage@1"] == 0.5 and out["coverage@2"] == 0.75  # {1, 3}; {0, 1, 3} of 4
    assert out["arp@1"] == 0.5 and out["arp@2"] == 1.0  # (1 + 0) / 2; ((1 + 3) / 2 + 0) / 2
    assert out["arp_ratio@2"] == 2.0  # targets' mean count (1 + 0) / 2
    # Self-information: column 0 -log2(2/2) = 0, column 1 -log2(1/2) = 1, column 3 (no user: 1) 1.
    assert out["novelty@1"] == 1.0 and out["novelty@2"] == 0.75
    # n = 4: case 1, target at rank 1: p = 1, pu(column 1) = (5 - 2) / 4 -> 0.25, over 2 slots;
    # case 2, rank 1: p = 1, pu = 0 (never trained on) -> 1, over 1 slot.
    assert out["serendipity@1"] == 0.625 and out["serendipity@2"] == pytest.approx(0.5625)
    # Case 1's pair: 1 - cos([1, 1], [1, 0]); case 2 has no pair.
    assert out["diversity@2"] == pytest.approx(1 - 1 / math.sqrt(2))
    assert "diversity@1" not in out


def _oracle(lists, targets, train_lists, num_items, vectors, k):
    """Every metric from its definition, one case at a time."""
    events = [0] * num_items
    users = [set() for _ in range(num_items)]
    for user, history in enumerate(train_lists):
        for item in history:
            events[item - R] += 1
            users[item - R].add(user)
    distinct = sorted({e for e in events if e > 0}, reverse=True)
    out = {"arp": [], "novelty": [], "serendipity": [], "diversity": []}
    recommended = set()
    for row, target in zip(lists, targets):
        items = [c for c in row[:k] if c != PAD_COLUMN]
        if not items:
            continue
        recommended.update(items)
        out["arp"].append(sum(events[c] for c in items) / len(items))
        num_users = sum(1 for h in train_lists if h)
        out["novelty"].append(sum(-math.log2(max(len(users[c]), 1) / num_users) for c in items) / len(items))
        gain = 0.0
        for rank, c in enumerate(items, start=1):
            pu = (num_items + 1 - (distinct.index(events[c]) + 1)) / num_items if events[c] else 0.0
            gain += max((num_items + 1 - rank) / num_items - pu, 0.0) * (c == target - R)
        out["serendipity"].append(gain / len(items))
        pairs = [(a, b) for i, a in enumerate(items) for b in items[i + 1 :]]
        if pairs:
            cos = [
                np.dot(vectors[a], vectors[b]) / (np.linalg.norm(vectors[a]) * np.linalg.norm(vectors[b]))
                for a, b in pairs
            ]
            out["diversity"].append(sum(1 - c for c in cos) / len(pairs))
    means = {f"{name}@{k}": float(np.mean(v)) for name, v in out.items()}
    means[f"coverage@{k}"] = len(recommended) / num_items
    target_events = np.mean([events[t - R] for t in targets])
    means[f"arp_ratio@{k}"] = means[f"arp@{k}"] / target_events
    return means


@tensorflow_only
@pytest.mark.parametrize("factored", [False, True])
def test_evaluate_equals_the_oracle_of_its_own_top_k(factored):
    # A SASRec (ranked a block at a time, its lists from the same pass) or its score matrix
    # given as a table: evaluate's beyond-accuracy metrics must be the oracle's on the
    # oracle's top-k lists of the same scores, and its accuracy the oracle's ranks'.
    rng = np.random.default_rng(3)
    num_items, n, k = 12, 40, 5
    train_lists = [list(rng.integers(R, R + num_items - 2, size=rng.integers(1, 8))) for _ in range(30)]
    histories = [list(rng.integers(R, R + num_items, size=rng.integers(1, 6))) for _ in range(n)]
    targets = rng.integers(R, R + num_items, size=n)
    cases = splits.Cases(splits.Sequences.from_list(range(n), histories), targets)
    keras.utils.set_random_seed(0)
    model = SASRec(num_items=num_items, max_sequence_length=4, hidden_dim=8, num_layers=1)
    scores = model.score(pipeline.pad_left(cases.histories, 4)).numpy()
    vectors = rng.integers(0, 2, size=(num_items, 4)).astype(np.float64) + 0.1
    popularity = beyond_accuracy.ItemPopularity.of(
        splits.Sequences.from_list(range(30), train_lists), num_items
    )
    out = evaluation.evaluate(
        model if factored else _Rows(scores),
        cases,
        ks=(k,),
        batch_size=16,
        progress=False,
        metrics="all",
        popularity=popularity,
        item_vectors=vectors,
    )
    lists = []
    for i in range(n):
        values, columns = oracle_top_k(scores[i], k, histories[i])
        lists.append(np.where(np.isfinite(values), columns, PAD_COLUMN))
    for key, value in _oracle(lists, targets, train_lists, num_items, vectors, k).items():
        assert out[key] == pytest.approx(value, rel=1e-6), key
    ranks = [oracle_rank(scores[i], targets[i], histories[i]) for i in range(n)]
    assert out[f"ndcg@{k}"] == pytest.approx(np.mean([1 / math.log2(r + 2) if r < k else 0 for r in ranks]))
    short = [r for r, h in zip(ranks, histories) if len(h) < 5]
    assert out["by_history_length"]["1-4"]["cases"] == len(short)
    assert out["by_history_length"]["1-4"]["mrr"] == pytest.approx(np.mean([1 / (r + 1) for r in short]))
    groups = popularity.groups()
    tail = [r for r, t in zip(ranks, targets) if groups[t - R] == 2]
    assert out["by_target_popularity"]["tail"]["hr@5"] == pytest.approx(np.mean([r < 5 for r in tail]))
    assert sum(g["cases"] for g in out["by_target_popularity"].values()) == n


class _Rows:
    """A stand-in ranked on its score matrix: the rows of a fixed table, batch after batch."""

    max_sequence_length = 4
    uses_timestamps = False

    def __init__(self, scores):
        self.scores, self.num_items, self.start = scores, scores.shape[1], 0

    def score(self, window):
        rows = self.scores[self.start : self.start + len(window)]
        self.start += len(window)
        return rows


@tensorflow_only
def test_rank_and_top_k_in_one_pass_equal_the_oracles():
    rng = np.random.default_rng(5)
    num_items, batch = 11, 24
    query = rng.normal(size=(batch, 3)).astype(np.float32)
    table = rng.normal(size=(num_items, 3)).astype(np.float32)
    histories = [list(rng.integers(0, R + num_items, size=rng.integers(0, 5))) for _ in range(batch)]
    targets = rng.integers(R, R + num_items, size=batch)
    scores = (query.astype(np.float64) @ table.T.astype(np.float64)).astype(np.float32)
    ragged = tf.ragged.constant(histories, dtype="int64")
    for k, chunk in ((1, 1), (4, 3), (11, 4096)):
        ranks, (values, columns) = block_ranking.rank_and_top_k_by_query(
            query, table, targets, ragged, None, k, chunk_items=chunk
        )
        for row in range(batch):
            assert int(ranks[row]) == oracle_rank(scores[row], targets[row], histories[row])
            want_values, want_columns = oracle_top_k(scores[row], k, histories[row])
            finite = np.isfinite(want_values)
            assert np.asarray(columns[row])[finite].tolist() == want_columns[finite].tolist()
            assert (np.asarray(columns[row])[~finite] == PAD_COLUMN).all()


def test_unknown_metric_and_missing_popularity_are_refused():
    popularity, _, _ = _hand_case()
    with pytest.raises(ValueError, match="unknown metrics"):
        beyond_accuracy.BeyondAccuracy((10,), popularity, ["coverage", "fame"])
    with pytest.raises(ValueError, match="need popularity"):
        evaluation._chosen_metrics(["coverage"], None)
    assert evaluation._chosen_metrics(["accuracy"], None) == set()
    assert evaluation._chosen_metrics("coverage, novelty", popularity) == {"coverage", "novelty"}
    assert evaluation._chosen_metrics("all", popularity) == set(beyond_accuracy.METRICS)
