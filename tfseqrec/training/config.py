"""Training options: one dataclass per driver, checked on construction.

Option names mean the same in every model kind: ``max_sequence_length`` is always
items of history, ``max_tokens`` tokens (Recformer), ``epochs`` the epochs of the
main training stage, ``patience`` epochs without a better validation NDCG@10.
"""

import dataclasses
import inspect
import json
import os
import typing

from tfseqrec import models, presets, registry
from tfseqrec.checks import check_choice, check_number
from tfseqrec.data import events, splits


class Options:
    """``from_dict`` for option dataclasses: unknown keys are an error naming the known ones."""

    kind: typing.ClassVar[str] = "training"
    renamed: typing.ClassVar[dict] = {}

    @classmethod
    def from_dict(cls, values):
        values = {cls.renamed.get(key, key): value for key, value in values.items()}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown {cls.kind} options {unknown}; known: {sorted(known)}")
        return cls(**values)

    def __post_init__(self):
        self.check()

    def check(self):
        """Raises ``ValueError`` naming the first option out of range (subclasses extend it)."""


# The id models ``TrainConfig`` trains: every registry entry but the text-only one (Recformer,
# ``RecformerConfig``).
MODELS = tuple(name for name, spec in registry.MODELS.items() if spec.preparation != "text")

# Values that train_config.json files written before presets recorded for every model, UniSRec's
# defaults then; a model whose constructor does not take them never received them.
LEGACY_MODEL_OPTIONS = {"num_experts": 8, "adaptor_dropout": 0.2}


