import numpy as np
import pytest

from tfseqrec.data import readers, splits, synthetic


def test_sizes_lengths_and_time_order_are_as_asked():
    log = synthetic.generate(num_events=5_000, num_items=300, num_users=100, seed=3, min_length=5)
    assert len(log) == 5_000
    lengths = np.bincount(log.users, minlength=100)
    assert lengths.min() >= 5 and lengths.sum() == 5_000
    assert lengths.max() > 3 * np.median(lengths)  # a long tail, not equal lengths
    assert log.items.min() >= 0 and log.items.max() < 300
    assert np.all(np.diff(log.timestamps) >= 0)  # one log in time order
    for u in range(3):  # and strictly increasing per user
        assert np.all(np.diff(log.timestamps[log.users == u]) > 0)


def test_the_same_seed_gives_the_same_log():
    a, b = (synthetic.generate(2_000, 100, 40, seed=1) for _ in range(2))
    c = synthetic.generate(2_000, 100, 40, seed=2)
    assert all(
        np.array_equal(x, y)
        for x, y in zip((a.users, a.items, a.timestamps), (b.users, b.items, b.timestamps))
    )
    assert not np.array_equal(a.items, c.items)


def test_popularity_is_zipf_and_follows_continue_a_cycle():
    log = synthetic.generate(200_000, 1_000, 2_000, seed=0, zipf_exponent=1.0, follow_prob=0.0)
    counts = np.sort(np.bincount(log.items, minlength=1_000))[::-1]
    # Zipf(1): the top item is drawn about twice as often as the second, ten times the tenth.
    assert 1.7 < counts[0] / counts[1] < 2.3 and 8 < counts[0] / counts[9] < 12
    follow = synthetic.generate(50_000, 1_000, 500, seed=0, follow_prob=0.8)
    order = np.lexsort((follow.timestamps, follow.users))
    users, items = follow.users[order], follow.items[order]
    same_user = users[1:] == users[:-1]
    pairs = items[:-1][same_user] * 1_000 + items[1:][same_user]
    # Most transitions repeat one of 1,000 successor pairs: the walk along the cycle.
    top = np.sort(np.bincount(pairs))[::-1][:1_000].sum()
    assert top / same_user.sum() > 0.75


def test_csv_round_trip_through_the_reader(tmp_path):
    log = synthetic.generate(3_000, 200, 60, seed=0)
    path = synthetic.write_csv(log, tmp_path / "synthetic.csv.gz", chunk_events=1_000)
    data = readers.read_interactions(path)
    assert data.users.tolist() == log.users.astype(str).tolist()
    assert data.items.tolist() == log.items.astype(str).tolist()
    assert data.timestamps.tolist() == log.timestamps.tolist() and data.has_time
    split, _, report = splits.prepare(data)
    assert report["num_users"] == 60 and report["test_cases"] == 60


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_events=100, num_items=10, num_users=30), "need 150 events"),
        (dict(num_events=0, num_items=10), r"num_events must be an integer >= 1, got 0"),
        (dict(num_events=100, num_items=10, num_users=2, follow_prob=1.5), "follow_prob"),
    ],
)
def test_bad_sizes_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        synthetic.generate(**kwargs)
