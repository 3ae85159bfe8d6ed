"""SequenceBuilder: events to leave-one-out sequence Examples with Beam."""

import glob
import json
import os

import pytest
import tensorflow as tf
from tfx.types import artifact_utils, standard_artifacts

from components import beam_io
from components.artifacts import ItemVocabulary
from components.sequence_builder import InputError, SequenceBuilder, order_user
from tests.components.conftest import BEAM_ARGS, make_artifact, run_executor, write_event_examples
from tfseqrec.data import splits as splits_lib
from tfseqrec.data import synthetic, tfrecord
from tfseqrec.data import vocab as vocab_lib


def test_component_contract():
    spec = SequenceBuilder.SPEC_CLASS
    assert spec.INPUTS["examples"].type == standard_artifacts.Examples
    assert spec.OUTPUTS["sequences"].type == standard_artifacts.Examples
    assert spec.OUTPUTS["vocabulary"].type == ItemVocabulary
    assert {"user_column", "item_column", "time_column", "min_sequence_length"} <= set(spec.PARAMETERS)


@pytest.mark.parametrize("name", ["records.gz", "records"])
def test_a_file_s_records_come_back_whole_and_in_order(tmp_path, name):
    # More than two reading batches, the last one short; gzipped or not.
    path = str(tmp_path / name)
    written = [f"record {i}".encode() * (i % 3 + 1) for i in range(2 * beam_io.READ_BATCH + 5)]
    with tf.io.TFRecordWriter(path, options="GZIP" if name.endswith(".gz") else None) as writer:
        for record in written:
            writer.write(record)
    assert list(beam_io.file_records(path)) == written


def test_a_user_s_exact_duplicate_events_are_kept_once():
    # Time order, ties by item id; (5, "b") twice is one event, "b" at another time is another.
    events = [(7, "b", ()), (5, "b", ()), (5, "a", ()), (5, "b", ()), (1, "c", ())]
    assert order_user(("u", events)) == ("u", ["c", "a", "b", "b"], [1, 5, 5, 7], {})
    # With context, the same item at the same time is one event too, with the first value in text order.
    events = [(5, "b", ("view",)), (5, "b", ("buy",)), (1, "c", ("view",))]
    assert order_user(("u", events), ("kind",)) == ("u", ["c", "b"], [1, 5], {"kind": ["view", "buy"]})


def test_event_columns_ride_with_their_items(tmp_path):
    kinds = ["view", "cart", "buy", "view"]
    rows = [{"user_id": "u", "item_id": f"i{t}", "timestamp": t, "kind": kinds[t]} for t in range(4)]
    rows.append({"user_id": "v", "item_id": "i9", "timestamp": 0, "kind": ""})  # an empty field: no value
    sequences, _ = _build(tmp_path, {"train": rows}, event_columns="kind")
    raw = {}
    for name in ("train", "eval", "test"):
        data = _read(sequences, name, ["kind"])
        histories = data if name == "train" else data.histories
        raw[name] = {
            u: histories.events["kind"][histories.row_splits[i] : histories.row_splits[i + 1]].tolist()
            for i, u in enumerate(histories.users)
        }
    # Leave-one-out histories are prefixes of the user's events: their values are too.
    assert raw == {
        "train": {"u": ["view", "cart"], "v": [""]},
        "eval": {"u": ["view", "cart"]},
        "test": {"u": ["view", "cart", "buy"]},
    }
    with pytest.raises(InputError, match="column 'device' is missing from the input examples"):
        _build(tmp_path / "again", {"train": rows}, event_columns="device")


def _build(tmp_path, splits, beam_args=BEAM_ARGS, **parameters):
    return _build_from(tmp_path, write_event_examples(tmp_path / "events", splits), beam_args, **parameters)


def _build_from(tmp_path, examples, beam_args=BEAM_ARGS, **parameters):
    """The SequenceBuilder's ``(sequences, vocabulary)`` artifacts of event ``examples``."""
    sequences = make_artifact(standard_artifacts.Examples, tmp_path / "sequences")
    vocabulary = make_artifact(ItemVocabulary, tmp_path / "vocabulary")
    run_executor(
        SequenceBuilder,
        {"examples": [examples]},
        {"sequences": [sequences], "vocabulary": [vocabulary]},
        parameters,
        beam=True,
        tmp_dir=str(tmp_path / "tmp"),
        beam_args=beam_args,
    )
    return sequences, vocabulary


def _read(sequences, split, event_columns=()):
    path = os.path.join(artifact_utils.get_split_uri([sequences], split), "*")
    return tfrecord.read_examples(sorted(glob.glob(path)), compression="GZIP", event_columns=event_columns)


