"""The TFX SequenceBuilder on bad input: one timestamp rule, parameters checked, empty users counted."""

import os

import pytest

from components.sequence_builder import InputError
from tests.components.test_sequence_builder import _build, _read
from tfseqrec.data import vocab as vocab_lib


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_non_finite_timestamps_are_refused(tmp_path, value):
    rows = [{"user_id": "u", "item_id": "i", "timestamp": "1"}, {"user_id": "u", "item_id": "j", "timestamp": value}]
    with pytest.raises(Exception, match="is not a finite number"):
        _build(tmp_path, {"train": rows})


def test_naive_iso_dates_are_utc_as_in_the_readers(tmp_path):
    # Naive 00:30 is UTC: between 00:10Z and 01:00Z, whatever the machine's time zone.
    rows = [
        {"user_id": "u", "item_id": "b", "timestamp": "2020-01-01T00:30:00"},
        {"user_id": "u", "item_id": "a", "timestamp": "2020-01-01T00:10:00+00:00"},
        {"user_id": "u", "item_id": "c", "timestamp": "2020-01-01T01:00:00+00:00"},
    ]
    sequences, _ = _build(tmp_path, {"train": rows})
    vocab = vocab_lib.ItemVocabulary.load(os.path.join(sequences.uri, "item_vocab.tsv"))
    test = _read(sequences, "test")
    assert vocab.to_raw(test.histories[0]) == ["a", "b"] and vocab.to_raw(test.targets) == ["c"]


@pytest.mark.parametrize("bad", [1, 2, -3])
def test_min_sequence_length_is_checked(tmp_path, bad):
    rows = [{"user_id": "u", "item_id": "i", "timestamp": "1"}]
    with pytest.raises(Exception, match=r"min_sequence_length must be an integer >= 3"):
        _build(tmp_path, {"train": rows}, min_sequence_length=bad)


def test_empty_user_ids_are_refused_with_a_count(tmp_path):
    rows = [
        {"user_id": "u", "item_id": "i", "timestamp": "1"},
        {"user_id": "", "item_id": "j", "timestamp": "2"},
        {"user_id": " ", "item_id": "k", "timestamp": "3"},
    ]
    with pytest.raises(InputError, match=r"2 input records have an empty 'user_id'"):
        _build(tmp_path, {"train": rows})
