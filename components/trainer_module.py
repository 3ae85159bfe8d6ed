"""The module of the standard TFX ``Trainer``: ``run_fn(fn_args)`` trains any tfseqrec id model.

Wire it with ``Trainer(run_fn="components.trainer_module.run_fn", examples=...)`` (or
``module_file=`` this file) on the ``sequences`` of the ``SequenceBuilder``:

- hyper-parameters come from ``fn_args.custom_config``: the options of the model's
  kind (``tfseqrec.kinds``; ``model``, ``hidden_dim``, ``epochs``,
  ``max_sequence_length``, ...), plus ``serving_k`` (items per ``serving_default``
  answer, default 10), ``strategy`` (``mirrored``: every GPU of the trainer's
  machine; ``multi_worker``: every worker of ``TF_CONFIG``'s cluster, the chief
  writing the outputs; ``tfseqrec.distribute``) and, for the kinds that read item text
  (``unisrec``), ``item_text`` (the path of the items' text file, read with
  ``tf.io.gfile``), and for the id models ``item_features`` (an item-features file:
  ``tfseqrec train --item-features``) and ``event_features`` (the event columns the
  SequenceBuilder wrote, ``tfseqrec train --event-features``: their values come from the
  training split, as in ``tfseqrec train``);
- records are read through ``fn_args.data_accessor`` with ``schema(event_features)`` (the
  ``tfseqrec.data.tfrecord`` features) and gathered by ``tfrecord.from_batches``;
- ``fn_args.train_steps``, when set (``TrainArgs(num_steps=N)``), caps training at N steps;
- ``fn_args.base_model`` (the Trainer's ``base_model`` input: the pipeline's last blessed
  model), when given, is warm-started from (``tfseqrec train --warm-start``): its vocabulary
  grows by the new items, its weights and optimizer state are carried on; a base model
  without a tfseqrec model directory (``MODEL_DIR``, written by an older tfseqrec) is said
  on stderr and training starts anew;
- TensorBoard logs and the Keras model directory go to ``fn_args.model_run_dir``, and the
  model directory's files also to ``MODEL_DIR`` beside the serving SavedModel in the
  ``Model`` artifact, where the next run's warm start finds them;
- the TF Serving SavedModel of ``tfseqrec.export`` goes to ``fn_args.serving_model_dir``.
"""

import os
import sys
import tempfile

import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.public import tfxio

from tfseqrec import distribute, export, kinds
from tfseqrec.data import events as events_lib
from tfseqrec.data import splits, tfrecord
from tfseqrec.data import vocab as vocab_lib

# The tfseqrec model directory (``tfseqrec.load``, ``--warm-start``) inside a Trainer's ``Model``
# artifact, beside TFX's ``Format-Serving``; the Pusher pushes only the latter.
MODEL_DIR = "Format-tfseqrec"


def schema(event_columns=()):
    """The sequence records' features (``tfrecord.feature_spec``), every one of variable length
    (sparse when read)."""
    return schema_pb2.Schema(
        feature=[
            schema_pb2.Feature(
                name=name, type=schema_pb2.BYTES if spec.dtype == tf.string else schema_pb2.INT
            )
            for name, spec in tfrecord.feature_spec(event_columns).items()
        ]
    )


def read_vocabulary(file_patterns):
    """The ``item_vocab.tsv`` the SequenceBuilder wrote in its ``sequences`` artifact.

    The standard Trainer passes no custom artifact, so the vocabulary is found at the
    root of the ``Examples`` artifact whose ``Split-*`` folders ``file_patterns`` name
    (TFX's split layout, ``artifact_utils.get_split_uri``).
    """
    split_dir = os.path.dirname(file_patterns[0])
    if not os.path.basename(split_dir).startswith("Split-"):
        raise ValueError(f"{file_patterns[0]}: not a split of an Examples artifact (Split-*/...)")
    source = os.path.join(os.path.dirname(split_dir), vocab_lib.VOCAB_FILENAME)
    if not tf.io.gfile.exists(source):
        raise FileNotFoundError(
            f"{source}: no vocabulary; are these Examples written by the SequenceBuilder?"
        )
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, vocab_lib.VOCAB_FILENAME)
        tf.io.gfile.copy(source, local)
        return vocab_lib.ItemVocabulary.load(local)


