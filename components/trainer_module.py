"""The module of the standard TFX ``Trainer``: ``run_fn(fn_args)`` trains any tfseqrec model.

Wire it with ``Trainer(run_fn="components.trainer_module.run_fn", examples=...)`` (or
``module_file=`` this file) on the ``sequences`` of the ``SequenceBuilder``:

- hyper-parameters come from ``fn_args.custom_config``: any ``tfseqrec.training.TrainConfig``
  key (``model``, ``hidden_dim``, ``epochs``, ``max_sequence_length``, ...), plus
  ``serving_k`` (items per ``serving_default`` answer, default 10);
- ``fn_args.train_steps``, when set (``TrainArgs(num_steps=N)``), caps training at N steps;
- TensorBoard logs and the Keras model directory go to ``fn_args.model_run_dir``;
- the TF Serving SavedModel of ``tfseqrec.export`` goes to ``fn_args.serving_model_dir``.
"""

import os
import tempfile

import tensorflow as tf

from tfseqrec import export, training
from tfseqrec.data import splits, tfrecord
from tfseqrec.data import vocab as vocab_lib


def read_vocabulary(file_patterns):
    """The ``item_vocab.tsv`` the SequenceBuilder wrote beside the ``Split-*`` folders."""
    root = os.path.dirname(os.path.dirname(file_patterns[0]))
    source = os.path.join(root, vocab_lib.VOCAB_FILENAME)
    if not tf.io.gfile.exists(source):
        raise FileNotFoundError(f"{source}: no vocabulary; are these Examples written by the SequenceBuilder?")
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, vocab_lib.VOCAB_FILENAME)
        tf.io.gfile.copy(source, local)
        return vocab_lib.ItemVocabulary.load(local)


def read_split(file_patterns):
    files = sorted(path for pattern in file_patterns for path in tf.io.gfile.glob(pattern))
    if not files:
        raise FileNotFoundError(f"no records match {file_patterns}")
    return tfrecord.read_examples(files, compression="GZIP")


def run_fn(fn_args):
    """Trains on ``fn_args.train_files``, validates on ``fn_args.eval_files``, exports for serving."""
    options = dict(fn_args.custom_config or {})
    k = int(options.pop("serving_k", 10))
    config = training.TrainConfig.from_dict(options)
    vocabulary = read_vocabulary(fn_args.train_files)
    train = read_split(fn_args.train_files)
    valid = read_split(fn_args.eval_files)
    split = splits.Split(train, valid, None, {})
    steps = fn_args.train_steps if fn_args.train_steps and fn_args.train_steps > 0 else None
    model, _ = training.fit(
        split,
        vocabulary,
        fn_args.model_run_dir,
        config,
        verbose=2,
        data={"train_files": list(fn_args.train_files), "eval_files": list(fn_args.eval_files)},
        log_dir=fn_args.model_run_dir,
        max_steps=steps,
    )
    export.save(model, vocabulary, fn_args.serving_model_dir, k=k)
