import math

import keras
import numpy as np
import pytest

from tests import test_case
from tfseqrec import losses


def _f32(x):
    return np.asarray(x, np.float32)


def _i32(x):
    return keras.ops.convert_to_tensor(np.asarray(x, np.int32))


def softplus(x):
    return math.log1p(math.exp(x))


class LossesTest(test_case.TestCase):
    def test_full_softmax_by_hand(self):
        loss = losses.FullSoftmaxCrossEntropy()
        expected = -math.log(math.exp(3) / (math.exp(1) + math.exp(2) + math.exp(3)))
        self.assertAllClose(loss([2], [[1.0, 2.0, 3.0]]), expected)

    def test_full_softmax_from_embeddings_equals_logits(self):
        # Oracle: NumPy's log-softmax of hidden @ table.T + bias; then, with
        # exclude_history, the same with each row's seen items (not its positive) removed.
        rng = np.random.default_rng(0)
        hidden, table, bias = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=6)
        positives = np.array([0, 5, 2, 2])
        logits = hidden @ table.T + bias
        log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        expected = -np.mean(log_softmax[np.arange(4), positives])
        # Rows 0-1 are sequence 0 (seen: 1, 3, 5), rows 2-3 sequence 1 (seen: 2, 4).
        rows = np.array([0, 0, 1, 1])
        seen = np.zeros((2, 6), bool)
        seen[0, [1, 3, 5]] = True
        seen[1, [2, 4]] = True
        kept = [[0, 2, 4], [0, 2, 4, 5], [0, 1, 2, 3, 5], [0, 1, 2, 3, 5]]  # by hand
        without_seen = np.mean(
            [np.log(np.exp(logits[n, kept[n]]).sum()) - logits[n, positives[n]] for n in range(4)]
        )
        args = [_f32(hidden), np.asarray(positives)]
        # The table as a tensor, and as ItemRows over an embedding with 3 reserved rows first.
        padded = np.concatenate([rng.normal(size=(3, 3)), table])
        for item_table in (
            _f32(table),
            losses.ItemRows(_f32(padded), 3),
        ):
            loss = losses.FullSoftmaxCrossEntropy()
            self.assertAllClose(loss.from_embeddings(*args, item_table, _f32(bias)), expected)
            history = (np.asarray(rows), np.asarray(seen))
            got = losses.FullSoftmaxCrossEntropy(exclude_history=True).from_embeddings(
                *args, item_table, _f32(bias), history=history
            )
            self.assertAllClose(got, without_seen, atol=1e-5)
        self.assertGreater(expected - without_seen, 0.1)  # the exclusion matters here

    def test_full_softmax_without_the_history_against_numpy(self):
        rng = np.random.default_rng(1)
        hidden, table = rng.normal(size=(5, 3)), rng.normal(size=(7, 3))
        rows, positives = np.array([0, 0, 1, 1, 1]), np.array([2, 4, 0, 6, 3])
        seen = np.zeros((2, 7), bool)
        seen[0, [1, 2, 4]] = True  # the positives 2 and 4 are seen too: they stay candidates
        seen[1, [0, 5]] = True
        logits = hidden @ table.T
        expected = []
        for n in range(5):
            keep = ~seen[rows[n]]
            keep[positives[n]] = True
            row = logits[n, keep]
            expected.append(np.log(np.exp(row).sum()) - logits[n, positives[n]])
        loss = losses.FullSoftmaxCrossEntropy(exclude_history=True)
        got = loss.from_embeddings(
            _f32(hidden),
            np.asarray(positives),
            _f32(table),
            history=(np.asarray(rows), np.asarray(seen)),
        )
        self.assertAllClose(got, np.mean(expected), atol=1e-5)
        # Without the flag the history is ignored: the plain full softmax.
        plain = losses.FullSoftmaxCrossEntropy().from_embeddings(
            _f32(hidden),
            np.asarray(positives),
            _f32(table),
            history=(np.asarray(rows), np.asarray(seen)),
        )
        full = np.log(np.exp(logits).sum(axis=1)) - logits[np.arange(5), positives]
        self.assertAllClose(plain, full.mean(), atol=1e-5)
        self.assertTrue(losses.get(keras.saving.serialize_keras_object(loss)).exclude_history)

    def test_bce_by_hand(self):
        loss = losses.BinaryCrossEntropy()
        self.assertAllClose(loss([0], [[2.0, -1.0]]), softplus(-2.0) + softplus(-1.0))

    def test_bce_drops_accidental_hits(self):
        # One item only: every negative is the positive, so only the positive term is left.
        table = _f32([[1.0, 0.0]])
        hidden = _f32([[0.5, 0.0]])
        loss = losses.BinaryCrossEntropy(num_negatives=3, seed=0)
        self.assertAllClose(loss.from_embeddings(hidden, np.asarray([0]), table), softplus(-0.5))

    def test_gbce_beta_limits(self):
        g0 = losses.GBCE(num_negatives=10, t=0.0)
        self.assertAllClose(g0.beta(101), 1.0)  # plain BCE
        g1 = losses.GBCE(num_negatives=10, t=1.0)
        self.assertAllClose(g1.beta(101), 0.1)  # alpha = 10 / 100
        g1.num_items = 101
        self.assertAllClose(g1([0], [[2.0, -1.0]]), 0.1 * softplus(-2.0) + softplus(-1.0))
        with pytest.raises(ValueError, match="t must be"):
            losses.GBCE(t=2.0)

    def test_sampled_softmax_uniform_logq_is_a_constant_shift(self):
        # Under a uniform sampler every logit moves by log(num_items): the softmax is
        # unchanged. (This cannot see the correction; the log-uniform tests below do.)
        rng = np.random.default_rng(1)
        hidden = _f32(rng.normal(size=(5, 4)))
        table = _f32(rng.normal(size=(50, 4)))
        positives = np.asarray([1, 2, 3, 4, 5])
        with_q = losses.SampledSoftmaxCrossEntropy(num_negatives=20, sampler="uniform", seed=3)
        without = losses.SampledSoftmaxCrossEntropy(
            num_negatives=20, sampler="uniform", logq_correction=False, seed=3
        )
        self.assertAllClose(
            with_q.from_embeddings(hidden, positives, table),
            without.from_embeddings(hidden, positives, table),
        )

    def test_sampled_softmax_log_uniform_logq_against_numpy(self):
        # Fixed negatives (a duplicate, and item 2, a hit for row 1), the sampler's own
        # log-probabilities; the oracle is Yi et al.'s corrected logit s_j - log Q(j),
        # with Q the log-uniform (Zipf) law written out, and the hit removed.
        rng = np.random.default_rng(2)
        n = 10
        hidden, table, bias = rng.normal(size=(2, 3)), rng.normal(size=(n, 3)), rng.normal(size=n)
        positives, negatives = np.array([7, 2]), np.array([0, 0, 2, 9])

        def q(ids):  # P(i) = log((i + 2) / (i + 1)) / log(n + 1)
            return np.log((ids + 2.0) / (ids + 1.0)) / np.log(n + 1.0)

        logits = hidden @ table.T + bias
        expected = {}
        for corrected in (True, False):
            shift = np.log(q(np.arange(n))) if corrected else np.zeros(n)
            values = []
            for row, pos in enumerate(positives):
                candidates = [pos] + [j for j in negatives if j != pos]
                z = logits[row, candidates] - shift[candidates]
                values.append(np.log(np.exp(z).sum()) - z[0])
            expected[corrected] = np.mean(values)
        for corrected in (True, False):
            loss = losses.SampledSoftmaxCrossEntropy(
                num_negatives=4, sampler="log_uniform", logq_correction=corrected
            )
            draw = loss.sample

            def fixed(num_items, rows=None, draw=draw):
                return _i32(negatives), draw(num_items, rows)[1]

            loss.sample = fixed
            got = loss.from_embeddings(
                _f32(hidden),
                np.asarray(positives),
                _f32(table),
                _f32(bias),
            )
            self.assertAllClose(got, expected[corrected], atol=1e-5)
        self.assertGreater(abs(expected[True] - expected[False]), 0.1)  # the correction matters here

    def test_sampled_softmax_logq_estimates_the_full_softmax(self):
        # The loss is log(1 + sum_k exp(s_k - log Q(k)) / exp(s_pos - log Q(pos))) over K
        # draws from Q. With the correction, sum_k exp(s_k) / Q(k) is an unbiased estimate of
        # K * sum_{j != pos} exp(s_j) (importance sampling; Bengio & Senecal 2008, Yi et al.
        # 2019), so the loss gives back the full softmax's denominator, and so its loss.
        # Without it, the estimate is of K * sum_j Q(j) exp(s_j): biased to popular (small) ids.
        rng = np.random.default_rng(0)
        n, pos, draws = 20, 10, 100000
        hidden, table = rng.normal(size=(1, 4)), rng.normal(size=(n, 4))
        s = table @ hidden[0]
        q = np.log((np.arange(n) + 2.0) / (np.arange(n) + 1.0)) / np.log(n + 1.0)
        others = np.arange(n) != pos
        full = np.log(np.exp(s).sum()) - s[pos]  # the full softmax loss

        def implied_full_loss(corrected):
            loss = losses.SampledSoftmaxCrossEntropy(
                num_negatives=draws, sampler="log_uniform", logq_correction=corrected, seed=0
            )
            value = float(loss.from_embeddings(_f32(hidden), np.asarray([pos]), _f32(table)))
            z_others = np.expm1(value) * np.exp(s[pos]) / draws / (q[pos] if corrected else 1.0)
            return np.log(np.exp(s[pos]) + z_others) - s[pos]

        self.assertAllClose(implied_full_loss(True), full, atol=0.03)  # ~7 standard deviations
        biased = np.log(np.exp(s[pos]) + np.sum(q[others] * np.exp(s[others]))) - s[pos]
        self.assertAllClose(implied_full_loss(False), biased, atol=0.03)
        self.assertGreater(abs(full - biased), 1.0)

    def test_log_uniform_sampler_is_a_distribution(self):
        loss = losses.SampledSoftmaxCrossEntropy(num_negatives=1000, sampler="log_uniform", seed=0)
        negatives, log_q = loss.sample(100)
        negatives = np.asarray(negatives)
        self.assertAllInRange(negatives, 0, 99)
        self.assertAllClose(np.sum(np.exp(np.asarray(log_q(np.arange(100))))), 1.0, atol=1e-5)
        # Popular (small) ids are drawn more often.
        counts = np.bincount(negatives, minlength=100)
        self.assertGreater(counts[:10].sum(), counts[-50:].sum())

    def test_sampled_softmax_masks_accidental_hits(self):
        table = _f32([[1.0], [2.0]])
        hidden = _f32([[1.0]])
        loss = losses.SampledSoftmaxCrossEntropy(
            num_negatives=50, sampler="uniform", logq_correction=False, seed=0
        )
        # Item 1 is the positive; every draw of item 1 among negatives is ignored, so the
        # softmax is over {pos: 2} and the draws of item 0 (logit 1).
        value = float(loss.from_embeddings(hidden, np.asarray([1]), table))
        negatives, _ = losses.SampledSoftmaxCrossEntropy(
            num_negatives=50, sampler="uniform", logq_correction=False, seed=0
        ).sample(2)
        negatives = np.asarray(negatives)
        n0 = int(np.sum(negatives == 0))
        self.assertAllClose(value, -math.log(math.exp(2) / (math.exp(2) + n0 * math.exp(1))), atol=1e-5)

    def test_sampled_softmax_per_position_against_numpy(self):
        rng = np.random.default_rng(2)
        hidden, table = rng.normal(size=(4, 3)), rng.normal(size=(30, 3))
        positives = np.array([0, 5, 7, 29])

        def loss_object():
            return losses.SampledSoftmaxCrossEntropy(
                num_negatives=12, sampler="log_uniform", per_position=True, seed=4
            )

        value = float(loss_object().from_embeddings(_f32(hidden), np.asarray(positives), _f32(table)))
        negatives, _ = loss_object().sample(30, 4)  # the same seed: the same draws
        negatives = np.asarray(negatives)
        self.assertEqual(negatives.shape, (4, 12))
        self.assertGreater(len({tuple(row) for row in negatives}), 1)  # each position its own negatives

        def log_q(ids):  # the log-uniform sampler's probability, written out
            return np.log(np.log((ids + 2.0) / (ids + 1.0)) / np.log(31.0))

        pos = np.sum(hidden * table[positives], axis=1) - log_q(positives)
        neg = np.einsum("nd,nkd->nk", hidden, table[negatives]) - log_q(negatives)
        neg = np.where(negatives == positives[:, None], -np.inf, neg)  # accidental hits
        logits = np.concatenate([pos[:, None], neg], axis=1)
        expected = np.mean(np.log(np.exp(logits).sum(axis=1)) - pos)
        self.assertAllClose(value, expected, atol=1e-4)

    def test_serialization_and_lookup(self):
        for loss in (
            losses.FullSoftmaxCrossEntropy(),
            losses.BinaryCrossEntropy(num_negatives=2, seed=1),
            losses.GBCE(num_negatives=8, t=0.5),
            losses.SampledSoftmaxCrossEntropy(num_negatives=16, sampler="uniform", logq_correction=False),
            losses.SampledSoftmaxCrossEntropy(num_negatives=8, per_position=True),
        ):
            revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(loss))
            self.assertEqual(type(revived), type(loss))
            self.assertEqual(revived.get_config(), loss.get_config())
        self.assertIsInstance(losses.get("gbce"), losses.GBCE)
        self.assertIsInstance(losses.get(None), losses.FullSoftmaxCrossEntropy)
        with pytest.raises(ValueError, match="unknown loss"):
            losses.get("hinge")


