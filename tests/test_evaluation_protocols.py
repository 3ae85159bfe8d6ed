"""Seen filtering as the protocols choose it: the whole history, the input window, or none.

``evaluate(exclude_seen="window")`` removes only the items of the model's input window
(the last ``max_sequence_length`` of the history), as the HSTU paper's protocol does;
``True`` the whole history. Checked against a hand-computed case and against the NumPy
oracle of ``tests/test_ranking.py`` on a model ranked block by block.
"""

import math

import keras
import numpy as np
import pytest

from tests.test_ranking import R, _FixedScores, oracle_metrics, oracle_rank
from tfseqrec import evaluation
from tfseqrec.data import pipeline, splits
from tfseqrec.models import SASRec

# Ids 3..8 (columns 0..5); _FixedScores reads a window of 2 items.
SCORES = [[0.9, 0.8, 0.7, 0.6, 0.5, 0.1]] * 2
HISTORY = [3, 4, 5]  # oldest first: the window is [4, 5]


@pytest.mark.parametrize(
    "target, exclude_seen, rank",
    [
        (7, True, 1),  # 3, 4, 5 gone: only 6 (0.6) is ahead of 7 (0.5)
        (7, "window", 2),  # 4, 5 gone: 3 (0.9) and 6 are ahead
        (7, False, 4),  # 3, 4, 5 and 6 are ahead
        (4, True, 0),  # the target repeats a history item and stays; 3 and 5 gone
        (4, "window", 1),  # the target stays, 5 gone, 3 is ahead
    ],
)
def test_hand_computed_ranks(target, exclude_seen, rank):
    cases = splits.Cases(splits.Sequences.from_list([0, 1], [HISTORY, HISTORY]), np.array([target, target]))
    out = evaluation.evaluate(
        _FixedScores(SCORES), cases, ks=(1, 10), exclude_seen=exclude_seen, progress=False
    )
    assert out["ndcg@10"] == pytest.approx(1 / math.log2(rank + 2))
    assert out["mrr"] == pytest.approx(1 / (rank + 1))
    assert out["hr@1"] == (1.0 if rank == 0 else 0.0)
    assert out["exclude_seen"] == exclude_seen


def test_window_filtering_of_a_model_equals_the_oracle():
    """Block-ranked SASRec with histories longer than its window: the oracle excludes the window only."""
    rng = np.random.default_rng(11)
    num_items, window, n = 30, 4, 29
    histories = [list(rng.permutation(np.arange(R, R + num_items))[: rng.integers(1, 12)]) for _ in range(n)]
    targets = rng.integers(R, R + num_items, size=n)
    targets[::4] = [h[0] for h in histories[::4]]  # often outside the window: ranked as an item seen long ago
    targets[1::6] = [h[-1] for h in histories[1::6]]  # inside the window: stays a candidate
    cases = splits.Cases(splits.Sequences.from_list(range(n), histories), targets)
    keras.utils.set_random_seed(0)
    model = SASRec(num_items=num_items, max_sequence_length=window, hidden_dim=8, num_layers=1)
    scores = model.score(pipeline.pad_left(cases.histories, window)).numpy()
    for exclude_seen, seen in (("window", lambda h: h[-window:]), (True, lambda h: h)):
        out = evaluation.evaluate(model, cases, batch_size=8, exclude_seen=exclude_seen, progress=False)
        expected = oracle_metrics(
            [oracle_rank(scores[i], targets[i], seen(histories[i])) for i in range(n)], evaluation.DEFAULT_KS
        )
        for key, value in expected.items():
            assert out[key] == pytest.approx(value, abs=1e-6), (exclude_seen, key)
    whole = evaluation.evaluate(model, cases, exclude_seen=True, progress=False)["mrr"]
    assert evaluation.evaluate(model, cases, exclude_seen="window", progress=False)["mrr"] < whole


def test_unknown_exclude_seen_is_an_error():
    cases = splits.Cases(splits.Sequences.from_list([0], [HISTORY]), np.array([7]))
    with pytest.raises(ValueError, match="window"):
        evaluation.evaluate(_FixedScores(SCORES), cases, exclude_seen="history", progress=False)


def test_evaluating_a_model_again_reads_its_weights_of_now_without_tracing_again():
    rng = np.random.default_rng(5)
    num_items, window, n = 20, 4, 9
    histories = [list(rng.integers(R, R + num_items, size=rng.integers(1, 6))) for _ in range(n)]
    cases = splits.Cases(
        splits.Sequences.from_list(range(n), histories), rng.integers(R, R + num_items, size=n)
    )
    keras.utils.set_random_seed(0)
    model = SASRec(num_items=num_items, max_sequence_length=window, hidden_dim=8, num_layers=1)
    first = evaluation.evaluate(model, cases, progress=False)
    traces = model._query_graph.experimental_get_tracing_count()
    table = model.backbone.item_embedding.embeddings
    table.assign(rng.normal(size=table.shape).astype("float32"))
    scores = model.score(pipeline.pad_left(cases.histories, window)).numpy()
    again = evaluation.evaluate(model, cases, progress=False)
    expected = oracle_metrics(
        [oracle_rank(scores[i], cases.targets[i], histories[i]) for i in range(n)], evaluation.DEFAULT_KS
    )
    for key, value in expected.items():
        assert again[key] == pytest.approx(value, abs=1e-6), key
    assert again["mrr"] != first["mrr"]
    assert model._query_graph.experimental_get_tracing_count() == traces
