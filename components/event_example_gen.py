"""EventExampleGen: interaction CSV files to ``tf.Example`` events, ids kept as strings.

TFX's ``CsvExampleGen`` infers each column's type from the data: ids ``"007"`` and
``"7"`` both become the integer 7 (two items merged), and one id like ``"1e3"`` turns
a whole id column into floats (``"7.0"``). This component reads each file with the
library's reader (``tfseqrec.data.readers``: the same parsing, errors naming file and
line, one timestamp rule) and writes every field as bytes, so an id is exactly the
text in the file and a timestamp keeps its full precision (a float32 feature would
round 2020's epoch seconds to 128 s).

Output: an ``Examples`` artifact with one split, ``train``, of records
``{user_column: bytes, item_column: bytes, time_column: bytes}`` (the time as seconds
since the epoch, as text) and one bytes feature per column of ``event_columns``
(comma-separated: the events' context, ``tfseqrec train --event-features``; a column
missing from a file is refused naming the file), the input ``SequenceBuilder`` takes. Files are read in
parallel by Beam, one file per worker, with the transforms every runner translates, Dask's
included (``components.beam_io``).
"""

import os
import tempfile

import apache_beam as beam
import tensorflow as tf
from tfx import v1 as tfx
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils

from components import beam_io
from tfseqrec.data import events as events_lib
from tfseqrec.data import readers

SPLIT = "train"


def input_files(input_base):
    """The interaction files under ``input_base`` (``*.csv``, ``*.tsv`` and their ``.gz``), sorted."""
    files = []
    for pattern in ("*.csv", "*.tsv", "*.csv.gz", "*.tsv.gz"):
        files += tf.io.gfile.glob(os.path.join(input_base, pattern))
    if not files:
        raise ValueError(f"no *.csv or *.tsv files in {input_base}")
    return sorted(files)


def file_events(path, user_column, item_column, time_column, event_columns=()):
    """Serialized event ``tf.Example`` records of one file, read by ``readers.read_interactions``."""
    local = path
    with tempfile.TemporaryDirectory() as tmp:
        if "://" in path:  # a remote file (gs://...): the reader reads local files
            local = os.path.join(tmp, os.path.basename(path))
            tf.io.gfile.copy(path, local)
        fmt = "tsv" if ".tsv" in os.path.basename(path) else "csv"
        events = readers.read_interactions(
            local,
            format=fmt,
            user_col=user_column,
            item_col=item_column,
            time_col=time_column,
            progress=False,
            event_columns=list(event_columns) or None,
        )
        context = [events.events[c].tolist() for c in event_columns]
        for i, (user, item, time) in enumerate(zip(events.users, events.items, events.timestamps.tolist())):
            feature = {
                user_column: _bytes(user),
                item_column: _bytes(item),
                time_column: _bytes(repr(time)),
            }
            for column, values in zip(event_columns, context):
                feature[column] = _bytes(values[i])
            yield tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _bytes(text):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(text).encode("utf-8")]))


@tfx.dsl.components.component(use_beam=True)
def EventExampleGen(  # noqa: N802 (TFX component names are classes)
    examples: tfx.dsl.components.OutputArtifact[tfx.types.standard_artifacts.Examples],
    input_base: tfx.dsl.components.Parameter[str],
    user_column: tfx.dsl.components.Parameter[str] = "user_id",
    item_column: tfx.dsl.components.Parameter[str] = "item_id",
    time_column: tfx.dsl.components.Parameter[str] = "timestamp",
    event_columns: tfx.dsl.components.Parameter[str] = "",
    beam_pipeline: tfx.dsl.components.BeamComponentParameter[beam.Pipeline] = None,
):
    """Reads the interaction files of ``input_base`` into string-typed event Examples."""
    files = input_files(input_base)
    context = tuple(events_lib.check_names(event_columns))
    out = os.path.join(examples.uri, f"Split-{SPLIT}", "data_tfrecord")
    with beam_pipeline as pipeline:
        events = (
            pipeline
            | "Files" >> beam.Create(files)
            | "Read" >> beam.FlatMap(file_events, user_column, item_column, time_column, context)
            | "ToSplit" >> beam.Map(lambda record: (out, record))
        )
        _ = beam_io.write_records(events, "Write", beam_io.num_shards(files))
    examples.split_names = artifact_utils.encode_split_names([SPLIT])
    examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
