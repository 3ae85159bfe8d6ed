"""Behaviour shared by SASRec, BERT4Rec, UniSRec and HSTU, and what is particular to each."""

import contextlib
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests import test_case
from tfseqrec import losses, metrics
from tfseqrec.data import pipeline, splits, vocab
from tfseqrec.models import HSTU, BERT4Rec, SASRec, UniSRec

NUM_ITEMS = 12
LENGTH = 6


def _tiny(cls, **kwargs):
    keras.utils.set_random_seed(0)
    if cls is UniSRec:  # distinct random text vectors, ids added (text alone is tested in test_unisrec.py)
        text = np.random.default_rng(0).normal(size=(NUM_ITEMS, 6)).astype("float32")
        kwargs = {"text_dim": 6, "text_embeddings": text, "use_id_embeddings": True, **kwargs}
    return cls(num_items=NUM_ITEMS, max_sequence_length=LENGTH, hidden_dim=8, num_layers=2, **kwargs)


def _sequences(n=32, seed=0):
    rng = np.random.default_rng(seed)
    # Each user walks the catalogue in order from a random start: a learnable pattern.
    starts = rng.integers(0, NUM_ITEMS, size=n)
    seqs = [
        [vocab.NUM_RESERVED + (s + j) % NUM_ITEMS for j in range(int(rng.integers(3, 9)))] for s in starts
    ]
    return splits.Sequences.from_list([str(i) for i in range(n)], seqs)


@pytest.mark.parametrize("cls", [SASRec, BERT4Rec, UniSRec, HSTU])
class TestEveryModel:
    def test_score_shape_and_reserved_ids_never_recommended(self, cls):
        model = _tiny(cls)
        scores = model.score(np.array([[0, 0, 3, 4, 5, 6]]))
        assert tuple(scores.shape) == (1, NUM_ITEMS)
        ids, top = model.recommend([[3, 4, 5], [7]], k=NUM_ITEMS - 3)  # all unseen items of user 0
        assert ids.shape == (2, NUM_ITEMS - 3) and ids.min() >= vocab.NUM_RESERVED
        assert np.all(np.isfinite(top))
        assert not {3, 4, 5} & set(ids[0].tolist())  # seen items excluded
        assert np.all(np.diff(top, axis=1) <= 0)  # best first
        ids, _ = model.recommend([[3, 4, 5]], k=NUM_ITEMS, exclude_seen=False)
        assert {3, 4, 5} <= set(ids[0].tolist())

    def test_left_padding_does_not_change_the_prediction(self, cls):
        model = _tiny(cls)
        short = model.score(np.array([[3, 4, 5]]))
        padded = model.score(np.array([[0, 0, 0, 3, 4, 5]]))
        np.testing.assert_allclose(short, padded, atol=1e-5)

    def test_config_round_trip_and_keras_save_load(self, cls, tmp_path):
        model = _tiny(cls, loss=losses.GBCE(num_negatives=4, t=0.5))
        clone = cls.from_config(model.get_config())
        assert clone.get_config() == model.get_config()
        assert isinstance(clone.loss_fn, losses.GBCE) and clone.loss_fn.t == 0.5
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        if cls is not BERT4Rec:
            model.fit(pipeline.causal_dataset(_sequences(8), LENGTH, 8), epochs=1, verbose=0)
        else:
            model.fit(pipeline.cloze_dataset(_sequences(8), LENGTH, 8), epochs=1, verbose=0)
        path = os.path.join(tmp_path, "m.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        history = np.array([[0, 3, 4, 5, 6, 7]])
        np.testing.assert_allclose(loaded.score(history), model.score(history), atol=1e-6)

    def test_fit_learns_a_sequential_pattern(self, cls):
        model = _tiny(cls, dropout=0.0)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), metrics=metrics.default_metrics((1,)))
        seqs = _sequences(64)
        split = splits.leave_one_out(seqs)
        if cls is not BERT4Rec:
            train = pipeline.causal_dataset(split.train, LENGTH, 16, seed=0)
        else:
            train = pipeline.cloze_dataset(split.train, LENGTH, 16, seed=0)
        valid = pipeline.eval_dataset(split.valid, LENGTH, 64)
        before = model.evaluate(valid, return_dict=True, verbose=0)
        history = model.fit(train, validation_data=valid, epochs=60, verbose=0)
        after = model.evaluate(valid, return_dict=True, verbose=0)
        assert history.history["loss"][-1] < history.history["loss"][0]
        # Chance is 1/12 ~ 0.08; a working model gets far above it.
        assert after["hr_1"] > max(before["hr_1"] + 0.2, 0.3)
        assert set(after) >= {"loss", "ndcg_1", "hr_1", "mrr"}


