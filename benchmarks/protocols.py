"""The evaluation protocols of the ML-1M benchmarks, each named after the figure it is comparable with.

Published ML-1M figures differ in more than the model: the data file, whether the
second-to-last item validates or trains, which already-seen items are filtered at test,
and the training's negatives. A ``Protocol`` fixes those choices, so a row measured on
one is set beside the anchor measured the same way, and no other:

- ``sasrec-plus``: SASRec's 5-core ``ml-1m.txt`` (3,416 items), the second-to-last item
  validates (early stopping), the user's whole history filtered at test. SASRec+
  (Klenitskiy & Vasilev, RecSys 2023) report on it.
- ``rectools``: the raw ratings (``ml-1m_full_sequences.txt.gz``, 3,706 items, no k-core),
  a validation item, the whole history filtered: the HSTU figures of RecTools' own HSTU
  tutorial (``examples/tutorials/transformers_HSTU_tutorial.ipynb``), which sorts the
  ratings stably by time. Its HSTU with relative time attention reads the ratings'
  timestamps, which this file lacks; its HSTU with position attention only is the one
  comparable with a run here.
- ``hstu-paper``: the raw ratings, no validation split (the second-to-last item is a
  training target), only the items of the model's input window filtered, sampled softmax
  with 128 uniform negatives per position and the reference's fixed 101 epochs: the HSTU
  paper's figure (Zhai et al., ICML 2024; ``configs/ml-1m/hstu-sampled-softmax-n128-large-final.gin``
  of its reference code). The paper's HSTU also reads the ratings' timestamps (its relative
  attention bias buckets time gaps); ``ml-1m_full_sequences.txt.gz`` has none, so HSTU runs
  here with its position bias only: the one choice of the paper's this protocol cannot make.

``load_split`` builds a protocol's train / validation / test split with the library's own
readers and ``splits.prepare``, the split ``tfseqrec.training.train`` makes of the same
file with the protocol's options, so a peer library trained on it sees the same cases.

The scripts run as ``python benchmarks/NAME.py``, which puts this folder first on
``sys.path``; they import this module as ``protocols``.
"""

import dataclasses
import os
import re

from tfseqrec.data import readers, splits


@dataclasses.dataclass(frozen=True)
class Protocol:
    """The choices that differ between published ML-1M figures.

    Attributes:
        name: ``"sasrec-plus"``, ``"rectools"`` or ``"hstu-paper"``.
        data_file: the interaction file under the data root.
        validation: ``"last"`` (the second-to-last item validates, early stopping) or
            ``"none"`` (it is a training target; the last epoch is the model).
        exclude_seen: ``"history"`` (the user's whole history filtered at test) or
            ``"window"`` (only the items of the model's input window, its last
            ``max_sequence_length`` items); ``tfseqrec.evaluation.evaluate``'s
            ``exclude_seen`` is ``True`` or ``"window"`` for them.
        training: the ``TrainConfig`` options the protocol fixes, over the model's defaults.
        anchor: the published figure a row on this protocol is comparable with.
    """

    name: str
    data_file: str
    validation: str
    exclude_seen: str
    training: dict
    anchor: str

    def choices(self):
        """The protocol's choices as a dict: every field but ``anchor``.

        The anchor describes a published figure, not how a row is measured: a stored
        record whose choices equal today's is on the protocol however its anchor was worded.
        """
        return without_anchor(dataclasses.asdict(self))

    @property
    def evaluation_exclude_seen(self):
        """The ``exclude_seen`` argument of ``tfseqrec.evaluation.evaluate`` for this protocol."""
        return True if self.exclude_seen == "history" else "window"

    def training_options(self, overrides=None):
        """``TrainConfig`` values: the protocol's fixed options (validation included) over ``overrides``.

        An override of an option the protocol fixes is an error: the row would no longer
        be on the protocol.
        """
        fixed = dict(self.training)
        if self.validation != "last":  # "last" is TrainConfig's default
            fixed["validation"] = self.validation
        clash = sorted(k for k in (overrides or {}) if k in fixed and overrides[k] != fixed[k])
        if clash:
            raise ValueError(
                f"protocol {self.name!r} fixes {', '.join(f'{k}={fixed[k]!r}' for k in clash)}; "
                "choose another protocol to change them"
            )
        return {**(overrides or {}), **fixed}


