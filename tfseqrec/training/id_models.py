"""The id models' driver (SASRec, BERT4Rec, HSTU, UniSRec): from a data file to a trained model directory.

``train`` reads and splits the data, builds the model its registry entry names
(``tfseqrec.registry``: the class, and how its data are prepared: ``causal``
next-item windows, ``cloze`` masked windows, ``timed`` windows with the events'
times; whether it reads item text, whether it starts from a pre-training), fits it
with the standard callbacks, and writes a model directory
(``tfseqrec.training.directory``). It reads what the entry declares and calls
nothing back:

    model.keras       the best model by validation NDCG@10 (``BestModel``)
    item_vocab.tsv    the item vocabulary (raw ids <-> ids)
    train_config.json the ``TrainConfig`` and the data it was trained on
    history.csv       per-epoch loss and validation metrics (``HistoryLog``)
    logs/             TensorBoard

While the run is unfinished, ``OUTPUT.partial/backup/`` holds the last finished
epoch (BackupAndRestore, plus the best-model state): rerunning the same command
after a crash or ``kill -9`` resumes it and ends with the same best model.
"""

import dataclasses
import json
import os
import shutil
import sys

import keras
import numpy as np
import tensorflow as tf

from tfseqrec import distribute, evaluation, models, presets, registry
from tfseqrec import losses as losses_lib
from tfseqrec import metrics as metrics_lib
from tfseqrec.data import events as events_lib
from tfseqrec.data import features as features_lib
from tfseqrec.data import numpy_pipeline, pipeline, readers, splits, text, vocab
from tfseqrec.models.tasks import PRESET_RUN_FILE
from tfseqrec.optimizers import RowSparseAdam
from tfseqrec.schedules import FromStep, WarmupLinearDecay
from tfseqrec.training import directory, pretrain
from tfseqrec.training import warm as warm_lib
from tfseqrec.training.callbacks import BestModel, HistoryLog, StepLimit, TimeLimit, TrainingDiverged
from tfseqrec.training.config import LEGACY_MODEL_OPTIONS, TrainConfig
from tfseqrec.training.directory import BACKUP_DIR, MODEL_FILE, FreeSpaceGuard, output_directory

CONFIG_FILE = PRESET_RUN_FILE  # what from_preset and save_to_preset name it too
MONITOR = "val_ndcg_10"
BEST_STATE_FILE = "best_model.json"


def spec_of(model):
    """The registry entry of ``model``: a name, a ``ModelSpec``, or a kind (``tfseqrec.kinds``)."""
    if isinstance(model, registry.ModelSpec):
        return model
    spec = registry.get(getattr(model, "name", model))
    if spec.preparation == "text":
        raise ValueError(f"{spec.name} reads item text; tfseqrec.training.recformer trains it")
    return spec


def options(model, config):
    """``config`` (a ``TrainConfig`` or a dict) as the ``TrainConfig`` of ``model`` (a name, a
    ``ModelSpec`` or a kind).

    A dict without ``model`` is the model's; options of another model are an error.
    """
    name = spec_of(model).name
    if not isinstance(config, TrainConfig):
        config = TrainConfig.from_dict({"model": name, **(config or {})})
    if config.model != name:
        raise ValueError(f"the options are for model {config.model!r}, the kind is {name!r}")
    return config


def build_model(model, config, num_items, loss_normalizer=None, **model_kwargs):
    """The model ``model`` names (a name, a ``ModelSpec`` or a kind) of ``config``, for ``num_items`` items.

    ``model_kwargs`` go to the constructor (UniSRec's ``text_dim`` and ``text_embeddings``).
    The global random streams are seeded with ``config.seed`` first
    (``keras.utils.set_random_seed``), so the initial weights are a function of the
    seed and the options alone, whatever drew from the streams before (reading the
    data, a check build, another model).
    """
    spec = spec_of(model)
    config = options(spec, config)
    keras.utils.set_random_seed(config.seed)
    return construct(spec, config, num_items, loss_normalizer, _loss(config), **model_kwargs)


def construct(spec, config, num_items, loss_normalizer=None, loss=None, **model_kwargs):
    """``spec``'s model class of ``config`` for a catalogue of ``num_items`` (``model_kwargs`` to its
    constructor), without seeding.

    A model option the constructor does not take, or one out of range, is a
    ``ValueError`` naming it: which options it takes is read from the constructors'
    signatures (``presets.constructor_arguments``) before anything is built.
    """
    spec = spec_of(spec)
    model_options = constructor_options(spec, config)
    unknown = sorted(set(model_options) - presets.constructor_arguments(spec))
    if unknown:
        training = sorted(f.name for f in dataclasses.fields(TrainConfig))
        raise ValueError(
            f"unknown training options {unknown}: neither training options ({training}) nor "
            f"arguments of {spec.class_name}'s constructor (model options)"
        )
    kwargs = {
        **model_options,
        **model_kwargs,
        "num_items": num_items,
        "loss": loss,
        "loss_normalizer": loss_normalizer,
    }
    if config.max_sequence_length is not None:  # None before the data settle it: the constructor's
        kwargs["max_sequence_length"] = config.max_sequence_length
    if spec.preparation == "cloze":
        kwargs.update(last_item_only_prob=config.last_item_only_prob, seed=config.seed)
        if config.mask_prob is not None:  # None before the data settle it: the constructor's
            kwargs["mask_prob"] = config.mask_prob
    return presets.model_class(spec)(**kwargs)