@pytest.mark.parametrize("cls", [SASRec, BERT4Rec, UniSRec, HSTU])
def test_length_bucketed_validation_gives_the_same_metrics(cls):
    # Short histories are cut to narrower windows; the metrics must not move.
    model = _tiny(cls, dropout=0.0)
    model.compile(metrics=metrics.default_metrics((1, 5)))
    seqs = splits.Sequences.from_list(
        [str(i) for i in range(24)], [[3 + (i + j) % 11 for j in range(1 + i % 9)] for i in range(24)]
    )
    cases = splits.leave_one_out(seqs).test
    plain = model.evaluate(pipeline.eval_dataset(cases, LENGTH, 5), return_dict=True, verbose=0)
    ds = pipeline.eval_dataset(cases, LENGTH, 5, bucket_boundaries=(3, 4))
    assert {int(x["item_ids"].shape[1]) for x, _ in ds} == {3, 4, LENGTH}
    bucketed = model.evaluate(ds, return_dict=True, verbose=0)
    for name in ("ndcg_1", "ndcg_5", "hr_5", "mrr", "loss"):
        assert bucketed[name] == pytest.approx(plain[name], abs=1e-5), name


# --- the training losses against NumPy, and learning with each of them -------------------

# One hand-made batch: left-padded windows, each target the next item (0, weight 0, after
# padding); row 2 repeats item 5, so its history holds fewer items than its positions.
BATCH_IDS = np.array([[0, 0, 3, 4, 5, 6], [8, 9, 10, 11, 12, 13], [0, 0, 0, 5, 9, 5]])
BATCH_Y = np.array([[0, 0, 4, 5, 6, 7], [9, 10, 11, 12, 13, 14], [0, 0, 0, 9, 5, 3]])
SHARED_NEGATIVES = np.array([0, 1, 5, 11])  # sampled softmax: item indices, shared by the batch


def _fixed_negatives(shape, num_items, history=None):
    """Stands in for ``_uniform_negatives``: a fixed ``[n, k]`` pattern (some hit the positive)."""
    n, k = shape
    return tf.reshape(tf.math.floormod(tf.range(n * k) * 5 + 1, num_items), (n, k))


