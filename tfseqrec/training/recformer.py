"""From interactions and item text to a fine-tuned Recformer: the wiring behind
``tfseqrec train --model recformer`` (options: ``tfseqrec.training.config.RecformerConfig``).

``train`` splits the data (leave-one-out), tokenizes every item's text, starts the
encoder from all-MiniLM-L6-v2 (the first ``num_layers`` layers), and fine-tunes in
Recformer's two stages: stage 1 re-encodes the item table from the encoder after
every epoch, stage 2 freezes it and trains the encoder alone. Each epoch is validated
by full-catalogue NDCG@10 on the validation cases; the best weights are kept. The
model directory holds:

    model.keras         the Recformer (encoder and item table)
    item_vocab.tsv      the item vocabulary
    item_text.json      the text of every item, as read ({raw id: {attribute: text}})
    recformer_config.json  the ``RecformerConfig`` and the data
    history.csv         per-epoch loss and validation metrics
"""

import dataclasses
import json
import os
import time

import keras
import numpy as np
import tensorflow as tf

from tfseqrec.data import readers, splits, text
from tfseqrec.data import vocab as vocab_lib
from tfseqrec.models import recformer as recformer_lib
from tfseqrec.training.callbacks import RankingValidation, TimeLimit, TrainingDiverged
from tfseqrec.training.config import RecformerConfig
from tfseqrec.training.directory import MODEL_FILE, output_directory, read

CONFIG_FILE = "recformer_config.json"
TEXT_FILE = "item_text.json"


def default_attributes(item_text_path):
    return list(text.ATTRIBUTES["amazon" if str(item_text_path).endswith(".json") else "movielens"])


def item_texts(item_text, vocabulary, attributes):
    """``[vocabulary.size, len(attributes)]`` strings; reserved ids and unknown items are empty."""
    table = np.full((vocabulary.size, len(attributes)), "", dtype=object)
    missing = 0
    for i, raw in enumerate(vocabulary.items):
        attrs = item_text.get(raw)
        if attrs is None:
            missing += 1
            continue
        table[vocab_lib.NUM_RESERVED + i] = [attrs.get(a, "") or "" for a in attributes]
    return table, missing


def build(config, vocabulary, texts, model=None):
    """The ``RecformerRecommender`` of ``config`` over ``texts`` (``item_texts``).

    ``model`` (a ``Recformer``) is used as it is; otherwise one is built, started
    from all-MiniLM-L6-v2 when ``config.pretrained``.
    """
    path = recformer_lib.minilm_path()
    tokenizer = text.ItemTextTokenizer(os.path.join(path, "vocab.txt"), config.attributes, config.max_attribute_tokens)
    tokens, types = tokenizer.tokenize(texts)
    if model is None and config.init_from:
        backbone = pretrained_backbone(config)
        model = recformer_lib.Recformer(backbone, temperature=config.temperature, num_items=vocabulary.num_items)
        model.build()
    if model is None:
        backbone = recformer_lib.RecformerBackbone(
            num_layers=config.num_layers,
            max_tokens=config.max_tokens,
            max_sequence_length=config.max_sequence_length,
            attention_window=config.attention_window,
            dropout=config.dropout,
        )
        backbone.build()
        if config.pretrained:
            recformer_lib.load_bert_weights(backbone, path)
        model = recformer_lib.Recformer(backbone, temperature=config.temperature, num_items=vocabulary.num_items)
        model.build()
    return recformer_lib.RecformerRecommender(model, tokens, types, tokenizer.cls_id, tokenizer, texts)


def pretrained_backbone(config):
    """The ``RecformerBackbone`` of ``config.init_from`` (a ``tfseqrec pretrain --model recformer`` directory)."""
    from tfseqrec.training import pretrain

    pretrain.read_config(config.init_from, "recformer")
    backbone = keras.saving.load_model(os.path.join(config.init_from, pretrain.BACKBONE_FILE))
    for name in ("num_layers", "max_tokens", "max_sequence_length", "attention_window"):
        if getattr(backbone, name) != getattr(config, name):
            raise ValueError(f"{config.init_from} was pre-trained with {name} {getattr(backbone, name)}; "
                             f"fine-tuning asks for {getattr(config, name)} (use the pre-training's sizes)")
    return backbone