def test_leave_one_out_splits_and_vocabulary(tmp_path):
    events = {
        # Events of one user are spread over both input splits and out of order.
        "train": [
            {"user_id": "u1", "item_id": "10", "timestamp": 3},
            {"user_id": "u1", "item_id": "20", "timestamp": 1},
            {"user_id": "u2", "item_id": "10", "timestamp": 5},
        ],
        "eval": [
            {"user_id": "u1", "item_id": "30", "timestamp": 2},
            {"user_id": "u1", "item_id": "10", "timestamp": 4},
            {"user_id": "u2", "item_id": "30", "timestamp": 6},
        ],
    }
    sequences, vocabulary = _build(tmp_path, events)
    assert artifact_utils.decode_split_names(sequences.split_names) == ["train", "eval", "test", "full"]
    vocab = vocab_lib.ItemVocabulary.load(os.path.join(vocabulary.uri, "item_vocab.tsv"))
    # Training events only: u1's 20 30 and u2's 10 30 (u1's held-out 10 10 do not count;
    # over all events 10 would lead with 3).
    assert vocab.items == ["30", "10", "20"] and vocab.counts.tolist() == [2, 1, 1]
    assert vocab == vocab_lib.ItemVocabulary.load(os.path.join(sequences.uri, "item_vocab.tsv"))
    # u1 in time order: 20 30 10 10 -> train 20 30, eval 10 after [20 30], test 10 after [20 30 10].
    train = _read(sequences, "train")
    rows = {u: vocab.to_raw(train[i]) for i, u in enumerate(train.users)}
    assert rows == {"u1": ["20", "30"], "u2": ["10", "30"]}  # u2 is too short to evaluate
    valid, test = _read(sequences, "eval"), _read(sequences, "test")
    assert list(valid.histories.users) == ["u1"] and vocab.to_raw(valid.targets) == ["10"]
    assert vocab.to_raw(test.histories[0]) == ["20", "30", "10"] and vocab.to_raw(test.targets) == ["10"]
    # Each item keeps its event's time (HSTU's time bias reads them).
    assert test.histories.times(0).tolist() == [1, 2, 3] and valid.histories.times(0).tolist() == [1, 2]
    assert {u: train.times(i).tolist() for i, u in enumerate(train.users)} == {"u1": [1, 2], "u2": [5, 6]}
    full = _read(sequences, "full")  # each user's whole sequence: what to recommend from
    assert {u: vocab.to_raw(full[i]) for i, u in enumerate(full.users)} == {
        "u1": ["20", "30", "10", "10"],
        "u2": ["10", "30"],
    }
    assert sequences.get_int_custom_property("num_users") == 2
    assert sequences.get_int_custom_property("test_records") == 1
    assert vocabulary.get_int_custom_property("num_items") == 3
    with open(os.path.join(sequences.uri, "summary.json")) as f:
        assert json.load(f)["num_items"] == 3


def test_iso_timestamps_and_named_columns(tmp_path):
    rows = [
        {"uid": 7, "movie": 2, "when": "2024-01-03T00:00:00Z"},
        {"uid": 7, "movie": 1, "when": "2024-01-01"},
        {"uid": 7, "movie": 3, "when": "2024-01-02T12:00:00+00:00"},
    ]
    sequences, _ = _build(
        tmp_path, {"train": rows}, user_column="uid", item_column="movie", time_column="when"
    )
    test = _read(sequences, "test")
    vocab = vocab_lib.ItemVocabulary.load(os.path.join(sequences.uri, "item_vocab.tsv"))
    assert list(test.histories.users) == ["7"]
    assert vocab.to_raw(test.histories[0]) == ["1", "3"] and vocab.to_raw(test.targets) == ["2"]


def test_missing_column_names_it(tmp_path):
    rows = [{"user_id": "u", "item_id": "i"}]
    with pytest.raises(InputError, match="column 'timestamp' is missing from the input examples"):
        _build(tmp_path, {"train": rows})


def test_unparsable_timestamp_names_the_column_and_value(tmp_path):
    rows = [
        {"user_id": "u", "item_id": "i", "timestamp": "1"},
        {"user_id": "u", "item_id": "j", "timestamp": "later"},
    ]
    with pytest.raises(Exception, match="column 'timestamp': cannot parse timestamp 'later'"):
        _build(tmp_path, {"train": rows})


def _records(sequences, vocab):
    """Every output record as comparable raw values, in user order, per split."""
    out = {}
    for name in ("train", "eval", "test"):
        data = _read(sequences, name)
        if name == "train":
            rows = [(u, tuple(vocab.to_raw(data[i]))) for i, u in enumerate(data.users)]
        else:
            rows = [
                (u, tuple(vocab.to_raw(data.histories[i])), vocab.to_raw([data.targets[i]])[0])
                for i, u in enumerate(data.histories.users)
            ]
        out[name] = sorted(rows)
    return out


def test_multi_process_runner_gives_the_in_process_output_and_the_library_split(tmp_path):
    log = synthetic.generate(num_events=1_500, num_items=80, num_users=60, seed=5)
    rows = [
        {"user_id": f"u{u}", "item_id": str(i), "timestamp": int(t)}
        for u, i, t in zip(log.users, log.items, log.timestamps)
    ]
    events = {"train": rows[::2], "eval": rows[1::2]}  # a user's events spread over both input splits
    outputs = {}
    for mode, args in (
        ("in_memory", BEAM_ARGS),
        ("multi_processing", ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]),
    ):
        sequences, vocabulary = _build(tmp_path / mode, events, beam_args=args)
        vocab = vocab_lib.ItemVocabulary.load(os.path.join(vocabulary.uri, "item_vocab.tsv"))
        outputs[mode] = (vocab.items, vocab.counts.tolist(), _records(sequences, vocab))
    assert outputs["multi_processing"] == outputs["in_memory"]
    # The library's own split of the same log (timestamps are distinct per user, so
    # both orders agree) gives the same vocabulary and records.
    split, vocab, _ = splits_lib.prepare(log.to_interactions())
    assert outputs["in_memory"][0] == vocab.items and outputs["in_memory"][1] == vocab.counts.tolist()
    expected = {
        "train": sorted(
            ("u" + u, tuple(vocab.to_raw(split.train[i]))) for i, u in enumerate(split.train.users)
        ),
        "eval": sorted(
            ("u" + u, tuple(vocab.to_raw(split.valid.histories[i])), vocab.to_raw([t])[0])
            for i, (u, t) in enumerate(zip(split.valid.histories.users, split.valid.targets))
        ),
        "test": sorted(
            ("u" + u, tuple(vocab.to_raw(split.test.histories[i])), vocab.to_raw([t])[0])
            for i, (u, t) in enumerate(zip(split.test.histories.users, split.test.targets))
        ),
    }
    assert outputs["in_memory"][2] == expected