@contextlib.contextmanager
def _fixed_draws(loss):
    """``loss`` draws fixed negatives inside the block (the samplers are tested in test_losses.py)."""
    if isinstance(loss, losses.SampledSoftmaxCrossEntropy):
        draw = loss.sample

        def sample(num_items, rows=None):
            return tf.constant(SHARED_NEGATIVES, tf.int32), draw(num_items, rows)[1]

        loss.sample = sample
    elif isinstance(loss, (losses.BinaryCrossEntropy, losses.GBCE)):
        loss._uniform_negatives = _fixed_negatives
    try:
        yield
    finally:  # back to the class's own methods
        loss.__dict__.pop("sample", None)
        loss.__dict__.pop("_uniform_negatives", None)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _numpy_loss(name, hidden, table, num_negatives=4, t=0.75):
    """The batch's training loss, from the papers' equations, in NumPy.

    ``hidden``: the model's output ``[batch, length, d]``; ``table``: its output item
    table ``[num_items, d]``. Positions with a real target count, in row-major order.
    """
    weight = BATCH_Y >= vocab.NUM_RESERVED
    rows = np.nonzero(weight)[0]
    positives = BATCH_Y[weight] - vocab.NUM_RESERVED
    logits = hidden[weight] @ table.T  # [n, num_items]
    n, num_items = logits.shape
    values = []
    if name == "softmax":  # without the other items of the position's sequence
        for i in range(n):
            seen = {
                j - vocab.NUM_RESERVED
                for j in np.concatenate([BATCH_IDS[rows[i]], BATCH_Y[rows[i]]])
                if j >= vocab.NUM_RESERVED
            }
            keep = [j for j in range(num_items) if j not in seen or j == positives[i]]
            values.append(np.log(np.exp(logits[i, keep]).sum()) - logits[i, positives[i]])
    elif name in ("bce", "gbce"):
        negatives = ((np.arange(n * num_negatives) * 5 + 1) % num_items).reshape(n, num_negatives)
        alpha = num_negatives / (num_items - 1)
        beta = alpha * (t * (1 - 1 / alpha) + 1 / alpha) if name == "gbce" else 1.0  # gSASRec, eq. 11
        for i in range(n):
            negative = [j for j in negatives[i] if j != positives[i]]  # accidental hits dropped
            values.append(beta * _softplus(-logits[i, positives[i]]) + _softplus(logits[i, negative]).sum())
    elif name == "sampled_softmax":  # log-uniform Q, logQ-corrected logits (Yi et al., 2019)
        log_q = np.log(
            np.log((np.arange(num_items) + 2.0) / (np.arange(num_items) + 1.0)) / np.log(num_items + 1.0)
        )
        for i in range(n):
            candidates = [positives[i]] + [j for j in SHARED_NEGATIVES if j != positives[i]]
            z = logits[i, candidates] - log_q[candidates]
            values.append(np.log(np.exp(z).sum()) - z[0])
    return float(np.mean(values))


def _loss_against_numpy(model, loss_name, table_of):
    """The model's training loss on the hand-made batch at its current weights, and NumPy's.

    ``table_of`` maps the item embedding variable to the output table, written out.
    """
    x = {"item_ids": BATCH_IDS, "padding_mask": BATCH_IDS != vocab.PAD_ID}
    weight = (BATCH_Y >= vocab.NUM_RESERVED).astype("float32")
    with _fixed_draws(model.loss_fn):
        hidden = model(x, training=True)
        got = float(model.compute_loss(x, tf.constant(BATCH_Y), hidden, tf.constant(weight)))
    table = table_of(np.asarray(model.backbone.item_embedding.embeddings))
    return got, _numpy_loss(loss_name, np.asarray(hidden), table)


# Histories of the walk `_sequences` trains on, and the item that follows each (14 wraps to 3).
WALKS = np.array([[0, 0, 0, 3, 4, 5], [0, 9, 10, 11, 12, 13], [0, 0, 0, 0, 13, 14]])
WALK_NEXT = [6, 14, 3]


def _learns_the_walk(model, epochs=30):
    """Trains on the walk; returns ``(first epoch's loss, last epoch's loss, top items)``."""
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(pipeline.causal_dataset(_sequences(64), LENGTH, 16, seed=0), epochs=epochs, verbose=0)
    top = np.argmax(np.asarray(model.score(WALKS, exclude_seen=True)), axis=1) + vocab.NUM_RESERVED
    return history.history["loss"][0], history.history["loss"][-1], top.tolist()


@pytest.mark.parametrize("loss", ["bce", "sampled_softmax", "gbce"])
def test_sasrec_trains_with_every_loss(loss):
    model = _tiny(SASRec, dropout=0.0, loss=losses.LOSSES[loss](num_negatives=4, seed=0))
    # At initialisation the loss is its equation in NumPy on the model's own hidden states
    # and item embeddings (SASRec's output table is its input table, tied).
    got, expected = _loss_against_numpy(model, loss, lambda emb: emb[vocab.NUM_RESERVED :])
    assert got == pytest.approx(expected, rel=1e-4)
    # Trained with its random draws, the model learns the walk: the next item ranks first.
    first, last, top = _learns_the_walk(model)
    assert last < 0.5 * first
    assert top == WALK_NEXT