def test_build_gives_each_loss_the_options_that_apply_to_it():
    softmax = losses.build("softmax")
    assert isinstance(softmax, losses.FullSoftmaxCrossEntropy) and softmax.exclude_history
    assert not losses.build("softmax", exclude_history=False).exclude_history
    sampled = losses.build("sampled_softmax", seed=3, num_negatives=7, per_position=True, sampler="uniform")
    assert (sampled.num_negatives, sampled.per_position, sampled.sampler) == (7, True, "uniform")
    assert losses.build("bce", num_negatives=5, exclude_history=False).num_negatives == 5
    for name, option, message in (
        ("softmax", {"num_negatives": 8}, "num_negatives applies to the sampled losses, not 'softmax'"),
        (
            "bce",
            {"per_position": True},
            "negatives_per_position applies to the sampled_softmax loss, not 'bce'",
        ),
        ("gbce", {"sampler": "uniform"}, "sampler applies to the sampled_softmax loss, not 'gbce'"),
        ("sampled_softmax", {"exclude_history": True}, "negatives_exclude_history applies to the softmax"),
        ("hinge", {}, "unknown loss 'hinge'"),
    ):
        with pytest.raises(ValueError, match=message):
            losses.build(name, **option)


def test_fixed_normalizer_is_mean_targets_times_the_batch():
    assert losses.fixed_normalizer(np.array([2, 3]), batch_size=128) == 2.5 * 2  # one batch holds both
    assert losses.fixed_normalizer([1.0, 2.0, 6.0], batch_size=2) == 3.0 * 2
    assert losses.fixed_normalizer([], batch_size=2) is None