def check(model, config, with_features=False):
    """Checks ``config.model_options`` by building a one-item model of them (``ValueError`` naming a bad one);
    ``with_features``: as a model with item attributes will be built (of a placeholder attribute).

    This creates TensorFlow variables: call it after a multi-worker strategy exists.
    """
    spec = spec_of(model)
    if config.event_features and spec.reads_item_text:
        raise ValueError(f"event_features: {spec.name} reads no event context (sasrec, bert4rec and hstu do)")
    placeholder = {"item_features": {"placeholder": {"kind": "numeric"}}} if with_features else {}
    construct(spec, config, 1, **placeholder)


def constructor_options(model, config):
    """``config.model_options`` less the values files written before presets recorded for every
    model (``LEGACY_MODEL_OPTIONS``) where the constructor does not take them."""
    accepted = presets.constructor_arguments(spec_of(model))
    return {
        k: v for k, v in config.model_options.items() if k in accepted or LEGACY_MODEL_OPTIONS.get(k) != v
    }


def training_dataset(model, config, sequences):
    """The ``tf.data`` training pipeline of ``config``: Cloze windows, or next-item windows
    (with the events' times when the model reads them), as ``model``'s entry prepares its data."""
    spec = spec_of(model)
    windows = {
        "seed": config.seed,
        "window_stride": config.window_stride,
        "bucket_boundaries": config.bucket_boundaries,
        "events": tuple(config.event_features or ()),
    }
    if spec.preparation == "cloze":
        return pipeline.cloze_dataset(sequences, config.max_sequence_length, config.batch_size, **windows)
    return pipeline.causal_dataset(
        sequences,
        config.max_sequence_length,
        config.batch_size,
        timestamps=bool(config.time_buckets),
        **windows,
    )


def targets_outside_windows(model, config, sequences):
    """``(outside, total)``: the training targets of ``sequences`` that no training window of
    ``config`` holds (``numpy_pipeline.targets_outside_windows``), and all of them. A next-item
    window's first item is input only."""
    spec = spec_of(model)
    windows = presets.windows_of(
        spec, {"max_sequence_length": config.max_sequence_length, "window_stride": config.window_stride}
    )
    return numpy_pipeline.targets_outside_windows(
        sequences, **windows, first_is_target=spec.preparation == "cloze"
    )


def with_attributes(config, item_text):
    """``config`` with the attributes of ``item_text``'s format when it names none."""
    if config.attributes is None:
        config = dataclasses.replace(config, attributes=text.default_attributes(item_text))
    return config


def model_inputs(model, config, vocabulary, item_text, output_dir, verbose="auto"):
    """``(config, model_kwargs)``: what the constructor needs beyond the options.

    A model that reads item text (``reads_item_text``: UniSRec) gets every item's text
    encoded once by the frozen sentence encoder (all-MiniLM-L6-v2), and the text is kept
    beside the model (``item_text.json``); the others need nothing.
    """
    spec = spec_of(model)
    if not spec.reads_item_text:
        return config, {}
    if item_text is None:
        raise ValueError(
            f"{spec.name} reads the items' text: give its file (in the TFX pipeline, "
            "custom_config={'item_text': PATH})"
        )
    config = with_attributes(config, item_text)
    os.makedirs(output_dir, exist_ok=True)
    raw_text = readers.read_item_text(item_text)
    texts, missing = text.item_texts(raw_text, vocabulary, config.attributes)
    directory.require_text(item_text, raw_text, vocabulary, missing)
    directory.write_item_text(output_dir, raw_text, vocabulary)
    encoder_config = {
        "attributes": list(config.attributes),
        "max_attribute_tokens": config.max_attribute_tokens,
        "num_layers": 6,
    }
    encoder = models.SentenceEncoder.from_pretrained(**encoder_config)
    vectors = encoder.encode(texts[vocab.NUM_RESERVED :], progress=None if verbose == "auto" else False)
    return config, {"text_dim": encoder.dim, "text_embeddings": vectors, "text_encoder": encoder_config}


# The model directory's record of the attributes: how to encode more items the same way (export).
FEATURES_FILE = "item_features.json"