def test_sasrec_is_causal():
    model = _tiny(SASRec)
    a = model(np.array([[3, 4, 5, 6, 7, 8]]))
    b = model(np.array([[3, 4, 5, 9, 10, 11]]))
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-6)


def test_sasrec_loss_ignores_unweighted_positions():
    model = _tiny(SASRec, dropout=0.0)
    x = {"item_ids": tf.constant([[0, 3, 4]]), "padding_mask": tf.constant([[False, True, True]])}
    hidden = model(x)
    y = tf.constant([[0, 4, 5]])
    base = model.compute_loss(x, y, hidden, tf.constant([[0.0, 1.0, 1.0]]))
    other = model.compute_loss(x, tf.constant([[9, 4, 5]]), hidden, tf.constant([[0.0, 1.0, 1.0]]))
    np.testing.assert_allclose(base, other)  # the weight-0 target does not matter


def test_bert4rec_inference_appends_mask():
    model = _tiny(BERT4Rec)
    x = model.inference_inputs(np.array([[0, 3, 4, 5, 6, 7]], np.int32))
    np.testing.assert_array_equal(x["item_ids"], [[3, 4, 5, 6, 7, vocab.MASK_ID]])
    np.testing.assert_array_equal(x["padding_mask"], [[True] * 6])


@pytest.mark.parametrize(
    "option, message",
    [
        ({"mask_prob": 1.5}, "mask_prob must be a finite number >= 0 and <= 1, got 1.5"),
        ({"random_token_rate": -0.1}, "random_token_rate must be a finite number >= 0"),
        ({"mask_token_rate": 0.9, "random_token_rate": 0.2}, "must have a sum <= 1, got 0.9 and 0.2"),
    ],
)
def test_bert4rec_masking_options_are_checked(option, message):
    with pytest.raises(ValueError, match=message):
        _tiny(BERT4Rec, **option)