@dataclasses.dataclass
class TrainConfig(Options):
    """Training options of a run, and the model's constructor arguments (``model_options``).

    The fields are training options: how the data are cut into windows and batches,
    the loss, the optimizer and its schedule, validation and stopping. ``None`` means
    the model's training defaults (``tfseqrec.registry``), or the data's choice
    (``tfseqrec.presets.for_data``); the config
    records the resolved value. ``max_sequence_length`` is both: the windows'
    length and the model's constructor argument.

    ``model_options`` are the keyword arguments of the model's constructor
    (``{"hidden_dim": 64, "num_layers": 2}``); an option left out takes the
    constructor's default. They are checked by building the model: its constructor
    raises a ``ValueError`` naming the option (``tfseqrec.kinds.IdModelKind.check``).
    ``num_time_buckets`` (HSTU) is one of them; left out, the data decide
    (``tfseqrec.presets.for_data``: 128 when the data has event times, else 0).

    The loss is a training option: ``loss`` (a name in ``tfseqrec.losses.LOSSES``)
    and its arguments ``num_negatives``, ``negatives_per_position``, ``sampler``
    (``sampled_softmax``: ``"log_uniform"`` with the logQ correction, or
    ``"uniform"``) and ``negatives_exclude_history``. So is the Cloze masking of
    BERT4Rec's training sequences (``mask_prob``, ``last_item_only_prob``), which the
    loss normaliser reads before the model exists.

    ``validation``: ``"last"`` validates on each user's second-to-last item every
    epoch, keeps the best epoch and stops after ``patience`` epochs without a better
    NDCG@10; ``"none"`` has no validation split (that item is a training target like
    the others) and trains ``epochs`` epochs, keeping the last.

    ``from_dict`` also reads the flat form (model options beside the training
    options, as ``train_config.json`` held them before ``model_options``, and as
    ``--config`` JSON may give them) and applies a ``preset`` (a name in the
    model's ``presets``, which mixes both kinds of option) under the values given.
    """

    model: str = "sasrec"
    preset: str = None  # a tuned configuration (tfseqrec.registry)
    model_options: dict = dataclasses.field(default_factory=dict)
    max_sequence_length: int = None  # None: the model's constructor default (presets.for_data)
    loss: str = None  # softmax, sampled_softmax, bce, gbce (None: the model's default, tfseqrec.registry)
    loss_normalization: str = "fixed"
    num_negatives: int = None
    negatives_exclude_history: bool = None
    negatives_per_position: bool = None  # sampled_softmax: each position its own negatives (HSTU: yes)
    sampler: str = None  # sampled_softmax: "log_uniform" (logQ-corrected; the default) or "uniform"
    sparse_item_updates: bool = None  # RowSparseAdam (None: with a sampled loss over >= 100,000 items)
    attributes: list = None  # UniSRec: item attributes read (None: by the item-text file)
    max_attribute_tokens: int = 32  # UniSRec: tokens of each attribute the text encoder reads
    seq_seq_weight: float = 1e-3  # UniSRec pre-training: weight of the sequence-sequence loss
    item_drop: float = 0.2  # UniSRec pre-training: item drop of the augmented history
    init_from: str = None  # UniSRec: a directory written by `tfseqrec pretrain --model unisrec`
    mask_prob: float = None  # BERT4Rec: Cloze masking probability (None: by the data, presets.for_data)
    last_item_only_prob: float = 0.0  # BERT4Rec: share of training sequences with only the last item masked
    batch_size: int = None  # None: the model's default, else by the data (presets.for_data)
    learning_rate: float = None  # None: the model's default (BERT4Rec, HSTU: by the data)
    learning_rate_schedule: str = "constant"
    warmup_epochs: float = None  # None: the model's default (BERT4Rec: by the data)
    epochs: int = 200
    patience: int = 20
    validation: str = "last"  # "last": the second-to-last item validates; "none": no validation split
    split: str = "leave_one_out"  # or "temporal": at test_start (and valid_start), seconds (splits.prepare)
    test_start: float = None
    valid_start: float = None
    targets: str = "all"  # temporal: every event of the test period a target, or each user's "first"
    event_features: list = None  # per-event columns of the log the model reads as context (data.events)
    window_stride: int = None
    bucket_boundaries: list = None  # None: by the data (presets.for_data); [] for none
    validation_batch_size: int = 512
    validation_users: int = None  # validate on a fixed, seeded sample of this many users (None: all)
    max_train_minutes: float = None
    mixed_precision: bool = False
    jit_compile: bool = False
    seed: int = 0

    @classmethod
    def from_dict(cls, values):
        """The config of ``values`` over the preset they name (``"preset"``), if any.

        A key that is not a training option is a model option: flat keys join
        ``values["model_options"]`` (which wins), the preset's under both. A flat
        ``None`` meant the constructor's default (files written before
        ``model_options``) and is left out.
        """
        values = dict(values)
        preset = values.get("preset")
        if preset is not None:
            model = values.get("model", cls.model)
            check_choice("model", model, MODELS)
            values = {**presets.preset_options(model, preset), **values}
        model_options = {k: v for k, v in values.items() if k not in _FIELDS and v is not None}
        model_options.update(values.get("model_options") or {})
        training = {k: v for k, v in values.items() if k in _FIELDS}
        return super().from_dict({**training, "model_options": model_options})

    def __post_init__(self):
        check_choice("model", self.model, MODELS)
        if not isinstance(self.model_options, dict):
            raise ValueError(
                f"model_options must be an object of constructor arguments, got {self.model_options!r}"
            )
        self.model_options = dict(self.model_options)
        if self.preset is not None:
            presets.preset_options(self.model, self.preset)
        for name, value in presets.training_defaults(self.model, {"loss": self.loss}).items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        self.check()

    @property
    def sampled_loss(self):
        """Whether the loss reads only some items' rows (bce, sampled_softmax, gbce), not every item's."""
        return self.loss not in (None, "softmax")

    @property
    def time_buckets(self):
        """HSTU's time-bias buckets as settled (``model_options``; 0 when absent): whether the
        pipelines carry event times."""
        return self.model_options.get("num_time_buckets") or 0

    def check(self):
        # Training options only: the model checks its own options when it is built.
        for name in ("epochs", "validation_batch_size"):
            check_number(name, getattr(self, name), minimum=1, integer=True)
        for name in (
            "max_sequence_length",
            "batch_size",
            "num_negatives",
            "window_stride",
            "validation_users",
        ):
            check_number(name, getattr(self, name), minimum=1, integer=True, optional=True)
        check_number("patience", self.patience, minimum=0, integer=True)
        check_number("seed", self.seed, integer=True)
        check_number("mask_prob", self.mask_prob, minimum=0, maximum=1, exclusive_minimum=True, optional=True)
        check_number("max_attribute_tokens", self.max_attribute_tokens, minimum=1, integer=True)
        check_number("seq_seq_weight", self.seq_seq_weight, minimum=0)
        check_number("item_drop", self.item_drop, minimum=0, maximum=1, exclusive_maximum=True)
        check_choice("validation", self.validation, VALIDATION)
        check_choice("split", self.split, splits.SPLITS)
        check_choice("targets", self.targets, splits.TARGETS)
        for name in ("test_start", "valid_start"):
            check_number(name, getattr(self, name), optional=True)
        if (self.split == "temporal") != (self.test_start is not None):
            raise ValueError(
                "split 'temporal' needs test_start (--test-start), and test_start needs split 'temporal'"
            )
        if self.valid_start is not None and self.split != "temporal":
            raise ValueError("valid_start is for split 'temporal'")
        check_choice("sampler", self.sampler, SAMPLERS, optional=True)
        if self.sampler is not None and self.loss != "sampled_softmax":
            raise ValueError(f"sampler applies to the sampled_softmax loss, not {self.loss!r}")
        if self.init_from is not None and not registry.get(self.model).pretrainable:
            raise ValueError(
                f"init_from is for models that 'tfseqrec pretrain' pre-trains (unisrec, recformer), "
                f"not {self.model}"
            )
        if self.sparse_item_updates and not self.sampled_loss:
            raise ValueError(
                "sparse_item_updates needs a sampled loss (bce, sampled_softmax, gbce): the full "
                "softmax's gradient covers every item"
            )
        if self.attributes is not None and (
            not isinstance(self.attributes, (list, tuple)) or not self.attributes
        ):
            raise ValueError(
                f"attributes must be a non-empty list of attribute names, got {self.attributes!r}"
            )
        check_number("last_item_only_prob", self.last_item_only_prob, minimum=0, maximum=1)
        check_number("learning_rate", self.learning_rate, minimum=0, exclusive_minimum=True, optional=True)
        check_number("warmup_epochs", self.warmup_epochs, minimum=0, optional=True)
        check_number(
            "max_train_minutes", self.max_train_minutes, minimum=0, exclusive_minimum=True, optional=True
        )
        check_choice("loss_normalization", self.loss_normalization, ("fixed", "batch"))
        check_choice("learning_rate_schedule", self.learning_rate_schedule, ("constant", "cosine"))
        if self.bucket_boundaries is not None and not isinstance(self.bucket_boundaries, (list, tuple)):
            raise ValueError(f"bucket_boundaries must be a list of widths, got {self.bucket_boundaries!r}")
        for width in self.bucket_boundaries or ():
            check_number("bucket_boundaries", width, minimum=1, integer=True)
        if self.event_features is not None:
            self.event_features = events.check_names(self.event_features) or None