def feature_inputs(model, path, vocabulary, output_dir, verbose="auto"):
    """The constructor's ``item_features`` and ``item_feature_tables`` of the file ``path`` for
    ``vocabulary``'s items; writes the attributes' kinds and values to ``output_dir``
    (``FEATURES_FILE``) and prints what had no value."""
    spec = spec_of(model)
    if spec.reads_item_text:
        raise ValueError(
            f"{spec.name} reads the items' text (--item-text); --item-features is for the id models"
        )
    read = features_lib.read_item_features(path)
    encoded = features_lib.encode(read, vocabulary)
    if verbose:
        for line in features_lib.report_lines(encoded, path):
            print(line, file=sys.stderr, flush=True)
    os.makedirs(output_dir, exist_ok=True)
    record = {
        "file": os.path.abspath(path),
        "kinds": read.kinds,
        "values": encoded.values,
        "report": encoded.report,
    }
    with open(os.path.join(output_dir, FEATURES_FILE), "w") as f:
        json.dump(record, f, indent=1)
    return {"item_features": encoded.spec, "item_feature_tables": encoded.tables}


def add_featured_items(model, vocabulary, model_dir, path):
    """``(model, vocabulary, added)`` with the items of the features file ``path`` that
    ``vocabulary`` lacks, represented by their attributes (no retraining).

    The attributes are encoded as in training (``FEATURES_FILE`` of ``model_dir``: the
    value slots and numeric scaling); a value training never saw takes the "unknown" slot.
    """
    if getattr(model.backbone, "feature_embedding", None) is None:
        raise ValueError(
            f"{model_dir} was trained without item attributes; --item-features needs a model trained "
            "with them (tfseqrec train --item-features FILE)"
        )
    with open(os.path.join(model_dir, FEATURES_FILE)) as f:
        trained = json.load(f)
    read = features_lib.read_item_features(path, kinds=trained["kinds"])
    if set(read.kinds) != set(trained["kinds"]):
        raise ValueError(
            f"{path} has the attributes {sorted(read.kinds)}; the model was trained with {sorted(trained['kinds'])}"
        )
    grown, added = vocabulary.with_items(list(read.rows))
    if not added:
        return model, vocabulary, []
    # Encoded with training's values: the same value slots, a multi-valued field perhaps wider.
    encoded = features_lib.encode(read, grown, values=trained["values"])
    return model.with_items(grown.num_items, encoded.spec, encoded.tables), grown, added


def split_options(config):
    """``splits.prepare``'s arguments of how ``config`` splits the data (a ``TrainConfig`` or its dict)."""
    get = (
        config.get if isinstance(config, dict) else lambda name, default=None: getattr(config, name, default)
    )
    if get("split", "leave_one_out") != "temporal":
        return {}
    return {
        "split": "temporal",
        "test_start": get("test_start"),
        "valid_start": get("valid_start"),
        "targets": get("targets", "all"),
    }


def initialize(model, checkpoint):
    """Starts a UniSRec ``model`` from a ``tfseqrec pretrain --model unisrec`` directory (all but the
    item tables); returns the number of weights loaded."""
    pretrain.read_config(checkpoint, "unisrec")
    pretrained = directory.load_model_file(os.path.join(checkpoint, pretrain.MODEL_FILE))
    return model.load_shared_weights(pretrained)


