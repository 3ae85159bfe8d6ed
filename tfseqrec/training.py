"""From a data file to a trained, saved model: the wiring behind ``tfseqrec train``.

``train`` reads and splits the data, builds the model, fits it with the standard
callbacks, and writes a model directory:

    model.keras       the best model by validation NDCG@10 (``BestModel``)
    item_vocab.tsv    the item vocabulary (raw ids <-> ids)
    train_config.json the ``TrainConfig`` and the data it was trained on
    history.csv       per-epoch loss and validation metrics (``HistoryLog``)
    logs/             TensorBoard

The run works in ``OUTPUT.partial/`` and becomes ``OUTPUT/`` only when it completes
(``output_directory``). While it is unfinished, ``OUTPUT.partial/backup/`` holds the
last finished epoch (BackupAndRestore, plus the best-model state): rerunning the same
command after a crash or ``kill -9`` resumes it and ends with the same best model.

``load`` reads such a directory back.
"""

import contextlib
import csv
import dataclasses
import json
import os
import shutil
import sys
import time
import typing

import keras
import numpy as np
import tensorflow as tf

from tfseqrec import losses as losses_lib
from tfseqrec import metrics as metrics_lib
from tfseqrec.data import pipeline, readers, splits
from tfseqrec.data import vocab as vocab_lib

MODEL_FILE = "model.keras"
CONFIG_FILE = "train_config.json"
MONITOR = "val_ndcg_10"
BACKUP_DIR = "backup"
BEST_STATE_FILE = "best_model.json"
PARTIAL_SUFFIX = ".partial"
RUN_FILES = ("train_config.json", "recformer_config.json")  # what marks a tfseqrec model directory


class TrainingDiverged(ValueError):
    """Training stopped on a non-finite loss; the best model so far stays on disk."""


class Options:
    """``from_dict`` for option dataclasses: unknown keys are an error naming the known ones."""

    kind: typing.ClassVar[str] = "training"

    @classmethod
    def from_dict(cls, values):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown {cls.kind} options {unknown}; known: {sorted(known)}")
        return cls(**values)

    def __post_init__(self):
        self.check()

    def check(self):
        """Raises ``ValueError`` naming the first option out of range (subclasses extend it)."""


def check_number(name, value, minimum=None, maximum=None, integer=False, exclusive_minimum=False,
                 exclusive_maximum=False, optional=False):
    """Raises ``ValueError`` unless ``value`` is a finite number in range; returns it.

    The message names the option and the value, e.g. ``batch_size must be an integer
    >= 1, got -3``. Booleans are not numbers here.
    """
    if value is None and optional:
        return value
    kind = "an integer" if integer else "a finite number"
    bounds = []
    if minimum is not None:
        bounds.append(f"{'>' if exclusive_minimum else '>='} {minimum}")
    if maximum is not None:
        bounds.append(f"{'<' if exclusive_maximum else '<='} {maximum}")
    wanted = f"{name} must be {kind}{' ' + ' and '.join(bounds) if bounds else ''}, got {value!r}"
    numeric = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.integer, np.floating))
    if isinstance(value, bool) or not numeric or not np.isfinite(value):
        raise ValueError(wanted)
    if minimum is not None and (value <= minimum if exclusive_minimum else value < minimum):
        raise ValueError(wanted)
    if maximum is not None and (value >= maximum if exclusive_maximum else value > maximum):
        raise ValueError(wanted)
    return value


def check_choice(name, value, choices, optional=False):
    """Raises ``ValueError`` unless ``value`` is one of ``choices``."""
    if (value is None and optional) or value in choices:
        return value
    raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")