@dataclasses.dataclass(frozen=True)
class Published:
    """A published ML-1M figure: who reports it, for which model, and its NDCG@10 / HR@10.

    ``PUBLISHED`` holds each once; the protocols' anchors and every table that names a
    published figure read it from there, so no figure is typed twice.
    """

    source: str
    model: str
    ndcg: float
    hr: float

    @property
    def figures(self):
        """NDCG@10 / HR@10 as the tables print them, four places each."""
        return f"{self.ndcg:.4f} / {self.hr:.4f}"

    @property
    def labelled(self):
        """``"N NDCG@10 / H HR@10"``, four places each."""
        return f"{self.ndcg:.4f} NDCG@10 / {self.hr:.4f} HR@10"


SASREC_PLUS = "SASRec+ (Klenitskiy & Vasilev, RecSys 2023)"
RECTOOLS_TUTORIAL = "RecTools' HSTU tutorial (MTS AI)"
HSTU_PAPER = "the HSTU paper (Zhai et al., ICML 2024)"

# Keyed "protocol/model[-variant]": the protocol a figure was measured on, then what it is.
PUBLISHED = {
    "sasrec-plus/sasrec": Published(SASREC_PLUS, "SASRec with 3,000 negatives", 0.1857, 0.3159),
    "sasrec-plus/sasrec-softmax": Published(SASREC_PLUS, "SASRec with the full softmax", 0.1821, 0.3152),
    "sasrec-plus/bert4rec": Published(SASREC_PLUS, "BERT4Rec", 0.1537, 0.2843),
    "rectools/hstu": Published(
        RECTOOLS_TUTORIAL, "HSTU with relative position attention only (no timestamps)", 0.1745, 0.3087
    ),
    "rectools/hstu-time": Published(
        RECTOOLS_TUTORIAL,
        "HSTU with relative time attention too, from the ratings' timestamps",
        0.1895,
        0.3259,
    ),
    "rectools/sasrec": Published(RECTOOLS_TUTORIAL, "SASRec", 0.1622, 0.2878),
    "hstu-paper/hstu": Published(HSTU_PAPER, "HSTU-large", 0.1893, 0.3294),
    "hstu-paper/sasrec": Published(
        HSTU_PAPER + "'s reference code",
        "SASRec with the same loss and epochs (`configs/ml-1m/sasrec-sampled-softmax-n128-final.gin`)",
        0.1603,
        0.2853,
    ),
}


# Figures the benchmark notes quote from elsewhere that no protocol here is an anchor for: each
# typed once, with who reports it. benchmarks/tables.py refuses a hand-written note that quotes
# a four-place figure found neither in its runs nor here nor in ``PUBLISHED``.
QUOTED = {
    "sasrec-paper/sampled": (
        "the SASRec paper (Kang & McAuley, ICDM 2018): NDCG@10 against 100 uniform negatives",
        0.5905,
    ),
    "bert4rec-paper/sampled": (
        "the BERT4Rec paper (Sun et al., CIKM 2019): NDCG@10 against 100 popularity-sampled negatives",
        0.4818,
    ),
    "rectools/hstu-large-quoted": ("an HSTU-large NDCG@10 quoted for RecTools, not in its notebooks", 0.2164),
    "rectools/hstu-large-quoted-hr": ("the HR@10 quoted with it", 0.3642),
    "hstu-paper-file/rectools-hstu-large": (
        "RecTools' HSTU-large NDCG@10 on the HSTU paper's preprocessed ML-1M",
        0.1891,
    ),
    "hstu-paper-file/rectools-hstu-large-hr": ("its HR@10", 0.3350),
}