def align(recommender, config, verbose="auto"):
    """Teaches ``[CLS]`` the checkpoint's mean-pooled sentence vector on item text.

    A ``RecformerAligner`` on the recommender's backbone (trained in place) for
    ``config.align_epochs`` passes over the item table, one-item inputs, 64 per
    batch. No interaction is read, so the model stays zero-shot. Returns the fit
    history (or ``None`` with ``align_epochs=0``).
    """
    if config.align_epochs <= 0:
        return None
    model = recommender.model
    aligner = recformer_lib.RecformerAligner(model.backbone, temperature=model.temperature)
    ids = np.arange(vocab_lib.NUM_RESERVED, vocab_lib.NUM_RESERVED + model.num_items)
    width = recommender.item_width()
    ds = tf.data.Dataset.from_tensor_slices(ids).shuffle(len(ids), seed=config.seed).batch(64)
    ds = ds.map(lambda i: recommender.pack(tf.RaggedTensor.from_tensor(i[:, None]), width)).prefetch(2)
    aligner.compile(optimizer=keras.optimizers.AdamW(config.align_learning_rate, weight_decay=0.0))
    history = aligner.fit(ds, epochs=config.align_epochs, verbose=verbose)
    recommender.refresh_item_embeddings()
    return history


def training_pairs(sequences, examples_per_user=1):
    """``(histories, targets)``: the last ``examples_per_user`` next items of each sequence."""
    histories, targets = [], []
    for u in range(len(sequences)):
        seq = sequences[u]
        for t in range(max(1, len(seq) - examples_per_user), len(seq)):
            histories.append(seq[:t])
            targets.append(seq[t])
    return histories, np.asarray(targets, np.int64)


def training_dataset(recommender, sequences, config):
    histories, targets = training_pairs(sequences, config.examples_per_user)
    ragged = tf.ragged.constant(histories, dtype=tf.int64, ragged_rank=1)
    ds = tf.data.Dataset.from_tensor_slices((ragged, targets - vocab_lib.NUM_RESERVED))
    ds = ds.shuffle(len(targets), seed=config.seed, reshuffle_each_iteration=True).batch(config.batch_size)
    return ds.map(lambda h, y: (recommender.pack(h), y), num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


def finetune(recommender, split, config, verbose="auto"):
    """Recformer's two-stage fine-tuning on ``split.train``; returns per-epoch rows.

    Stage 1 re-encodes the item table after every epoch (``RankingValidation`` with
    ``refresh=True``); stage 2 starts from the best stage-1 weights and table and
    keeps the table frozen. Each epoch is validated on ``split.valid`` (full-catalogue
    NDCG@10); the best weights are restored at the end. ``config.max_train_minutes``
    bounds the time of both stages together.
    """
    model = recommender.model
    train_ds = training_dataset(recommender, split.train, config)
    rows, start = [], time.monotonic()
    budget = config.max_train_minutes * 60 if config.max_train_minutes else None
    best_weights, best = None, -np.inf
    stages = [(1, config.epochs, config.learning_rate, True),
              (2, config.stage2_epochs, config.stage2_learning_rate or config.learning_rate / 2, False)]
    recommender.refresh_item_embeddings()
    for stage, epochs, learning_rate, refresh in stages:
        if epochs <= 0 or (budget and time.monotonic() - start >= budget):
            continue
        if best_weights is not None:  # stage 2 starts from the best stage-1 model and its item table
            model.set_weights(best_weights)
        model.compile(optimizer=keras.optimizers.AdamW(learning_rate, weight_decay=0.0))
        validation = RankingValidation(recommender, split.valid, refresh, config.validation_batch_size, start)
        callbacks = [
            validation,
            keras.callbacks.EarlyStopping(monitor="val_ndcg_10", mode="max", patience=config.patience),
        ]
        if budget:
            callbacks.append(TimeLimit(max(1.0, budget - (time.monotonic() - start))))
        history = model.fit(train_ds, epochs=epochs, callbacks=callbacks, verbose=verbose, shuffle=False)
        for epoch, values in enumerate(zip(*history.history.values())):
            rows.append({"stage": stage, "epoch": epoch + 1, **dict(zip(history.history.keys(), map(float, values)))})
        if validation.best > best:
            best, best_weights = validation.best, validation.best_weights
        if validation.diverged is not None:
            d = validation.diverged
            raise TrainingDiverged(
                f"training diverged: the loss became {d['loss']} in stage {stage}, epoch {d['epoch'] + 1}, "
                f"batch {d['batch'] + 1}; nothing was saved. Try a lower learning rate."
            )
    if best_weights is not None:
        model.set_weights(best_weights)
    return rows


def train(data_path, item_text_path, output_dir, config=None, verbose="auto", split=None, vocabulary=None,
          report=None, overwrite=False):
    """Fine-tunes a Recformer; returns ``(recommender, history_rows, split, vocabulary)``.

    Args:
        data_path: interaction file or dataset directory (see ``readers``).
        item_text_path: item text (``*.item.json``, ``movies.dat``, ``u.item``).
        output_dir: the model directory.
        config: ``RecformerConfig`` or dict.
        verbose: ``fit`` verbosity.
        split, vocabulary, report: a prepared split to train on instead of
            ``data_path``'s leave-one-out split (for example
            ``splits.cold_start_split``'s train set) and what to record about it.
        overwrite: replace a model already in ``output_dir`` (``directory.output_directory``:
            the run writes ``output_dir`` only when it completes).
    """
    config = config if isinstance(config, RecformerConfig) else RecformerConfig.from_dict(config or {})
    if config.attributes is None:
        config.attributes = default_attributes(item_text_path)
    keras.utils.set_random_seed(config.seed)
    if split is None:
        split, vocabulary, report = splits.prepare(readers.read_interactions(data_path))
    raw_text = readers.read_item_text(item_text_path)
    texts, missing = item_texts(raw_text, vocabulary, config.attributes)
    recommender = build(config, vocabulary, texts)
    info = {"config": dataclasses.asdict(config), "data": str(data_path), "item_text": str(item_text_path),
            "items_without_text": missing, "report": report or {}}
    with output_directory(output_dir, {"config": info["config"], "data": info["data"]}, overwrite, CONFIG_FILE) as work:
        vocabulary.save(work)
        with open(os.path.join(work, TEXT_FILE), "w", encoding="utf-8") as f:
            json.dump({raw: raw_text[raw] for raw in vocabulary.items if raw in raw_text}, f, ensure_ascii=False)
        with open(os.path.join(work, CONFIG_FILE), "w") as f:
            json.dump(info, f, indent=2)
        if config.pretrained and not config.init_from:  # a pre-trained checkpoint was aligned before
            align(recommender, config, verbose=verbose)
        rows = finetune(recommender, split, config, verbose=verbose)
        recommender.model.save(os.path.join(work, MODEL_FILE))
        _write_history(os.path.join(work, "history.csv"), rows)
    return recommender, rows, split, vocabulary


def _write_history(path, rows):
    with open(path, "w") as f:
        keys = ["stage", "epoch"] + sorted({k for r in rows for k in r} - {"stage", "epoch"})
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(str(r.get(k, "")) for k in keys) + "\n")