def train(
    kind,
    data_path,
    output_dir,
    config=None,
    format=None,
    strategy=None,
    callbacks=(),
    verbose="auto",
    overwrite=False,
    item_text=None,
    item_features=None,
    warm_start=None,
    **read_kwargs,
):
    """Trains a model of ``kind`` on leave-one-out splits of ``data_path``.

    Args:
        kind: the model: its name (``"sasrec"``), registry entry or kind (``tfseqrec.kinds``).
        data_path: interaction file or dataset directory (see ``readers``).
        output_dir: model directory, written when the run completes (see
            ``output_directory``: an unfinished run resumes).
        config: ``TrainConfig`` or dict (of ``kind``'s model).
        format: input format (``None`` detects it).
        strategy: a ``tf.distribute`` strategy to build and train under, or its name
            (``tfseqrec.distribute``: ``mirrored``, ``multi_worker``; in a multi-worker
            cluster only the chief writes ``output_dir``).
        callbacks: extra Keras callbacks.
        verbose: ``fit``'s verbosity (progress bar on a terminal).
        overwrite: replace a model already in ``output_dir`` (see ``output_directory``).
        item_text: the items' text file, for models that read it (UniSRec; see ``model_inputs``).
        item_features: an item-features file (``tfseqrec.data.read_item_features``): each
            item's attributes join its id embedding (SASRec, BERT4Rec, HSTU).
        warm_start: a model directory of ``kind`` to start from (``tfseqrec.training.warm``):
            its weights and architecture, its vocabulary grown by the log's new items; the
            training options are ``config``'s.
        **read_kwargs: passed to ``readers.read_interactions`` (column names, encoding).

    Returns:
        ``(model, history, split, vocabulary)``; ``model`` holds the best weights.
    """
    spec = spec_of(kind)
    config = options(spec, config)
    # The strategy first: a multi-worker one must exist before TensorFlow makes any variable.
    strategy = distribute.resolve(strategy)
    previous = None
    if warm_start is not None:
        previous, config = _warm_source(spec, config, warm_start)
    check(spec, config, item_features is not None)  # bad model options fail before the data are read
    if config.event_features:
        read_kwargs = {**read_kwargs, "event_columns": config.event_features}
    events = readers.read_interactions(data_path, format=format, **read_kwargs)
    if previous is None:
        split, vocabulary, report = splits.prepare(
            events, validation=config.validation, **split_options(config)
        )
    else:
        previous, split, vocabulary, report = _warm_split(previous, config, events)
    data = {"data": os.path.abspath(events.path), "format": events.format, "report": report}
    # The options settled by the data once: what the run trains with, and what a resumed run must match.
    config, per_window, choices = _run_config(spec, config, split, vocabulary.num_items, verbose)
    data["choices"] = choices
    record = {"config": dataclasses.asdict(config), "data": data["data"]}
    # In a multi-worker cluster each worker trains into its own directory; the chief's is output_dir.
    own_dir = distribute.worker_output_dir(output_dir, strategy)
    with output_directory(own_dir, record, overwrite) as out:
        config, inputs = model_inputs(spec, config, vocabulary, item_text, out, verbose)
        if item_text is not None:
            data["item_text"] = os.path.abspath(item_text)
        if item_features is not None:
            inputs.update(feature_inputs(spec, item_features, vocabulary, out, verbose))
            data["item_features"] = os.path.abspath(item_features)
        if previous is not None:
            data["warm_start"] = {
                "from": os.path.abspath(warm_start),
                "items": previous["items"],
                "vanished_items": report["warm_start_vanished_items"],
            }
        model, history = _fit_settled(
            spec,
            split,
            vocabulary,
            out,
            config,
            per_window,
            strategy,
            callbacks,
            verbose,
            data,
            model_kwargs=inputs,
            warm=previous,
        )
    if own_dir != output_dir:
        shutil.rmtree(own_dir)  # a copy of the chief's
    return model, history, split, vocabulary


def fit(
    kind,
    split,
    vocabulary,
    output_dir,
    config=None,
    strategy=None,
    callbacks=(),
    verbose="auto",
    data=None,
    log_dir=None,
    max_steps=None,
    model_kwargs=None,
    warm=None,
):
    """Trains a model of ``kind`` on a prepared split (``train`` sequences, ``valid`` cases).

    What ``train`` does once the data are read (the TFX trainer's entry point).

    Args:
        kind: the model: its name, registry entry or kind, as for ``train``.
        split: a ``splits.Split`` (``test`` is not used; ``valid`` empty with
            ``validation="none"``).
        vocabulary: the ``ItemVocabulary`` of its ids.
        output_dir: the model directory (see the module docstring).
        config: ``TrainConfig`` or dict.
        strategy: a ``tf.distribute`` strategy to build and train under, or its name.
        callbacks: extra Keras callbacks.
        verbose: ``fit``'s verbosity.
        data: what to record about the data in ``train_config.json``.
        log_dir: TensorBoard directory (default ``output_dir/logs``).
        max_steps: stop after this many training steps in all (``None``: epochs only).
        model_kwargs: more arguments of the model's constructor (UniSRec's text vectors).
        warm: what ``warm_prepared`` gives, to start from a trained model's weights and
            optimizer state (the split, vocabulary and config must be the ones it gave).

    Returns:
        ``(model, history)``; ``model`` holds the best weights by validation NDCG@10
        (with ``validation="none"``, those of the last epoch).
    """
    spec = spec_of(kind)
    strategy = distribute.resolve(strategy)
    config, per_window, choices = _run_config(
        spec, options(spec, config), split, vocabulary.num_items, verbose
    )
    data = {**(data or {}), "choices": choices}
    return _fit_settled(
        spec,
        split,
        vocabulary,
        output_dir,
        config,
        per_window,
        strategy,
        callbacks,
        verbose,
        data,
        log_dir,
        max_steps,
        model_kwargs,
        warm,
    )


