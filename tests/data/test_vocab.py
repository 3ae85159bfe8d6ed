import numpy as np
import pytest
import tensorflow as tf

from tfseqrec.data import vocab


def test_reserved_layout():
    assert (vocab.PAD_ID, vocab.MASK_ID, vocab.OOV_ID, vocab.NUM_RESERVED) == (0, 1, 2, 3)


def test_from_items_orders_by_count_then_natural_id():
    v = vocab.ItemVocabulary.from_items(["10", "2", "2", "10", "7", "3"])
    assert v.items == ["2", "10", "3", "7"]
    assert v.counts.tolist() == [2, 2, 1, 1]
    assert v.size == 4 + vocab.NUM_RESERVED


def test_lookup_and_back():
    v = vocab.ItemVocabulary(["a", "b"])
    assert v.lookup(["b", "a", "nope"]).tolist() == [4, 3, vocab.OOV_ID]
    assert v.to_raw([3, 4, 0, 1, 2]) == ["a", "b", "[PAD]", "[MASK]", "[OOV]"]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        v.to_raw([5])


def test_save_load_round_trip(tmp_path):
    v = vocab.ItemVocabulary.from_items(["x", "y", "y", "z é"])
    path = v.save(tmp_path)
    assert path.endswith(vocab.VOCAB_FILENAME)
    assert vocab.ItemVocabulary.load(tmp_path) == v


def test_load_names_file_and_line(tmp_path):
    bad = tmp_path / "v.tsv"
    bad.write_text("a\t1\nb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"v\.tsv:2: expected"):
        vocab.ItemVocabulary.load(bad)


def test_rejects_ids_that_cannot_be_stored():
    with pytest.raises(ValueError, match="tab or newline"):
        vocab.ItemVocabulary(["a\tb"])
    with pytest.raises(ValueError, match="duplicate"):
        vocab.ItemVocabulary(["a", "a"])


def test_tf_lookup_table_matches_numpy_lookup(tmp_path):
    # By hand: "6" is the most frequent, then count ties in natural order (7 before 10);
    # ids start after the reserved ones, anything else is OOV.
    v = vocab.ItemVocabulary.from_items(["5", "6", "6", "10", "7"])
    expected = {"6": 3, "5": 4, "7": 5, "10": 6, "unknown": vocab.OOV_ID, "": vocab.OOV_ID, "1": vocab.OOV_ID}
    table = v.lookup_table(v.save(tmp_path))
    raw = ["7", "6", "unknown", "5", "10", "", "1", "6"]
    want = [expected[r] for r in raw]
    assert table.lookup(tf.constant(raw)).numpy().tolist() == want
    assert v.lookup(raw).tolist() == want


def test_factorize_against_numpy_unique():
    raw = np.random.default_rng(0).integers(0, 50, size=500).astype(str).astype(object)
    uniques, codes = vocab.factorize(raw)
    assert (uniques[codes] == raw).all()
    first_seen = np.sort(np.unique(raw, return_index=True)[1])
    assert uniques.tolist() == raw[first_seen].tolist()  # order of first appearance
    assert vocab.factorize([3, "3", np.int64(4)])[0].tolist() == ["3", "4"]
    with pytest.raises(ValueError, match="None"):
        vocab.factorize(["a", None])
