"""Training options: one dataclass per driver, checked on construction.

Option names mean the same in every model kind: ``max_sequence_length`` is always
items of history, ``max_tokens`` tokens (Recformer), ``epochs`` the epochs of the
main training stage, ``patience`` epochs without a better validation NDCG@10.
"""

import dataclasses
import typing

from tfseqrec.checks import check_choice, check_number


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


# Sizes and loss of SASRec, BERT4Rec and UniSRec (the configuration of Klenitskiy & Vasilev, RecSys 2023).
ID_MODEL_DEFAULTS = {"hidden_dim": 64, "num_layers": 2, "loss": "softmax"}

# Each id model's values of the ``TrainConfig`` fields left ``None`` (its training
# defaults, each chosen on validation NDCG@10; see the README). The keys are the
# ``--model`` names ``TrainConfig`` trains (``tfseqrec.kinds`` builds a kind of each).
MODEL_DEFAULTS = {
    # SASRec on ML-1M, 30 minutes, seed 0: best validation NDCG@10 0.1961 at 2e-3 against 0.1918 at 1e-3.
    "sasrec": {**ID_MODEL_DEFAULTS, "learning_rate": 2e-3, "warmup_epochs": 0.0},
    # BERT4Rec on ML-1M, 10 minutes, seed 0: best validation NDCG@10 0.1177 at 4e-3, 0.1079 at 2e-3, 0.0807 at 1e-3.
    # Without a warm-up, 4e-3 left seeds 1 and 2 near chance for 12 and 25+ epochs; 5 epochs of warm-up lift
    # seed 2 to 0.1250 in 10 minutes (0.0202 without).
    "bert4rec": {**ID_MODEL_DEFAULTS, "learning_rate": 4e-3, "warmup_epochs": 5.0},
    # UniSRec: SASRec's training defaults (its encoder is SASRec's).
    "unisrec": {
        **ID_MODEL_DEFAULTS,
        "learning_rate": 2e-3,
        "warmup_epochs": 0.0,
        "use_id_embeddings": False,
        "id_dropout": 0.0,
        "temperature": 0.07,
    },
    # HSTU: the sizes of the reference ML-1M configuration (HSTU-large; Zhai et al., ICML 2024). Its sampled
    # softmax (128 negatives per position, as the reference draws them) learns less per epoch than the full
    # softmax on ML-1M (GPU probe: 0.161 against 0.188 after 40 epochs): full by default, the reference's
    # when --loss sampled_softmax (for catalogues too large to score whole). Adam at 2e-3,
    # not the reference's 1e-3: pointwise attention sits at popularity level for ~10 epochs at 1e-3 and ~5 at
    # 2e-3; validation NDCG@10 after 40 epochs 0.19 against 0.16 (a GPU probe; README, "HSTU").
    "hstu": {
        "hidden_dim": 50,
        "num_layers": 8,
        "num_heads": 2,
        "loss": "softmax",
        "num_negatives": 128,
        "negatives_per_position": True,
        "temperature": 0.05,
        "learning_rate": 2e-3,
        "warmup_epochs": 0.0,
    },
}

# The id models that ``tfseqrec pretrain`` pre-trains (a checkpoint ``init_from`` starts from).
PRETRAINED_MODELS = ("unisrec",)