def _fit_settled(
    spec,
    split,
    vocabulary,
    output_dir,
    config,
    per_window,
    strategy,
    callbacks,
    verbose,
    data,
    log_dir=None,
    max_steps=None,
    model_kwargs=None,
    warm=None,
):
    """``fit`` with ``config`` already settled by ``_run_config`` (``per_window`` its windows' targets);
    ``warm``: ``{"model", "optimizer"}`` whose weights and state the new one starts from (``warm.carry``)."""
    _start_run(output_dir, config, vocabulary, data)
    model_kwargs = {**(model_kwargs or {}), **event_inputs(config, split)}
    train_ds = training_dataset(spec, config, split.train)
    normalizer = _normalizer(config, per_window)
    model = _compiled_model(
        spec, config, split, vocabulary, train_ds, strategy, normalizer, model_kwargs, warm
    )
    best = _best_model(config, output_dir)
    extra = _callbacks(config, output_dir, best, callbacks, log_dir, max_steps)
    history = _fit_epochs(
        model, config, train_ds, _validation_dataset(config, split, vocabulary), best, extra, verbose
    )
    _require_saved_epoch(best)
    return model, history


def _run_config(spec, config, split, num_items, verbose):
    """``(config, targets_per_window, choices)``: ``config`` with what the data settle
    (``tfseqrec.presets.for_data``: one line each on stderr), the training targets of each window
    (which the loss normaliser counts), and the choices as ``train_config.json`` records them
    (``{option: {"value", "reason"}}``); a split that does not match ``config.validation`` is an error."""
    if config.validation == "none" and len(split.valid):
        raise ValueError(
            "validation='none' trains on each user's second-to-last item, but the split holds "
            f"{len(split.valid)} validation cases; split with splits.prepare(..., validation='none')"
        )
    if config.validation != "none" and not len(split.valid):
        raise ValueError(
            "the split has no validation cases; train with validation='none' for a fixed epoch count"
        )
    choices = presets.for_data(spec.name, split.train, config)
    if verbose:
        for line in choices.lines():
            print(line, file=sys.stderr, flush=True)
    config = settled(config, choices)
    per_window = presets.targets_per_window(spec, _flat_options(config), split.train)
    _note_outside_windows(spec, config, split.train, verbose)
    _note_sparse_updates(config, num_items, verbose)
    recorded = {name: {"value": value, "reason": choices.reasons[name]} for name, value in choices.items()}
    return config, per_window, recorded


def settled(config, choices):
    """``config`` with ``choices`` (``presets.for_data``) in it: training options as fields, the
    model's own in ``model_options``."""
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    values = {name: value for name, value in choices.items() if name in fields}
    model_options = {name: value for name, value in choices.items() if name not in fields}
    if model_options:
        values["model_options"] = {**config.model_options, **model_options}
    return dataclasses.replace(config, **values)


def _flat_options(config):
    """A ``TrainConfig`` as one flat dict (``presets``' form)."""
    values = dataclasses.asdict(config)
    return {**values, **values.pop("model_options")}


def _validation_dataset(config, split, vocabulary):
    """The validation cases' pipeline (``validation_users`` of them); ``None`` with ``validation="none"``."""
    if config.validation == "none":
        return None
    valid_ds = pipeline.eval_dataset(
        split.valid.sample(config.validation_users, config.seed),
        config.max_sequence_length,
        evaluation.score_batch_size(config.validation_batch_size, vocabulary.num_items),
        bucket_boundaries=config.bucket_boundaries,
        timestamps=bool(config.time_buckets),
        events=tuple(config.event_features or ()),
    )
    return _without_autotune(valid_ds)


def _best_model(config, output_dir):
    """The callback that keeps the best epoch by validation NDCG@10 (the last with ``validation="none"``)."""
    return BestModel(
        os.path.join(output_dir, MODEL_FILE),
        os.path.join(output_dir, BACKUP_DIR, BEST_STATE_FILE),
        MONITOR if config.validation != "none" else None,
        config.patience,
    )


def _fit_epochs(model, config, train_ds, valid_ds, best, callbacks, verbose):
    """``model.fit`` for ``config.epochs`` over one repeated iterator, resumed after ``best.epochs_done``."""
    # The pipelines shuffle (fresh each epoch); fit's own shuffle does not apply to tf.data.
    train_ds, steps_per_epoch = _repeated(train_ds)
    if steps_per_epoch and best.epochs_done:
        # Resuming: the batches of the epochs already trained are skipped, so every
        # later epoch sees the same shuffled order as in an uninterrupted run.
        train_ds = train_ds.skip(best.epochs_done * steps_per_epoch)
    return model.fit(
        train_ds,
        validation_data=valid_ds,
        epochs=config.epochs,
        steps_per_epoch=steps_per_epoch,
        callbacks=callbacks,
        verbose=verbose,
        shuffle=False,
    )


def _require_saved_epoch(best):
    """Raises ``TrainingDiverged`` when training diverged or no epoch was saved."""
    if best.diverged is not None:
        raise TrainingDiverged(best.describe_divergence())
    if best.best_epoch is None:
        what = (
            f"a finite {best.monitor} (is the validation split empty?)" if best.monitor else "finite weights"
        )
        raise TrainingDiverged(f"no epoch gave {what}; nothing was saved to {best.path}")