def quoted(key):
    """A ``QUOTED`` figure, four places, as the notes print it."""
    return f"{QUOTED[key][1]:.4f}"


# An NDCG@10 or HR@10 as the pages and notes print it: four places.
FIGURE = re.compile(r"(?<![\d.])0\.\d{4}(?!\d)")


def published_figures():
    """Every ``PUBLISHED`` NDCG@10 and HR@10 as the pages print them, four places each."""
    return {f"{v:.4f}" for p in PUBLISHED.values() for v in (p.ndcg, p.hr)}


def published(key):
    """The ``Published`` figure ``key`` names; a ``KeyError`` lists the keys."""
    if key not in PUBLISHED:
        raise KeyError(f"no published figure {key!r}; known: {', '.join(PUBLISHED)}")
    return PUBLISHED[key]


PROTOCOLS = {
    "sasrec-plus": Protocol(
        name="sasrec-plus",
        data_file="ml-1m/ml-1m.txt",
        validation="last",
        exclude_seen="history",
        training={},
        anchor=f"{SASREC_PLUS}, same file and protocol: SASRec {published('sasrec-plus/sasrec').labelled} "
        f"with 3,000 negatives ({published('sasrec-plus/sasrec-softmax').figures} full softmax), BERT4Rec "
        f"{published('sasrec-plus/bert4rec').figures}; no HSTU figure",
    ),
    "rectools": Protocol(
        name="rectools",
        data_file="ml-1m/ml-1m_full_sequences.txt.gz",
        validation="last",
        exclude_seen="history",
        training={},
        anchor=f"{RECTOOLS_TUTORIAL} on the raw ratings with a validation item and the whole history "
        "filtered: HSTU with relative position attention only (no timestamps, as here) "
        f"{published('rectools/hstu').labelled}; with relative time attention too, from the ratings' "
        f"timestamps, {published('rectools/hstu-time').figures}; SASRec {published('rectools/sasrec').figures}",
    ),
    "hstu-paper": Protocol(
        name="hstu-paper",
        data_file="ml-1m/ml-1m_full_sequences.txt.gz",
        validation="none",
        exclude_seen="window",
        training={
            "loss": "sampled_softmax",
            "num_negatives": 128,
            "sampler": "uniform",
            "negatives_per_position": True,
            "epochs": 101,
        },
        anchor=f"{HSTU_PAPER}, HSTU-large: {published('hstu-paper/hstu').labelled} (the reference code's 101 "
        "epochs, with a relative time bias from the ratings' timestamps, which the file here lacks); its "
        f"reference code's {published('hstu-paper/sasrec').model}: {published('hstu-paper/sasrec').figures}",
    ),
}


def without_anchor(fields):
    """A protocol's fields (a dict, as a stored record holds them) without ``anchor``: its choices."""
    return {k: v for k, v in (fields or {}).items() if k != "anchor"}


def get(name):
    """The ``Protocol`` called ``name``; a ``ValueError`` lists the names."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; expected one of {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]


def data_path(protocol, data_root):
    """The protocol's interaction file under ``data_root`` (a ``Protocol`` or its name)."""
    protocol = get(protocol) if isinstance(protocol, str) else protocol
    return os.path.join(data_root, protocol.data_file)


def load(protocol, data_root):
    """``(split, vocabulary)`` of ``protocol`` (a ``Protocol`` or its name) on the files under ``data_root``.

    ``splits.prepare``'s leave-one-out with the protocol's ``validation``, as
    ``tfseqrec.training.train`` splits the same file: with ``"none"`` the second-to-last
    item of each user is a training item and ``valid`` holds no case.
    """
    protocol = get(protocol) if isinstance(protocol, str) else protocol
    events = readers.read_interactions(data_path(protocol, data_root), progress=False)
    split, vocabulary, _ = splits.prepare(events, validation=protocol.validation)
    return split, vocabulary


def load_split(protocol, data_root):
    """The train / validation / test ``splits.Split`` of ``protocol`` (see ``load``)."""
    return load(protocol, data_root)[0]