@dataclasses.dataclass
class TrainConfig(Options):
    """Hyper-parameters of a training run; ``None`` means the model's own default."""

    model: str = "sasrec"
    max_sequence_length: int = 200
    hidden_dim: int = None  # None: the model kind's (HSTU 50, others 64)
    num_layers: int = None  # None: the model kind's (HSTU 8, others 2)
    num_heads: int = None
    intermediate_dim: int = None
    attention_dim: int = None  # HSTU: Q/K width per head (None: hidden_dim // num_heads)
    linear_dim: int = None  # HSTU: U/V width per head (None: hidden_dim // num_heads)
    relative_position_bias: bool = None  # HSTU: learn a bias per relative position (True)
    attention: str = None  # HSTU: "silu" (pointwise, the paper) or "softmax"
    num_time_buckets: int = (
        None  # HSTU: relative time bias buckets (None: 128 when the data has times, else 0)
    )
    dropout: float = None
    normalized_residual: bool = None
    initializer_range: float = None
    position_origin: str = None
    loss: str = None  # None: the model kind's (softmax)
    loss_normalization: str = "fixed"
    num_negatives: int = None
    negatives_exclude_history: bool = None
    negatives_per_position: bool = None  # sampled_softmax: each position its own negatives (HSTU: yes)
    sparse_item_updates: bool = None  # RowSparseAdam (None: with a sampled loss over >= 100,000 items)
    num_experts: int = 8  # UniSRec: adaptor experts
    adaptor_dropout: float = 0.2  # UniSRec
    use_id_embeddings: bool = None  # UniSRec: add id embeddings to the text vectors
    id_dropout: float = (
        None  # UniSRec with ids: share of item occurrences read by their text alone in training
    )
    temperature: float = None  # UniSRec, HSTU: cosine scores divided by it (0.07, 0.05)
    attributes: list = None  # UniSRec: item attributes read (None: by the item-text file)
    max_attribute_tokens: int = 32  # UniSRec: tokens of each attribute the text encoder reads
    seq_seq_weight: float = 1e-3  # UniSRec pre-training: weight of the sequence-sequence loss
    item_drop: float = 0.2  # UniSRec pre-training: item drop of the augmented history
    init_from: str = None  # UniSRec: a directory written by `tfseqrec pretrain --model unisrec`
    mask_prob: float = 0.2
    mask_token_rate: float = None
    random_token_rate: float = None
    last_item_only_prob: float = 0.0
    batch_size: int = 128
    learning_rate: float = None  # None: the model kind's (SASRec, UniSRec and HSTU 2e-3, BERT4Rec 4e-3)
    learning_rate_schedule: str = "constant"
    warmup_epochs: float = None  # None: the model kind's (BERT4Rec 5, others 0)
    epochs: int = 200
    patience: int = 20
    window_stride: int = None
    bucket_boundaries: list = dataclasses.field(default_factory=lambda: [50, 100])
    validation_batch_size: int = 512
    validation_users: int = None  # validate on a fixed, seeded sample of this many users (None: all)
    max_train_minutes: float = None
    mixed_precision: bool = False
    jit_compile: bool = False
    seed: int = 0

    def __post_init__(self):
        check_choice("model", self.model, MODEL_DEFAULTS)
        for name, value in MODEL_DEFAULTS[self.model].items():
            # A kind's number of negatives is for a sampled loss, not for its full softmax.
            if name == "num_negatives" and self.loss == "softmax":
                continue
            if name == "negatives_per_position" and self.loss != "sampled_softmax":
                continue
            if getattr(self, name) is None:
                setattr(self, name, value)
        self.check()

    @property
    def sampled_loss(self):
        """Whether the loss reads only some items' rows (bce, sampled_softmax, gbce), not every item's."""
        return self.loss not in (None, "softmax")

    def check(self):
        for name in (
            "max_sequence_length",
            "hidden_dim",
            "num_layers",
            "batch_size",
            "epochs",
            "validation_batch_size",
        ):
            check_number(name, getattr(self, name), minimum=1, integer=True)
        for name in (
            "num_heads",
            "intermediate_dim",
            "attention_dim",
            "linear_dim",
            "num_negatives",
            "window_stride",
            "validation_users",
        ):
            check_number(name, getattr(self, name), minimum=1, integer=True, optional=True)
        check_number("patience", self.patience, minimum=0, integer=True)
        check_number("num_time_buckets", self.num_time_buckets, minimum=0, integer=True, optional=True)
        check_number("seed", self.seed, integer=True)
        check_number("dropout", self.dropout, minimum=0, maximum=1, exclusive_maximum=True, optional=True)
        check_number("initializer_range", self.initializer_range, minimum=0, optional=True)
        check_number("mask_prob", self.mask_prob, minimum=0, maximum=1, exclusive_minimum=True)
        check_number("num_experts", self.num_experts, minimum=1, integer=True)
        check_number("max_attribute_tokens", self.max_attribute_tokens, minimum=1, integer=True)
        check_number("adaptor_dropout", self.adaptor_dropout, minimum=0, maximum=1, exclusive_maximum=True)
        check_number(
            "id_dropout", self.id_dropout, minimum=0, maximum=1, exclusive_maximum=True, optional=True
        )
        check_number("temperature", self.temperature, minimum=0, exclusive_minimum=True, optional=True)
        check_number("seq_seq_weight", self.seq_seq_weight, minimum=0)
        check_number("item_drop", self.item_drop, minimum=0, maximum=1, exclusive_maximum=True)
        if self.init_from is not None and self.model not in PRETRAINED_MODELS:
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
        for name in ("mask_token_rate", "random_token_rate"):
            check_number(name, getattr(self, name), minimum=0, maximum=1, optional=True)
        if (self.mask_token_rate or 0) + (self.random_token_rate or 0) > 1:
            raise ValueError("mask_token_rate + random_token_rate must be <= 1")
        check_number("learning_rate", self.learning_rate, minimum=0, exclusive_minimum=True)
        check_number("warmup_epochs", self.warmup_epochs, minimum=0)
        check_number(
            "max_train_minutes", self.max_train_minutes, minimum=0, exclusive_minimum=True, optional=True
        )
        check_choice("loss_normalization", self.loss_normalization, ("fixed", "batch"))
        check_choice("learning_rate_schedule", self.learning_rate_schedule, ("constant", "cosine"))
        check_choice("position_origin", self.position_origin, ("newest", "oldest"), optional=True)
        check_choice("attention", self.attention, ("silu", "softmax"), optional=True)
        if not isinstance(self.bucket_boundaries, (list, tuple)):
            raise ValueError(f"bucket_boundaries must be a list of widths, got {self.bucket_boundaries!r}")
        for width in self.bucket_boundaries:
            check_number("bucket_boundaries", width, minimum=1, integer=True)


@dataclasses.dataclass
class RecformerConfig(Options):
    """Sizes and schedule of a Recformer run (defaults fit a 2-core CPU; see the README).

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
    max_sequence_length: int = 20
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