def _note_outside_windows(spec, config, train, verbose):
    """The training log's line when some training targets lie outside every training window:
    without ``window_stride``, the items of a history before its newest ``max_sequence_length``."""
    if not verbose:
        return
    outside, total = targets_outside_windows(spec, config, train)
    if outside:
        windows = (
            f"each user's newest {config.max_sequence_length} items"
            if config.window_stride is None
            else f"windows {config.window_stride} items apart"
        )
        share = f"{outside / total:.0%}" if outside >= total / 100 else "under 1%"
        print(
            f"{config.model}: {outside:,} of {total:,} training targets ({share}) are "
            f"outside the training windows ({windows}) and are not trained on; "
            f"--window-stride {config.max_sequence_length} trains on them too",
            file=sys.stderr,
            flush=True,
        )


# Catalogues from this size on get RowSparseAdam with a sampled loss, unless the config says otherwise.
SPARSE_UPDATES_MIN_ITEMS = 100_000


def sparse_item_updates(config, num_items):
    """Whether Adam updates only the item rows a batch touched (``RowSparseAdam``).

    ``config.sparse_item_updates`` when set; by default, with a sampled loss over a
    catalogue of at least ``SPARSE_UPDATES_MIN_ITEMS`` items, where dense updates of
    the table and its moments dominate a step (benchmarks/README.md, "Scale").
    """
    if config.sparse_item_updates is not None:
        return bool(config.sparse_item_updates)
    return config.sampled_loss and num_items >= SPARSE_UPDATES_MIN_ITEMS


def _note_sparse_updates(config, num_items, verbose):
    """The training log's line when Adam is row-sparse (``train_config.json`` keeps the option as given)."""
    if sparse_item_updates(config, num_items) and verbose:
        print(
            f"{config.model}: row-sparse Adam on the item table ({config.loss} over {num_items:,} items; "
            f"--no-sparse-item-updates for dense Adam)",
            file=sys.stderr,
            flush=True,
        )


def _compiled_model(spec, config, split, vocabulary, train_ds, strategy, normalizer, model_kwargs, warm=None):
    """The model of ``spec`` and ``config``, built and compiled under ``strategy`` (from ``warm``'s weights)."""
    with (strategy or tf.distribute.get_strategy()).scope():
        model = build_model(spec, config, vocabulary.num_items, normalizer, **model_kwargs)
        if warm is not None:
            warm_lib.carry(warm["model"], model)
        # Each item's training events: UniSRec reads one never trained on by its text alone, an
        # id model weighs an item's attributes by them (``attribute_shrinkage``).
        model.backbone.set_item_counts(split.train.item_counts(vocab.NUM_RESERVED + model.num_items))
        if config.init_from:
            initialize(model, config.init_from)
        adam = RowSparseAdam if sparse_item_updates(config, vocabulary.num_items) else keras.optimizers.Adam
        rate = learning_rate(config, int(train_ds.cardinality()) * config.epochs)
        model.compile(
            optimizer=adam(rate), metrics=metrics_lib.default_metrics(), jit_compile=config.jit_compile
        )
        if warm is not None and warm["optimizer"] is not None:
            warm_lib.carry_moments(warm["optimizer"], model.optimizer, model.trainable_variables)
            start = int(model.optimizer.iterations)
            if start and isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
                model.optimizer.learning_rate = FromStep(rate, start)  # the schedule starts over
    return model


def _warm_source(spec, config, model_dir):
    """``((model, vocabulary), config)``: the trained model of ``model_dir`` and ``config`` with its
    architecture (``warm.architecture``); a model of another kind is refused."""
    model, vocabulary, info = directory.read(model_dir, CONFIG_FILE)
    if type(model) is not presets.model_class(spec):
        raise ValueError(f"--warm-start {model_dir} holds a {type(model).__name__}, not a {spec.class_name}")
    config = warm_lib.architecture(config, info.get("config") or {})
    if model.event_features and not config.event_features:
        config.event_features = list(model.event_features)
    return (model, vocabulary), config


def _warm_split(previous, config, events):
    """``(warm, split, vocabulary, report)`` of the log ``events`` over the trained vocabulary grown
    by its new items (ids kept; counts of the new training events); ``warm``: ``{"model"`` (grown),
    ``"optimizer"`` (the trained one's), ``"items"`` (the number added)``}``."""
    model, vocabulary = previous
    log_items = vocab.ItemVocabulary(vocab.factorize(events.items)[0])
    grown, merged, changes = _grown(model, vocabulary, log_items, config.seed)
    split, merged, report = splits.prepare(
        events,
        vocabulary=merged,
        validation=config.validation,
        event_vocabulary=events_lib.EventVocabulary.of_model(model),
        **split_options(config),
    )
    warm, merged = _warm_state(model, grown, vocabulary, merged, split.train, changes)
    report["warm_start_new_items"] = warm["items"]
    report["warm_start_vanished_items"] = changes["vanished_items"]
    return warm, split, merged, report