@dataclasses.dataclass
class TrainConfig(Options):
    """Hyper-parameters of a training run; ``None`` means the model's own default."""

    model: str = "sasrec"
    max_sequence_length: int = 200
    hidden_dim: int = 64
    num_layers: int = 2
    num_heads: int = None
    intermediate_dim: int = None
    dropout: float = None
    normalized_residual: bool = None
    initializer_range: float = None
    position_origin: str = None
    loss: str = "softmax"
    loss_normalization: str = "fixed"
    num_negatives: int = None
    negatives_exclude_history: bool = None
    mask_prob: float = 0.2
    mask_token_rate: float = None
    random_token_rate: float = None
    last_item_only_prob: float = 0.0
    batch_size: int = 128
    learning_rate: float = 1e-3
    learning_rate_schedule: str = "constant"
    warmup_epochs: float = 0.0
    epochs: int = 200
    patience: int = 20
    window_stride: int = None
    bucket_boundaries: list = dataclasses.field(default_factory=lambda: [50, 100])
    validation_batch_size: int = 512
    max_train_minutes: float = None
    mixed_precision: bool = False
    jit_compile: bool = False
    seed: int = 0

    def check(self):
        for name in ("max_sequence_length", "hidden_dim", "num_layers", "batch_size", "epochs",
                     "validation_batch_size"):
            check_number(name, getattr(self, name), minimum=1, integer=True)
        for name in ("num_heads", "intermediate_dim", "num_negatives", "window_stride"):
            check_number(name, getattr(self, name), minimum=1, integer=True, optional=True)
        check_number("patience", self.patience, minimum=0, integer=True)
        check_number("seed", self.seed, integer=True)
        check_number("dropout", self.dropout, minimum=0, maximum=1, exclusive_maximum=True, optional=True)
        check_number("initializer_range", self.initializer_range, minimum=0, optional=True)
        check_number("mask_prob", self.mask_prob, minimum=0, maximum=1, exclusive_minimum=True)
        check_number("last_item_only_prob", self.last_item_only_prob, minimum=0, maximum=1)
        for name in ("mask_token_rate", "random_token_rate"):
            check_number(name, getattr(self, name), minimum=0, maximum=1, optional=True)
        if (self.mask_token_rate or 0) + (self.random_token_rate or 0) > 1:
            raise ValueError("mask_token_rate + random_token_rate must be <= 1")
        check_number("learning_rate", self.learning_rate, minimum=0, exclusive_minimum=True)
        check_number("warmup_epochs", self.warmup_epochs, minimum=0)
        check_number("max_train_minutes", self.max_train_minutes, minimum=0, exclusive_minimum=True, optional=True)
        check_choice("loss_normalization", self.loss_normalization, ("fixed", "batch"))
        check_choice("learning_rate_schedule", self.learning_rate_schedule, ("constant", "cosine"))
        check_choice("position_origin", self.position_origin, ("newest", "oldest"), optional=True)
        if not isinstance(self.bucket_boundaries, (list, tuple)):
            raise ValueError(f"bucket_boundaries must be a list of widths, got {self.bucket_boundaries!r}")
        for width in self.bucket_boundaries:
            check_number("bucket_boundaries", width, minimum=1, integer=True)


def build_model(config, num_items, loss_normalizer=None):
    """The model of ``config`` for a catalogue of ``num_items``."""
    from tfseqrec import models

    if config.model not in models.MODELS:
        raise ValueError(f"unknown model {config.model!r}; expected one of {sorted(models.MODELS)}")
    kwargs = {
        "num_items": num_items,
        "max_sequence_length": config.max_sequence_length,
        "hidden_dim": config.hidden_dim,
        "num_layers": config.num_layers,
        "loss": _loss(config),
        "loss_normalizer": loss_normalizer,
    }
    for name in ("num_heads", "intermediate_dim", "dropout"):
        if getattr(config, name) is not None:
            kwargs[name] = getattr(config, name)
    per_model = {
        "sasrec": ("normalized_residual", "initializer_range", "position_origin"),
        "bert4rec": ("initializer_range", "mask_token_rate", "random_token_rate", "position_origin"),
    }
    for name in per_model.get(config.model, ()):
        if getattr(config, name) is not None:
            kwargs[name] = getattr(config, name)
    if config.model == "bert4rec":
        kwargs.update(mask_prob=config.mask_prob, last_item_only_prob=config.last_item_only_prob, seed=config.seed)
    return models.MODELS[config.model](**kwargs)