def test_bce_negatives_avoid_the_users_history():
    # 10 items; row 0 has seen items 0-4, row 1 nothing: row 0's negatives are 5 to 9.
    num_items = 10
    seen = np.zeros((2, num_items), bool)
    seen[0, :5] = True
    rows = np.asarray([0] * 50 + [1] * 50)
    loss = losses.BinaryCrossEntropy(num_negatives=20, seed=0)
    negatives = np.asarray(loss._uniform_negatives((100, 20), num_items, (rows, np.asarray(seen))))
    assert set(negatives[:50].ravel()) == {5, 6, 7, 8, 9}
    assert len(set(negatives[50:].ravel())) == num_items  # row 1 draws from everything
    plain = losses.BinaryCrossEntropy(num_negatives=20, exclude_history=False, seed=0)
    drawn = np.asarray(plain._uniform_negatives((100, 20), num_items, (rows, np.asarray(seen))))
    assert set(drawn[:50].ravel()) & {0, 1, 2, 3, 4}  # the option is what excludes them


def test_sasrec_bce_training_excludes_history_items():
    """Through the model: a BCE step builds the history of each row from the batch."""
    from tfseqrec.models import SASRec

    model = SASRec(
        num_items=6, max_sequence_length=4, hidden_dim=8, loss=losses.BinaryCrossEntropy(num_negatives=3)
    )
    x = {"item_ids": np.asarray([[3, 4, 5, 6]]), "padding_mask": np.ones((1, 4), "int32")}
    rows, seen = model._history(x, np.asarray([[4, 5, 6, 7]]), np.asarray([[True] * 4]))
    np.testing.assert_array_equal(np.asarray(seen), [[True, True, True, True, True, False]])
    np.testing.assert_array_equal(np.asarray(rows), [[0, 0, 0, 0]])
    # A weight-0 target is no item of the sequence.
    _, seen = model._history(x, np.asarray([[4, 5, 6, 8]]), np.asarray([[True, True, True, False]]))
    np.testing.assert_array_equal(np.asarray(seen), [[True, True, True, True, False, False]])


