"""The NumPy batches serve the windows of the tf.data pipeline (one cutting, two feeds)."""

import numpy as np
import pytest

from tfseqrec.data import numpy_pipeline, splits

SEQUENCES = splits.Sequences.from_list(
    range(5),
    [[3, 4, 5, 6, 7, 8, 9], [10, 11], [12], [3, 5, 7, 9, 11, 13], [4, 6, 8]],
    [[float(t) for t in range(7)], [1.0, 2.0], [3.0], [float(t) for t in range(6)], [5.0, 6.0, 7.0]],
)


def _tf_batches(ds):
    import tensorflow as tf  # the tf.data feed, for the comparison; absent where JAX runs alone

    return [tf.nest.map_structure(np.asarray, batch) for batch in ds]


@pytest.mark.parametrize("stride", [None, 2])
def test_causal_batches_equal_the_tf_data_pipeline(stride):
    pipeline = pytest.importorskip("tfseqrec.data.pipeline")
    kwargs = {"shuffle": False, "window_stride": stride, "timestamps": True}
    expected = _tf_batches(pipeline.causal_dataset(SEQUENCES, 4, 3, **kwargs))
    got = numpy_pipeline.causal_batches(SEQUENCES, 4, 3, **kwargs)
    assert len(got) == len(expected)
    for (x, y, w), (ex, ey, ew) in zip((got[i] for i in range(len(got))), expected):
        assert sorted(x) == sorted(ex) == ["item_ids", "padding_mask", "timestamps"]
        for name in x:
            np.testing.assert_array_equal(x[name], ex[name])
        np.testing.assert_array_equal(y, ey)
        np.testing.assert_array_equal(w, ew)


def test_cloze_batches_equal_the_tf_data_pipeline():
    pipeline = pytest.importorskip("tfseqrec.data.pipeline")
    expected = _tf_batches(pipeline.cloze_dataset(SEQUENCES, 4, 2, shuffle=False, window_stride=3))
    got = numpy_pipeline.cloze_batches(SEQUENCES, 4, 2, shuffle=False, window_stride=3)
    assert len(got) == len(expected)
    for i, batch in enumerate(expected):
        np.testing.assert_array_equal(got[i]["item_ids"], batch["item_ids"])
        np.testing.assert_array_equal(got[i]["padding_mask"], batch["padding_mask"])


def test_windows_by_hand():
    x, y, w = numpy_pipeline.causal_windows(SEQUENCES, 3)
    # User 1 [10, 11]: inputs [0, 0, 10], targets [0, 0, 11]; user 2 (one item) has no window.
    np.testing.assert_array_equal(x["item_ids"][1], [0, 0, 10])
    np.testing.assert_array_equal(y[1], [0, 0, 11])
    np.testing.assert_array_equal(w[1], [0, 0, 1])
    np.testing.assert_array_equal(x["item_ids"][0], [6, 7, 8])
    np.testing.assert_array_equal(y[0], [7, 8, 9])
    assert len(y) == 4


def test_targets_outside_the_windows_by_hand():
    # Next-item windows of 3 inputs (4 items): a sequence's first item is never a target, so the
    # lengths 7, 2, 1, 6, 3 give 6 + 1 + 0 + 5 + 2 = 14 targets; the newest windows leave out
    # user 0's 4, 5, 6 and user 3's 5, 7.
    causal = {"min_length": 2, "first_is_target": False}
    assert numpy_pipeline.targets_outside_windows(SEQUENCES, 4, **causal) == (5, 14)
    # Windows ending 2 items apart (user 0: at 9, 7, 5) cover every target.
    assert numpy_pipeline.targets_outside_windows(SEQUENCES, 4, stride=2, **causal) == (0, 14)
    # A stride wider than a window leaves gaps: user 0's windows [6, 7, 8, 9] and [3, 4] train on
    # 7, 8, 9 and 4, not 5 and 6; user 3 has one window (its second would hold one item).
    assert numpy_pipeline.targets_outside_windows(SEQUENCES, 4, stride=5, **causal) == (4, 14)
    # Cloze windows of 3: every item a target, 19 in all; 4 of user 0's and 3 of user 3's left out.
    assert numpy_pipeline.targets_outside_windows(SEQUENCES, 3) == (7, 19)


def test_batches_reshuffle_every_epoch_and_drop_the_remainder():
    batches = numpy_pipeline.causal_batches(SEQUENCES, 3, 2, seed=0, drop_remainder=True)
    assert len(batches) == 2  # 4 windows
    first = np.concatenate([batches[i][1] for i in range(len(batches))])
    orders = []
    for _ in range(5):
        batches.on_epoch_end()
        orders.append(np.concatenate([batches[i][1] for i in range(len(batches))]))
    # Every epoch serves the same windows, in some epoch another order.
    for order in orders:
        np.testing.assert_array_equal(np.sort(order, axis=0), np.sort(first, axis=0))
    assert any(not np.array_equal(order, first) for order in orders)
    assert len(numpy_pipeline.causal_batches(SEQUENCES, 3, 3)) == 2  # 4 windows, the last batch partial
