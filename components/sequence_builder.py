"""SequenceBuilder: interaction ``Examples`` to per-user sequence ``Examples``, with Beam.

Input: ``Examples`` with one event per record (``EventExampleGen`` over
``user,item,timestamp`` CSV files; int64 and float features are read too), from every
split it has, and the ``event_columns`` (comma-separated) of the events' context. Output:

- ``sequences``: ``Examples`` in the ``tfseqrec.data.tfrecord`` schema (with the
  items' ``timestamps``, in seconds), splits
  ``train`` (each user's sequence without its last two items), ``eval`` and ``test``
  (leave-one-out cases: the history and the held-out next item), and ``full`` (each user's
  whole sequence: the histories to recommend from, as the pipeline's BulkInferrer does). Users with fewer than
  ``min_sequence_length`` events give their whole sequence to ``train`` and no case,
  as ``tfseqrec.data.splits.leave_one_out`` does. Each record also carries the raw values
  of the ``event_columns`` (``event_<column>``, one per item; their vocabulary is the
  Trainer's, from the training split). The vocabulary is also written at
  ``sequences.uri/item_vocab.tsv``, so a Trainer given only these ``Examples`` has it.
- ``vocabulary``: ``ItemVocabulary`` (``item_vocab.tsv``), items by their count of
  *training* interactions (held-out validation and test items count 0 there), as
  ``tfseqrec.data.splits.prepare`` counts them.

Events of a user are ordered by time; equal times by item id, so every runner
produces the same sequences. Events with the same user, item and time are kept once
(the first of their context values in text order, whatever order the runner reads them in). Timestamps may be numbers or ISO 8601 strings.

The work is two Apache Beam pipelines (read, group by user, count items; then split and
write) of the transforms every runner translates (``components.beam_io``), so it runs on
the DirectRunner here, on a ``dask.distributed`` cluster (``components.dask_runner``), and on
Dataflow, Flink or Spark through the pipeline's ``beam_pipeline_args``.
"""

import itertools
import json
import os
import pickle

import apache_beam as beam
import tensorflow as tf
from tfx import v1 as tfx
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils

from components import beam_io
from components.artifacts import ItemVocabulary
from tfseqrec.data import events as events_lib
from tfseqrec.data import readers, splits, tfrecord
from tfseqrec.data import vocab as vocab_lib

SPLITS = ("train", "eval", "test", "full")
EMPTY_USERS_FILE = "empty_users.count"
# Where the first pipeline leaves each user's ordered events for the second (removed after).
STAGING_DIR = ".users"
NAMESPACE = "tfseqrec.SequenceBuilder"


class InputError(ValueError):
    """Bad input events; the message names the column and the offending value."""


def feature_value(example, column):
    """The single value of ``column`` in a ``tf.train.Example`` (bytes, int or float)."""
    feature = example.features.feature.get(column)
    if feature is None:
        raise InputError(
            f"column {column!r} is missing from the input examples "
            f"(they have {sorted(example.features.feature)})"
        )
    kind = feature.WhichOneof("kind")
    values = getattr(feature, kind).value if kind else []
    if len(values) != 1:
        return None
    return values[0]


def parse_time(value, column):
    """A timestamp as a float, by ``readers.parse_timestamp`` (naive ISO dates are UTC)."""
    if isinstance(value, (int, float)):
        text = repr(value)
    else:
        text = value.decode("utf-8", "replace")
    try:
        return readers.parse_timestamp(text)
    except ValueError as e:
        raise InputError(f"column {column!r}: {e}") from None


def parse_event(record, user_column, item_column, time_column, event_columns=()):
    """``(user, (time, item, context))`` of one serialized event record; ``context`` is the tuple
    of the ``event_columns``' values (text; ``""`` where a record has none)."""
    example = tf.train.Example.FromString(record)
    values = {}
    context = tuple(_text(feature_value(example, c) or b"").strip() for c in event_columns)
    for column in (user_column, item_column, time_column):
        value = feature_value(example, column)
        if value is None:
            raise InputError(f"column {column!r} has no single value in record {_short(example)}")
        values[column] = value
    # Stripped as the library's readers strip CSV fields.
    user, item = _text(values[user_column]).strip(), _text(values[item_column]).strip()
    if not item or "\t" in item or "\n" in item:
        raise InputError(f"column {item_column!r}: item id {item!r} is empty or holds a tab or newline")
    return user, (parse_time(values[time_column], time_column), item, context)


