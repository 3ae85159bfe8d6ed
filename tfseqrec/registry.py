"""The model registry: each model kind's name, class, description, data preparation and presets.

One table, ``MODELS``, that imports no TensorFlow: the command line (its ``--model``
choices and help), ``tfseqrec.kinds`` (which builds, trains, loads and exports each kind),
``tfseqrec.presets`` (the training defaults and what the data settle), ``tfseqrec.__init__``
and the docs read it. Adding a model is a package under ``tfseqrec/models/`` and one
``ModelSpec`` here (CONTRIBUTING.md).

A model option's default lives in the model's constructor only; ``training`` holds the
training options a kind leaves ``None`` in ``TrainConfig`` (loss, learning rate, warm-up);
``by_history`` the options the length of the data's histories settles
(``tfseqrec.presets.for_data``); ``presets`` the tuned configurations by name, model and
training options together, each pinning the values it was measured with.

Example:

>>> sorted(MODELS)
['bert4rec', 'hstu', 'recformer', 'sasrec', 'unisrec']
>>> get("bert4rec").preparation, get("hstu").preparation, get("sasrec").class_name
('cloze', 'timed', 'SASRec')
>>> preset_name("sasrec", "ml1m-cosine")
'sasrec_ml1m_cosine'
"""

import dataclasses
import types

# How a kind's training sequences are prepared (``tfseqrec.training.id_models``):
# "causal": next-item targets at every position; "cloze": masked items, fresh each batch;
# "timed": causal, with event times when the data carry them (a relative time bias);
# "text": the items' text (Recformer's own driver).
PREPARATIONS = ("causal", "cloze", "timed", "text")


