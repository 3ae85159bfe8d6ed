import numpy as np
import tensorflow as tf

from tfseqrec.data import splits, tfrecord, vocab


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