def test_bert4rec_masks_inside_the_train_step():
    model = _tiny(BERT4Rec, mask_prob=0.5, seed=3)
    model.compile(optimizer="adam")
    ds = pipeline.cloze_dataset(_sequences(), LENGTH, 8, seed=0)  # unlabeled batches
    element = next(iter(ds))
    assert isinstance(element, dict)
    history = model.fit(ds, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert model.masking.mask_token_id == vocab.MASK_ID
    assert isinstance(model.backbone.output_bias, keras.Variable) and model.backbone.output_bias.shape == (
        NUM_ITEMS,
    )


def test_xla_loss_path_equals_the_gathering_path():
    model = _tiny(SASRec, dropout=0.0)
    x, y, w = next(iter(pipeline.causal_dataset(_sequences(), LENGTH, 16, shuffle=False)))
    hidden = model(x)
    gathered = model.compute_loss(x, y, hidden, w)
    model.jit_compile = True
    dense = model.compute_loss(x, y, hidden, w)
    np.testing.assert_allclose(dense, gathered, rtol=1e-5)


@pytest.mark.parametrize("exclude_history", [False, True])
def test_fixed_loss_normalizer_divides_the_summed_loss(exclude_history):
    """Sum of per-position cross-entropies (NumPy) over the constant, whatever the batch.

    With ``exclude_history`` (SASRec's default) each position's softmax leaves out the
    other items of its row: its inputs and weighted targets.
    """
    loss = losses.FullSoftmaxCrossEntropy(exclude_history=exclude_history)
    model = _tiny(SASRec, dropout=0.0, loss_normalizer=7.0, loss=loss)
    x, y, w = next(iter(pipeline.causal_dataset(_sequences(), LENGTH, 16, shuffle=False)))
    ids, y, w = np.asarray(x["item_ids"]), np.asarray(y), np.asarray(w)
    hidden = np.asarray(model(x), np.float64)
    table = np.asarray(model.output_table()[0], np.float64)
    total = 0.0
    for row in range(len(ids)):
        seen = {int(i) for i in ids[row] if i >= vocab.NUM_RESERVED} | {
            int(t) for t, k in zip(y[row], w[row]) if k > 0
        }
        for position in np.flatnonzero(w[row] > 0):
            target = int(y[row, position])
            candidates = [
                j
                for j in range(NUM_ITEMS)
                if not exclude_history
                or j + vocab.NUM_RESERVED not in seen
                or j + vocab.NUM_RESERVED == target
            ]
            logits = table[candidates] @ hidden[row, position]
            own = float(table[target - vocab.NUM_RESERVED] @ hidden[row, position])
            total += np.log(np.exp(logits - logits.max()).sum()) + logits.max() - own
    expected = total / 7.0
    np.testing.assert_allclose(model.compute_loss(x, y, model(x), w), expected, rtol=1e-5)
    model.jit_compile = True  # the static-shape path agrees
    np.testing.assert_allclose(model.compute_loss(x, y, model(x), w), expected, rtol=1e-5)


def test_bert4rec_softmax_leaves_out_the_real_sequence_not_the_masking_noise():
    """Negatives left out: the real items, whatever [MASK] or random item replaced them."""
    model = _tiny(BERT4Rec)
    assert model.loss_fn.exclude_history  # the default loss
    random_item = 9  # stands in a masked slot; the user never had it
    x = {
        "item_ids": tf.constant([[0, 3, vocab.MASK_ID, random_item, 4]]),
        "padding_mask": tf.constant([[False, True, True, True, True]]),
    }
    y = tf.constant([[0, 0, 5, 6, 0]])
    weight = tf.constant([[False, False, True, True, False]])
    _, seen = model._history(x, y, weight)
    np.testing.assert_array_equal(np.flatnonzero(seen[0]) + vocab.NUM_RESERVED, [3, 4, 5, 6])


def test_bert4rec_original_masking_always_uses_the_mask_token():
    model = _tiny(BERT4Rec, mask_prob=1.0, mask_token_rate=1.0, random_token_rate=0.0, seed=0)
    ids = np.array([[0, 0, 3, 4, 5, 6]], np.int32)
    x, labels, weights = model.masking(ids)  # the Cloze preprocessor of its training step
    np.testing.assert_array_equal(x["item_ids"], [[0, 0] + [vocab.MASK_ID] * 4])
    np.testing.assert_array_equal(labels, [[0, 0, 3, 4, 5, 6]])
    clone = BERT4Rec.from_config(model.get_config())
    assert clone.masking.mask_token_rate == 1.0 and clone.masking.random_token_rate == 0.0


def test_sasrec_position_ids_from_either_end():
    mask = tf.constant([[False, False, True, True, True, True], [True] * 6])
    oldest = _tiny(SASRec).backbone.position_ids(mask).numpy()
    np.testing.assert_array_equal(oldest, [[0, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5]])
    newest = _tiny(SASRec, position_origin="newest").backbone.position_ids(mask[:, 2:]).numpy()
    np.testing.assert_array_equal(newest, [[2, 3, 4, 5], [2, 3, 4, 5]])  # LENGTH - 1 at the last slot


@pytest.mark.parametrize("cls", [SASRec, BERT4Rec, UniSRec, HSTU])
def test_output_does_not_depend_on_the_padding_width(cls):
    for origin in ("oldest", "newest"):
        model = _tiny(cls, position_origin=origin, dropout=0.0)
        wide = model(np.array([[0, 0, 0, 3, 4, 5]]))
        narrow = model(np.array([[3, 4, 5]]))
        # float32 sums over other widths: scores near 10 differ in their sixth digit.
        np.testing.assert_allclose(wide[:, 3:], narrow, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [SASRec, BERT4Rec])
def test_saved_before_position_origin_loads_counting_from_the_newest(cls):
    # The flat config of files written before the task's config nested its backbone's.
    config = _tiny(cls, position_origin="oldest").get_config()
    backbone = config.pop("backbone")["config"]
    flat = {**config, **{k: v for k, v in backbone.items() if k not in ("name", "trainable", "dtype")}}
    assert cls.from_config(flat).backbone.position_origin == "oldest"
    del flat["position_origin"]
    assert cls.from_config(flat).backbone.position_origin == "newest"


def test_initializer_range_sets_the_spread_of_every_kernel():
    for cls, kernels in ((SASRec, 6 * 2), (BERT4Rec, 6 * 2 + 1)):
        model = cls(num_items=200, max_sequence_length=8, hidden_dim=64, num_layers=2, initializer_range=0.02)
        found = [w for w in model.weights if w.path.endswith("kernel")]
        assert len(found) == kernels, [w.path for w in found]
        for w in found:
            assert 0.012 < np.std(np.asarray(w)) < 0.025, w.path
        glorot = cls(
            num_items=200, max_sequence_length=8, hidden_dim=64, num_layers=2, initializer_range=None
        )
        assert (
            np.std(np.asarray(glorot.backbone.blocks[0].ffn_in.kernel)) > 0.07
        )  # Glorot: sqrt(2 / (fan_in + fan_out))


def test_hstu_scores_are_cosines_over_the_temperature():
    model = _tiny(HSTU, temperature=0.5)
    assert isinstance(model.loss_fn, losses.FullSoftmaxCrossEntropy) and model.loss_fn.exclude_history
    test_case.set_numpy_weights(model, scale=3.0)
    scores = np.asarray(model.score(np.array([[3, 4, 5]])))
    hidden = np.asarray(model.backbone.item_embedding.embeddings)  # recomputed by hand below
    assert np.abs(scores).max() <= 1 / 0.5 + 1e-5
    out = np.asarray(model(np.array([[3, 4, 5]])))[0, -1] * 0.5  # unit vector
    table = hidden[vocab.NUM_RESERVED :] / np.linalg.norm(hidden[vocab.NUM_RESERVED :], axis=1, keepdims=True)
    np.testing.assert_allclose(np.linalg.norm(out), 1.0, atol=1e-5)
    np.testing.assert_allclose(scores[0], table @ out / 0.5, atol=1e-4)
    raw = _tiny(HSTU, temperature=None)
    assert np.abs(np.asarray(raw.score(np.array([[3, 4, 5]])))).max() > 0


def test_hstu_reads_timestamps_only_with_time_buckets():
    ids = np.array([[3, 4, 5, 6]])
    model = _tiny(HSTU, num_time_buckets=16, dropout=0.0)
    test_case.set_numpy_weights(model)
    soon = model({"item_ids": ids, "timestamps": np.array([[0, 10, 20, 30]])})
    later = model({"item_ids": ids, "timestamps": np.array([[0, 10**6, 2 * 10**6, 3 * 10**6]])})
    assert not np.allclose(soon, later)
    with pytest.raises(ValueError, match="num_time_buckets"):
        _tiny(HSTU)({"item_ids": ids, "timestamps": np.array([[0, 1, 2, 3]])})


@pytest.mark.parametrize("options", [{"attention": "softmax"}, {"relative_position_bias": False}])
def test_hstu_variants_train(options):
    def unit_rows(emb):  # HSTU scores by cosine: its output table is the L2-normalised items
        table = emb[vocab.NUM_RESERVED :]
        return table / np.linalg.norm(table, axis=1, keepdims=True)

    model = _tiny(HSTU, dropout=0.0, **options)
    # At initialisation: NumPy's full softmax without the sequence's other items (the
    # default loss) on the model's hidden states (normalised, over the temperature).
    got, expected = _loss_against_numpy(model, "softmax", unit_rows)
    assert got == pytest.approx(expected, rel=1e-4)
    first, last, top = _learns_the_walk(model)
    assert last < 0.5 * first
    assert top == WALK_NEXT
    assert HSTU.from_config(model.get_config()).get_config() == model.get_config()
