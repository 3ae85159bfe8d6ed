"""tfseqrec.ranking against a NumPy oracle, and every ranking path against each other.

The oracle below sorts candidates with ``np.lexsort`` and reads off the target's
position; it shares no code with ``tfseqrec.ranking``. Its rules, transcribed from
the module docstring: candidates are the real items minus the history (the target
kept), ties go against the target, a NaN candidate sorts ahead of the target, a
non-finite target score ranks ``num_items - 1``, a target outside the vocabulary
ranks ``num_items``.
"""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import test_case
from tfseqrec import block_ranking, evaluation, export, kinds, metrics, ranking
from tfseqrec.data import ItemVocabulary, pipeline, splits
from tfseqrec.models import SASRec

R = 3  # vocab.NUM_RESERVED, written out: the oracle does not import the code under test


def oracle_rank(scores, target, history, exclude=True):
    num_items = len(scores)
    if not R <= target < R + num_items:
        return num_items
    t = target - R
    if not np.isfinite(scores[t]):
        return num_items - 1
    seen = {h - R for h in history if R <= h < R + num_items} if exclude else set()
    candidates = np.array([j for j in range(num_items) if j == t or j not in seen])
    key = np.where(np.isnan(scores[candidates]), np.inf, scores[candidates])
    after_ties = (candidates == t).astype(int)  # the target sorts after items it ties with
    order = candidates[np.lexsort((after_ties, -key))]
    return int(np.flatnonzero(order == t)[0])


def oracle_metrics(ranks, ks):
    ranks = np.asarray(ranks, np.float64)
    out = {}
    for k in ks:
        out[f"ndcg@{k}"] = np.mean([1 / math.log2(r + 2) if r < k else 0.0 for r in ranks])
        out[f"hr@{k}"] = np.mean(ranks < k)
    out["mrr"] = np.mean(1 / (ranks + 1))
    return out


def oracle_top_k(scores, k, history):
    s = np.where(np.isnan(scores), -np.inf, scores).astype(np.float64)
    for h in history:
        if R <= h < R + len(s):
            s[h - R] = -np.inf
    order = np.argsort(-s, kind="stable")[: min(k, len(s))]
    return s[order], order


