"""Sequences as ``tf.train.Example`` records: the schema TFX components exchange.

One ``tf.train.Example`` per user sequence (or evaluation case):

    ==============  =========  ======  ================================================
    feature         type       count   meaning
    ==============  =========  ======  ================================================
    ``user_id``     bytes      1       raw user id
    ``items``       bytes      n >= 0  raw item ids, oldest first
    ``item_ids``    int64      n       vocabulary ids of ``items`` (``vocab.OOV_ID``
                                       where unknown)
    ``target``      bytes      0 or 1  raw held-out next item (evaluation cases only)
    ``target_id``   int64      0 or 1  its vocabulary id
    ``timestamps``  int64      0 or n  the items' times in seconds (data with times)
    ``event_<c>``   bytes      n       raw values of event column ``c`` (data with
                                       event context; ``""`` for none)
    ==============  =========  ======  ================================================

Raw ids make the records readable without the vocabulary (serving signatures take
them); the integer ids spare training a lookup. ``FEATURE_SPEC`` parses a batch in
the graph with ``tf.io.parse_example``; ``feature_spec(event_columns)`` adds the event
columns. Event values stay raw in the records: their vocabulary comes from the training
split's values (``events.EventVocabulary``), which ``encode_events`` applies.
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf

from tfseqrec.data import events as events_lib
from tfseqrec.data import splits as splits_lib

FEATURE_SPEC = {
    "user_id": tf.io.FixedLenFeature([], tf.string, default_value=""),
    "items": tf.io.RaggedFeature(tf.string),
    "item_ids": tf.io.RaggedFeature(tf.int64),
    "target": tf.io.RaggedFeature(tf.string),
    "target_id": tf.io.RaggedFeature(tf.int64),
    "timestamps": tf.io.RaggedFeature(tf.int64),
}

# The raw values of each event column, as read back (``read_raw_cases``).
RawCases = collections.namedtuple("RawCases", ["histories", "targets", "timestamps", "events"])


def feature_spec(event_columns=()):
    """``FEATURE_SPEC`` plus a raw-string feature ``event_<column>`` per event column."""
    spec = dict(FEATURE_SPEC)
    for column in events_lib.check_names(event_columns):
        spec[events_lib.input_name(column)] = tf.io.RaggedFeature(tf.string)
    return spec


def make_example(user_id, item_ids, items, target_id=None, target=None, timestamps=None, events=None):
    """Builds one ``tf.train.Example`` in the schema above (``timestamps``: seconds, one per item;
    ``events``: ``{column: raw values}``, one per item)."""
    if len(item_ids) != len(items):
        raise ValueError(f"user {user_id!r}: {len(item_ids)} item ids but {len(items)} raw items")
    feature = {
        "user_id": _bytes([user_id]),
        "items": _bytes(items),
        "item_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=list(map(int, item_ids)))),
    }
    if timestamps is not None:
        if len(timestamps) != len(item_ids):
            raise ValueError(f"user {user_id!r}: {len(item_ids)} items but {len(timestamps)} timestamps")
        seconds = _int64_seconds(user_id, timestamps)
        feature["timestamps"] = tf.train.Feature(int64_list=tf.train.Int64List(value=seconds))
    for column, values in (events or {}).items():
        if len(values) != len(item_ids):
            raise ValueError(f"user {user_id!r}: {len(item_ids)} items but {len(values)} {column!r} values")
        feature[events_lib.input_name(column)] = _bytes(values)
    if target_id is not None:
        feature["target"] = _bytes([target])
        feature["target_id"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(target_id)]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def _int64_seconds(user_id, timestamps):
    """Whole seconds as int64 (floored); a time beyond int64 is an error, never a wrapped value."""
    times = np.asarray(timestamps)
    if times.dtype.kind == "i":  # exact: int64 times near 2**63 do not survive float64
        return times.astype(np.int64).tolist()
    seconds = np.floor(times.astype(np.float64))
    bad = ~((seconds >= -(2.0**63)) & (seconds < 2.0**63))  # NaN too
    if bad.any():
        raise ValueError(
            f"user {user_id!r}: timestamp {times[bad][0]!r} is not a finite number of seconds within int64"
        )
    return seconds.astype(np.int64).tolist()


def write_examples(path, data, vocabulary, compression=None):
    """Writes ``Sequences`` or ``Cases`` to a TFRecord file; returns the record count.

    Args:
        path: output file (``.gz`` with ``compression="GZIP"`` is the TFX habit).
        data: ``splits.Sequences`` (training) or ``splits.Cases`` (evaluation).
        vocabulary: the ``ItemVocabulary`` the ids come from.
        compression: ``None`` or ``"GZIP"``.
    """
    cases = isinstance(data, splits_lib.Cases)
    sequences = data.histories if cases else data
    if sequences.events is not None:
        raise ValueError(
            f"{path}: these sequences carry event context {sorted(sequences.events)} as slots, which "
            "write_examples does not write back as values; build the records with make_example(events=...)"
        )
    options = tf.io.TFRecordOptions(compression_type=compression or "")
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for u in range(len(sequences)):
            ids = sequences[u]
            target_id = int(data.targets[u]) if cases else None
            example = make_example(
                str(sequences.users[u]),
                ids,
                vocabulary.to_raw(ids),
                target_id,
                vocabulary.to_raw([target_id])[0] if cases else None,
                None if sequences.timestamps is None else sequences.times(u),
            )
            writer.write(example.SerializeToString())
    return len(sequences)


def read_examples(paths, compression=None, batch_size=1024, event_columns=()):
    """Reads records back as ``Sequences`` and, when they carry targets, ``Cases``.

    Records are parsed in batches in the graph (``parse_examples``), then gathered by
    ``from_batches`` (``event_columns``: the event columns to read, as raw values).

    Returns:
        ``Sequences`` if no record has a target, else ``Cases``. Mixed files are an error.
    """
    if isinstance(paths, (str, bytes)) or not hasattr(paths, "__iter__"):
        paths = [paths]
    paths = [str(p) for p in paths]
    records = tf.data.TFRecordDataset(paths, compression_type=compression or "")
    batches = records.batch(batch_size).map(lambda r: parse_examples(r, event_columns))
    return from_batches(batches, source=paths, event_columns=event_columns)


def from_batches(batches, source="the records", event_columns=()):
    """``Sequences`` or ``Cases`` of batches of parsed records.

    Args:
        batches: iterable of dicts with ``user_id``, ``item_ids`` and optionally
            ``target_id``, each a dense, ragged or sparse tensor with one row per
            record (``parse_examples``, or a TFX ``data_accessor``'s datasets).
        source: named in errors.
        event_columns: event columns (``event_<column>`` features) to read: the
            sequences' ``events`` are then ``{column: raw values}`` (str), one per item,
            for ``encode_events`` to turn into slots.
    """
    columns = events_lib.check_names(event_columns)
    users, lengths, values, targets, times = [], [], [], [], []
    raw_events = {column: [] for column in columns}
    for batch in batches:
        ids = _ragged(batch["item_ids"])
        n = int(ids.nrows())
        users.extend(u.decode("utf-8") for u in _first(batch["user_id"], n, b""))
        lengths.append(ids.row_lengths().numpy())
        values.append(ids.flat_values.numpy())
        times.append(_times(batch, ids, source))
        for column in columns:
            flat = _event_rows(batch, ids, column, source).flat_values.numpy().tolist()
            raw_events[column].extend(v.decode("utf-8") for v in flat)
        # The target id of each record, -1 where it has none (ids are never negative).
        targets.append(
            _first(batch["target_id"], n, -1) if "target_id" in batch else np.full(n, -1, np.int64)
        )
    lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    values = np.concatenate(values).astype(np.int64) if values else np.zeros(0, np.int64)
    sequences = splits_lib.Sequences(
        np.asarray(users, dtype=object),
        values,
        splits,
        _joined_times(times, lengths, source),
        {c: np.asarray(v, dtype=object) for c, v in raw_events.items()} if columns else None,
    )
    targets = np.concatenate(targets) if targets else np.zeros(0, np.int64)
    has_target = targets >= 0
    if not has_target.any():
        return sequences
    if not has_target.all():
        raise ValueError(f"{source}: some records have a target and some do not")
    return splits_lib.Cases(sequences, targets.astype(np.int64))


def read_raw_cases(paths, compression=None, batch_size=1024, event_columns=()):
    """``RawCases(histories, targets, timestamps, events)`` of evaluation records, as an export is asked.

    ``histories`` and ``targets`` are raw ids (bytes); ``timestamps``: each record's item
    times (int seconds, one per item) when the records carry them, else ``None``;
    ``events``: ``{column: each record's raw values (bytes)}`` of ``event_columns``. A
    record without a target, records of which only some carry times, or a record whose
    times or event values do not match its items, is an error naming the files.
    """
    paths = [str(p) for p in paths]
    records = tf.data.TFRecordDataset(paths, compression_type=compression or "")
    histories, targets, times, lengths = [], [], [], []
    events = {column: [] for column in events_lib.check_names(event_columns)}
    for batch in records.batch(batch_size).map(lambda r: parse_examples(r, event_columns)):
        if int(tf.reduce_min(batch["target"].row_lengths())) < 1:
            raise ValueError(f"{paths}: a record has no target; is it an evaluation split?")
        histories.extend(batch["items"].to_list())
        targets.extend(_first(batch["target"], int(batch["target"].nrows()), b"").tolist())
        times.append(_times(batch, batch["items"], paths))
        lengths.append(batch["items"].row_lengths().numpy())
        for column, rows in events.items():
            rows.extend(_event_rows(batch, batch["items"], column, paths).to_list())
    flat = _joined_times(times, lengths, paths)
    if flat is None:
        return RawCases(histories, targets, None, events)
    splits = np.cumsum([len(h) for h in histories])[:-1]
    return RawCases(histories, targets, [t.tolist() for t in np.split(flat, splits)], events)


def encode_events(data, vocabulary):
    """``data`` (``Sequences`` or ``Cases`` read with raw event values) with its events as the
    slots of ``vocabulary`` (an ``events.EventVocabulary``)."""
    sequences = data.histories if isinstance(data, splits_lib.Cases) else data
    encoded = dataclasses.replace(sequences, events=vocabulary.encode(sequences.events))
    return dataclasses.replace(data, histories=encoded) if sequences is not data else encoded


def _event_rows(batch, ids, column, source):
    """The ragged raw values (bytes) of event column ``column`` of a batch, checked to be one per item."""
    name = events_lib.input_name(column)
    if name not in batch:
        raise ValueError(f"{source}: the records have no {name!r} feature (event column {column!r})")
    values = _ragged(batch[name])
    counts, lengths = values.row_lengths().numpy(), ids.row_lengths().numpy()
    if not np.array_equal(counts, lengths):
        bad = counts != lengths
        raise ValueError(
            f"{source}: a record has {int(counts[bad][0])} {name!r} values for {int(lengths[bad][0])} items "
            "(each item needs one)"
        )
    return values


def _joined_times(times, lengths, source):
    """The flat times of all batches (``_times`` of each), or ``None`` when no record carries any."""
    # A batch without items says nothing either way.
    timed = [t is not None for t, n in zip(times, lengths) if n.sum()]
    if any(timed) and not all(timed):
        raise ValueError(f"{source}: some records have timestamps and some do not")
    if not timed or not all(timed):
        return None
    return np.concatenate([np.zeros(0, np.int64) if t is None else t for t in times]).astype(np.int64)


def _times(batch, ids, source):
    """The flat int64 times of a batch whose records carry them (one per item), else ``None``."""
    if "timestamps" not in batch:
        return None
    times = _ragged(batch["timestamps"])
    counts, lengths = times.row_lengths().numpy(), ids.row_lengths().numpy()
    if not counts.any():
        return None
    if not np.array_equal(counts, lengths):
        raise ValueError(
            f"{source}: a record has {int(counts[counts != lengths][0])} timestamps for "
            f"{int(lengths[counts != lengths][0])} items (each item needs one, or no record any)"
        )
    return times.flat_values.numpy()


def _first(value, rows, default):
    """The first value of each of ``rows`` records (``default`` where there is none), as NumPy."""
    first = _ragged(value)[:, :1].to_tensor(default_value=default, shape=[rows, 1])
    return first[:, 0].numpy()


def _ragged(value):
    """A ``[rows, (values)]`` ragged tensor of a dense, ragged or sparse batch feature."""
    if isinstance(value, tf.RaggedTensor):
        return value
    if isinstance(value, tf.SparseTensor):
        return tf.RaggedTensor.from_sparse(value)
    value = tf.convert_to_tensor(value)
    return tf.RaggedTensor.from_tensor(value if value.shape.rank == 2 else value[:, None])


def parse_examples(serialized, event_columns=()):
    """Parses a batch of serialized records in the graph (with ``event_columns``, by
    ``feature_spec``); ragged features stay ragged."""
    return tf.io.parse_example(serialized, feature_spec(event_columns))


def _bytes(values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(v).encode("utf-8") for v in values]))
