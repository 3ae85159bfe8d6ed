"""The TFX SequenceBuilder on bad input: one timestamp rule, parameters checked, empty users counted."""

import os

import pytest

from components.sequence_builder import InputError
from tests.components.test_sequence_builder import _build, _read
from tfseqrec.data import vocab as vocab_lib


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_non_finite_timestamps_are_refused(tmp_path, value):
    rows = [
        {"user_id": "u", "item_id": "i", "timestamp": "1"},
        {"user_id": "u", "item_id": "j", "timestamp": value},
    ]
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


def test_event_example_gen_keeps_ids_as_written(tmp_path):
    """ "007" and "7" stay two items, and "1e3" does not turn the column into floats."""
    from tfx.types import standard_artifacts

    from components.event_example_gen import EventExampleGen
    from tests.components.conftest import make_artifact, run_executor

    data = tmp_path / "csv"
    data.mkdir()
    (data / "a.csv").write_text("user_id,item_id,timestamp\nu,007,1\nu,7,2\nu,1e3,1700000000.5\n")
    examples = make_artifact(standard_artifacts.Examples, tmp_path / "events")
    run_executor(
        EventExampleGen,
        {},
        {"examples": [examples]},
        {"input_base": str(data)},
        beam=True,
        tmp_dir=str(tmp_path / "tmp"),
    )
    sequences, _ = _build_from(tmp_path, examples)
    vocab = vocab_lib.ItemVocabulary.load(os.path.join(sequences.uri, "item_vocab.tsv"))
    test = _read(sequences, "test")
    assert sorted(vocab.items) == ["007", "1e3", "7"]
    assert vocab.to_raw(test.histories[0]) == ["007", "7"] and vocab.to_raw(test.targets) == ["1e3"]


def test_event_example_gen_reports_bad_rows_with_file_and_line(tmp_path):
    from tfx.types import standard_artifacts

    from components.event_example_gen import EventExampleGen
    from tests.components.conftest import make_artifact, run_executor

    data = tmp_path / "csv"
    data.mkdir()
    (data / "a.csv").write_text("user_id,item_id,timestamp\nu,1,1\nu,2,nan\n")
    examples = make_artifact(standard_artifacts.Examples, tmp_path / "events")
    with pytest.raises(
        Exception, match=r"a.csv:3: column 'timestamp': timestamp 'nan' is not a finite number"
    ):
        run_executor(
            EventExampleGen,
            {},
            {"examples": [examples]},
            {"input_base": str(data)},
            beam=True,
            tmp_dir=str(tmp_path / "tmp"),
        )


def _build_from(tmp_path, examples):
    """SequenceBuilder over an existing events artifact."""
    from tfx.types import standard_artifacts

    from components.artifacts import ItemVocabulary
    from components.sequence_builder import SequenceBuilder
    from tests.components.conftest import make_artifact, run_executor

    sequences = make_artifact(standard_artifacts.Examples, tmp_path / "sequences")
    vocabulary = make_artifact(ItemVocabulary, tmp_path / "vocabulary")
    run_executor(
        SequenceBuilder,
        {"examples": [examples]},
        {"sequences": [sequences], "vocabulary": [vocabulary]},
        {},
        beam=True,
        tmp_dir=str(tmp_path / "tmp2"),
    )
    return sequences, vocabulary