# ``validation``: the second-to-last item of each user validates, or there is no validation split.
VALIDATION = ("last", "none")
# ``sampler`` of the sampled softmax (``tfseqrec.losses.SampledSoftmaxCrossEntropy``).
SAMPLERS = ("log_uniform", "uniform")
_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


@dataclasses.dataclass
class RecformerConfig(Options):
    """Sizes and schedule of a Recformer run (defaults fit a 2-core CPU; docs/models/recformer.md).

    ``max_sequence_length`` is the items of a history (newest first), ``max_tokens``
    the tokens of a packed input (``[CLS]`` included), ``epochs`` the epochs of
    stage 1 (item table re-encoded every epoch), ``stage2_epochs`` those of stage 2
    (table frozen).
    """

    kind: typing.ClassVar[str] = "Recformer"
    # Names of model directories written before the option vocabulary was made one.
    renamed: typing.ClassVar[dict] = {"max_items": "max_sequence_length", "stage1_epochs": "epochs"}

    attributes: list = None  # None: by the item-text file (Amazon: title, brand, categories)
    max_attribute_tokens: int = 12
    max_sequence_length: int = None  # None: the backbone's default (RecformerBackbone)
    max_tokens: int = 128
    num_layers: int = 2  # of all-MiniLM-L6-v2's 6
    cached_layers: int = 0  # lower layers frozen, run once per item and cached (RecformerBackbone)
    attention_window: int = 64
    pretrained: bool = True
    align_epochs: int = 2  # [CLS] alignment on item text before fine-tuning (0: none)
    align_learning_rate: float = 5e-4
    dropout: float = 0.1
    temperature: float = 0.05
    batch_size: int = 32
    learning_rate: float = 5e-5
    epochs: int = 4
    stage2_epochs: int = 2
    stage2_learning_rate: float = None  # default: learning_rate / 2
    patience: int = 2
    examples_per_user: int = 1
    training_targets: str = "last"  # "last" (examples_per_user), "random" (one per user per epoch), "all"
    pooling: str = "cls"  # the vector of an input: its [CLS] state, or the mean of its tokens ("mean")
    pad_to_longest: bool = True  # batches as wide as their longest input (bucketed by length), not max_tokens
    attribute_tokens: dict = (
        None  # per-attribute token budgets, e.g. {"title": 24}; others: max_attribute_tokens
    )
    common_value_share: float = None  # drop comma-separated attribute values shared by this share of items
    learning_rate_schedule: str = "constant"  # or "linear": warm-up, then linear decay over both stages
    warmup_share: float = 0.05  # of all fine-tuning steps, with the "linear" schedule
    mlm_weight: float = 0.1  # pre-training: weight of masked language modelling
    init_from: str = None  # a directory written by `tfseqrec pretrain --model recformer`
    validation_batch_size: int = 128
    validation_users: int = None  # validate on a fixed, seeded sample of this many users (None: all)
    max_train_minutes: float = None
    seed: int = 0

    def __post_init__(self):
        if self.max_sequence_length is None:
            self.max_sequence_length = _backbone_default("max_sequence_length")
        super().__post_init__()

    def check(self):
        for name in (
            "max_attribute_tokens",
            "max_sequence_length",
            "max_tokens",
            "num_layers",
            "attention_window",
            "batch_size",
            "examples_per_user",
            "validation_batch_size",
        ):
            check_number(name, getattr(self, name), minimum=1, integer=True)
        check_number("validation_users", self.validation_users, minimum=1, integer=True, optional=True)
        for name in ("align_epochs", "epochs", "stage2_epochs", "patience", "cached_layers"):
            check_number(name, getattr(self, name), minimum=0, integer=True)
        check_number("seed", self.seed, integer=True)
        check_number("dropout", self.dropout, minimum=0, maximum=1, exclusive_maximum=True)
        check_number("temperature", self.temperature, minimum=0, exclusive_minimum=True)
        check_number("mlm_weight", self.mlm_weight, minimum=0)
        check_choice("training_targets", self.training_targets, ("last", "random", "all"))
        check_choice("pooling", self.pooling, ("cls", "mean"))
        check_choice("learning_rate_schedule", self.learning_rate_schedule, ("constant", "linear"))
        check_number("warmup_share", self.warmup_share, minimum=0, maximum=1, exclusive_maximum=True)
        check_number(
            "common_value_share",
            self.common_value_share,
            minimum=0,
            maximum=1,
            exclusive_minimum=True,
            optional=True,
        )
        if self.attribute_tokens is not None:
            if not isinstance(self.attribute_tokens, dict):
                raise ValueError(
                    f"attribute_tokens must be an object of attribute: tokens, got {self.attribute_tokens!r}"
                )
            for name, tokens in self.attribute_tokens.items():
                check_number(f"attribute_tokens[{name!r}]", tokens, minimum=1, integer=True)
        for name in ("learning_rate", "align_learning_rate"):
            check_number(name, getattr(self, name), minimum=0, exclusive_minimum=True)
        check_number(
            "stage2_learning_rate",
            self.stage2_learning_rate,
            minimum=0,
            exclusive_minimum=True,
            optional=True,
        )
        check_number(
            "max_train_minutes", self.max_train_minutes, minimum=0, exclusive_minimum=True, optional=True
        )
        if self.cached_layers >= self.num_layers:
            raise ValueError(
                f"cached_layers ({self.cached_layers}) must be below num_layers ({self.num_layers}): "
                "at least one layer reads the history"
            )
        if self.attention_window % 2:
            raise ValueError(f"attention_window must be even, got {self.attention_window}")