@contextlib.contextmanager
def output_directory(output_dir, record, overwrite=False, config_file=CONFIG_FILE):
    """The directory a run writes to, moved to ``output_dir`` when the run completes.

    A run works in ``output_dir + ".partial"`` and replaces ``output_dir`` only when
    the ``with`` block finishes without an exception, so a failed or killed run never
    leaves a model beside another run's vocabulary or config.

    - ``output_dir`` non-empty: refused unless ``overwrite`` (a finished model, or
      files that are not a tfseqrec model directory at all); with ``overwrite`` the
      old contents stay until the new run completes.
    - ``output_dir + ".partial"`` holding an unfinished run (a backup of at least one
      finished epoch): resumed when its ``record`` (the options and the data) is the
      same; refused when it differs, naming the differences, unless ``overwrite``
      (which starts over). A partial directory with no finished epoch starts over.

    Args:
        output_dir: the model directory.
        record: ``{"config": {...}, "data": path}``: what must match to resume.
        overwrite: replace a finished model or an unfinished run of other options.
        config_file: the run's JSON file inside the directory.

    Yields:
        The working directory.
    """
    output_dir = os.path.normpath(output_dir)
    work = output_dir + PARTIAL_SUFFIX
    if _non_empty(output_dir) and not overwrite:
        if _is_run(output_dir):
            raise FileExistsError(f"{output_dir} already holds a trained model; pass --overwrite to replace it "
                                  "(it stays in place until the new run completes)")
        raise FileExistsError(f"{output_dir} is not empty and is not a tfseqrec model directory; choose another "
                              "--output, or pass --overwrite to replace its contents")
    if _non_empty(work):
        if not _is_run(work):
            raise FileExistsError(f"{work} is not an unfinished tfseqrec run; move it away or remove it")
        try:
            with open(os.path.join(work, config_file)) as f:
                previous = json.load(f)
        except (OSError, ValueError):  # killed while writing it: nothing to resume
            previous = None
        differences = [] if previous is None else _differences(previous, record)
        resumable = previous is not None and os.path.isdir(os.path.join(work, BACKUP_DIR))
        if resumable and differences and not overwrite:
            raise ValueError(f"{work} holds an unfinished run with other options ({'; '.join(differences)}); "
                             "run again with the same options to resume it, or pass --overwrite to start over")
        if resumable and not differences:
            print(f"tfseqrec: resuming the unfinished run in {work}", file=sys.stderr)
        else:
            _remove(work)
    os.makedirs(work, exist_ok=True)
    yield work
    if os.path.lexists(output_dir):
        replaced = output_dir + ".replaced"
        if os.path.lexists(replaced):
            _remove(replaced)
        os.replace(output_dir, replaced)
        os.replace(work, output_dir)
        _remove(replaced)
    else:
        os.replace(work, output_dir)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def _non_empty(path):
    return os.path.exists(path) and (not os.path.isdir(path) or bool(os.listdir(path)))


def _is_run(path):
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, name)) for name in RUN_FILES)


def _differences(previous, record):
    """``["key: A there, B here", ...]`` between two run records."""
    out = []
    old_config, new_config = previous.get("config", {}), record.get("config", {})
    for key in sorted(set(old_config) | set(new_config)):
        if old_config.get(key) != new_config.get(key):
            out.append(f"{key}: {old_config.get(key)!r} there, {new_config.get(key)!r} here")
    if previous.get("data") != record.get("data"):
        out.append(f"data: {previous.get('data')!r} there, {record.get('data')!r} here")
    return out


