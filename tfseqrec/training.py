"""From a data file to a trained, saved model: the wiring behind ``tfseqrec train``.

``train`` reads and splits the data, builds the model, fits it with the standard
callbacks, and writes a model directory:

    model.keras       the best model by validation NDCG@10 (ModelCheckpoint)
    item_vocab.tsv    the item vocabulary (raw ids <-> ids)
    train_config.json the ``TrainConfig`` and the data it was trained on
    history.csv       per-epoch loss and validation metrics (CSVLogger)
    logs/             TensorBoard
    backup/           BackupAndRestore state: rerunning a killed run resumes it

``load`` reads such a directory back.
"""

import dataclasses
import json
import os
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
        "bert4rec": ("initializer_range", "mask_token_rate", "random_token_rate"),
    }
    for name in per_model.get(config.model, ()):
        if getattr(config, name) is not None:
            kwargs[name] = getattr(config, name)
    if config.model == "bert4rec":
        kwargs.update(mask_prob=config.mask_prob, last_item_only_prob=config.last_item_only_prob, seed=config.seed)
    return models.MODELS[config.model](**kwargs)


def train(data_path, output_dir, config=None, format=None, strategy=None, callbacks=(), verbose="auto", **read_kwargs):
    """Trains ``config.model`` on leave-one-out splits of ``data_path``.

    Args:
        data_path: interaction file or dataset directory (see ``readers``).
        output_dir: model directory (created; an unfinished run there resumes).
        config: ``TrainConfig`` or dict.
        format: input format (``None`` detects it).
        strategy: a ``tf.distribute`` strategy to build and train under.
        callbacks: extra Keras callbacks.
        verbose: ``fit``'s verbosity (progress bar on a terminal).
        **read_kwargs: passed to ``readers.read_interactions`` (column names, encoding).

    Returns:
        ``(model, history, split, vocabulary)``; ``model`` holds the best weights.
    """
    config = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(config or {})
    events = readers.read_interactions(data_path, format=format, **read_kwargs)
    split, vocabulary, report = splits.prepare(events)
    data = {"data": os.path.abspath(events.path), "format": events.format, "report": report}
    model, history = fit(split, vocabulary, output_dir, config, strategy, callbacks, verbose, data)
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
    valid_ds = pipeline.eval_dataset(split.valid, config.max_sequence_length, config.validation_batch_size)
    cbs = [
        keras.callbacks.BackupAndRestore(os.path.join(output_dir, "backup")),
        keras.callbacks.ModelCheckpoint(
            os.path.join(output_dir, MODEL_FILE), monitor=MONITOR, mode="max", save_best_only=True
        ),
        keras.callbacks.EarlyStopping(
            monitor=MONITOR, mode="max", patience=config.patience, restore_best_weights=True
        ),
        keras.callbacks.CSVLogger(os.path.join(output_dir, "history.csv"), append=True),
        keras.callbacks.TensorBoard(log_dir or os.path.join(output_dir, "logs")),
        *callbacks,
    ]
    if config.max_train_minutes:
        cbs.append(TimeLimit(config.max_train_minutes * 60))
    if max_steps:
        cbs.append(StepLimit(max_steps))
    # The pipelines shuffle (fresh each epoch); fit's own shuffle does not apply to tf.data.
    train_ds, steps_per_epoch = _repeated(train_ds)
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
    model.save(os.path.join(output_dir, MODEL_FILE))
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

    model = keras.saving.load_model(path)
    vocabulary = vocab_lib.ItemVocabulary.load(model_dir)
    with open(os.path.join(model_dir, config_file)) as f:
        info = json.load(f)
    return model, vocabulary, info


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
    if name == "softmax":
        return cls()
    kwargs = {"seed": config.seed}
    if config.num_negatives is not None:
        kwargs["num_negatives"] = config.num_negatives
    if config.negatives_exclude_history is not None:
        if name not in ("bce", "gbce"):
            raise ValueError(f"negatives_exclude_history applies to the bce and gbce losses, not {name!r}")
        kwargs["exclude_history"] = config.negatives_exclude_history
    return cls(**kwargs)
