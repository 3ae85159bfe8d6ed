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

from tfseqrec.data import readers, splits, text, wordpiece
from tfseqrec.data import vocab as vocab_lib
from tfseqrec.data.text import default_attributes, item_texts
from tfseqrec.models import recformer as recformer_lib
from tfseqrec.models.recformer.arrays import training_pairs
from tfseqrec.schedules import WarmupLinearDecay
from tfseqrec.training import directory, pretrain
from tfseqrec.training.callbacks import RankingValidation, TimeLimit, TrainingDiverged
from tfseqrec.training.config import RecformerConfig
from tfseqrec.training.directory import MODEL_FILE, TEXT_FILE, output_directory, read

CONFIG_FILE = "recformer_config.json"


def _backbone(config, **options):
    """The ``RecformerBackbone`` of ``config``'s sizes (``options`` to its constructor)."""
    return recformer_lib.RecformerBackbone(
        num_layers=config.num_layers,
        max_tokens=config.max_tokens,
        max_sequence_length=config.max_sequence_length,
        attention_window=config.attention_window,
        dropout=config.dropout,
        **options,
    )


def build(config, vocabulary, texts, model=None):
    """The ``RecformerRecommender`` of ``config`` over ``texts`` (``item_texts``).

    ``model`` (a ``Recformer``) is used as it is; otherwise one is built, started
    from all-MiniLM-L6-v2 when ``config.pretrained``.
    """
    path = recformer_lib.minilm_path()
    tokenizer = text.ItemTextTokenizer(
        os.path.join(path, "vocab.txt"),
        config.attributes,
        config.max_attribute_tokens,
        attribute_tokens=config.attribute_tokens,
    )
    shown = texts
    if config.common_value_share:
        shown, _ = text.drop_common_values(texts, config.common_value_share)
    tokens, types = tokenizer.tokenize(shown)
    first = vocab_lib.NUM_RESERVED
    wordpiece.check_item_tokens(
        tokens.to_list()[first:], types.to_list()[first:], tokenizer.unk_id, config.max_tokens, first
    )
    if model is None and config.init_from:
        backbone = pretrained_backbone(config)
        model = recformer_lib.Recformer(
            backbone, temperature=config.temperature, num_items=vocabulary.num_items, pooling=config.pooling
        )
        model.build()
    if model is None:
        backbone = _backbone(config, cached_layers=config.cached_layers)
        backbone.build()
        if config.pretrained:
            recformer_lib.load_bert_weights(backbone, path)
        model = recformer_lib.Recformer(
            backbone, temperature=config.temperature, num_items=vocabulary.num_items, pooling=config.pooling
        )
        model.build()
    pad_multiple = config.attention_window // 2 if config.pad_to_longest else None
    recommender = recformer_lib.RecformerRecommender(
        model, tokens, types, tokenizer.cls_id, tokenizer, texts, pad_multiple
    )
    return recommender.cache_item_states()


def text_report(config, texts, tokens):
    """What the items' text gives the model: values dropped, tokens per item, items that share their text."""
    report = {}
    if config.common_value_share:
        _, dropped = text.drop_common_values(texts, config.common_value_share)
        report["dropped_values"] = {config.attributes[a]: values for a, values in dropped.items()}
    rows = [tuple(row) for row in tokens.to_list()[vocab_lib.NUM_RESERVED :]]
    counts = {}
    for row in rows:
        counts[row] = counts.get(row, 0) + 1
    lengths = np.array([len(r) for r in rows])
    report["tokens_per_item"] = {
        "mean": float(lengths.mean()) if len(rows) else 0.0,
        "max": int(lengths.max(initial=0)),
    }
    # Items of identical text get identical vectors: they tie in every ranking.
    report["items_sharing_their_text"] = int(sum(n for n in counts.values() if n > 1))
    return report


def pretrained_backbone(config):
    """The ``RecformerBackbone`` of ``config.init_from`` (a ``tfseqrec pretrain --model recformer`` directory)."""
    pretrain.read_config(config.init_from, "recformer")
    backbone = directory.load_model_file(os.path.join(config.init_from, pretrain.BACKBONE_FILE))
    for name in ("num_layers", "max_tokens", "max_sequence_length", "attention_window"):
        if getattr(backbone, name) != getattr(config, name):
            raise ValueError(
                f"{config.init_from} was pre-trained with {name} {getattr(backbone, name)}; "
                f"fine-tuning asks for {getattr(config, name)} (use the pre-training's sizes)"
            )
    if config.cached_layers != backbone.cached_layers:
        # The same weights; freezing and the second item-position table come with the new backbone.
        cached = recformer_lib.RecformerBackbone.from_config(
            {**backbone.get_config(), "cached_layers": config.cached_layers}
        )
        cached.build()
        for new, old in zip([cached.embedding] + cached.blocks, [backbone.embedding] + backbone.blocks):
            new.set_weights(old.get_weights())
        backbone = cached
    return backbone


