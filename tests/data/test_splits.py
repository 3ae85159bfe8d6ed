import numpy as np
import pytest

from tfseqrec.data import readers, splits, vocab


def _interactions(rows):
    users, items, times = zip(*rows)
    return readers.Interactions(
        np.array(users, dtype=object), np.array(items, dtype=object), np.array(times, np.int64), has_time=True
    )


def test_sort_by_time_is_stable_on_ties():
    data = _interactions([("u", "c", 5), ("v", "z", 1), ("u", "a", 1), ("u", "b", 1)])
    out = splits.sort_by_time(data)
    assert out.users.tolist() == ["u", "u", "u", "v"]
    assert out.items.tolist() == ["a", "b", "c", "z"]  # a and b tie: file order


def test_k_core_is_iterative_and_reports():
    # Item "rare" has 1 event; removing it leaves user "w" with 1 event, which then goes.
    rows = [("u", "x", 1), ("u", "y", 2), ("v", "x", 1), ("v", "y", 2), ("w", "x", 1), ("w", "rare", 2)]
    out, report = splits.k_core(_interactions(rows), min_user_interactions=2, min_item_interactions=2)
    assert sorted(set(out.users.tolist())) == ["u", "v"]
    assert report == {"k_core": [2, 2], "removed_interactions": 2, "removed_users": 1, "removed_items": 1}


def test_build_sequences_and_repeats():
    data = splits.sort_by_time(_interactions([("u", "a", 1), ("u", "a", 2), ("u", "b", 3), ("v", "b", 1)]))
    seqs, v, report = splits.build_sequences(data)
    assert v.items == ["a", "b"]  # two events each: the tie goes to the natural id order
    assert [v.to_raw(s) for s in seqs.to_list()] == [["a", "a", "b"], ["b"]]
    seqs, _, report = splits.build_sequences(data, v, drop_repeats=True)
    assert [v.to_raw(s) for s in seqs.to_list()] == [["a", "b"], ["b"]]
    assert report["removed_repeats"] == 1


def test_oov_counted():
    data = splits.sort_by_time(_interactions([("u", "a", 1), ("u", "new", 2)]))
    seqs, _, report = splits.build_sequences(data, vocab.ItemVocabulary(["a"]))
    assert seqs[0].tolist() == [3, vocab.OOV_ID]
    assert report["oov_interactions"] == 1


def test_leave_one_out_by_hand():
    seqs = splits.Sequences.from_list(["u", "v", "w"], [[3, 4, 5, 6], [7, 8], [9, 10, 11]])
    split = splits.leave_one_out(seqs)
    assert split.train.to_list()[0].tolist() == [3, 4]
    assert split.train.to_list()[1].tolist() == [7, 8]  # too short: train only
    assert split.train.to_list()[2].tolist() == [9]
    assert split.valid.histories.users.tolist() == ["u", "w"]
    assert [h.tolist() for h in split.valid.histories.to_list()] == [[3, 4], [9]]
    assert split.valid.targets.tolist() == [5, 10]
    assert [h.tolist() for h in split.test.histories.to_list()] == [[3, 4, 5], [9, 10]]
    assert split.test.targets.tolist() == [6, 11]
    assert split.report["train_only_users"] == 1
    assert split.report["test_cases"] == 2


def test_leave_one_out_without_validation_by_hand():
    seqs = splits.Sequences.from_list(
        ["u", "v", "w"], [[3, 4, 5, 6], [7, 8], [9, 10, 11]], [[1, 2, 3, 4], [5, 6], [7, 8, 9]]
    )
    split = splits.leave_one_out(seqs, validation="none")
    # The second-to-last items (5 and 10) are training items; the last stay the test targets.
    assert [s.tolist() for s in split.train.to_list()] == [[3, 4, 5], [7, 8], [9, 10]]
    assert [t.tolist() for t in (split.train.times(0), split.train.times(2))] == [[1, 2, 3], [7, 8]]
    assert len(split.valid) == 0 and split.report["valid_cases"] == 0
    assert [h.tolist() for h in split.test.histories.to_list()] == [[3, 4, 5], [9, 10]]
    assert split.test.targets.tolist() == [6, 11] and split.report["train_interactions"] == 7
    with pytest.raises(ValueError, match="validation must be one of"):
        splits.leave_one_out(seqs, validation="first")