def train(data_path, output_dir, config=None, format=None, strategy=None, callbacks=(), verbose="auto",
          overwrite=False, **read_kwargs):
    """Trains ``config.model`` on leave-one-out splits of ``data_path``.

    Args:
        data_path: interaction file or dataset directory (see ``readers``).
        output_dir: model directory, written when the run completes (see
            ``output_directory``: an unfinished run resumes).
        config: ``TrainConfig`` or dict.
        format: input format (``None`` detects it).
        strategy: a ``tf.distribute`` strategy to build and train under.
        callbacks: extra Keras callbacks.
        verbose: ``fit``'s verbosity (progress bar on a terminal).
        overwrite: replace a model already in ``output_dir`` (see ``output_directory``).
        **read_kwargs: passed to ``readers.read_interactions`` (column names, encoding).

    Returns:
        ``(model, history, split, vocabulary)``; ``model`` holds the best weights.
    """
    config = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(config or {})
    events = readers.read_interactions(data_path, format=format, **read_kwargs)
    split, vocabulary, report = splits.prepare(events)
    data = {"data": os.path.abspath(events.path), "format": events.format, "report": report}
    record = {"config": dataclasses.asdict(config), "data": data["data"]}
    with output_directory(output_dir, record, overwrite) as work:
        model, history = fit(split, vocabulary, work, config, strategy, callbacks, verbose, data)
    return model, history, split, vocabulary


def fit(split, vocabulary, output_dir, config=None, strategy=None, callbacks=(), verbose="auto", data=None,
        log_dir=None, max_steps=None):
    """Trains ``config.model`` on a prepared split (``train`` sequences, ``valid`` cases).

    What ``train`` does once the data are read; the TFX trainer calls it on the
    sequences the SequenceBuilder wrote.

    Args:
        split: a ``splits.Split`` (``test`` is not used).
        vocabulary: the ``ItemVocabulary`` of its ids.
        output_dir: the model directory (see the module docstring).
        config: ``TrainConfig`` or dict.
        strategy: a ``tf.distribute`` strategy to build and train under.
        callbacks: extra Keras callbacks.
        verbose: ``fit``'s verbosity.
        data: what to record about the data in ``train_config.json``.
        log_dir: TensorBoard directory (default ``output_dir/logs``).
        max_steps: stop after this many training steps in all (``None``: epochs only).

    Returns:
        ``(model, history)``; ``model`` holds the best weights by validation NDCG@10.
    """
    config = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(config or {})
    keras.utils.set_random_seed(config.seed)
    if config.mixed_precision:
        keras.mixed_precision.set_global_policy(
            "mixed_float16" if tf.config.list_physical_devices("GPU") else "mixed_bfloat16"
        )
    os.makedirs(output_dir, exist_ok=True)
    vocabulary.save(output_dir)
    with open(os.path.join(output_dir, CONFIG_FILE), "w") as f:
        json.dump({"config": dataclasses.asdict(config), **(data or {})}, f, indent=2)

    train_ds = training_dataset(config, split.train)
    train_steps = int(train_ds.cardinality()) * config.epochs
    strategy = strategy or tf.distribute.get_strategy()
    with strategy.scope():
        model = build_model(config, vocabulary.num_items, loss_normalizer(config, split.train))
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate(config, train_steps)),
            metrics=metrics_lib.default_metrics(),
            jit_compile=config.jit_compile,
        )
    valid_ds = pipeline.eval_dataset(
        split.valid, config.max_sequence_length, config.validation_batch_size, bucket_boundaries=config.bucket_boundaries
    )
    best = BestModel(
        os.path.join(output_dir, MODEL_FILE), os.path.join(output_dir, BACKUP_DIR, BEST_STATE_FILE), MONITOR,
        config.patience,
    )
    cbs = [
        # The epoch's row, then the best-model state, then the backup: each is on disk
        # before the epoch counts as done, and a resumed run drops rows of undone epochs.
        HistoryLog(os.path.join(output_dir, "history.csv"), best.epochs_done),
        best,
        keras.callbacks.BackupAndRestore(os.path.join(output_dir, BACKUP_DIR)),
        keras.callbacks.TensorBoard(log_dir or os.path.join(output_dir, "logs")),
        *callbacks,
    ]
    if config.max_train_minutes:
        cbs.append(TimeLimit(config.max_train_minutes * 60))
    if max_steps:
        cbs.append(StepLimit(max_steps))
    # The pipelines shuffle (fresh each epoch); fit's own shuffle does not apply to tf.data.
    train_ds, steps_per_epoch = _repeated(train_ds)
    if steps_per_epoch and best.epochs_done:
        # Resuming: the batches of the epochs already trained are skipped, so every
        # later epoch sees the same shuffled order as in an uninterrupted run.
        train_ds = train_ds.skip(best.epochs_done * steps_per_epoch)
    valid_ds = _without_autotune(valid_ds)
    history = model.fit(
        train_ds,
        validation_data=valid_ds,
        epochs=config.epochs,
        steps_per_epoch=steps_per_epoch,
        callbacks=cbs,
        verbose=verbose,
        shuffle=False,
    )
    if best.diverged is not None:
        raise TrainingDiverged(best.describe_divergence())
    if best.best_epoch is None:
        raise TrainingDiverged(
            f"no epoch gave a finite {MONITOR} (is the validation split empty?); nothing was saved to {best.path}"
        )
    return model, history


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


