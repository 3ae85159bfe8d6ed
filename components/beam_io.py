"""TFRecord files in and out of a Beam pipeline with ``Create``, ``FlatMap``, ``Map`` and
``GroupByKey`` only, the transforms every runner translates (``components.dask_runner``).

A file is read whole by one worker (``read_records``); records are written as
``{prefix}-{shard:05d}-of-{shards:05d}.gz`` (``write_records``), each shard by one worker,
its records in sorted order, so that every runner writes the same files. A shard is
written beside its final name and renamed into place: a retried task rewrites it whole.
"""

import math
import os
import uuid
import zlib

import apache_beam as beam
import tensorflow as tf

# Input bytes a shard of output holds at most: a shard's records are grouped in one
# worker's memory before they are written.
SHARD_BYTES = 32 * 2**20

# Records a ``tf.data`` step reads (``file_records``): enough to spread its cost, few enough
# that a batch of large records (a long history staged as one) stays small in memory.
READ_BATCH = 256


def num_shards(paths):
    """Output shards for input files ``paths``: one per input file or per ``SHARD_BYTES`` of input,
    whichever is more, so that the next step reads as many files in parallel as this one did."""
    size = sum(tf.io.gfile.stat(path).length for path in paths)
    return max(1, len(paths), math.ceil(size / SHARD_BYTES))


def read_records(pipeline, label, paths):
    """The serialized records of the TFRecord files ``paths`` (``.gz``: gzipped), a file a worker."""
    return (
        pipeline
        | f"{label}Files" >> beam.Create(sorted(paths))
        | f"{label}Records" >> beam.FlatMap(file_records)
    )


def file_records(path):
    """The serialized records of one TFRecord file, in order.

    Read ``READ_BATCH`` records at a time: ``tf.data`` costs about half a millisecond a step
    in eager Python, which a step a record made most of a SequenceBuilder's time.
    """
    compression = "GZIP" if path.endswith(".gz") else ""
    records = tf.data.TFRecordDataset(path, compression_type=compression).batch(READ_BATCH)
    for batch in records.as_numpy_iterator():
        yield from batch.tolist()


def write_records(pairs, label, shards):
    """Writes ``(prefix, serialized record)`` pairs as gzipped TFRecord shards of each prefix.

    A record's shard is the CRC-32 of its bytes modulo ``shards``; a shard that no record
    falls in is not written. Returns the written paths (one element a shard).
    """
    return (
        pairs
        | f"{label}Shard" >> beam.Map(_shard_key, shards)
        | f"{label}Group" >> beam.GroupByKey()
        | f"{label}Write" >> beam.Map(_write_shard, shards)
    )


def _shard_key(pair, shards):
    prefix, record = pair
    return (prefix, zlib.crc32(record) % shards), record


def _write_shard(element, shards):
    (prefix, shard), records = element
    path = f"{prefix}-{shard:05d}-of-{shards:05d}.gz"
    tf.io.gfile.makedirs(os.path.dirname(path))
    staged = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{uuid.uuid4().hex}")
    with tf.io.TFRecordWriter(staged, options="GZIP") as writer:
        for record in sorted(records):
            writer.write(record)
    tf.io.gfile.rename(staged, path, overwrite=True)
    return path