def ordered_vocabulary(counts):
    """The ``ItemVocabulary`` of ``(item, count)`` pairs (its own order: most frequent first)."""
    return vocab_lib.ItemVocabulary.from_counts(dict(counts))


def write_vocabulary(vocabulary, paths):
    for path in paths:
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(vocabulary.serialize())
    return vocabulary.num_items


def order_user(element, event_columns=()):
    """``(user, items, times, context)``: a user's events in time order (equal times by item id);
    ``context``: ``{column: values}`` of the ``event_columns``, one per item.

    An event with the same item at the same time as another is kept once, as
    ``splits.drop_duplicates`` keeps it in ``tfseqrec train`` (with the first of their
    context values in text order, so that every runner keeps the same one).
    """
    user, events = element
    ordered = sorted(set(events), key=lambda e: (e[0], vocab_lib.natural_key(e[1]), e[2]))
    kept = [e for i, e in enumerate(ordered) if i == 0 or e[:2] != ordered[i - 1][:2]]
    context = {column: [e[2][c] for e in kept] for c, column in enumerate(event_columns)}
    return user, [e[1] for e in kept], [e[0] for e in kept], context


def training_counts(element, min_length):
    """``(item, count)`` pairs of one user: 1 per training event, 0 for a held-out one.

    Training events are those ``splits.leave_one_out`` keeps for training. Held-out
    items still get a (zero) pair, so items seen only in validation or test targets
    are in the vocabulary (a target needs an id to be ranked) without counting as
    popular.
    """
    items = element[1]
    n_train = int(splits.train_lengths([len(items)], min_length)[0])
    for i, item in enumerate(items):
        yield item, int(i < n_train)


class SplitUser(beam.DoFn):
    """One user's time-ordered items to ``(prefix, serialized record)`` pairs of each split, by
    ``splits.leave_one_out``; the vocabulary is read from ``vocabulary_path`` when first needed
    (not a side input, nor ``setup``: the DaskRunner has neither)."""

    def __init__(self, min_length, vocabulary_path, prefixes):
        self.min_length = min_length
        self.vocabulary_path = vocabulary_path
        self.prefixes = prefixes
        self.vocabulary = None
        self.users = beam.metrics.Metrics.counter(NAMESPACE, "users")
        self.events = beam.metrics.Metrics.counter(NAMESPACE, "interactions")

    def process(self, element):
        if self.vocabulary is None:
            self.vocabulary = vocab_lib.ItemVocabulary.load(self.vocabulary_path)
        vocabulary, (user, items, times, context) = self.vocabulary, pickle.loads(element)
        self.users.inc()
        self.events.inc(len(items))
        sequences = splits.Sequences.from_list([user], [vocabulary.lookup(items)], [times])
        split = splits.leave_one_out(sequences, self.min_length)
        records = {
            "train": _example(user, split.train, vocabulary, context),
            "full": _example(user, sequences, vocabulary, context),
        }
        for name, cases in (("eval", split.valid), ("test", split.test)):
            if len(cases):
                records[name] = _example(user, cases.histories, vocabulary, context, cases.targets[0])
        for name, record in records.items():
            yield self.prefixes[name], record.SerializeToString()


def _example(user, sequences, vocabulary, context, target_id=None):
    """The record of the one user of ``sequences`` (its items, their times, the context of its
    items, and the target if any). Leave-one-out histories are prefixes of the user's events, so
    the context of a history of n items is the first n values of ``context``."""
    ids = sequences[0]
    target = None if target_id is None else vocabulary.to_raw([target_id])[0]
    events = {column: values[: len(ids)] for column, values in context.items()}
    return tfrecord.make_example(
        user, ids, vocabulary.to_raw(ids), target_id, target, sequences.times(0), events=events
    )


