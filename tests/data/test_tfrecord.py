import numpy as np
import pytest
import tensorflow as tf

from tfseqrec.data import events, splits, tfrecord, vocab


def _fixture():
    v = vocab.ItemVocabulary(["a", "b", "c"])
    seqs = splits.Sequences.from_list(["u1", "u2"], [[3, 4, 5], [5]])
    return v, seqs


def test_round_trip_sequences(tmp_path):
    v, seqs = _fixture()
    path = tmp_path / "train.tfrecord.gz"
    assert tfrecord.write_examples(path, seqs, v, compression="GZIP") == 2
    back = tfrecord.read_examples(path, compression="GZIP")
    assert back.users.tolist() == ["u1", "u2"]
    np.testing.assert_array_equal(back.values, seqs.values)
    np.testing.assert_array_equal(back.row_splits, seqs.row_splits)


def test_round_trip_cases(tmp_path):
    v, seqs = _fixture()
    cases = splits.Cases(seqs, np.array([4, 3]))
    path = tmp_path / "test.tfrecord"
    tfrecord.write_examples(path, cases, v)
    back = tfrecord.read_examples(path)
    assert isinstance(back, splits.Cases)
    assert back.targets.tolist() == [4, 3]


def test_parse_in_graph(tmp_path):
    v, seqs = _fixture()
    path = tmp_path / "x.tfrecord"
    tfrecord.write_examples(path, splits.Cases(seqs, np.array([4, 3])), v)
    batch = next(iter(tf.data.TFRecordDataset(str(path)).batch(2).map(tfrecord.parse_examples)))
    assert batch["user_id"].numpy().tolist() == [b"u1", b"u2"]
    assert batch["items"].to_list() == [[b"a", b"b", b"c"], [b"c"]]
    assert batch["item_ids"].to_list() == [[3, 4, 5], [5]]
    assert batch["target"].to_list() == [[b"b"], [b"a"]]


def test_round_trip_keeps_event_times(tmp_path):
    v, seqs = _fixture()
    timed = splits.Sequences(seqs.users, seqs.values, seqs.row_splits, np.array([7, 8, 9, 1_700_000_000]))
    path = tmp_path / "timed.tfrecord"
    tfrecord.write_examples(path, splits.Cases(timed, np.array([4, 3])), v)
    back = tfrecord.read_examples(path)
    assert back.histories.timestamps.tolist() == [7, 8, 9, 1_700_000_000]
    tfrecord.write_examples(tmp_path / "plain.tfrecord", seqs, v)
    assert tfrecord.read_examples(tmp_path / "plain.tfrecord").timestamps is None
    with pytest.raises(ValueError, match="a record has 0 timestamps for 3 items"):  # one batch, mixed
        tfrecord.read_examples([path, tmp_path / "plain.tfrecord"])
    with pytest.raises(ValueError, match="some records have timestamps and some do not"):  # batch by batch
        tfrecord.read_examples([path, tmp_path / "plain.tfrecord"], batch_size=2)
    with pytest.raises(ValueError, match="2 items but 1 timestamps"):
        tfrecord.make_example("u", [3, 4], ["a", "b"], timestamps=[5])


def test_event_values_ride_raw_and_encode_by_a_vocabulary(tmp_path):
    path = tmp_path / "events.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for user, items, kinds in (("u1", ["a", "b"], ["view", "buy"]), ("u2", ["c"], [""])):
            example = tfrecord.make_example(user, [3, 4][: len(items)], items, events={"kind": kinds})
            writer.write(example.SerializeToString())
    back = tfrecord.read_examples(path, event_columns=["kind"])
    assert back.events["kind"].tolist() == ["view", "buy", ""]
    encoded = tfrecord.encode_events(back, events.EventVocabulary({"kind": ["buy", "view"]}))
    assert encoded.events["kind"].tolist() == [4, 3, 1]  # FIRST_VALUE 3 on; 1: an empty field
    assert tfrecord.read_examples(path).events is None  # columns not asked for are not read
    with pytest.raises(ValueError, match="a record has 0 'event_device' values for 2 items"):
        tfrecord.read_examples(path, event_columns=["device"])
    with pytest.raises(ValueError, match="2 items but 1 'kind' values"):
        tfrecord.make_example("u", [3, 4], ["a", "b"], events={"kind": ["view"]})
    with pytest.raises(ValueError, match="carry event context"):
        tfrecord.write_examples(tmp_path / "x.tfrecord", encoded, vocab.ItemVocabulary(["a", "b"]))
