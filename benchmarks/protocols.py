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
  comparable with a run here. The figures, with their sources, are in ``anchors.json``.
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
import json
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
        anchor: the published figures of ``benchmarks/anchors.json`` on this protocol, in one
            line (``anchor_line``), for a script's printed table.
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


ANCHORS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "anchors.json")
with open(ANCHORS_FILE) as _f:
    # Each published figure once, with its protocol, what it assumes and its source.
    ANCHORS = json.load(_f)

# An NDCG@10 or HR@10 as the pages print it: four places.
FIGURE = re.compile(r"(?<![\d.])0\.\d{4}(?!\d)")


def published_figures():
    """Every anchor's NDCG@10 and HR@10 as the pages print them, four places each."""
    return {f"{a[k]:.4f}" for a in ANCHORS for k in ("ndcg@10", "hr@10") if a[k] is not None}


def anchor_line(name):
    """The anchors of protocol ``name`` in one line (for a script's printed table)."""
    found = [a for a in ANCHORS if a["protocol"] == name]
    figures = "; ".join(f"{a['model']} {a['ndcg@10']:.4f} / {a['hr@10']:.4f} ({a['assumes']})" for a in found)
    return f"{figures or 'none'} (benchmarks/anchors.json)"


PROTOCOLS = {
    "sasrec-plus": Protocol(
        name="sasrec-plus",
        data_file="ml-1m/ml-1m.txt",
        validation="last",
        exclude_seen="history",
        training={},
        anchor=anchor_line("sasrec-plus"),
    ),
    "rectools": Protocol(
        name="rectools",
        data_file="ml-1m/ml-1m_full_sequences.txt.gz",
        validation="last",
        exclude_seen="history",
        training={},
        anchor=anchor_line("rectools"),
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
        anchor=anchor_line("hstu-paper"),
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