def _cases(seed=0, batch=64, num_items=9):
    """Scores with ties and NaNs; histories with padding, reserved ids and repeats of the target."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=(batch, num_items)).astype(np.float32)  # many ties
    scores[rng.random(scores.shape) < 0.1] = np.nan
    scores[rng.random(scores.shape) < 0.05] = np.inf
    scores[rng.random(scores.shape) < 0.05] = -np.inf
    targets = rng.integers(R, R + num_items, size=batch)
    targets[:4] = [0, 1, 2, R + num_items + 5]  # padding, [MASK], OOV, past the catalogue
    histories = []
    for row in range(batch):
        h = list(rng.integers(0, R + num_items + 2, size=int(rng.integers(0, 7))))
        if row % 3 == 0:
            h.insert(int(rng.integers(0, len(h) + 1)), int(targets[row]))  # the target repeats
        histories.append(h)
    return scores, targets, histories


class RankingOracleTest(test_case.TestCase):
    def test_ranks_equal_the_oracle_dense_and_ragged_history(self):
        scores, targets, histories = _cases()
        width = max(len(h) for h in histories)
        dense = np.array([h + [0] * (width - len(h)) for h in histories], np.int64)
        ragged = tf.ragged.constant(histories, dtype=tf.int64)
        expected = [oracle_rank(scores[i], targets[i], histories[i]) for i in range(len(targets))]
        self.assertAllEqual(ranking.rank_targets(scores, targets, dense), expected)
        self.assertAllEqual(ranking.rank_targets(scores, targets, ragged), expected)
        unfiltered = [oracle_rank(scores[i], targets[i], [], exclude=False) for i in range(len(targets))]
        self.assertAllEqual(ranking.rank_targets(scores, targets), unfiltered)
        self.assertAllEqual(ranking.ranks(scores, targets), unfiltered)

    def test_hand_computed_rules(self):
        nan, inf = np.nan, np.inf
        scores = np.array(
            [
                [1.0, 1.0, 1.0, 1.0],  # a constant model ranks the target last
                [0.2, 0.9, 0.5, 0.1],  # target 4 (0.9) in the history stays a candidate: rank 0
                [nan, 0.0, 0.0, 0.0],  # NaN target: last
                [0.5, nan, 0.1, 0.1],  # a NaN candidate is ahead of the target
                [0.5, inf, -inf, 0.1],  # +inf ahead, -inf behind
                [0.5, 0.9, 0.1, 0.1],  # unknown target (OOV)
            ],
            np.float32,
        )
        targets = [6, 4, 3, 3, 3, 2]
        history = [[0, 0, 0], [4, 5, 4], [0, 0, 0], [0, 0, 0], [0, 0, 0], [4, 0, 0]]
        self.assertAllEqual(ranking.rank_targets(scores, targets, history), [3, 0, 3, 1, 1, 4])
        self.assertAllEqual(ranking.known_targets(targets, 4), [True] * 5 + [False])

    def test_exclude_items_keeps_only_the_target_and_ignores_reserved_ids(self):
        scores = np.arange(12, dtype=np.float32).reshape(2, 6)
        out = ranking.exclude_items(scores, [[0, 1, 2, 3, 8, 30], [5, 5, 0, 0, 0, 0]], keep=[8, 4])
        expected = scores.copy()
        expected[0, 0] = -np.inf  # id 3; 8 is kept, 30 lies past the catalogue
        expected[1, 2] = -np.inf  # id 5
        self.assertAllEqual(out, expected)

    def test_exclude_items_and_ranks_compile_with_xla(self):
        scores, targets, histories = _cases(seed=1)
        width = max(len(h) for h in histories)
        dense = tf.constant([h + [0] * (width - len(h)) for h in histories], tf.int32)
        fn = tf.function(ranking.rank_targets, jit_compile=True)
        self.assertAllEqual(
            fn(tf.constant(scores), tf.constant(targets, tf.int32), dense),
            ranking.rank_targets(scores, targets, dense),
        )

    def test_rank_targets_by_query_equals_the_oracle_at_every_chunk_size(self):
        # Small integers: every score is exact whatever the order of the sums, so the
        # ties are real ties; a NaN row, an inf query and a bias as BERT4Rec has.
        rng = np.random.default_rng(4)
        num_items, batch = 11, 48
        _, targets, histories = _cases(seed=4, batch=batch, num_items=num_items)
        query = rng.integers(-2, 3, size=(batch, 3)).astype(np.float32)
        table = rng.integers(-2, 3, size=(num_items, 3)).astype(np.float32)
        table[7] = np.nan
        query[5, 1] = np.inf
        bias = rng.integers(-1, 2, size=num_items).astype(np.float32)
        ragged = tf.ragged.constant(histories, dtype=tf.int64)
        for b in (None, bias):
            with np.errstate(invalid="ignore"):
                scores = (
                    query.astype(np.float64) @ table.T.astype(np.float64) + (0 if b is None else b)
                ).astype(np.float32)
            expected = [oracle_rank(scores[i], targets[i], histories[i]) for i in range(batch)]
            unfiltered = [oracle_rank(scores[i], targets[i], [], exclude=False) for i in range(batch)]
            for chunk in (1, 3, 4, 11, 4096):
                got = block_ranking.rank_targets_by_query(
                    query, table, targets, ragged, bias=b, chunk_items=chunk
                )
                self.assertAllEqual(got, expected, msg=f"chunk {chunk}")
            graph = tf.function(block_ranking.rank_targets_by_query)
            self.assertAllEqual(graph(query, table, targets, None, b, 4), unfiltered)

    def test_count_true_equals_numpy_in_groups_and_not(self):
        rng = np.random.default_rng(7)
        for width in (256, 300, 128 * 3, 5):
            flags = rng.random((6, width)) < 0.5
            flags[0], flags[1] = True, False  # a full row: every group sums 128, the uint8 limit is 255
            self.assertAllEqual(
                block_ranking.count_true(tf.constant(flags)), flags.sum(axis=1), msg=f"width {width}"
            )

    def test_rank_targets_by_query_counts_full_groups_as_the_oracle(self):
        # 300 items in blocks of 128: two grouped blocks, then one of 44 columns; one
        # query scores the target above every item, so every group of a block is full.
        rng = np.random.default_rng(8)
        num_items, batch = 300, 8
        query = rng.integers(-3, 4, size=(batch, 4)).astype(np.float32)
        table = rng.integers(-3, 4, size=(num_items, 4)).astype(np.float32)
        targets = rng.integers(R, R + num_items, size=batch)
        table[targets[0] - R] = 100 * np.sign(query[0]) + (query[0] == 0)
        histories = [list(rng.integers(0, R + num_items, size=rng.integers(0, 20))) for _ in range(batch)]
        scores = (query.astype(np.float64) @ table.T.astype(np.float64)).astype(np.float32)
        expected = [oracle_rank(scores[i], targets[i], histories[i]) for i in range(batch)]
        got = block_ranking.rank_targets_by_query(
            query, table, targets, tf.ragged.constant(histories, dtype=tf.int64), chunk_items=128
        )
        self.assertAllEqual(got, expected)
        self.assertEqual(int(got[0]), 0)

    def test_top_k_equals_the_oracle(self):
        rng = np.random.default_rng(2)
        scores = rng.normal(size=(16, 10)).astype(np.float32)  # no ties: indices are defined
        scores[rng.random(scores.shape) < 0.1] = np.nan
        histories = [list(rng.integers(0, 15, size=int(rng.integers(0, 5)))) for _ in range(16)]
        padded = tf.ragged.constant(histories, dtype=tf.int64)
        for k in (1, 4, 10, 25):
            values, columns = ranking.top_k(scores, k, exclude=padded)
            for row in range(16):
                want_values, want_columns = oracle_top_k(scores[row], k, histories[row])
                self.assertAllEqual(values[row], want_values)
                finite = np.isfinite(want_values)
                self.assertAllEqual(np.asarray(columns[row])[finite], want_columns[finite])
        self.assertEqual(ranking.top_k(scores, -3)[0].shape, (16, 0))

    def test_top_k_in_blocks_equals_the_oracle(self):
        rng = np.random.default_rng(7)
        query = rng.normal(size=(16, 4)).astype(np.float32)  # no ties: indices are defined
        table = rng.normal(size=(10, 4)).astype(np.float32)
        table[6] = np.nan
        histories = [list(rng.integers(0, 15, size=int(rng.integers(0, 5)))) for _ in range(16)]
        scores = (query.astype(np.float64) @ table.T.astype(np.float64)).astype(np.float32)
        block_scores, _ = block_ranking.query_blocks(query, table)
        for k, chunk in ((1, 1), (4, 3), (10, 4), (25, 4096)):
            values, columns = block_ranking.top_k_in_blocks(
                block_scores, 10, 16, k, tf.ragged.constant(histories), chunk
            )
            for row in range(16):
                want_values, want_columns = oracle_top_k(scores[row], k, histories[row])
                self.assertAllClose(values[row], want_values, rtol=1e-6)
                finite = np.isfinite(want_values)
                self.assertAllEqual(np.asarray(columns[row])[finite], want_columns[finite])

    def test_gains_and_metrics_from_ranks_equal_the_formulas(self):
        ranks = np.array([0, 1, 4, 9, 10, 100, 3])
        out = ranking.metrics_from_ranks(ranks, ks=(1, 5, 10))
        for key, value in oracle_metrics(ranks, (1, 5, 10)).items():
            self.assertAllClose(out[key], value, atol=1e-12)
        for k in (1, 5, 10):
            m = metrics.NDCG(k)
            m.update_state(ranks + R, np.tile(-np.arange(101, dtype=np.float32), (len(ranks), 1)))
            self.assertAllClose(m.result(), out[f"ndcg@{k}"], atol=1e-6)

    def test_keras_metrics_never_reward_a_nan(self):
        ndcg, hr, mrr = metrics.NDCG(10), metrics.HitRate(10), metrics.MRR()
        for m in (ndcg, hr, mrr):
            m.update_state([3, 4], [[np.nan, 1.0, 2.0], [np.nan, np.nan, np.nan]])
        # Target 3 scores NaN: last (rank 2). Target 4 scores NaN: last (rank 2).
        self.assertAllClose(ndcg.result(), 0.5)
        self.assertAllClose(hr.result(), 1.0)  # 3 items, K = 10: last is still in the top 10
        self.assertAllClose(mrr.result(), 1 / 3)


class _FixedScores:
    """A stand-in model whose scores are the next rows of a table, batch after batch."""

    max_sequence_length = 2
    uses_timestamps = False

    def __init__(self, table):
        self.table = np.asarray(table, np.float32)
        self.offset = 0

    def score(self, window):
        self.offset += len(window)
        return self.table[self.offset - len(window) : self.offset]


def test_evaluate_equals_the_oracle_on_repeats_ties_nan_and_unknown_targets():
    scores, targets, histories = _cases(seed=3, batch=40)
    histories = [[h for h in hist if h != 0] for hist in histories]  # Sequences hold no padding
    cases = splits.Cases(splits.Sequences.from_list(range(40), histories), targets)
    out = evaluation.evaluate(_FixedScores(scores), cases, batch_size=16, progress=False)
    expected = oracle_metrics(
        [oracle_rank(scores[i], targets[i], histories[i]) for i in range(40)], evaluation.DEFAULT_KS
    )
    for key, value in expected.items():
        assert out[key] == pytest.approx(value, abs=1e-12), key
    assert out["num_users"] == 40 and out["num_unknown_targets"] == 4
    raw = evaluation.evaluate(_FixedScores(scores), cases, exclude_seen=False, batch_size=16, progress=False)
    unfiltered = [oracle_rank(scores[i], targets[i], [], exclude=False) for i in range(40)]
    assert raw["mrr"] == pytest.approx(oracle_metrics(unfiltered, (1,))["mrr"])


@pytest.mark.parametrize("kind", ["sasrec", "bert4rec"])
def test_evaluate_of_a_model_equals_the_oracle_on_its_score_matrix(kind):
    """``evaluate`` ranks a model block by block; the oracle ranks ``model.score``'s whole matrix."""
    from tfseqrec.models import BERT4Rec

    rng = np.random.default_rng(6)
    num_items = 40
    histories = [list(rng.integers(R, R + num_items, size=int(rng.integers(1, 9)))) for _ in range(37)]
    targets = rng.integers(R, R + num_items, size=37)
    targets[::5] = [h[0] for h in histories[::5]]  # repeats of a history item
    targets[3] = 2  # OOV
    cases = splits.Cases(splits.Sequences.from_list(range(37), histories), targets)
    keras.utils.set_random_seed(0)
    cls = SASRec if kind == "sasrec" else BERT4Rec
    model = cls(num_items=num_items, max_sequence_length=4, hidden_dim=8, num_layers=1)
    if kind == "bert4rec":  # a bias that matters
        model.score(np.zeros((1, 4), np.int32))
        model.backbone.output_bias.assign(rng.normal(size=num_items).astype(np.float32))
    scores = model.score(pipeline.pad_left(cases.histories, 4)).numpy()
    out = evaluation.evaluate(
        model, cases, batch_size=16, progress=False, sampled={"num_negatives": 5, "sampler": "uniform"}
    )
    expected = oracle_metrics(
        [oracle_rank(scores[i], targets[i], histories[i]) for i in range(37)], evaluation.DEFAULT_KS
    )
    for key, value in expected.items():
        assert out[key] == pytest.approx(value, abs=1e-6), key
    assert out["num_unknown_targets"] == 1
    # The sampled metrics read single columns; from the whole matrix they are the same.
    whole = evaluation.evaluate(
        _FixedScores(scores),
        cases,
        batch_size=16,
        progress=False,
        sampled={"num_negatives": 5, "sampler": "uniform"},
    )
    for key, value in whole.items():
        assert out[key] == pytest.approx(value, abs=1e-6), key


