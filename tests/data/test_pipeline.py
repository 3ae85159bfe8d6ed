import numpy as np
import pytest

from tfseqrec.data import ClozePreprocessor, pipeline, splits


def _seqs():
    return splits.Sequences.from_list(["u", "v"], [[3, 4, 5, 6, 7, 8], [9, 10]])


def test_pad_left():
    out = pipeline.pad_left(_seqs(), 4)
    np.testing.assert_array_equal(out, [[5, 6, 7, 8], [0, 0, 9, 10]])
    np.testing.assert_array_equal(pipeline.pad_left(_seqs(), 4, drop_last=1), [[4, 5, 6, 7], [0, 0, 0, 9]])


def test_sliding_windows_by_hand():
    windows, rows = pipeline.sliding_windows(_seqs(), width=3, stride=2, min_length=2)
    # u: ends at 6, 4, 2 items; v: ends at 2 items.
    np.testing.assert_array_equal(windows, [[6, 7, 8], [4, 5, 6], [0, 3, 4], [0, 9, 10]])
    np.testing.assert_array_equal(rows, [0, 0, 0, 1])


def test_causal_dataset_shifts_targets():
    ds = pipeline.causal_dataset(_seqs(), max_sequence_length=4, batch_size=8, shuffle=False)
    x, y, w = next(iter(ds))
    np.testing.assert_array_equal(x["item_ids"], [[4, 5, 6, 7], [0, 0, 0, 9]])
    np.testing.assert_array_equal(y, [[5, 6, 7, 8], [0, 0, 0, 10]])
    np.testing.assert_array_equal(w, [[1, 1, 1, 1], [0, 0, 0, 1]])
    np.testing.assert_array_equal(x["padding_mask"], (x["item_ids"].numpy() != 0).astype(np.int32))


def test_cloze_dataset_unmasked_and_masked():
    ds = pipeline.cloze_dataset(_seqs(), max_sequence_length=4, batch_size=8, shuffle=False)
    x = next(iter(ds))
    np.testing.assert_array_equal(x["item_ids"], [[5, 6, 7, 8], [0, 0, 9, 10]])
    # Masked by the preprocessor the BERT4Rec task calls in its training step (here mapped in tf.data).
    masking = ClozePreprocessor(num_items=20, mask_prob=1.0, mask_token_rate=1.0, random_token_rate=0.0)
    x, labels, weights = next(iter(pipeline.cloze_dataset(_seqs(), 4, 8, shuffle=False).map(masking)))
    np.testing.assert_array_equal(x["item_ids"], [[1, 1, 1, 1], [0, 0, 1, 1]])
    np.testing.assert_array_equal(labels, [[5, 6, 7, 8], [0, 0, 9, 10]])
    np.testing.assert_array_equal(x["padding_mask"], [[1, 1, 1, 1], [0, 0, 1, 1]])


def test_shuffle_reshuffles_each_epoch():
    seqs = splits.Sequences.from_list([str(i) for i in range(64)], [[3 + i, 4 + i] for i in range(64)])
    ds = pipeline.causal_dataset(seqs, 2, batch_size=64, seed=0)
    a = next(iter(ds))[1].numpy()
    b = next(iter(ds))[1].numpy()
    assert not np.array_equal(a, b)
    assert sorted(a[:, -1].tolist()) == sorted(b[:, -1].tolist())


def test_eval_dataset():
    cases = splits.Cases(_seqs(), np.array([11, 12]))
    x, y = next(iter(pipeline.eval_dataset(cases, 3, 8)))
    np.testing.assert_array_equal(x["item_ids"], [[6, 7, 8], [0, 9, 10]])
    np.testing.assert_array_equal(y, [11, 12])
    # The whole history rides along (validation excludes all of it), right-padded per batch.
    np.testing.assert_array_equal(x["history"], [[3, 4, 5, 6, 7, 8], [9, 10, 0, 0, 0, 0]])
    x, _ = next(iter(pipeline.eval_dataset(cases, 3, 8, history=False)))
    assert set(x) == {"item_ids", "padding_mask"}