def align(recommender, config, verbose="auto"):
    """Teaches ``[CLS]`` the checkpoint's mean-pooled sentence vector on item text.

    A ``RecformerAligner`` on the recommender's backbone (trained in place) for
    ``config.align_epochs`` passes over the item table, one-item inputs, 64 per
    batch. No interaction is read, so the model stays zero-shot. Returns the fit
    history (or ``None`` with ``align_epochs=0``). Either way the item table is
    encoded after it, so the recommender ranks zero-shot as it stands (before, with
    no alignment the table stayed unencoded and every item tied).
    """
    if config.align_epochs <= 0:
        recommender.refresh_item_embeddings()
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


def aligns(config):
    """Whether a run of ``config`` first aligns ``[CLS]`` (``align``) on the item text.

    Only a ``[CLS]``-pooled model starting from all-MiniLM-L6-v2 does: mean pooling reads
    the checkpoint's own sentence vector, and a ``tfseqrec pretrain`` checkpoint
    (``init_from``) was aligned when it was pre-trained. Fine-tuning and pre-training
    both ask here.
    """
    return config.pretrained and not config.init_from and config.pooling == "cls"


def training_dataset(recommender, sequences, config):
    """Batches ``(packed histories, next item's table index)`` of ``config.training_targets``.

    ``"last"``: the last ``examples_per_user`` targets of each sequence; ``"random"``:
    one target per sequence, drawn afresh every epoch (the official collator);
    ``"all"``: every position. Pairs are shuffled every epoch (seeded). With
    ``recommender.pad_multiple`` batches are grouped by packed width, so a batch of
    short histories is narrow.
    """
    rng = np.random.default_rng(config.seed)
    per_user = {"last": config.examples_per_user, "all": None}.get(config.training_targets)

    def pairs():
        histories, targets = training_pairs(
            sequences, per_user, rng if config.training_targets == "random" else None
        )
        for i in rng.permutation(len(targets)):
            yield histories[i], targets[i] - vocab_lib.NUM_RESERVED

    ds = tf.data.Dataset.from_generator(
        pairs, output_signature=(tf.TensorSpec([None], tf.int64), tf.TensorSpec([], tf.int64))
    )
    multiple = recommender.pad_multiple
    if multiple:
        item_lengths = tf.constant(recommender.item_tokens.row_lengths().numpy())
        buckets = -(-recommender.model.max_tokens // multiple)

        def bucket(history, _):
            width = 1 + tf.reduce_sum(tf.gather(item_lengths, history[-recommender.max_sequence_length :]))
            return tf.minimum((width - 1) // multiple, buckets - 1)

        ds = ds.group_by_window(
            bucket, lambda _, window: window.padded_batch(config.batch_size), window_size=config.batch_size
        )
    else:
        ds = ds.padded_batch(config.batch_size)
    return ds.map(
        lambda h, y: (recommender.pack(tf.RaggedTensor.from_tensor(h, padding=0)), y),
        num_parallel_calls=tf.data.AUTOTUNE,
    ).prefetch(2)


def steps_per_epoch(recommender, sequences, config):
    """Batches of one pass of ``training_dataset`` (at most: each width bucket may end in a short batch)."""
    pairs = sum(1 for u in range(len(sequences)) if len(sequences[u]) >= 2)
    if config.training_targets != "random":
        per_user = None if config.training_targets == "all" else config.examples_per_user
        pairs = len(training_pairs(sequences, per_user)[1])
    buckets = -(-recommender.model.max_tokens // recommender.pad_multiple) if recommender.pad_multiple else 1
    return -(-pairs // config.batch_size) + buckets - 1


def finetune(recommender, split, config, verbose="auto", encode_items=True):
    """Recformer's two-stage fine-tuning on ``split.train``; returns per-epoch rows.

    ``encode_items=False`` skips encoding the item table before the first epoch, for
    a table that already holds this encoder's vectors (``align`` ends by encoding it).

    Stage 1 re-encodes the item table after every epoch (``RankingValidation`` with
    ``refresh=True``); stage 2 starts from the best stage-1 weights and table and
    keeps the table frozen. Each epoch is validated on ``split.valid`` (full-catalogue
    NDCG@10); the best weights are restored at the end. ``config.max_train_minutes``
    bounds the time of both stages together. With ``learning_rate_schedule="linear"``
    one AdamW runs both stages on ``WarmupLinearDecay`` (warm-up over
    ``warmup_share`` of the planned steps, then down to 0 at the last planned step);
    otherwise each stage has its own constant rate.
    """
    model = recommender.model
    train_ds = training_dataset(recommender, split.train, config)
    rows, start = [], time.monotonic()
    budget = config.max_train_minutes * 60 if config.max_train_minutes else None
    best_weights, best = None, -np.inf
    schedule, optimizer = _linear_schedule(recommender, split.train, config), None
    if encode_items:
        recommender.refresh_item_embeddings()
    for stage, epochs, learning_rate, refresh in _stages(config):
        if epochs <= 0 or (budget and time.monotonic() - start >= budget):
            continue
        if best_weights is not None:  # stage 2 starts from the best stage-1 model and its item table
            model.set_weights(best_weights)
        if schedule is None or optimizer is None:  # with a schedule, one optimiser runs over both stages
            optimizer = keras.optimizers.AdamW(schedule or learning_rate, weight_decay=0.0)
            model.compile(optimizer=optimizer)
        valid = split.valid.sample(config.validation_users, config.seed)
        validation = RankingValidation(recommender, valid, refresh, config.validation_batch_size, start)
        callbacks = _stage_callbacks(validation, config, budget, start)
        history = model.fit(train_ds, epochs=epochs, callbacks=callbacks, verbose=verbose, shuffle=False)
        rows += _history_rows(stage, history)
        if validation.best > best:
            best, best_weights = validation.best, validation.best_weights
        _raise_if_diverged(validation, stage)
    if best_weights is not None:
        model.set_weights(best_weights)
    return rows


def _stages(config):
    """``(stage, epochs, learning rate, refresh the item table)`` of fine-tuning's two stages."""
    return [
        (1, config.epochs, config.learning_rate, True),
        (2, config.stage2_epochs, config.stage2_learning_rate or config.learning_rate / 2, False),
    ]


def _linear_schedule(recommender, sequences, config):
    """The ``WarmupLinearDecay`` over both stages' planned steps with the ``"linear"`` schedule; else ``None``."""
    if config.learning_rate_schedule != "linear":
        return None
    total = steps_per_epoch(recommender, sequences, config) * (config.epochs + config.stage2_epochs)
    return WarmupLinearDecay(config.learning_rate, total, int(config.warmup_share * total))


def _stage_callbacks(validation, config, budget, start):
    """A stage's callbacks: validation, early stopping on it, and what is left of the time budget."""
    callbacks = [
        validation,
        keras.callbacks.EarlyStopping(monitor="val_ndcg_10", mode="max", patience=config.patience),
    ]
    if budget:
        callbacks.append(TimeLimit(max(1.0, budget - (time.monotonic() - start))))
    return callbacks


def _history_rows(stage, history):
    """One row per epoch of a stage's ``fit`` history: stage, epoch and every logged value."""
    return [
        {"stage": stage, "epoch": epoch + 1, **dict(zip(history.history.keys(), map(float, values)))}
        for epoch, values in enumerate(zip(*history.history.values()))
    ]


def _raise_if_diverged(validation, stage):
    """``TrainingDiverged`` when the stage's loss became non-finite (``RankingValidation.diverged``)."""
    if validation.diverged is not None:
        d = validation.diverged
        raise TrainingDiverged(
            f"training diverged: the loss became {d['loss']} in stage {stage}, epoch {d['epoch'] + 1}, "
            f"batch {d['batch'] + 1}; nothing was saved. Try a lower learning rate."
        )


def train(
    data_path,
    item_text_path,
    output_dir,
    config=None,
    verbose="auto",
    split=None,
    vocabulary=None,
    report=None,
    overwrite=False,
):
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
    raw_text = readers.read_item_text(item_text_path)
    if config.attributes is None:
        config.attributes = default_attributes(item_text_path, raw_text)
    keras.utils.set_random_seed(config.seed)
    if split is None:
        split, vocabulary, report = splits.prepare(readers.read_interactions(data_path))
    texts, missing = item_texts(raw_text, vocabulary, config.attributes)
    directory.require_text(item_text_path, raw_text, vocabulary, missing, some_may_lack=True)
    recommender = build(config, vocabulary, texts)
    info = {
        "config": dataclasses.asdict(config),
        "data": str(data_path),
        "item_text": str(item_text_path),
        "items_without_text": missing,
        "report": report or {},
        "text": text_report(config, texts, recommender.item_tokens),
    }
    if verbose:
        print(f"item text: {json.dumps(info['text'])}", flush=True)
    with output_directory(
        output_dir, {"config": info["config"], "data": info["data"]}, overwrite, CONFIG_FILE
    ) as work:
        vocabulary.save(work)
        directory.write_item_text(work, raw_text, vocabulary)
        with open(os.path.join(work, CONFIG_FILE), "w") as f:
            json.dump(info, f, indent=2)
        aligned = aligns(config)
        if aligned:
            align(recommender, config, verbose=verbose)
        rows = finetune(recommender, split, config, verbose=verbose, encode_items=not aligned)
        recommender.model.save(os.path.join(work, MODEL_FILE))
        _write_history(os.path.join(work, "history.csv"), rows)
    return recommender, rows, split, vocabulary


def pretrain_recformer(domains, config, work, verbose):
    """Recformer's alignment, MLM and item-item contrast on ``domains``; writes ``backbone.keras`` to ``work``."""
    if config.cached_layers:
        raise ValueError(
            "pre-training trains every layer (its MLM reads the token embeddings); cached_layers "
            "is a fine-tuning option: pre-train without it, then fine-tune with init_from and it"
        )
    path = recformer_lib.minilm_path()
    tokens, types = [], []
    for d in domains:
        tokenizer = text.ItemTextTokenizer(
            os.path.join(path, "vocab.txt"), d.attributes, config.max_attribute_tokens
        )
        t, y = tokenizer.tokenize(d.texts[vocab_lib.NUM_RESERVED :])
        tokens.append(t)
        types.append(y)
    empty = tf.ragged.constant([[]] * vocab_lib.NUM_RESERVED, dtype=tf.int64, ragged_rank=1)
    item_tokens = tf.concat([empty] + tokens, axis=0)
    item_types = tf.concat([tf.cast(empty, tf.int32)] + types, axis=0)
    num_items = int(item_tokens.nrows()) - vocab_lib.NUM_RESERVED
    backbone = _backbone(config)
    backbone.build()
    recformer_lib.load_bert_weights(backbone, path)
    model = recformer_lib.Recformer(
        backbone, temperature=config.temperature, num_items=num_items, pooling=config.pooling
    )
    model.build()
    recommender = recformer_lib.RecformerRecommender(
        model, item_tokens, item_types, tokenizer.cls_id, tokenizer
    )
    if aligns(config):
        align(recommender, config, verbose=verbose)
    histories, targets = training_pairs(pretrain.joined_sequences(domains), config.examples_per_user)
    width = recommender.item_width()
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.ragged.constant(histories, dtype=tf.int64, ragged_rank=1), targets)
    )
    ds = ds.shuffle(len(targets), seed=config.seed, reshuffle_each_iteration=True).batch(config.batch_size)
    ds = ds.map(
        lambda h, y: (recommender.pack(h), recommender.pack(tf.RaggedTensor.from_tensor(y[:, None]), width)),
        num_parallel_calls=tf.data.AUTOTUNE,
    ).prefetch(2)
    task = recformer_lib.RecformerPretrainer(
        backbone,
        temperature=config.temperature,
        mlm_weight=config.mlm_weight,
        seed=config.seed,
        pooling=config.pooling,
    )
    task.compile(optimizer=keras.optimizers.AdamW(config.learning_rate, weight_decay=0.0))
    rows = pretrain.fit_epochs(task, ds, config, verbose)
    backbone.save(os.path.join(work, pretrain.BACKBONE_FILE))
    return rows


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
    grown, added = vocabulary.with_items(raw_text)
    if not added:
        return recommender, vocabulary, []
    texts, _ = item_texts(raw_text, grown, config.attributes)
    directory.require_new_item_text("--item-text", texts, grown, vocabulary.size, config.attributes)
    old = recommender.model
    known = old.item_embeddings.numpy()
    model = old.resized(grown.num_items)
    result = build(config, grown, texts, model=model)
    new_ids = np.arange(vocabulary.size, grown.size)
    model.set_item_embeddings(np.concatenate([known, result.encode_items(new_ids)]))
    return result, grown, added


def read_model(model_dir):
    """``(recommender, vocabulary, info)`` of a directory written by ``train``.

    The Recformer kind's reader: users load any model directory with ``tfseqrec.load``.
    """
    model, vocabulary, info = read(model_dir, CONFIG_FILE)
    raw_text = directory.read_item_text(model_dir)
    if raw_text is None:
        raise FileNotFoundError(
            f"{model_dir}: no {TEXT_FILE}; a Recformer directory keeps its items' text there"
        )
    config = RecformerConfig.from_dict(info["config"])
    texts, _ = item_texts(raw_text, vocabulary, config.attributes)
    return build(config, vocabulary, texts, model=model), vocabulary, info