# The file ``tfseqrec train -h`` reads each model's defaults from, so that help needs no
# TensorFlow: ``defaults()`` writes it, and a test keeps it equal to what ``defaults()`` reads.
DEFAULTS_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "defaults.json")


def defaults(model):
    """``{option: value}``: what ``tfseqrec train --model MODEL`` uses for an option left unset.

    Read from where each lives: the model's constructor (architecture), the registry
    (training defaults, options the histories' length settles, the warm-up), the options
    dataclass (``TrainConfig``, ``RecformerConfig``) and ``tfseqrec.presets`` (batch size and
    time bias by the data). A value the data settle is a string saying how.
    """
    spec = registry.get(model)
    if spec.preparation == "text":
        values = {f.name: f.default for f in dataclasses.fields(RecformerConfig) if f.default is not None}
        return dict(
            sorted({**values, "max_sequence_length": _backbone_default("max_sequence_length")}.items())
        )
    values = {}
    for name in sorted(presets.constructor_arguments(spec) - {"trainable"}):  # Keras's own
        try:
            values[name] = presets.constructor_default(spec, name)
        except ValueError:  # a required argument (num_items)
            continue
    for field in dataclasses.fields(TrainConfig):
        if field.default not in (None, dataclasses.MISSING) and field.name != "model":
            values[field.name] = field.default
    values.update(presets.training_defaults(model, {}))
    for name in {n for options in spec.by_history.values() for n in options}:
        long, short = spec.by_history["long"][name], spec.by_history["short"][name]
        values[name] = long if long == short else f"{_text(long)} long histories, {_text(short)} short"
    long, short = (presets.BUCKET_BOUNDARIES[k] for k in ("long", "short"))
    values["bucket_boundaries"] = f"{_text(list(long))} long histories, {_text(list(short))} short"
    if "batch_size" not in spec.training:
        sizes = presets.BATCH_SIZES
        values["batch_size"] = (
            f"{sizes[0]}, halved down to {sizes[-1]} while an epoch has under "
            f"{presets.MIN_BATCHES_PER_EPOCH} batches"
        )
    if spec.warmup:
        epochs, updates = spec.warmup
        values["warmup_epochs"] = f"{_text(epochs)}, at most {updates} updates"
    if spec.time_bias:
        values["num_time_buckets"] = f"{presets.TIME_BUCKETS} when the events have times, else 0"
    return {name: value for name, value in sorted(values.items()) if value is not None}


def write_defaults(path=DEFAULTS_FILE):
    """Writes every model's ``defaults`` to ``path`` (JSON), for ``tfseqrec train -h``."""
    with open(path, "w") as f:
        json.dump({model: defaults(model) for model in registry.MODELS}, f, indent=1)
        f.write("\n")


def _backbone_default(name):
    """The default of ``RecformerBackbone``'s argument ``name``."""
    return inspect.signature(models.RecformerBackbone).parameters[name].default


def _text(value):
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    write_defaults()