def test_prepare_without_validation_counts_the_second_to_last_item_as_training():
    # Item "c" occurs only as u's second-to-last item: trained on without a validation split.
    rows = [
        ("u", "a", 1),
        ("u", "b", 2),
        ("u", "c", 3),
        ("u", "d", 4),
        ("v", "a", 1),
        ("v", "b", 2),
        ("v", "d", 3),
    ]
    _, with_valid, _ = splits.prepare(_interactions(rows))
    without, vocabulary, _ = splits.prepare(_interactions(rows), validation="none")
    assert dict(zip(with_valid.items, with_valid.counts.tolist()))["c"] == 0
    assert dict(zip(vocabulary.items, vocabulary.counts.tolist())) == {"a": 2, "b": 2, "c": 1, "d": 0}
    assert [list(vocabulary.to_raw(s)) for s in without.train.to_list()] == [["a", "b", "c"], ["a", "b"]]
    assert len(without.valid) == 0 and list(vocabulary.to_raw(without.test.targets)) == ["d", "d"]


def test_sequences_select_and_drop_last():
    seqs = splits.Sequences.from_list(["a", "b", "c"], [[1, 2, 3], [4], [5, 6]])
    picked = seqs.select([2, 0])
    assert [s.tolist() for s in picked.to_list()] == [[5, 6], [1, 2, 3]]
    assert [s.tolist() for s in seqs.drop_last(1).to_list()] == [[1, 2], [], [5]]


def test_cold_start_split():
    rng = np.random.default_rng(0)
    seq_list = [rng.choice(np.arange(3, 53), size=rng.integers(2, 15), replace=False) for _ in range(300)]
    seqs = splits.Sequences.from_list([str(i) for i in range(300)], seq_list)
    cold = splits.cold_start_split(seqs, cold_item_fraction=0.2, seed=1)
    assert len(cold.cold_items) == 10
    assert not np.isin(cold.train.values, cold.cold_items).any()
    assert np.isin(cold.test_cold.targets, cold.cold_items).all()
    assert not np.isin(cold.test_warm.targets, cold.cold_items).any()
    assert len(cold.test_cold) + len(cold.test_warm) == 300
    assert cold.test_cold.targets.size > 0
    removed = sum(np.isin(s[:-1], cold.cold_items).sum() for s in seq_list)
    assert cold.report["removed_interactions"] == removed


def test_prepare_on_ml1m_counts(data_root):
    data = readers.read_interactions(data_root / "ml-1m" / "ml-1m.txt")
    split, v, report = splits.prepare(data)
    assert (report["num_users"], report["num_items"], report["num_interactions"]) == (6040, 3416, 999611)
    assert report["test_cases"] == report["valid_cases"] == 6040
    assert report["train_interactions"] == 999611 - 2 * 6040


def test_prepare_counts_training_events_only():
    # u: a b | c (valid) | d (test); v: b | c | c; w is too short to evaluate: d d, all training.
    rows = [
        ("u", "a", 1),
        ("u", "b", 2),
        ("u", "c", 3),
        ("u", "d", 4),
        ("v", "b", 1),
        ("v", "c", 2),
        ("v", "c", 3),
        ("w", "d", 1),
        ("w", "d", 2),
    ]
    _, v, _ = splits.prepare(_interactions(rows))
    # Training events: a 1, b 2, d 2 (w); c only ever held out: kept with count 0, last.
    # (Counting every event would give c 3, d 3, b 2, a 1.)
    assert v.items == ["b", "d", "a", "c"] and v.counts.tolist() == [2, 2, 1, 0]
    # Other held-out targets (u's test d -> a, v's valid c -> a) leave the counts as they were.
    changed = [(u, "a" if (u, t) in {("u", 4), ("v", 2)} else i, t) for u, i, t in rows]
    split, v2, _ = splits.prepare(_interactions(changed))
    assert (v2.items, v2.counts.tolist()) == (v.items, v.counts.tolist())
    assert v2.to_raw(split.test.targets) == ["a", "c"] and v2.to_raw(split.valid.targets) == ["c", "a"]
    # Ids follow the training counts; a given vocabulary is used as it is.
    assert v.lookup(["b", "c"]).tolist() == [3, 6]
    given = vocab.ItemVocabulary(["c", "a", "b", "d"], [9, 9, 9, 9])
    assert splits.prepare(_interactions(rows), vocabulary=given)[1] is given


