import math

import keras
import numpy as np
import pytest

from tests import test_case
from tfseqrec import evaluation, metrics
from tfseqrec.data import splits

# evaluate batches users through tf.function graphs: the TensorFlow backend's (tests/backends
# runs this file on JAX too, where the metrics below still run).
tensorflow_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="evaluate runs on the TensorFlow backend"
)


class RankingMetricsTest(test_case.TestCase):
    # Vocabulary ids start at 3: column j of the scores is id j + 3.

    def test_ties_count_against_the_true_item(self):
        self.assertAllEqual(metrics.ranks([3, 4], [[1.0, 1.0, 1.0], [0.0, 5.0, 5.0]]), [2, 1])

    def test_hand_computed_values(self):
        y_true = [3, 5, 4]
        y_pred = [[0.9, 0.1, 0.5], [0.9, 0.1, 0.5], [0.2, -np.inf, 0.7]]
        # ranks: 0, 1, 2 (the -inf item is excluded and ranks below everything)
        ndcg = metrics.NDCG(k=2)
        ndcg.update_state(y_true, y_pred)
        self.assertAllClose(ndcg.result(), (1.0 + 1.0 / math.log2(3)) / 3)
        hr = metrics.HitRate(k=2)
        hr.update_state(y_true, y_pred)
        self.assertAllClose(hr.result(), 2 / 3)
        mrr = metrics.MRR()
        mrr.update_state(y_true, y_pred)
        self.assertAllClose(mrr.result(), (1 + 1 / 2 + 1 / 3) / 3)

    def test_streaming_over_batches(self):
        m = metrics.HitRate(k=1)
        m.update_state([3], [[1.0, 0.0]])
        m.update_state([3, 3, 3], [[0.0, 1.0]] * 3)
        self.assertAllClose(m.result(), 0.25)

    def test_metrics_from_ranks_matches_keras_metrics(self):
        ranks = np.array([0, 1, 4, 9, 10, 100])
        out = evaluation.metrics_from_ranks(ranks, ks=(10,))
        self.assertAllClose(out["hr@10"], 4 / 6)
        self.assertAllClose(
            out["ndcg@10"], np.mean([1, 1 / math.log2(3), 1 / math.log2(6), 1 / math.log2(11), 0, 0])
        )
        self.assertAllClose(out["mrr"], np.mean(1 / (ranks + 1)))
        # The streaming Keras metrics on scores that put each target at those ranks
        # (the target, id 3, scores 0; `rank` other items score 1, the rest -1).
        scores = np.full((len(ranks), 101), -1.0, np.float32)
        scores[:, 0] = 0.0
        for row, rank in enumerate(ranks):
            scores[row, 1 : 1 + rank] = 1.0
        y_true = np.full(len(ranks), 3)
        for name, metric in (
            ("hr@10", metrics.HitRate(k=10)),
            ("ndcg@10", metrics.NDCG(k=10)),
            ("mrr", metrics.MRR()),
        ):
            metric.update_state(y_true[:3], scores[:3])  # streamed over two batches
            metric.update_state(y_true[3:], scores[3:])
            self.assertAllClose(metric.result(), out[name], atol=1e-6)

    def test_config_round_trip(self):
        self.assertEqual(metrics.NDCG.from_config(metrics.NDCG(k=5).get_config()).k, 5)
        self.assertEqual(metrics.NDCG(k=20).name, "ndcg_20")


class _FixedScores:
    """A stand-in recommender whose scores are a fixed table, to test evaluate itself."""

    max_sequence_length = 3
    uses_timestamps = False

    def __init__(self, table):
        self.table = np.asarray(table, np.float32)
        self.calls = 0

    def score(self, window):
        self.calls += 1
        return self.table[: len(window)]


@tensorflow_only
def test_evaluate_excludes_whole_history_and_counts_ties():
    # 4 items (ids 3..6). User 0 saw ids 3 and 6; target 4.
    histories = splits.Sequences.from_list(["u0", "u1"], [[6, 3, 3, 3], [5]])
    cases = splits.Cases(histories, np.array([4, 3]))
    table = [[9.0, 1.0, 0.0, 8.0], [2.0, 2.0, 2.0, 2.0]]
    with_filter = evaluation.evaluate(_FixedScores(table), cases, ks=(1,), progress=False)
    # u0: ids 3 and 6 removed (6 lies outside the 3-item window but is still seen) -> rank 0.
    # u1: all tied; id 5 removed -> two others tie at 2.0 -> rank 2.
    assert with_filter["hr@1"] == 0.5
    assert with_filter["mrr"] == pytest.approx((1 + 1 / 3) / 2)
    without = evaluation.evaluate(_FixedScores(table), cases, ks=(1,), exclude_seen=False, progress=False)
    assert without["mrr"] == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert without["num_users"] == 2 and not without["exclude_seen"]


@tensorflow_only
def test_evaluate_default_batch_depends_on_how_the_model_is_ranked():
    # A score-matrix model: 256 cases a batch (300 cases -> 2 calls), fewer when a batch's
    # scores would pass MAX_SCORES_PER_BATCH; a block-ranked model: 1,024.
    histories = splits.Sequences.from_list(range(300), [[3]] * 300)
    cases = splits.Cases(histories, np.full(300, 4))
    model = _FixedScores(np.zeros((300, 4)))
    evaluation.evaluate(model, cases, progress=False)
    assert model.calls == 2

    class Scorer:
        def __init__(self, bounded):
            self.bounded = bounded

    huge = type("Model", (), {"num_items": evaluation.MAX_SCORES_PER_BATCH // 100})()
    assert evaluation._batch_size(None, Scorer(False), huge) == 100
    assert evaluation._batch_size(None, Scorer(True), huge) == 1024
    assert evaluation._batch_size(7, Scorer(True), huge) == 7


@tensorflow_only
def test_evaluate_batches_and_sampled_negatives_avoid_history():
    rng = np.random.default_rng(0)
    num_items, n = 30, 50
    seqs = [list(rng.choice(np.arange(3, 3 + num_items), size=5, replace=False)) for _ in range(n)]
    cases = splits.Cases(
        splits.Sequences.from_list(range(n), [s[:-1] for s in seqs]), np.array([s[-1] for s in seqs])
    )
    table = rng.normal(size=(n, num_items))

    class Rows(_FixedScores):
        def __init__(self):
            super().__init__(table)
            self.offset = 0

        def score(self, window):
            out = self.table[self.offset : self.offset + len(window)]
            self.offset += len(window)
            return out

    model = Rows()
    out = evaluation.evaluate(
        model,
        cases,
        batch_size=16,
        sampled={"num_negatives": 10, "sampler": "popularity"},
        item_counts=np.arange(num_items, 0, -1),
        progress=False,
    )
    assert model.offset == n
    assert 0 <= out["sampled_ndcg@10"] <= 1 and out["sampled_hr@10"] >= out["hr@10"]
    assert out["sampled"] == {"num_negatives": 10, "sampler": "popularity"}
    negatives = evaluation._sample_negatives(
        cases.histories, cases.targets - 3, num_items, {"num_negatives": 20}, None, rng
    )
    for row, negs in enumerate(negatives):
        assert not set(negs + 3) & (set(seqs[row]))
        assert len(set(negs)) == 20