# --- one model, every path -----------------------------------------------------------

NUM_ITEMS, WINDOW = 15, 4


def _consistency_data():
    """Histories longer than the window, targets repeating items inside and outside it."""
    rng = np.random.default_rng(5)
    histories, targets = [], []
    for u in range(30):
        h = [int(i) for i in rng.integers(R, R + NUM_ITEMS, size=int(rng.integers(2, 12)))]
        kind = u % 4
        if kind == 0 and len(h) > WINDOW:
            target = h[0]  # seen, only outside the model's window
        elif kind == 1:
            target = h[-1]  # seen, inside the window
        else:
            target = int(rng.integers(R, R + NUM_ITEMS))
        histories.append(h)
        targets.append(target)
    targets[-1] = 2  # OOV: a target the vocabulary lacks
    return splits.Cases(splits.Sequences.from_list(range(30), histories), np.array(targets))


def test_every_ranking_path_gives_the_same_numbers(tmp_path):
    """``evaluate``, validation in ``fit``, the export's signatures and the RankingEvaluator agree."""
    pytest.importorskip("tfx")
    from components import ranking_evaluator

    cases = _consistency_data()
    keras.utils.set_random_seed(0)
    model = SASRec(num_items=NUM_ITEMS, max_sequence_length=WINDOW, hidden_dim=8, num_layers=2)
    model.compile(optimizer="adam", metrics=metrics.default_metrics(evaluation.DEFAULT_KS))
    vocabulary = ItemVocabulary([f"i{j}" for j in range(NUM_ITEMS)], np.arange(NUM_ITEMS, 0, -1))

    library = evaluation.evaluate(model, cases, progress=False)
    assert library["num_unknown_targets"] == 1 and library["num_users"] == 30

    in_fit = model.evaluate(pipeline.eval_dataset(cases, WINDOW, batch_size=8), return_dict=True, verbose=0)
    for k in evaluation.DEFAULT_KS:
        assert in_fit[f"ndcg_{k}"] == pytest.approx(library[f"ndcg@{k}"], abs=1e-6)
        assert in_fit[f"hr_{k}"] == pytest.approx(library[f"hr@{k}"], abs=1e-6)
    assert in_fit["mrr"] == pytest.approx(library["mrr"], abs=1e-6)
    # The data make the window-versus-whole-history difference show.
    window_ds = pipeline.eval_dataset(cases, WINDOW, 8, history=False)
    window_only = model.evaluate(window_ds, return_dict=True, verbose=0)
    assert abs(window_only["mrr"] - library["mrr"]) > 1e-3

    path = str(tmp_path / "export" / "1")
    export.save(kinds.get("sasrec"), model, vocabulary, path, warmup=False)
    raw_histories = [[vocabulary.items[i - R].encode() for i in h] for h in cases.histories.to_list()]
    raw_targets = [vocabulary.items[t - R].encode() if t >= R else b"unknown-item" for t in cases.targets]
    served = ranking_evaluator.evaluate_export(path, raw_histories, raw_targets, batch_size=7)
    for key, value in library.items():
        if key != "exclude_seen":
            assert served[key] == pytest.approx(value, abs=1e-6), key

    # The top-k that serving uses: an unseen target sits at its rank; a seen one is never listed.
    ranks, known = ranking_evaluator.rank_cases(path, raw_histories, raw_targets)
    loaded = tf.saved_model.load(path).signatures["recommend_top_k"]
    seen_targets = 0
    for h, t, r, ok in zip(raw_histories, raw_targets, ranks, known):
        listed = list(loaded(history=tf.constant([h]), k=tf.constant([NUM_ITEMS]))["item_ids"][0].numpy())
        if t in h:
            seen_targets += 1
            assert t not in listed[: NUM_ITEMS - len(set(h))]
        elif ok:
            assert listed.index(t) == r
    assert seen_targets >= 10