@dataclasses.dataclass(frozen=True)
class Preset:
    """A tuned configuration: ``options`` (model and training options), what it is for, and the
    benchmark records (``benchmarks/results/``) that measured it."""

    description: str
    options: dict
    records: tuple = ()


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model kind.

    Attributes:
        name: the ``--model`` name.
        class_name: the model's class in ``tfseqrec.models``.
        description: one line for help and docs.
        preparation: one of ``PREPARATIONS``.
        reads_item_text: training reads the items' text (``--item-text``).
        pretrainable: ``tfseqrec pretrain`` pre-trains it (``init_from`` starts from that).
        training: training defaults (``TrainConfig`` fields the kind leaves ``None``).
        warmup: ``(epochs, updates)``: a warm-up of ``epochs`` epochs and at most ``updates``
            updates when ``warmup_epochs`` is unset (``tfseqrec.presets.for_data``): on data
            with many batches an epoch, fewer epochs.
        by_history: ``{"short": {...}, "long": {...}}``: options the mean length of the
            training windows settles when left unset (``tfseqrec.presets.for_data``).
        presets: ``{name: Preset}``.
    """

    name: str
    class_name: str
    description: str
    preparation: str
    reads_item_text: bool = False
    pretrainable: bool = False
    training: dict = dataclasses.field(default_factory=dict)
    warmup: tuple = None
    by_history: dict = dataclasses.field(default_factory=dict)
    presets: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.preparation not in PREPARATIONS:
            raise ValueError(f"{self.name}: preparation must be one of {PREPARATIONS}")
        # Read-only views: a caller that changed a default would change it for every run.
        object.__setattr__(self, "training", types.MappingProxyType(dict(self.training)))
        object.__setattr__(self, "by_history", types.MappingProxyType(dict(self.by_history)))
        object.__setattr__(self, "presets", types.MappingProxyType(dict(self.presets)))

    @property
    def time_bias(self):
        """Whether the model has a relative time bias that event times switch on."""
        return self.preparation == "timed"


# SASRec: 2e-3 had the best ML-1M validation of 1e-3 / 2e-3 (records ml1m-sasrec-seeds-0-1-2,
# ml1m-sasrec-lr-4e-3); batches of 128 on any data (defaults-probes-4min).
_SASREC_TRAINING = {"loss": "softmax", "learning_rate": 2e-3, "warmup_epochs": 0.0, "batch_size": 128}
# The sizes of Klenitskiy & Vasilev (RecSys 2023), as benchmarks/ml1m.py runs them.
_SASREC_ML1M = {
    "max_sequence_length": 200,
    "hidden_dim": 64,
    "num_layers": 2,
    "num_heads": 1,
    "dropout": 0.1,
    "bucket_boundaries": [50, 100],
    **_SASREC_TRAINING,
}
_BERT4REC_TRAINING = {"loss": "softmax"}
# BERT4Rec: a warm-up keeps 4e-3 from stalling some seeds near popularity (ml1m-bert4rec-*): five
# epochs, the 240 updates of ML-1M's (its 6,040 windows in batches of 128), and no more on larger data.
_BERT4REC_WARMUP = (5.0, 240)
# Short histories (a few items a window) mask more and need one layer (defaults-probes-10min-2,
# defaults-probes-layers-seed-*). A [MASK] slot reads its neighbours only through the attention's
# value and output kernels, which BERT's 0.02 spread shrinks 6x each at 64 wide: on short
# histories a 0.1 spread lets 4e-3 learn that read (defaults-budgets-spread-seed-0,
# defaults-probes-scientific-spread).
_BERT4REC_BY_HISTORY = {
    "long": {"learning_rate": 4e-3, "mask_prob": 0.2, "num_layers": 2, "initializer_range": 0.02},
    "short": {"learning_rate": 4e-3, "mask_prob": 0.4, "num_layers": 1, "initializer_range": 0.1},
}
# HSTU: the full softmax learns more per epoch than the reference's sampled one (gpu-sasrec-plus);
# its rate is left to the data so that a smaller batch scales it.
_HSTU_TRAINING = {
    "loss": "softmax",
    "num_negatives": 128,
    "negatives_per_position": True,
    "warmup_epochs": 0.0,
}

MODELS = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="sasrec",
            class_name="SASRec",
            description="SASRec (2018): causal self-attention over a history's item ids",
            preparation="causal",
            training=_SASREC_TRAINING,
            presets={
                "ml1m": Preset(
                    "MovieLens-1M: 64 wide, 2 layers, 200 items, lr 2e-3 (the stored ML-1M runs)",
                    _SASREC_ML1M,
                    ("ml1m-sasrec-blockwise-seed-0", "ml1m-sasrec-blockwise-seeds-1-2"),
                ),
                # Every 200-item window of a long history, not only its newest; lowered SASRec
                # on ML-100K, hence not the default.
                "ml1m-cosine": Preset(
                    "MovieLens-1M in 80 epochs: every 200-item window, lr 4e-3 decayed by a cosine",
                    {
                        **_SASREC_ML1M,
                        "learning_rate": 4e-3,
                        "learning_rate_schedule": "cosine",
                        "warmup_epochs": 1.0,
                        "epochs": 80,
                        "window_stride": 200,
                    },
                    (
                        "ml1m-sasrec-window-stride-cosine-80-seed-0",
                        "ml1m-sasrec-window-stride-cosine-80-seeds-1-2",
                    ),
                ),
            },
        ),
        ModelSpec(
            name="bert4rec",
            class_name="BERT4Rec",
            description="BERT4Rec (2019): bidirectional attention, trained to fill in masked items",
            preparation="cloze",
            training=_BERT4REC_TRAINING,
            warmup=_BERT4REC_WARMUP,
            by_history=_BERT4REC_BY_HISTORY,
            presets={
                "ml1m": Preset(
                    "MovieLens-1M: 64 wide, 2 layers, 200 items, lr 4e-3, 5 warm-up epochs",
                    {
                        "max_sequence_length": 200,
                        "hidden_dim": 64,
                        "num_layers": 2,
                        "batch_size": 128,
                        "num_heads": 2,
                        "dropout": 0.1,
                        "bucket_boundaries": [50, 100],
                        **_BERT4REC_TRAINING,
                        "warmup_epochs": _BERT4REC_WARMUP[0],
                        **_BERT4REC_BY_HISTORY["long"],
                    },
                    ("ml1m-bert4rec-seed-0", "ml1m-bert4rec-seeds-1-2"),
                ),
            },
        ),
        ModelSpec(
            name="hstu",
            class_name="HSTU",
            description="HSTU (2024): Meta's generative recommender, with a time bias",
            preparation="timed",
            training=_HSTU_TRAINING,
            # 4e-3 at batches of 128 on any histories (ml1m-hstu-rate-4e-3-seed-0).
            by_history={"long": {"learning_rate": 4e-3}, "short": {"learning_rate": 4e-3}},
            presets={
                "ml1m": Preset(
                    "MovieLens-1M: HSTU-large's 50 wide, 8 layers, 2 heads, full softmax, lr 4e-3",
                    {
                        "max_sequence_length": 200,
                        "hidden_dim": 50,
                        "num_layers": 8,
                        "num_heads": 2,
                        "dropout": 0.2,
                        "temperature": 0.05,
                        "batch_size": 128,
                        "bucket_boundaries": [50, 100],
                        "loss": "softmax",
                        "learning_rate": 4e-3,
                        "warmup_epochs": 0.0,
                    },
                    ("ml1m-hstu-rate-4e-3-seed-0",),
                ),
            },
        ),
        ModelSpec(
            name="unisrec",
            class_name="UniSRec",
            description="UniSRec (2022): items as text vectors (ids optional); --item-text",
            preparation="causal",
            reads_item_text=True,
            pretrainable=True,
            training=_SASREC_TRAINING,  # its encoder is SASRec's
            presets={
                "scientific": Preset(
                    "Amazon Scientific: text + ids, 384 wide, 2 heads, 50 items, 8 epochs",
                    {
                        "max_sequence_length": 50,
                        "hidden_dim": 384,
                        "num_layers": 2,
                        "num_heads": 2,
                        "dropout": 0.5,
                        "use_id_embeddings": True,
                        "batch_size": 128,
                        "epochs": 8,
                        "patience": 10,
                        **_SASREC_TRAINING,
                    },
                    ("text-unisrec-384", "text-unisrec-384-more", "text-seeds"),
                ),
            },
        ),
        ModelSpec(
            name="recformer",
            class_name="RecformerRecommender",
            description="Recformer (2023): a language model over item text, no ids; --item-text",
            preparation="text",
            reads_item_text=True,
            pretrainable=True,
        ),
    )
}


def get(name):
    """The ``ModelSpec`` called ``name``; ``ValueError`` naming the known ones otherwise."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(MODELS)}")
    return MODELS[name]


def preset_name(model, preset):
    """The full name of ``model``'s preset ``preset``, as ``from_preset`` takes it (``sasrec_ml1m``)."""
    return f"{model}_{preset}".replace("-", "_")


def find_preset(name, model=None):
    """``(spec, preset_key)`` of a preset by full name (``sasrec_ml1m``) or, with ``model``, by its
    short name (``ml1m``); ``ValueError`` listing the known names otherwise."""
    for spec in MODELS.values():
        if model is not None and spec.name != model:
            continue
        for key in spec.presets:
            if name in (key, preset_name(spec.name, key)) and (model is not None or name != key):
                return spec, key
    if model is not None:
        known = ", ".join(sorted(get(model).presets)) or "none"
        raise ValueError(f"{model} has no preset {name!r}; its presets: {known}")
    known = sorted(preset_name(s.name, k) for s in MODELS.values() for k in s.presets)
    raise ValueError(f"no preset {name!r}; the presets: {', '.join(known)}")
