"""Pre-training over several (interactions, item text) datasets: ``tfseqrec pretrain``.

The datasets' items are put side by side in one catalogue, each known by its own
text (its own attributes: MovieLens title and genres, Amazon title, brand and
categories), and their training sequences (leave-one-out: the last two items of
each user are held out) are mixed in every epoch.

- ``recformer`` (options ``RecformerConfig``): the all-MiniLM-L6-v2 start and
  ``[CLS]`` alignment on every dataset's items, then the paper's masked language
  modelling plus item-item contrast (``RecformerPretrainer``) on
  ``(history, next item)`` pairs. Writes ``backbone.keras``.
- ``unisrec`` (options ``TrainConfig``): the frozen text vectors of every item, then
  the paper's sequence-item and sequence-sequence contrast (``UniSRecPretrainer``)
  on ``(history, next item)`` pairs, every position of every sequence. Writes
  ``model.keras`` (a text-only UniSRec over the joined catalogue).

Either directory also holds ``pretrain_config.json`` (options, datasets, per-epoch
loss) and is read by ``tfseqrec train --model KIND --init-from DIR``, which
fine-tunes its weights on one dataset.
"""

import dataclasses
import json
import os
import time

import keras
import numpy as np
import tensorflow as tf

from tfseqrec.data import readers, splits
from tfseqrec.data import text as text_lib
from tfseqrec.data import vocab as vocab_lib
from tfseqrec.models import SentenceEncoder, UniSRecPretrainer
from tfseqrec.training.callbacks import StepsPerEpoch, TimeLimit
from tfseqrec.training.directory import output_directory

CONFIG_FILE = "pretrain_config.json"
BACKBONE_FILE = "backbone.keras"
MODEL_FILE = "model.keras"


@dataclasses.dataclass
class Domain:
    """One pre-training dataset: its split, vocabulary and item text ``[vocabulary.size, attributes]``."""

    data: str
    item_text: str
    split: splits.Split
    vocabulary: vocab_lib.ItemVocabulary
    attributes: list
    texts: np.ndarray
    missing: int


def read_domains(datasets, attributes=None):
    """``Domain``s of ``[(interactions path, item text path), ...]``.

    ``attributes`` (default: by each item-text file) are the attributes read.
    """
    if not datasets:
        raise ValueError("pre-training needs at least one (interactions, item text) dataset")
    domains = []
    for data, item_text in datasets:
        split, vocabulary, _ = splits.prepare(readers.read_interactions(data))
        attrs = list(attributes or text_lib.default_attributes(item_text))
        texts, missing = text_lib.item_texts(readers.read_item_text(item_text), vocabulary, attrs)
        if missing == vocabulary.num_items:
            raise ValueError(
                f"{item_text}: none of the {vocabulary.num_items} items of {data} has text; "
                "do the two files use the same item ids?"
            )
        domains.append(Domain(str(data), str(item_text), split, vocabulary, attrs, texts, missing))
    return domains


def offsets(domains):
    """The first joined id of each domain's items (after the reserved ids)."""
    sizes = [d.vocabulary.num_items for d in domains]
    return vocab_lib.NUM_RESERVED + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


def joined_sequences(domains):
    """Every domain's training sequences in joined ids, one ``Sequences``."""
    users, seqs = [], []
    for d, offset in zip(domains, offsets(domains)):
        for u in range(len(d.split.train)):
            users.append(f"{len(users)}")
            seqs.append(d.split.train[u] - vocab_lib.NUM_RESERVED + offset)
    return splits.Sequences.from_list(users, seqs)


def history_pairs(sequences, max_sequence_length, examples_per_user=None):
    """``(windows [n, max_sequence_length] left-padded int32, next items [n])`` of ``sequences``.

    Every position after the first of each sequence, or its last ``examples_per_user``.
    """
    windows, targets = [], []
    for u in range(len(sequences)):
        seq = sequences[u]
        first = 1 if examples_per_user is None else max(1, len(seq) - examples_per_user)
        for t in range(first, len(seq)):
            history = seq[max(0, t - max_sequence_length) : t]
            windows.append(np.pad(history, (max_sequence_length - len(history), 0)))
            targets.append(seq[t])
    return np.asarray(windows, np.int32).reshape(-1, max_sequence_length), np.asarray(targets, np.int32)