def _grown(model, trained, log_items, seed):
    """``(grown, merged, changes)``: ``model`` over its vocabulary ``trained`` grown by ``log_items``
    (``warm.warm_start``), and the catalogue's changes (``warm.catalogue_changes``), said on stderr."""
    changes = warm_lib.catalogue_changes(trained, log_items)
    print(warm_lib.change_line(changes, trained.num_items), file=sys.stderr, flush=True)
    grown, merged = warm_lib.warm_start(model, trained, log_items, seed=seed)
    return grown, merged, changes


def _warm_state(model, grown, trained, merged, train, changes):
    """``(warm, vocabulary)``: what ``fit`` starts from, and ``merged`` with the counts of the
    ``train`` sequences (the trained ids, this log's popularity)."""
    counts = train.item_counts(merged.size)[vocab.NUM_RESERVED :]
    merged = vocab.ItemVocabulary(merged.items, counts)
    warm = {
        "model": grown,
        "optimizer": model.optimizer,
        "items": merged.num_items - trained.num_items,
        "vanished_items": changes["vanished_items"],
    }
    return warm, merged


def warm_prepared(kind, config, split, vocabulary, model_dir):
    """``(warm, config, split, vocabulary)`` to ``fit`` a prepared split from the trained model of
    ``model_dir`` (the TFX Trainer's base model): ``vocabulary`` (the split's ids) merged into the
    trained one (known items keep the trained ids, new ones follow: ``warm.warm_start``), the split's
    ids and event context moved onto the trained model's, ``config`` with its architecture; ``warm``
    as ``fit`` takes it (``"items"``: the number of items added)."""
    spec = spec_of(kind)
    (model, trained), config = _warm_source(spec, options(spec, config), model_dir)
    grown, merged, changes = _grown(model, trained, vocabulary, config.seed)
    ids = np.arange(vocabulary.size, dtype=np.int64)
    ids[vocab.NUM_RESERVED :] = merged.lookup(vocabulary.items)
    context = events_lib.EventVocabulary.of_model(model)
    slots = {} if context is None else _slot_remaps(split.event_vocabulary, context)
    split = dataclasses.replace(
        split,
        train=_moved(split.train, ids, slots),
        valid=_moved(split.valid, ids, slots),
        test=split.test if split.test is None else _moved(split.test, ids, slots),
        event_vocabulary=context,
    )
    warm, merged = _warm_state(model, grown, trained, merged, split.train, changes)
    return warm, config, split, merged


def _slot_remaps(given, trained):
    """``{column: remap}``: a slot of the ``given`` event vocabulary to the ``trained`` one's slot of the
    same value (a value the trained model lacks: unknown)."""
    if given is None or sorted(given.columns) != sorted(trained.columns):
        raise ValueError(
            f"the trained model reads event context {trained.columns}, the split carries "
            f"{[] if given is None else given.columns}: a warm start keeps the event features"
        )
    remaps = {}
    for column, values in given.values.items():
        index = {v: events_lib.FIRST_VALUE + i for i, v in enumerate(trained.values[column])}
        remap = np.arange(events_lib.FIRST_VALUE + len(values), dtype=np.int32)
        remap[events_lib.FIRST_VALUE :] = [index.get(v, events_lib.UNKNOWN_SLOT) for v in values]
        remaps[column] = remap
    return remaps


def _moved(data, ids, slots):
    """``Sequences`` or ``Cases`` with item ids ``ids[id]`` and event slots ``slots[column][slot]``."""
    cases = isinstance(data, splits.Cases)
    sequences = data.histories if cases else data
    events = (
        None
        if sequences.events is None
        else {c: slots[c][v] if c in slots else v for c, v in sequences.events.items()}
    )
    moved = dataclasses.replace(sequences, values=ids[sequences.values], events=events)
    return splits.Cases(moved, ids[data.targets]) if cases else moved


def event_inputs(config, split):
    """The constructor's ``event_features`` (``{column: [values]}``) of the split's event context
    for ``config.event_features``; ``{}`` without event features."""
    columns = list(config.event_features or ())
    vocabulary = split.event_vocabulary
    have = [] if vocabulary is None else vocabulary.columns
    if sorted(columns) != sorted(have):
        raise ValueError(
            f"event_features {columns}, but the split carries event context {have}: read the log "
            "with read_interactions(..., event_columns=event_features)"
        )
    if not columns:
        return {}
    return {"event_features": vocabulary.values}


def _start_run(output_dir, config, vocabulary, data):
    """Seeds, the precision policy, and the vocabulary and run JSON, written first."""
    keras.utils.set_random_seed(config.seed)
    if config.mixed_precision:
        keras.mixed_precision.set_global_policy(
            "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"
        )
    os.makedirs(output_dir, exist_ok=True)
    vocabulary.save(output_dir)
    with open(os.path.join(output_dir, CONFIG_FILE), "w") as f:
        json.dump({"config": dataclasses.asdict(config), **(data or {})}, f, indent=2)


