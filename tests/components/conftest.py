"""Helpers for the TFX component tests: artifacts on disk, executors run directly."""

import os

import tensorflow as tf
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils, standard_artifacts

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def make_artifact(cls, uri, split_names=None, artifact_id=None):
    artifact = cls()
    artifact.uri = str(uri)
    os.makedirs(artifact.uri, exist_ok=True)
    if split_names is not None:
        artifact.split_names = artifact_utils.encode_split_names(list(split_names))
    if artifact_id is not None:
        artifact.id = artifact_id
    return artifact


def write_event_examples(root, splits):
    """An ``Examples`` artifact of event records: ``{split: [{column: value}, ...]}``."""
    examples = make_artifact(standard_artifacts.Examples, root, split_names=list(splits))
    for name, rows in splits.items():
        os.makedirs(os.path.join(root, f"Split-{name}"), exist_ok=True)
        path = os.path.join(root, f"Split-{name}", "data_tfrecord-00000-of-00001.gz")
        with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
            for row in rows:
                feature = {}
                for column, value in row.items():
                    if isinstance(value, int):
                        feature[column] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
                    else:
                        feature[column] = tf.train.Feature(
                            bytes_list=tf.train.BytesList(value=[value.encode()])
                        )
                writer.write(
                    tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
                )
    return examples


def run_executor(component_class, inputs, outputs, parameters, beam=False, tmp_dir=None, beam_args=BEAM_ARGS):
    executor_class = component_class.EXECUTOR_SPEC.executor_class
    if beam:
        context = base_beam_executor.BaseBeamExecutor.Context(
            beam_pipeline_args=list(beam_args), tmp_dir=tmp_dir
        )
    else:
        context = executor_class.Context(tmp_dir=tmp_dir)
    executor_class(context=context).Do(inputs, outputs, parameters)
