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
    ==============  =========  ======  ================================================

Raw ids make the records readable without the vocabulary (serving signatures take
them); the integer ids spare training a lookup. ``FEATURE_SPEC`` parses a batch in
the graph with ``tf.io.parse_example``.
"""

import numpy as np
import tensorflow as tf

from tfseqrec.data import splits as splits_lib

FEATURE_SPEC = {
    "user_id": tf.io.FixedLenFeature([], tf.string, default_value=""),
    "items": tf.io.RaggedFeature(tf.string),
    "item_ids": tf.io.RaggedFeature(tf.int64),
    "target": tf.io.RaggedFeature(tf.string),
    "target_id": tf.io.RaggedFeature(tf.int64),
}


def make_example(user_id, item_ids, items, target_id=None, target=None):
    """Builds one ``tf.train.Example`` in the schema above."""
    if len(item_ids) != len(items):
        raise ValueError(f"user {user_id!r}: {len(item_ids)} item ids but {len(items)} raw items")
    feature = {
        "user_id": _bytes([user_id]),
        "items": _bytes(items),
        "item_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=list(map(int, item_ids)))),
    }
    if target_id is not None:
        feature["target"] = _bytes([target])
        feature["target_id"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(target_id)]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


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
            )
            writer.write(example.SerializeToString())
    return len(sequences)


def read_examples(paths, compression=None):
    """Reads records back as ``Sequences`` and, when they carry targets, ``Cases``.

    Returns:
        ``Sequences`` if no record has a target, else ``Cases``. Mixed files are an error.
    """
    if isinstance(paths, (str, bytes)) or not hasattr(paths, "__iter__"):
        paths = [paths]
    users, seqs, targets = [], [], []
    for path in paths:
        for record in tf.data.TFRecordDataset(str(path), compression_type=compression or ""):
            example = tf.train.Example.FromString(record.numpy())
            f = example.features.feature
            users.append(f["user_id"].bytes_list.value[0].decode("utf-8"))
            seqs.append(np.asarray(f["item_ids"].int64_list.value, np.int64))
            target = f["target_id"].int64_list.value if "target_id" in f else []
            targets.append(int(target[0]) if target else None)
    sequences = splits_lib.Sequences.from_list(users, seqs)
    has_target = [t is not None for t in targets]
    if not any(has_target):
        return sequences
    if not all(has_target):
        raise ValueError(f"{paths}: some records have a target and some do not")
    return splits_lib.Cases(sequences, np.asarray(targets, np.int64))


def parse_examples(serialized):
    """Parses a batch of serialized records in the graph; ragged features stay ragged."""
    return tf.io.parse_example(serialized, FEATURE_SPEC)


def _bytes(values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(v).encode("utf-8") for v in values]))