def check_columns(patterns, columns):
    """Fails before Beam starts when the first record lacks a column."""
    for pattern in patterns:
        files = sorted(tf.io.gfile.glob(pattern))
        for path in files:
            for record in itertools.islice(beam_io.file_records(path), 1):
                example = tf.train.Example.FromString(record)
                for column in columns:
                    if column not in example.features.feature:
                        raise InputError(
                            f"column {column!r} is missing from the input examples {path} "
                            f"(columns: {sorted(example.features.feature)}); name the right one with "
                            f"the SequenceBuilder's user_column / item_column / time_column / event_columns "
                            "(--user-col / --item-col / --time-col / --event-features of 'tfseqrec pipeline run')"
                        )
                return
    raise InputError(f"no input records under {patterns}")


@tfx.dsl.components.component(use_beam=True)
def SequenceBuilder(  # noqa: N802 (TFX component names are classes)
    examples: tfx.dsl.components.InputArtifact[tfx.types.standard_artifacts.Examples],
    sequences: tfx.dsl.components.OutputArtifact[tfx.types.standard_artifacts.Examples],
    vocabulary: tfx.dsl.components.OutputArtifact[ItemVocabulary],
    user_column: tfx.dsl.components.Parameter[str] = "user_id",
    item_column: tfx.dsl.components.Parameter[str] = "item_id",
    time_column: tfx.dsl.components.Parameter[str] = "timestamp",
    min_sequence_length: tfx.dsl.components.Parameter[int] = 3,
    event_columns: tfx.dsl.components.Parameter[str] = "",
    beam_pipeline: tfx.dsl.components.BeamComponentParameter[beam.Pipeline] = None,
):
    """Groups events by user into leave-one-out sequence splits and builds the vocabulary."""
    if (
        isinstance(min_sequence_length, bool)
        or not isinstance(min_sequence_length, int)
        or min_sequence_length < 3
    ):
        raise InputError(
            f"min_sequence_length must be an integer >= 3 (a training item, a validation and a test target), "
            f"got {min_sequence_length!r}"
        )
    names = artifact_utils.decode_split_names(examples.split_names)
    patterns = [os.path.join(artifact_utils.get_split_uri([examples], name), "*") for name in names]
    columns = (user_column, item_column, time_column)
    context = tuple(events_lib.check_names(event_columns))
    check_columns(patterns, columns + context)
    paths = [
        os.path.join(vocabulary.uri, vocab_lib.VOCAB_FILENAME),
        os.path.join(sequences.uri, vocab_lib.VOCAB_FILENAME),
    ]
    _build(
        beam_pipeline, dict(zip(names, patterns)), columns, context, min_sequence_length, sequences.uri, paths
    )
    _record_outputs(sequences, vocabulary, user_column, patterns, paths[0])


def _build(beam_pipeline, patterns, columns, context, min_length, sequences_uri, vocabulary_paths):
    """Two Beam pipelines: events to ordered users and the vocabulary, then users to splits.

    The second reads the vocabulary the first wrote (the DaskRunner has no side inputs);
    the users pass between them as pickled records under ``sequences_uri``, removed after.
    """
    inputs = [path for pattern in patterns.values() for path in tf.io.gfile.glob(pattern)]
    shards = beam_io.num_shards(inputs)
    staging = os.path.join(sequences_uri, STAGING_DIR)
    with beam_pipeline as pipeline:
        _order_users(pipeline, inputs, columns, context, min_length, sequences_uri, vocabulary_paths, shards)
    prefixes = {name: os.path.join(sequences_uri, f"Split-{name}", "data_tfrecord") for name in SPLITS}
    staged = tf.io.gfile.glob(os.path.join(staging, "*.gz"))
    if staged:  # none when no event has a user: refused after (_record_outputs)
        with beam.Pipeline(options=beam_pipeline.options) as pipeline:
            split = beam.ParDo(SplitUser(min_length, vocabulary_paths[1], prefixes))
            records = beam_io.read_records(pipeline, "ReadUsers", staged) | "Split" >> split
            _ = beam_io.write_records(records, "WriteSplits", shards)
        tf.io.gfile.rmtree(staging)