def read_split(data_accessor, file_patterns, batch_size=1024, event_columns=()):
    """``Sequences`` or ``Cases`` of the records ``file_patterns`` match, by ``data_accessor``
    (with the raw values of ``event_columns``)."""
    if not any(tf.io.gfile.glob(pattern) for pattern in file_patterns):
        raise FileNotFoundError(f"no records match {file_patterns}")
    options = tfxio.TensorFlowDatasetOptions(batch_size=batch_size, num_epochs=1, shuffle=False)
    dataset = data_accessor.tf_dataset_factory(list(file_patterns), options, schema(event_columns))
    return tfrecord.from_batches(dataset, source=file_patterns, event_columns=event_columns)


def read_splits(fn_args, event_columns):
    """The ``Split`` of the Trainer's train and eval records; event values become the slots of the
    training split's values (``EventVocabulary.from_values``), as ``tfseqrec train`` makes them."""
    train = read_split(fn_args.data_accessor, fn_args.train_files, event_columns=event_columns)
    valid = read_split(fn_args.data_accessor, fn_args.eval_files, event_columns=event_columns)
    if not event_columns:
        return splits.Split(train, valid, None, {})
    context = events_lib.EventVocabulary.from_values(train.events)
    train, valid = tfrecord.encode_events(train, context), tfrecord.encode_events(valid, context)
    return splits.Split(train, valid, None, {}, event_vocabulary=context)


def local_copy(path, directory):
    """``path`` (any ``tf.io.gfile`` file system: gs://, ...) copied into ``directory``, keeping its name."""
    tf.io.gfile.makedirs(directory)
    local = os.path.join(directory, os.path.basename(path))
    tf.io.gfile.copy(path, local, overwrite=True)
    return local


def base_model_dir(base_model, directory):
    """The tfseqrec model directory of the Trainer's base model (``fn_args.base_model``, the
    path of its serving SavedModel) copied into ``directory``; ``None`` without a base model, or
    one without a model directory (said on stderr)."""
    if not base_model:
        return None
    source = os.path.join(os.path.dirname(base_model.rstrip("/")), MODEL_DIR)
    if not tf.io.gfile.isdir(source):
        print(
            f"the base model {base_model} has no {MODEL_DIR} (trained by an older tfseqrec): training anew",
            file=sys.stderr,
        )
        return None
    local = os.path.join(directory, MODEL_DIR)
    _copy_files(source, local)
    return local


def _copy_files(source, target):
    """The files of directory ``source`` (not its folders: logs, backups) copied into ``target``."""
    tf.io.gfile.makedirs(target)
    for name in tf.io.gfile.listdir(source):
        path = os.path.join(source, name)
        if not tf.io.gfile.isdir(path):
            tf.io.gfile.copy(path, os.path.join(target, name), overwrite=True)


def run_fn(fn_args):
    """Trains on ``fn_args.train_files``, validates on ``fn_args.eval_files``, exports for serving."""
    options = dict(fn_args.custom_config or {})
    k = int(options.pop("serving_k", 10))
    item_text = options.pop("item_text", None)
    item_features = options.pop("item_features", None)
    strategy = distribute.resolve(options.pop("strategy", None))
    kind = kinds.get(options.get("model", "sasrec"))
    kind.check(kind.options(options))  # bad options fail before any record is read
    vocabulary = read_vocabulary(fn_args.train_files)
    split = read_splits(fn_args, events_lib.check_names(options.get("event_features") or ()))
    steps = fn_args.train_steps if fn_args.train_steps and fn_args.train_steps > 0 else None
    # Across workers (multi_worker), only the chief writes the run and serving directories.
    run_dir = distribute.worker_output_dir(fn_args.model_run_dir, strategy)
    serving_dir = distribute.worker_output_dir(fn_args.serving_model_dir, strategy)
    with tempfile.TemporaryDirectory() as tmp:
        model, vocabulary = kind.fit(
            split,
            vocabulary,
            run_dir,
            options,
            verbose=2,
            data={
                "train_files": list(fn_args.train_files),
                "eval_files": list(fn_args.eval_files),
                "base_model": fn_args.base_model,
            },
            max_steps=steps,
            item_text=local_copy(item_text, run_dir) if item_text else None,
            strategy=strategy,
            item_features=local_copy(item_features, run_dir) if item_features else None,
            warm_start=base_model_dir(fn_args.base_model, tmp),
        )
    export.save(kind, model, vocabulary, serving_dir, k=k)
    if serving_dir == fn_args.serving_model_dir:  # the chief
        _copy_files(run_dir, os.path.join(os.path.dirname(serving_dir), MODEL_DIR))
    for own, chief in ((run_dir, fn_args.model_run_dir), (serving_dir, fn_args.serving_model_dir)):
        if own != chief:
            tf.io.gfile.rmtree(own)