def add_items(recommender, vocabulary, raw_text, config):
    """Adds the items of ``raw_text`` that ``vocabulary`` lacks, without retraining.

    New items get the next vocabulary ids (count 0, natural order of their raw ids),
    their text is tokenized and encoded as one-item sequences by the trained encoder,
    and the item table grows by their vectors; the vectors of known items are kept.

    Args:
        recommender: a ``RecformerRecommender``.
        vocabulary: its ``ItemVocabulary``.
        raw_text: ``{raw id: {attribute: text}}`` (``readers.read_item_text``).
        config: the model's ``RecformerConfig`` (attributes, token budget).

    Returns:
        ``(recommender, vocabulary, added)``: a new recommender over the grown table,
        its vocabulary and the raw ids added.
    """
    added = sorted((raw for raw in raw_text if raw not in vocabulary), key=vocab_lib.natural_key)
    if not added:
        return recommender, vocabulary, []
    grown = vocab_lib.ItemVocabulary(
        vocabulary.items + added, np.concatenate([vocabulary.counts, np.zeros(len(added), np.int64)])
    )
    texts, _ = item_texts(raw_text, grown, config.attributes)
    old = recommender.model
    known = old.item_embeddings.numpy()
    model = old.resized(grown.num_items)
    result = build(config, grown, texts, model=model)
    new_ids = np.arange(vocabulary.size, grown.size)
    model.set_item_embeddings(np.concatenate([known, result.encode_items(new_ids)]))
    return result, grown, added


def load(model_dir):
    """``(recommender, vocabulary, info)`` of a directory written by ``train``."""
    model, vocabulary, info = read(model_dir, CONFIG_FILE)
    with open(os.path.join(model_dir, TEXT_FILE), encoding="utf-8") as f:
        raw_text = json.load(f)
    config = RecformerConfig.from_dict(info["config"])
    texts, _ = item_texts(raw_text, vocabulary, config.attributes)
    return build(config, vocabulary, texts, model=model), vocabulary, info
