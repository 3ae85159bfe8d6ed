"""What a model trains with: its training defaults, and the options the data settle.

``for_data(model, sequences)`` is the one place where a choice that depends on the data
is made (number of layers, Cloze mask share, initial spread, learning rate, batch size and widths by the
length of the histories; HSTU's time bias by whether the events carry times). The command
line calls it (``tfseqrec train`` prints each choice on stderr and records them in the run
directory's ``train_config.json``), and Python users call it before building a model:

>>> import numpy as np
>>> from tfseqrec import presets
>>> from tfseqrec.data import splits
>>> short = splits.Sequences(np.arange(40), np.tile([2, 3, 4, 5], 40), np.arange(0, 161, 4))
>>> choices = presets.for_data("bert4rec", short)
>>> choices["num_layers"], choices["mask_prob"], choices["batch_size"], round(choices["learning_rate"], 6)
(1, 0.4, 16, 0.001414)
>>> sorted(choices.model_options)
['initializer_range', 'mask_prob', 'max_sequence_length', 'num_layers']

The training defaults of each model (``training``) and its named presets live in
``tfseqrec.registry``; a model option's default lives in its constructor.
"""

import dataclasses
import inspect

import numpy as np

from tfseqrec import models, registry
from tfseqrec.data import numpy_pipeline, vocab

# ``batch_size`` left unset (BERT4Rec, HSTU): the largest of these that gives an epoch at least
# ``MIN_BATCHES_PER_EPOCH`` batches, so that small data get enough updates an epoch for early
# stopping's patience and an epoch-counted warm-up (record defaults-probes-4min).
BATCH_SIZES = (128, 64, 32, 16)
MIN_BATCHES_PER_EPOCH = 24

# The batches' widths by the length of the histories: short histories add 10 and 20, which hold
# most of their windows (defaults-probes-10min-2); long ones keep [50, 100] (defaults-widths-ml100k).
BUCKET_BOUNDARIES = {"short": (10, 20, 50, 100), "long": (50, 100)}

# Histories are short when the mean training window is under this many items (Amazon Scientific:
# 5), long otherwise (MovieLens: 89-108): a model's ``by_history`` options follow.
SHORT_HISTORY_ITEMS = 20

# HSTU's relative time bias when the data carry event times: the reference's log buckets.
TIME_BUCKETS = 128


class Choices(dict):
    """``{option: value}`` that ``for_data`` chose, with ``reasons[option]`` saying why.

    ``model_options`` are the model constructor's arguments among them, ``training`` the
    rest (``TrainConfig`` fields: loss, learning rate, batch size, ...).
    """

    def __init__(self, model, values, reasons):
        super().__init__(values)
        self.model = model
        self.reasons = dict(reasons)

    @property
    def model_options(self):
        accepted = constructor_arguments(registry.get(self.model)) - set(_TRAINING_ONLY)
        return {k: v for k, v in self.items() if k in accepted}

    @property
    def training(self):
        accepted = constructor_arguments(registry.get(self.model)) - set(_TRAINING_ONLY)
        return {k: v for k, v in self.items() if k not in accepted or k in _BOTH}

    def lines(self):
        """One line per choice, as ``tfseqrec train`` prints them."""
        return [f"{self.model}: {name} {_show(value)} ({self.reasons[name]})" for name, value in self.items()]


# Options that are both a training option and a constructor argument: the windows' length,
# and the mask share, which the loss normaliser reads before the model exists.
_BOTH = ("max_sequence_length", "mask_prob")
# Constructor arguments that the training options make (the loss object from ``loss`` and its options).
_TRAINING_ONLY = ("loss", "loss_normalizer")