def test_eval_dataset_buckets_by_history_length():
    cases = splits.Cases(_seqs(), np.array([11, 12]))
    batches = list(pipeline.eval_dataset(cases, 6, 8, bucket_boundaries=(3,)))
    # v (2 items) fits width 3 with a slot to spare; u (6 items) keeps the full width.
    (x1, y1), (x2, y2) = batches
    np.testing.assert_array_equal(x1["item_ids"], [[0, 9, 10]])
    np.testing.assert_array_equal(x1["padding_mask"], [[0, 1, 1]])
    np.testing.assert_array_equal(x1["history"], [[9, 10]])
    np.testing.assert_array_equal(y1, [12])
    np.testing.assert_array_equal(x2["item_ids"], [[3, 4, 5, 6, 7, 8]])
    np.testing.assert_array_equal(x2["history"], [[3, 4, 5, 6, 7, 8]])
    np.testing.assert_array_equal(y2, [11])


def test_bucketing_trims_padding_and_keeps_every_window():
    rng = np.random.default_rng(0)
    seqs = splits.Sequences.from_list(
        [str(i) for i in range(200)],
        [list(rng.integers(3, 50, size=rng.integers(2, 40))) for _ in range(200)],
    )
    plain = pipeline.causal_dataset(seqs, 32, 16, shuffle=False)
    bucketed = pipeline.causal_dataset(seqs, 32, 16, seed=1, bucket_boundaries=(8, 16))
    widths, rows, batches = set(), [], 0
    for x, y, _ in bucketed:
        batches += 1
        width = x["item_ids"].shape[1]
        widths.add(width)
        # Nothing real was cut: the trimmed columns would all have been padding.
        real = (x["item_ids"].numpy() != 0).sum(axis=1)
        assert real.max() <= width
        pad = np.zeros((len(real), 32 - width), np.int32)
        rows += [tuple(r) for r in np.concatenate([pad, y.numpy()], axis=1)]
    assert widths == {8, 16, 32}
    assert int(bucketed.cardinality()) == batches  # known epoch length: progress bars show it
    expected = [tuple(r) for _, y, _ in plain for r in y.numpy()]
    assert sorted(rows) == sorted(expected)


def test_cloze_bucketing_widths_and_masking():
    rng = np.random.default_rng(1)
    seqs = splits.Sequences.from_list(
        [str(i) for i in range(120)],
        [list(rng.integers(3, 50, size=rng.integers(1, 30))) for _ in range(120)],
    )
    masking = ClozePreprocessor(num_items=47, mask_prob=0.3, seed=0)
    ds = pipeline.cloze_dataset(seqs, 30, 16, seed=0, bucket_boundaries=(10, 20)).map(masking)
    widths, total = set(), 0
    for x, labels, weights in ds:
        widths.add(x["item_ids"].shape[1])
        assert x["item_ids"].shape == labels.shape == weights.shape
        total += int((x["padding_mask"].numpy() == 1).sum())
    assert widths == {10, 20, 30}
    assert total == seqs.num_events


def _timed():
    # Each item's time is 100 * its id: the oracle of every window.
    seqs = _seqs()
    return splits.Sequences(seqs.users, seqs.values, seqs.row_splits, seqs.values * 100)


def test_causal_and_eval_datasets_carry_the_inputs_times():
    ds = pipeline.causal_dataset(
        _timed(), max_sequence_length=4, batch_size=8, shuffle=False, timestamps=True
    )
    x, _, _ = next(iter(ds))
    assert x["timestamps"].dtype == "int64"
    np.testing.assert_array_equal(x["timestamps"], x["item_ids"].numpy() * 100)
    cases = splits.Cases(_timed(), np.array([9, 3]))
    x, _ = next(iter(pipeline.eval_dataset(cases, 4, batch_size=8, timestamps=True)))
    np.testing.assert_array_equal(x["timestamps"], x["item_ids"].numpy() * 100)
    np.testing.assert_array_equal(pipeline.pad_left_times(_timed(), 3), [[600, 700, 800], [0, 900, 1000]])
    assert "timestamps" not in next(iter(pipeline.causal_dataset(_timed(), 4, 8, shuffle=False)))[0]


def test_times_asked_of_sequences_without_them_fail():
    with pytest.raises(ValueError, match="the model reads event times, but these sequences have none"):
        pipeline.causal_dataset(_seqs(), 4, 8, timestamps=True)