def test_event_times_follow_their_items_through_every_split():
    # Times are the item id * 10 + the user's number: any misalignment shows.
    rows = [("u", "a", 10), ("u", "b", 20), ("u", "c", 30), ("u", "d", 40), ("v", "e", 11), ("v", "f", 21)]
    split, v, _ = splits.prepare(_interactions(rows))
    seconds = dict(((u, item), t) for u, item, t in rows)

    def expected(sequences, row):
        return [seconds[(sequences.users[row], item)] for item in v.to_raw(sequences[row])]

    for seqs in (split.train, split.valid.histories, split.test.histories, split.test.histories.select([0])):
        assert len(seqs.timestamps) == len(seqs.values)
        for row in range(len(seqs)):
            assert seqs.times(row).tolist() == expected(seqs, row)
    assert split.test.histories.times(0).tolist() == [10, 20, 30]
    cold = splits.cold_start_split(
        splits.build_sequences(splits.sort_by_time(_interactions(rows)), v)[0], 0.5
    )
    assert all(cold.train.times(r).tolist() == expected(cold.train, r) for r in range(len(cold.train)))


def test_sequences_without_real_times_have_none():
    data = readers.Interactions(
        np.array(["u", "u"], dtype=object), np.array(["a", "b"], dtype=object), np.arange(2), has_time=False
    )  # the SASRec format's line numbers
    split, _, _ = splits.prepare(data)
    assert split.train.timestamps is None and split.test.histories.timestamps is None
    seqs = splits.Sequences.from_list(["u"], [[3, 4]], [[5, 6]])
    assert seqs.drop_last(1).timestamps.tolist() == [5]


def test_item_counts_by_hand():
    seqs = splits.Sequences.from_list(["a", "b"], [[3, 4, 3], [5, 3]])
    assert seqs.item_counts(7).tolist() == [0, 0, 0, 3, 1, 1, 0]


# --- the temporal split ---------------------------------------------------------------


def _brute_force_temporal(seqs, times, test_start, valid_start, targets):
    """The temporal split user by user, in plain Python: ``(train, valid, test)`` as lists."""
    train, valid, test = [], [], []
    for items, stamps in zip(seqs, times):
        before = [i for i, t in zip(items, stamps) if t < test_start]
        period = [i for i, t in zip(items, stamps) if t >= test_start]
        if before and period:
            test += [(list(before), target) for target in (period if targets == "all" else period[:1])]
        if valid_start is None:
            if len(before) >= 2:
                valid.append((before[:-1], before[-1]))
                train.append(before[:-1])
            else:
                train.append(before)
        else:
            early = [i for i, t in zip(items, stamps) if t < valid_start]
            middle = [i for i, t in zip(items, stamps) if valid_start <= t < test_start]
            if early and middle:
                valid += [(list(early), target) for target in (middle if targets == "all" else middle[:1])]
            train.append(early)
    return train, valid, test


def _as_lists(cases):
    return [(h.tolist(), int(t)) for h, t in zip(cases.histories.to_list(), cases.targets)]


@pytest.mark.parametrize("valid_start", [None, 55])
@pytest.mark.parametrize("targets", ["all", "first"])
def test_the_temporal_split_is_the_brute_force_one(valid_start, targets):
    rng = np.random.default_rng(0)
    users, seqs, times = [], [], []
    for u in range(60):
        n = int(rng.integers(1, 12))
        users.append(f"u{u}")
        seqs.append(rng.integers(3, 40, size=n).tolist())
        times.append(np.sort(rng.integers(0, 100, size=n)).tolist())
    split = splits.temporal_split(
        splits.Sequences.from_list(users, seqs, times), 70, valid_start=valid_start, targets=targets
    )
    train, valid, test = _brute_force_temporal(seqs, times, 70, valid_start, targets)
    assert [s.tolist() for s in split.train.to_list()] == train
    assert _as_lists(split.valid) == valid and _as_lists(split.test) == test
    assert len(test) > 10 and len(valid) > 10


def test_a_temporal_split_at_a_time_outside_the_log_is_refused():
    seqs = splits.Sequences.from_list(["a", "b"], [[3, 4], [5, 6]], [[10, 20], [15, 30]])
    with pytest.raises(ValueError, match="test_start .* leaves a period empty: the events run from"):
        splits.temporal_split(seqs, 31)
    with pytest.raises(ValueError, match="leaves a period empty"):
        splits.temporal_split(seqs, 10)  # nothing before it
    with pytest.raises(ValueError, match="valid_start .* must come before test_start"):
        splits.temporal_split(seqs, 15, valid_start=20)
    with pytest.raises(ValueError, match="needs event times"):
        splits.temporal_split(splits.Sequences.from_list(["a"], [[3, 4]]), 1)