def training_dataset(config, sequences):
    """The ``tf.data`` training pipeline of ``config.model``."""
    make = pipeline.cloze_dataset if config.model == "bert4rec" else pipeline.causal_dataset
    return make(
        sequences,
        config.max_sequence_length,
        config.batch_size,
        seed=config.seed,
        window_stride=config.window_stride,
        bucket_boundaries=config.bucket_boundaries,
    )


def learning_rate(config, total_steps):
    """Adam's learning rate: ``config.learning_rate``, constant or on a schedule.

    ``"cosine"`` decays it to 0 over ``config.epochs`` epochs (``total_steps``), after
    a linear warm-up of ``config.warmup_epochs``; under a time budget, set ``epochs``
    to what the budget holds so the decay ends with it.
    """
    if config.learning_rate_schedule == "constant":
        return config.learning_rate
    if config.learning_rate_schedule != "cosine":
        raise ValueError(f"learning_rate_schedule must be 'constant' or 'cosine', got {config.learning_rate_schedule!r}")
    if total_steps <= 0:
        raise ValueError("a cosine schedule needs a known number of training steps")
    warmup = int(total_steps * config.warmup_epochs / config.epochs)
    return keras.optimizers.schedules.CosineDecay(
        0.0 if warmup else config.learning_rate,
        decay_steps=max(total_steps - warmup, 1),
        warmup_target=config.learning_rate if warmup else None,
        warmup_steps=warmup,
    )


def loss_normalizer(config, sequences):
    """The fixed loss normaliser of ``config``: mean target positions per batch.

    ``None`` when ``config.loss_normalization`` is ``"batch"`` (each batch's own mean).
    With ``"fixed"`` every training position weighs the same whatever batch, and so
    whatever length bucket, it falls in; the constant keeps the loss on the scale of
    a per-position mean.
    """
    if config.loss_normalization == "batch":
        return None
    if config.loss_normalization != "fixed":
        raise ValueError(f"loss_normalization must be 'fixed' or 'batch', got {config.loss_normalization!r}")
    if config.model == "bert4rec":
        windows, _ = pipeline.sliding_windows(sequences, config.max_sequence_length, config.window_stride)
        items = (windows != vocab_lib.PAD_ID).sum(axis=1)
        # Cloze: mask_prob of the items, at least one, or only the last item.
        per_window = (1 - config.last_item_only_prob) * np.maximum(config.mask_prob * items, 1) + config.last_item_only_prob
    else:
        windows, _ = pipeline.sliding_windows(sequences, config.max_sequence_length + 1, config.window_stride, min_length=2)
        per_window = (windows[:, :-1] != vocab_lib.PAD_ID).sum(axis=1)
    if not len(per_window):
        return None
    return float(np.mean(per_window) * min(config.batch_size, len(per_window)))