def for_data(model, sequences, options=None):
    """The options of ``model`` that its defaults and the training ``sequences`` settle.

    Args:
        model: a name in ``tfseqrec.registry.MODELS`` (an id model).
        sequences: the training ``tfseqrec.data.Sequences``.
        options: what is already given: a dict of training and model options (as
            ``tfseqrec train --config`` takes them, ``model_options`` nested or flat,
            ``preset`` applied under them) or a ``TrainConfig``. Given options are
            never changed; only the ones left unset are chosen.

    Returns:
        ``Choices``: every option set here, in the order they are settled: the training
        defaults (``registry``), the windows' length (the constructor's default), the
        options the histories' length settles (``by_history``, ``bucket_boundaries``),
        the time bias, the batch size, a data-settled learning rate scaled to it, and
        the warm-up (the registry's ``warmup``: epochs, at most so many updates).
    """
    spec = registry.get(model)
    if spec.preparation == "text":
        raise ValueError(f"{model} reads item text; for_data settles the id models' options")
    given = _flat(model, options)
    values, reasons = {}, {}

    def choose(name, value, reason):
        values[name] = given[name] = value
        reasons[name] = reason

    for name, value in training_defaults(model, given).items():
        if given.get(name) is None:
            choose(name, value, f"{model}'s default")
    if given.get("max_sequence_length") is None:
        choose("max_sequence_length", constructor_default(spec, "max_sequence_length"), "the model's default")
    rate_by_data = given.get("learning_rate") is None
    _by_history(spec, sequences, given, choose)
    _time_bias(spec, sequences, given, choose)
    windows = len(numpy_pipeline.sliding_windows(sequences, **windows_of(spec, given))[0])
    if given.get("batch_size") is None:
        size = default_batch_size(windows)
        choose(
            "batch_size",
            size,
            f"{windows:,} training windows, at least {MIN_BATCHES_PER_EPOCH} batches an epoch",
        )
        if rate_by_data and size < BATCH_SIZES[0]:
            rate = values["learning_rate"]
            reason = f"{_show(rate)} at batches of {BATCH_SIZES[0]}, times sqrt({size}/{BATCH_SIZES[0]})"
            choose("learning_rate", batch_learning_rate(rate, size), reason)
    if spec.warmup and given.get("warmup_epochs") is None:
        epochs, updates = spec.warmup
        batches = -(-windows // given["batch_size"])
        reason = f"{_show(epochs)} epochs, at most {updates} updates: {batches} batches an epoch"
        choose("warmup_epochs", min(epochs, updates / batches), reason)
    return Choices(model, values, reasons)


def resolve(model, sequences, options=None):
    """Every option of a run of ``model``: those given (a named preset's under them) and those
    ``for_data`` settles, as one ``Choices`` (a given option's reason: ``"given"``).

    For a script that builds the model and its training itself (``benchmarks/gpu.py``):
    ``model_options`` go to the constructor, ``training`` to the loss and the optimizer.

    >>> import numpy as np
    >>> from tfseqrec.data import splits
    >>> short = splits.Sequences(np.arange(40), np.tile([2, 3, 4, 5], 40), np.arange(0, 161, 4))
    >>> run = resolve("sasrec", short, {"hidden_dim": 16})
    >>> run.model_options["hidden_dim"], run.reasons["hidden_dim"], run.training["loss"]
    (16, 'given', 'softmax')
    """
    given = {k: v for k, v in _flat(model, options).items() if k not in ("model", "preset") and v is not None}
    chosen = for_data(model, sequences, given)
    return Choices(model, {**given, **chosen}, {**dict.fromkeys(given, "given"), **chosen.reasons})


def _by_history(spec, sequences, given, choose):
    """The options the mean length of the training windows settles (``by_history``, widths)."""
    lengths = np.minimum(sequences.lengths, int(given["max_sequence_length"]))
    mean = float(np.mean(lengths)) if len(lengths) else 0.0
    which = "short" if mean < SHORT_HISTORY_ITEMS else "long"
    why = f"{which} histories: {mean:.1f} items a window on average"
    for name, value in spec.by_history.get(which, {}).items():
        if given.get(name) is None:
            choose(name, value, why)
    if given.get("bucket_boundaries") is None:
        choose("bucket_boundaries", list(BUCKET_BOUNDARIES[which]), why)


def _time_bias(spec, sequences, given, choose):
    """HSTU's time buckets by whether the events carry times; buckets that cannot apply are refused."""
    timed = sequences.timestamps is not None
    if spec.time_bias and given.get("num_time_buckets") is None:
        reason = "the data have event times: relative time bias" if timed else "the data have no event times"
        choose("num_time_buckets", TIME_BUCKETS if timed else 0, reason)
    elif not spec.time_bias and given.get("num_time_buckets"):
        raise ValueError(f"num_time_buckets applies to models with a time bias (hstu), not {spec.name}")
    elif given.get("num_time_buckets") and not timed:
        raise ValueError(
            f"num_time_buckets={given['num_time_buckets']} needs event times, and the data has none "
            "(the SASRec text format, or a CSV without a time column)"
        )


def training_defaults(model, given):
    """``model``'s training defaults (``registry``) that apply under the options ``given``.

    A default number of negatives, or negatives per position, applies to a sampled loss only.
    """
    spec = registry.get(model)
    loss = given.get("loss") or spec.training.get("loss")
    defaults = {}
    for name, value in spec.training.items():
        if name == "num_negatives" and loss == "softmax":
            continue
        if name == "negatives_per_position" and loss != "sampled_softmax":
            continue
        defaults[name] = value
    return defaults


def windows_of(spec, options):
    """``sliding_windows`` arguments of a kind's training windows: Cloze windows of ``N`` items, or
    next-item windows of ``N + 1`` (inputs and the targets one item later) holding two or more."""
    length = options["max_sequence_length"]
    stride = options.get("window_stride")
    if spec.preparation == "cloze":
        return {"width": length, "stride": stride, "min_length": 1}
    return {"width": length + 1, "stride": stride, "min_length": 2}


def targets_per_window(spec, options, sequences):
    """Expected training targets of each window of ``sequences`` (the loss normaliser's input)."""
    windows, _ = numpy_pipeline.sliding_windows(sequences, **windows_of(spec, options))
    if spec.preparation == "cloze":
        items = (windows != vocab.PAD_ID).sum(axis=1)
        # mask_prob of the items, at least one; or only the last item.
        p = options.get("last_item_only_prob") or 0.0
        return (1 - p) * np.maximum(options["mask_prob"] * items, 1) + p
    return (windows[:, :-1] != vocab.PAD_ID).sum(axis=1)


def default_batch_size(num_windows):
    """The batch size for ``num_windows`` training windows an epoch: 128, halved (down to 16)
    while an epoch would have fewer than ``MIN_BATCHES_PER_EPOCH`` batches."""
    for size in BATCH_SIZES:
        if num_windows >= MIN_BATCHES_PER_EPOCH * size:
            return size
    return BATCH_SIZES[-1]


def batch_learning_rate(learning_rate, batch_size):
    """``learning_rate``, set for batches of ``BATCH_SIZES[0]``, for batches of ``batch_size``:
    scaled by ``sqrt(batch_size / BATCH_SIZES[0])``, Adam's square-root rule (Malladi et al.,
    NeurIPS 2022; record defaults-probes-rate-seed-*)."""
    return learning_rate * float(np.sqrt(batch_size / BATCH_SIZES[0]))


def preset_options(model, preset):
    """The options of ``model``'s preset (short name ``ml1m`` or full ``sasrec_ml1m``), a copy."""
    spec, key = registry.find_preset(preset, model)
    return {k: list(v) if isinstance(v, list) else v for k, v in spec.presets[key].options.items()}


def model_class(spec):
    """The model class of a registry entry."""
    return getattr(models, spec.class_name)


def constructor_default(spec, name):
    """The default of the argument ``name`` of ``spec``'s model (its backbone's constructor)."""
    cls = model_class(spec)
    for klass in (*cls.__mro__, *cls.backbone_cls.__mro__):  # the first class that names it
        parameter = (
            inspect.signature(klass.__init__).parameters.get(name) if "__init__" in vars(klass) else None
        )
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return parameter.default
    raise ValueError(f"{spec.class_name} has no default for {name}")


def constructor_arguments(spec):
    """The keyword arguments ``spec``'s model takes (``NextItemTask.constructor_arguments``)."""
    return model_class(spec).constructor_arguments()


def _flat(model, options):
    """``options`` (a dict or a ``TrainConfig``) as one flat dict, a named preset under it."""
    if options is None:
        options = {}
    elif dataclasses.is_dataclass(options):
        # A TrainConfig holds the training defaults it filled in: they are reported as chosen.
        defaults = training_defaults(model, {"loss": options.loss})
        options = {
            k: v for k, v in dataclasses.asdict(options).items() if k not in defaults or v != defaults[k]
        }
    options = dict(options)
    nested = options.pop("model_options", None) or {}
    flat = {**options, **nested}
    if flat.get("model") not in (None, model):
        raise ValueError(f"the options are for model {flat['model']!r}, not {model!r}")
    if flat.get("preset") is not None:
        flat = {**preset_options(model, flat["preset"]), **{k: v for k, v in flat.items() if v is not None}}
    return flat


def _show(value):
    return f"{value:g}" if isinstance(value, float) else str(value)