def _order_users(pipeline, inputs, columns, context, min_length, sequences_uri, vocabulary_paths, shards):
    """Reads and parses the events, counts those without a user, groups and orders each user's
    events (staged for the second pipeline), and writes the vocabulary of the training counts."""
    events = beam_io.read_records(pipeline, "Read", inputs) | "Parse" >> beam.Map(
        parse_event, *columns, context
    )
    # Events without a user id are counted, then refused after the pipeline (_record_outputs).
    empty = (
        events
        | "EmptyUsers" >> beam.Filter(lambda event: not event[0])
        | "EmptyUser" >> beam.Map(lambda _: (None, 1))
    )
    _ = (
        _with_seed(pipeline, empty, "EmptyUsers", (None, 0))
        | "CountEmptyUsers" >> beam.GroupByKey()
        | "WriteEmptyUsers" >> beam.Map(_write_count, os.path.join(sequences_uri, EMPTY_USERS_FILE))
    )
    users = (
        events
        | "WithUser" >> beam.Filter(lambda event: bool(event[0]))
        | "ByUser" >> beam.GroupByKey()
        | "OrderUser" >> beam.Map(order_user, context)
    )
    staged = users | "Stage" >> beam.Map(
        lambda user: (os.path.join(sequences_uri, STAGING_DIR, "users"), pickle.dumps(user))
    )
    _ = beam_io.write_records(staged, "StageUsers", shards)
    counts = (
        users
        | "TrainingItems" >> beam.FlatMap(training_counts, min_length)
        | "ByItem" >> beam.GroupByKey()
        | "Count" >> beam.Map(lambda item: (None, (item[0], sum(item[1]))))
    )
    _ = (
        _with_seed(pipeline, counts, "Counts", (None, None))
        | "Collect" >> beam.GroupByKey()
        | "Order" >> beam.Map(lambda group: ordered_vocabulary(c for c in group[1] if c is not None))
        | "WriteVocabulary" >> beam.Map(write_vocabulary, vocabulary_paths)
    )


def _with_seed(pipeline, pcoll, label, seed):
    """``pcoll`` and one ``seed`` element, so that a group of none still yields (a count of 0)."""
    return (pcoll, pipeline | f"{label}Seed" >> beam.Create([seed])) | f"{label}Flatten" >> beam.Flatten()


def _record_outputs(sequences, vocabulary, user_column, patterns, vocabulary_path):
    """Refuses empty users or no events; sets the splits, payload format and counts on the artifacts."""
    with tf.io.gfile.GFile(os.path.join(sequences.uri, EMPTY_USERS_FILE)) as f:
        empty_users = int(f.read())
    tf.io.gfile.remove(os.path.join(sequences.uri, EMPTY_USERS_FILE))
    if empty_users:
        raise InputError(
            f"{empty_users} input records have an empty {user_column!r}; every event needs a user"
        )
    with tf.io.gfile.GFile(vocabulary_path) as f:
        num_items = sum(1 for _ in f)
    if num_items == 0:
        raise InputError(f"no events in {patterns}")
    sequences.split_names = artifact_utils.encode_split_names(list(SPLITS))
    examples_utils.set_payload_format(sequences, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
    counts = {name: _count_records(os.path.join(sequences.uri, f"Split-{name}", "*")) for name in SPLITS}
    summary = {
        "num_items": num_items,
        "num_users": counts["train"],
        **{f"{k}_records": v for k, v in counts.items()},
    }
    for key, value in summary.items():
        sequences.set_int_custom_property(key, value)
    vocabulary.set_int_custom_property("num_items", num_items)
    with tf.io.gfile.GFile(os.path.join(sequences.uri, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)


def _write_count(group, path):
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(str(sum(group[1])))


def _count_records(pattern):
    files = tf.io.gfile.glob(pattern)
    return sum(1 for path in files for _ in beam_io.file_records(path))


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _short(example):
    return {k: _text(feature_value(example, k)) for k in sorted(example.features.feature)}