def pretrain(kind, datasets, output_dir, options=None, verbose="auto", overwrite=False):
    """Pre-trains a model of ``kind`` (Recformer or UniSRec) on ``datasets``; returns the per-epoch rows.

    Args:
        kind: the model kind (``tfseqrec.kinds.get("recformer")``); its ``pretrain``
            runs the kind's own pre-training.
        datasets: ``[(interactions path, item text path), ...]``.
        output_dir: the checkpoint directory (written when the run completes).
        options: dict of the kind's options (``RecformerConfig`` or ``TrainConfig``):
            sizes, ``epochs``, ``learning_rate``, ``batch_size``, ``max_train_minutes``,
            ``mlm_weight`` (Recformer), ``seq_seq_weight`` and ``item_drop`` (UniSRec).
        verbose: ``fit`` verbosity.
        overwrite: replace a checkpoint already in ``output_dir``.
    """
    if not kind.pretrainable:
        kind.pretrain(None, None, None)  # the kind's own error names those that pre-train
    config = kind.options(dict(options or {}))
    if config.init_from is not None:
        raise ValueError("init_from is for fine-tuning a pre-trained checkpoint, not for pre-training")
    domains = read_domains(datasets, config.attributes)
    keras.utils.set_random_seed(config.seed)
    record = {"config": dataclasses.asdict(config), "data": [list(map(str, pair)) for pair in datasets]}
    with output_directory(output_dir, record, overwrite, CONFIG_FILE) as work:
        start = time.monotonic()
        rows = kind.pretrain(domains, config, work, verbose)
        info = {
            "model": kind.name,
            "config": dataclasses.asdict(config),
            "seconds": time.monotonic() - start,
            "datasets": [
                {
                    "data": d.data,
                    "item_text": d.item_text,
                    "num_items": d.vocabulary.num_items,
                    "items_without_text": d.missing,
                    "attributes": d.attributes,
                    "training_events": int(d.split.train.num_events),
                }
                for d in domains
            ],
            "history": rows,
        }
        with open(os.path.join(work, CONFIG_FILE), "w") as f:
            json.dump(info, f, indent=2)
    return rows


def fit_epochs(task, ds, config, verbose):
    """``task.fit`` for ``config.epochs``; ``max_train_minutes`` stops it at the first step past them.

    Pre-training has no validation to wait for, and one epoch over every position of a
    large dataset can outlast any budget. Returns a row per epoch: loss and steps.
    """
    steps = StepsPerEpoch()
    callbacks = [steps]
    if config.max_train_minutes:
        callbacks.append(TimeLimit(config.max_train_minutes * 60, within_epoch=True))
    history = task.fit(ds, epochs=config.epochs, callbacks=callbacks, verbose=verbose)
    return [
        {"epoch": i + 1, "loss": float(loss), "steps": n}
        for i, (loss, n) in enumerate(zip(history.history["loss"], steps.counts))
    ]


def pretrain_unisrec(kind, domains, config, work, verbose):
    """UniSRec's pre-training (``UniSRecPretrainer``) on ``domains``; writes ``model.keras`` to ``work``.

    ``kind``: the UniSRec kind, which builds the model.
    """
    vectors = []
    for d in domains:
        encoder = SentenceEncoder.from_pretrained(
            d.attributes, max_attribute_tokens=config.max_attribute_tokens
        )
        vectors.append(
            encoder.encode(d.texts[vocab_lib.NUM_RESERVED :], progress=None if verbose == "auto" else False)
        )
    vectors = np.concatenate(vectors)
    config = dataclasses.replace(config, model_options={**config.model_options, "use_id_embeddings": False})
    model = kind.build(config, len(vectors), text_dim=vectors.shape[1], text_embeddings=vectors)
    windows, targets = history_pairs(joined_sequences(domains), config.max_sequence_length)
    ds = (
        tf.data.Dataset.from_tensor_slices(({"item_ids": windows}, targets))
        .shuffle(len(targets), seed=config.seed, reshuffle_each_iteration=True)
        .batch(config.batch_size, drop_remainder=len(targets) >= config.batch_size)
        .prefetch(2)
    )
    task = UniSRecPretrainer(model, config.seq_seq_weight, config.item_drop, seed=config.seed)
    task.compile(optimizer=keras.optimizers.Adam(config.learning_rate))
    rows = fit_epochs(task, ds, config, verbose)
    model.save(os.path.join(work, MODEL_FILE))
    return rows


def read_config(checkpoint, model):
    """The ``pretrain_config.json`` of a checkpoint directory of ``model``; errors say what is wrong."""
    path = os.path.join(checkpoint, CONFIG_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{checkpoint}: no {CONFIG_FILE}; is it a directory written by 'tfseqrec pretrain'?"
        )
    with open(path) as f:
        info = json.load(f)
    if info.get("model") != model:
        raise ValueError(f"{checkpoint} holds a pre-trained {info.get('model')}, not a {model}")
    return info