def _callbacks(config, output_dir, best, extra, log_dir, max_steps):
    callbacks = [
        # Room for the epoch's files first (a write h5py starts on a full disk can crash).
        FreeSpaceGuard(output_dir),
        # The epoch's row, then the best-model state, then the backup: each is on disk
        # before the epoch counts as done, and a resumed run drops rows of undone epochs.
        HistoryLog(os.path.join(output_dir, "history.csv"), best.epochs_done),
        best,
        keras.callbacks.BackupAndRestore(os.path.join(output_dir, BACKUP_DIR)),
        keras.callbacks.TensorBoard(log_dir or os.path.join(output_dir, "logs")),
        *extra,
    ]
    if config.max_train_minutes:
        callbacks.append(TimeLimit(config.max_train_minutes * 60))
    if max_steps:
        callbacks.append(StepLimit(max_steps))
    return callbacks


def _repeated(ds):
    """``(ds.repeat(), batches of one pass)``, or ``(ds, None)`` when the count is unknown.

    ``fit`` keeps one iterator over a repeated training set for the whole run; epochs
    stay aligned with whole passes, so each is still one freshly shuffled pass. With a
    new iterator per epoch, tearing down the previous one stalled ``fit`` ~18 s (CPU
    idle, in tf.data's autotuning) at about one epoch in four on ML-1M.
    """
    steps = int(ds.cardinality())
    return (ds.repeat(), steps) if steps > 0 else (ds, None)


def _without_autotune(ds):
    """``ds`` with tf.data autotuning off.

    ``evaluate`` (validation in ``fit``) drops its iterator after every pass; with
    autotuning on, that teardown stalled ~18 s in some epochs (see ``_repeated``).
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.with_options(options)


def learning_rate(config, total_steps):
    """Adam's learning rate: ``config.learning_rate``, constant or on a schedule.

    ``"constant"``: after a linear warm-up of ``config.warmup_epochs`` when it is set.
    ``"cosine"`` decays it to 0 over ``config.epochs`` epochs (``total_steps``), after
    a linear warm-up of ``config.warmup_epochs``; under a time budget, set ``epochs``
    to what the budget holds so the decay ends with it.
    """
    if config.learning_rate is None:
        raise ValueError(
            f"{config.model}'s learning_rate is unset: the data settle it (tfseqrec.presets.for_data)"
        )
    if config.learning_rate_schedule == "constant":
        if not config.warmup_epochs:
            return config.learning_rate
        if total_steps <= 0:
            raise ValueError("a warm-up needs a known number of training steps")
        return WarmupLinearDecay(
            config.learning_rate, None, int(total_steps * config.warmup_epochs / config.epochs)
        )
    if config.learning_rate_schedule != "cosine":
        raise ValueError(
            f"learning_rate_schedule must be 'constant' or 'cosine', got {config.learning_rate_schedule!r}"
        )
    if total_steps <= 0:
        raise ValueError("a cosine schedule needs a known number of training steps")
    warmup = int(total_steps * (config.warmup_epochs or 0) / config.epochs)
    return keras.optimizers.schedules.CosineDecay(
        0.0 if warmup else config.learning_rate,
        decay_steps=max(total_steps - warmup, 1),
        warmup_target=config.learning_rate if warmup else None,
        warmup_steps=warmup,
    )


def loss_normalizer(kind, config, sequences):
    """The fixed loss normaliser of ``kind`` (a name, a ``ModelSpec`` or a kind) and ``config``
    (``tfseqrec.losses.fixed_normalizer``) on ``sequences``, with the options the data settle settled as a run settles them.

    ``None`` when ``config.loss_normalization`` is ``"batch"`` (each batch's own mean).
    """
    if config.loss_normalization == "batch":
        return None
    spec = spec_of(kind)
    config = settled(config, presets.for_data(spec.name, sequences, config))
    return _normalizer(config, presets.targets_per_window(spec, _flat_options(config), sequences))


def _normalizer(config, targets_per_window):
    """``loss_normalizer`` from the windows' target counts."""
    if config.loss_normalization == "batch":
        return None
    if config.loss_normalization != "fixed":
        raise ValueError(f"loss_normalization must be 'fixed' or 'batch', got {config.loss_normalization!r}")
    return losses_lib.fixed_normalizer(targets_per_window, config.batch_size)


def _loss(config):
    return losses_lib.build(
        config.loss,
        seed=config.seed,
        num_negatives=config.num_negatives,
        per_position=config.negatives_per_position,
        sampler=config.sampler,
        exclude_history=config.negatives_exclude_history,
    )
