"""Event context: per-event categorical columns of the log (an event type, a device, a rating).

An event's context describes the event, not the item: a view or a purchase, on a phone or
a laptop. ``read_interactions(..., event_columns=[...])`` reads the columns as text;
``EventVocabulary`` turns each column's values into integer slots, which the id models
embed and add to the input vector of that event (never to the scored items). Slots follow
the item attributes' (``tfseqrec.data.features``): 0 pads, 1 is an empty field, 2 a value
the model was not trained with; the values themselves start at ``FIRST_VALUE``, the most
frequent first.

The model's inputs name a column ``event_<column>`` (``input_name``), int32 beside
``item_ids`` and aligned with it. A model's ``event_features`` config holds each column's
values (``EventVocabulary.values``), so that the model alone maps raw values to slots
(``EventVocabulary.of_model``), in evaluation and in its serving signatures.

Example:

>>> import numpy as np
>>> vocabulary = EventVocabulary.from_values({"type": np.array(["view", "buy", "view", ""], object)})
>>> vocabulary.values, vocabulary.sizes
({'type': ['view', 'buy']}, {'type': 5})
>>> vocabulary.encode({"type": np.array(["buy", "cart", ""], object)})["type"].tolist()
[4, 2, 1]
>>> vocabulary.decode({"type": np.array([4, 2, 1, 0])})["type"].tolist()
['buy', '\\x00', '', '']
"""

import collections
import dataclasses
import re

import numpy as np

from tfseqrec.data.features import FIRST_VALUE, MISSING_SLOT, PAD_SLOT, UNKNOWN_SLOT

__all__ = ["EventVocabulary", "input_name", "check_names", "sizes"]

PREFIX = "event_"
# The raw value ``EventVocabulary.decode`` gives an unknown slot: a text no vocabulary holds
# (values come from text files, which hold no NUL), so a model's lookup reads it as unknown too.
UNKNOWN_VALUE = "\x00"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def input_name(column):
    """The model input of event column ``column``: ``event_<column>``."""
    return PREFIX + column


def sizes(event_features):
    """``{column: slots}`` of a model's ``event_features``: ``{column: [values]}`` (the reserved
    slots plus the values) or ``{column: slots}`` as they are."""
    return {
        name: FIRST_VALUE + len(v) if isinstance(v, (list, tuple)) else int(v)
        for name, v in event_features.items()
    }


def check_names(columns):
    """``columns`` as a list of distinct names usable as input names (letters, digits, ``_``)."""
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    columns = list(columns)
    bad = [c for c in columns if not isinstance(c, str) or not _NAME.fullmatch(c)]
    if bad:
        raise ValueError(
            f"event feature names {bad} are not identifiers (letters, digits and '_', not starting "
            "with a digit): they name the model's inputs event_<name>"
        )
    if len(set(columns)) != len(columns):
        raise ValueError(f"event features {columns} name a column twice")
    return columns


@dataclasses.dataclass
class EventVocabulary:
    """The values of each event column, slot ``FIRST_VALUE + i`` for ``values[column][i]``.

    Attributes:
        values: ``{column: [value, ...]}``, most frequent first (ties by value).
    """

    values: dict

    @classmethod
    def from_values(cls, columns):
        """The vocabulary of raw columns ``{name: array of str}`` (an empty string is no value).

        A column with fewer than two distinct values tells the model nothing and is refused.
        """
        values = {}
        for name, raw in columns.items():
            counts = collections.Counter(v for v in np.asarray(raw, object).tolist() if v != "")
            if len(counts) < 2:
                raise ValueError(
                    f"event feature {name!r} has {len(counts)} distinct value(s) "
                    f"{sorted(counts)[:3]}: a column with one value tells the model nothing"
                )
            values[name] = [v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        return cls(values)

    @property
    def columns(self):
        return list(self.values)

    @property
    def sizes(self):
        """``{column: slots}``: the reserved slots plus the values (the model's ``event_features``)."""
        return {name: FIRST_VALUE + len(values) for name, values in self.values.items()}

    def encode(self, columns):
        """``{name: int32 slots}`` of raw columns ``{name: array of str}``: every column of the
        vocabulary must be there; unseen values get ``UNKNOWN_SLOT``, empty ones ``MISSING_SLOT``."""
        missing = [name for name in self.values if name not in columns]
        if missing:
            raise ValueError(f"event features {missing} are missing (the model reads {self.columns})")
        out = {}
        for name, values in self.values.items():
            raw = np.asarray(columns[name], object)
            unique, inverse = np.unique(raw.astype(str), return_inverse=True)
            index = {v: FIRST_VALUE + i for i, v in enumerate(values)}
            slots = np.asarray(
                [MISSING_SLOT if v == "" else index.get(v, UNKNOWN_SLOT) for v in unique.tolist()], np.int32
            )
            out[name] = slots[inverse.reshape(-1)].reshape(raw.shape) if len(raw) else np.zeros(0, np.int32)
        return out

    def decode(self, slots):
        """Raw values ``{name: array of str}`` of ``{name: int slots}`` (``encode``'s inverse): ``""``
        for padding and missing values, ``UNKNOWN_VALUE`` for an unknown one."""
        out = {}
        for name, column in slots.items():
            table = np.asarray(["", "", UNKNOWN_VALUE, *self.values[name]], object)
            out[name] = table[np.asarray(column, np.int64)]
        return out

    def restricted(self, slots):
        """The vocabulary of the values in ``slots`` (``{name: int array}``, e.g. the training
        events'), and ``{name: remap}``: ``remap[old_slot]`` is the new slot (``UNKNOWN_SLOT``
        for a value left out), to apply as ``remap[slots]``."""
        values, remaps = {}, {}
        for name, column in self.values.items():
            counts = np.bincount(np.asarray(slots[name], np.int64), minlength=FIRST_VALUE + len(column))
            kept = [
                i for i in np.argsort(-counts[FIRST_VALUE:], kind="stable") if counts[FIRST_VALUE + i] > 0
            ]
            remap = np.full(FIRST_VALUE + len(column), UNKNOWN_SLOT, np.int32)
            remap[:FIRST_VALUE] = [PAD_SLOT, MISSING_SLOT, UNKNOWN_SLOT]
            remap[FIRST_VALUE + np.asarray(kept, np.int64)] = FIRST_VALUE + np.arange(len(kept))
            values[name] = [column[i] for i in kept]
            remaps[name] = remap
        return EventVocabulary(values), remaps

    @classmethod
    def of_model(cls, model):
        """The vocabulary of ``model.event_features`` (``None`` for a model without event context);
        a model given slot counts only (``{column: slots}``) has no values to map raw ones with."""
        features = getattr(model, "event_features", None)
        if not features:
            return None
        counted = [name for name, v in features.items() if not isinstance(v, (list, tuple))]
        if counted:
            raise ValueError(
                f"the model's event features {counted} are slot counts, not values: raw values cannot be "
                "mapped to them (build it with event_features={column: [values]})"
            )
        return cls({name: list(values) for name, values in features.items()})