def load(model_dir, config_file=CONFIG_FILE):
    """``(model, vocabulary, info)`` of a directory written by ``train``.

    ``config_file`` names the JSON of the run (``info``); the Recformer driver
    writes ``recformer_config.json``.
    """
    path = os.path.join(model_dir, MODEL_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{model_dir}: no {MODEL_FILE}; is it a directory written by 'tfseqrec train'?")
    # Registers the model, layer and loss classes; newer Keras does not import
    # modules named in a saved file by itself.
    import tfseqrec.models  # noqa: F401

    model = keras.saving.load_model(path, safe_mode=True)
    vocabulary = vocab_lib.ItemVocabulary.load(model_dir)
    num_items = getattr(model, "num_items", None)
    if num_items is not None and num_items != vocabulary.num_items:
        raise ValueError(f"{model_dir}: the model scores {num_items} items but its vocabulary lists "
                         f"{vocabulary.num_items}; the directory mixes two runs")
    with open(os.path.join(model_dir, config_file)) as f:
        info = json.load(f)
    return model, vocabulary, info


def weights_finite(weights):
    """Whether every floating-point value of ``weights`` (variables or arrays) is finite."""
    arrays = (np.asarray(w) for w in weights)
    return all(np.all(np.isfinite(a)) for a in arrays if np.issubdtype(a.dtype, np.floating))


class HistoryLog(keras.callbacks.CSVLogger):
    """``CSVLogger`` that resumes: rows of epochs not done (``epoch >= epochs_done``) go.

    A run killed after an epoch's row was written but before the epoch counted as
    done redoes that epoch; without this its row would appear twice.
    """

    def __init__(self, path, epochs_done):
        super().__init__(path, append=True)
        self.epochs_done = epochs_done

    def on_train_begin(self, logs=None):
        if os.path.exists(self.filename):
            with open(self.filename, newline="") as f:
                rows = list(csv.reader(f))
            kept = rows[:1] + [r for r in rows[1:] if r and r[0].isdigit() and int(r[0]) < self.epochs_done]
            if len(kept) < len(rows):
                partial = self.filename + ".partial"
                with open(partial, "w", newline="") as f:
                    csv.writer(f, lineterminator="\n").writerows(kept if len(kept) > 1 else [])
                os.replace(partial, self.filename)
        super().on_train_begin(logs)


class BestModel(keras.callbacks.Callback):
    """Keeps the best model by ``monitor`` on disk, across restarts, and stops early.

    What ``ModelCheckpoint(save_best_only=True)`` and ``EarlyStopping(patience,
    restore_best_weights=True)`` do together, with two differences:

    - The best value, its epoch, the epochs waited since, the epochs done and the
      random generators' states are written to ``state_path`` after every epoch
      (atomically, before ``BackupAndRestore`` saves the epoch), and read back when
      it is created. A run killed and
      resumed therefore ends with the best model of all its epochs; with the Keras
      callbacks, whose best-so-far lives in memory only, it ended with a later,
      worse epoch.
    - Nothing non-finite is ever saved: a batch with a non-finite loss stops
      training (``TerminateOnNaN``), and an epoch is saved only when its loss, its
      metric and every weight are finite. ``diverged`` then says where it happened.

    The model file is replaced atomically (written beside it, then renamed), so an
    interruption never leaves half a file. At the end the best weights are loaded
    back into the model.
    """

    def __init__(self, path, state_path, monitor, patience):
        super().__init__()
        self.path = path
        self.state_path = state_path
        self.monitor = monitor
        self.patience = patience
        self.best = -np.inf
        self.best_epoch = None
        self.wait = 0
        self.diverged = None
        self.epochs_done = 0
        self._epoch = 0
        self._random_states = None
        if os.path.exists(state_path):  # a run resumes
            with open(state_path) as f:
                state = json.load(f)
            self.best_epoch, self.wait, self.epochs_done = state["best_epoch"], state["wait"], state["epochs_done"]
            self._random_states = state.get("random_states")
            self.best = -np.inf if state["best"] is None else state["best"]
            if self.best_epoch is not None and not os.path.exists(path):
                raise FileNotFoundError(f"{state_path} names epoch {self.best_epoch + 1} as the best, "
                                        f"but {path} is missing")

    def on_train_begin(self, logs=None):
        # The random generators' states (dropout, Cloze masking) are not part of the
        # weights BackupAndRestore saves: restored here, a resumed run draws the same
        # masks as an uninterrupted one.
        variables = self._random_variables()
        if self._random_states is not None and len(self._random_states) == len(variables):
            for variable, value in zip(variables, self._random_states):
                variable.assign(np.asarray(value, dtype=variable.dtype))

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not np.isfinite(loss) and self.diverged is None:
            self.diverged = {"epoch": self._epoch, "batch": batch, "loss": float(loss)}
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        value, loss = logs.get(self.monitor), logs.get("loss")
        if loss is not None and not np.isfinite(loss) and self.diverged is None:
            self.diverged = {"epoch": epoch, "batch": None, "loss": float(loss)}
            self.model.stop_training = True
        finite = self.diverged is None and value is not None and np.isfinite(value)
        if finite and value > self.best and weights_finite(self.model.weights):
            self._save_model()
            self.best, self.best_epoch, self.wait = float(value), epoch, 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.model.stop_training = True
        self.epochs_done = epoch + 1
        self._write_state()

    def on_train_end(self, logs=None):
        if self.best_epoch is not None:
            self.model.load_weights(self.path)

    def describe_divergence(self):
        d = self.diverged
        where = f"epoch {d['epoch'] + 1}" + (f", batch {d['batch'] + 1}" if d["batch"] is not None else "")
        kept = (f"the best model so far (epoch {self.best_epoch + 1}, {self.monitor} {self.best:.4f}) is in {self.path}"
                if self.best_epoch is not None else "no model was saved")
        return (f"training diverged: the loss became {d['loss']} in {where}; {kept}. "
                "Try a lower learning rate.")

    def _random_variables(self):
        """The model's state outside its weights: the seed generators' states."""
        weights = {id(w) for w in self.model.weights}
        return [v for v in self.model.variables if id(v) not in weights]

    def _save_model(self):
        partial = os.path.join(os.path.dirname(self.path), ".partial-" + os.path.basename(self.path))
        self.model.save(partial)
        os.replace(partial, self.path)

    def _write_state(self):
        os.makedirs(os.path.dirname(self.state_path), exist_ok=True)
        partial = self.state_path + ".partial"
        with open(partial, "w") as f:
            best = None if self.best_epoch is None else self.best
            random_states = [np.asarray(v).tolist() for v in self._random_variables()]
            json.dump({"best": best, "best_epoch": self.best_epoch, "wait": self.wait,
                       "epochs_done": self.epochs_done, "random_states": random_states}, f)
        os.replace(partial, self.state_path)


class TimeLimit(keras.callbacks.Callback):
    """Stops training at the end of the first epoch past ``seconds`` of fit time."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        if time.monotonic() - self.start >= self.seconds:
            self.model.stop_training = True


class StepLimit(keras.callbacks.Callback):
    """Stops training after ``steps`` training batches in all (validation still runs)."""

    def __init__(self, steps):
        super().__init__()
        self.steps = int(steps)
        self.seen = 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen >= self.steps:
            self.model.stop_training = True


def _loss(config):
    name = config.loss
    if name not in losses_lib.LOSSES:
        raise ValueError(f"unknown loss {name!r}; expected one of {sorted(losses_lib.LOSSES)}")
    cls = losses_lib.LOSSES[name]
    if name == "softmax" and config.num_negatives is None and config.negatives_exclude_history is None:
        return None  # the model's own default (SASRec leaves the sequence's other items out)
    kwargs = {} if name == "softmax" else {"seed": config.seed}
    if config.num_negatives is not None:
        if name == "softmax":
            raise ValueError("num_negatives applies to the sampled losses, not 'softmax'")
        kwargs["num_negatives"] = config.num_negatives
    if config.negatives_exclude_history is not None:
        if name not in ("softmax", "bce", "gbce"):
            raise ValueError(f"negatives_exclude_history applies to the softmax, bce and gbce losses, not {name!r}")
        kwargs["exclude_history"] = config.negatives_exclude_history
    return cls(**kwargs)