def _softmax_oracle(hidden, table, bias, positives, weight, rows, seen):
    """NumPy: ``sum_n w_n CE_n`` and its gradients, by hand.

    Position ``n`` keeps the items its sequence has not seen, and its positive; the
    gradient of ``w_n CE_n`` for the logits is ``w_n (softmax - one_hot)`` over those.
    """
    logits = hidden @ table.T + bias
    d_logits = np.zeros_like(logits)
    total = 0.0
    for n, positive in enumerate(positives):
        keep = ~seen[rows[n]]
        keep[positive] = True
        z = np.exp(logits[n, keep] - logits[n, keep].max())
        softmax = np.zeros(len(table))
        softmax[keep] = z / z.sum()
        total += weight[n] * -np.log(softmax[positive])
        d_logits[n] = weight[n] * (softmax - np.eye(len(table))[positive])
    return total, d_logits @ table, d_logits.T @ hidden, d_logits.sum(axis=0)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a TensorFlow kernel")
@pytest.mark.parametrize("block", [3, 4, 32])
def test_blockwise_softmax_and_its_gradient_against_numpy(block):
    import tensorflow as tf

    rng = np.random.default_rng(2)
    hidden, table, bias = rng.normal(size=(7, 3)), rng.normal(size=(6, 3)), rng.normal(size=6)
    positives = np.array([0, 5, 2, 2, 4, 1, 3])
    rows = np.array([0, 0, 1, 1, 1, 0, 1])
    seen = np.zeros((2, 6), bool)
    seen[0, [1, 3, 5]] = True  # row 0's positive 0 is not seen: it is a candidate once
    seen[1, [2, 4]] = True
    weight = np.array([1.0, 0.5, 0.0, 2.0, 1.0, 1.0, 1.0])  # a weight 0 drops a position
    expected = _softmax_oracle(hidden, table, bias, positives, weight, rows, seen)
    no_history = _softmax_oracle(hidden, table, bias, positives, weight, rows, np.zeros_like(seen))
    variables = [tf.constant(_f32(x)) for x in (hidden, table, bias)]
    for history, want in (((rows, seen), expected), (None, no_history)):
        with tf.GradientTape() as tape:
            tape.watch(variables)
            total = losses.softmax_cross_entropy_sum(
                *variables[:2], positives, _f32(weight), variables[2], history, block=block
            )
        np.testing.assert_allclose(float(total), want[0], rtol=1e-5)
        for got, grad in zip(tape.gradient(total, variables), want[1:]):
            np.testing.assert_allclose(np.asarray(got), grad, rtol=1e-4, atol=1e-6)
    # Without a bias, and the table's gradient flows through a transform before it.
    with tf.GradientTape() as tape:
        tape.watch(variables)
        total = losses.softmax_cross_entropy_sum(variables[0], 2.0 * variables[1], positives, _f32(weight))
    want = _softmax_oracle(hidden, 2.0 * table, np.zeros(6), positives, weight, rows, np.zeros_like(seen))
    np.testing.assert_allclose(float(total), want[0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(tape.gradient(total, variables[1])), 2.0 * want[2], rtol=1e-4)


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "mean_with_sample_weight", "none"])
def test_full_softmax_from_embeddings_reduces_as_keras_does(reduction):
    # Oracle: the Keras loss over the logits (`call` and Keras's own reduction).
    rng = np.random.default_rng(3)
    hidden, table = _f32(rng.normal(size=(5, 4))), _f32(rng.normal(size=(9, 4)))
    positives, weight = np.array([0, 8, 3, 3, 1]), _f32([1.0, 0.0, 2.0, 1.0, 0.5])
    loss = losses.FullSoftmaxCrossEntropy(reduction=reduction)
    for sample_weight in (None, weight):
        want = loss(positives, hidden @ table.T, sample_weight=sample_weight)
        got = loss.from_embeddings(hidden, positives, table, sample_weight=sample_weight)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
