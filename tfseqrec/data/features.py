"""Item attributes for the id models: read a features file, encode it against a vocabulary.

A features file has one row per item: an item id column and any number of attribute
columns, as CSV (``.csv``), TSV (``.tsv``) or JSON lines (``.jsonl``, ``.json``). Each
attribute is one of (``KINDS``; inferred unless given):

- ``numeric``: every value a number (a year, a price); standardised over the items;
- ``multi``: several values in one field, split on ``separator`` (``Action|Comedy``),
  or a JSON list;
- ``categorical``: one value an item (a brand).

An empty field is a missing value. ``encode`` turns the attributes of a vocabulary's
items into the tables ``tfseqrec.layers.ItemFeatureEmbedding`` reads, and counts what
had no value: an item with no row, an attribute left empty, a value the model never saw
(an item added at export); each gets a reserved slot of its own.

Example:

>>> import os, tempfile
>>> from tfseqrec.data.vocab import ItemVocabulary
>>> path = os.path.join(tempfile.mkdtemp(), "movies.csv")
>>> _ = open(path, "w").write("item_id,genres,year\\n1,Action|Comedy,1995\\n2,Drama,\\n3,Comedy,1999\\n")
>>> features = read_item_features(path)
>>> features.kinds
{'genres': 'multi', 'year': 'numeric'}
>>> encoded = encode(features, ItemVocabulary(["1", "2", "3", "4"]))
>>> encoded.spec["genres"], encoded.report["items_without_row"], encoded.report["missing"]["year"]
({'kind': 'multi', 'values': 6, 'width': 2}, 1, 2)
"""

import csv
import dataclasses
import json
import math
import os
import re

import numpy as np

from tfseqrec.data import vocab
from tfseqrec.data.readers import DataError

KINDS = ("categorical", "multi", "numeric")
# Value slots every categorical or multi-valued attribute reserves: 0 pads a multi-valued
# field (no vector), 1 is "missing" (no row, or an empty field), 2 "unknown" (a value the
# model was not trained with); the values themselves start at FIRST_VALUE.
PAD_SLOT, MISSING_SLOT, UNKNOWN_SLOT = 0, 1, 2
FIRST_VALUE = 3
ITEM_COLUMNS = ("item_id", "item", "itemid", "movie_id", "asin", "id")


@dataclasses.dataclass
class ItemFeatures:
    """The attributes of a features file.

    Attributes:
        path: the file.
        rows: ``{raw_item_id: {attribute: value}}``; a value is a string, a list of
            strings (multi), a float (numeric) or ``None`` (missing).
        kinds: ``{attribute: kind}`` in the file's column order.
    """

    path: str
    rows: dict
    kinds: dict


@dataclasses.dataclass
class EncodedFeatures:
    """A vocabulary's items encoded: what the model is built with and holds.

    Attributes:
        spec: ``{attribute: {"kind", "values", "width"}}``: the model's ``item_features``.
        tables: ``{attribute: array [vocabulary.size, width]}`` (value slots; numeric:
            ``[vocabulary.size, 2]``, standardised value and missing flag), for
            ``ItemFeatureEmbedding.set_tables``.
        values: ``{attribute: [value, ...]}`` by slot from ``FIRST_VALUE`` (categorical,
            multi) or ``{"mean", "std"}`` (numeric): how to encode more items the same way.
        report: counts of items without a row, missing values and unknown values by attribute.
    """

    spec: dict
    tables: dict
    values: dict
    report: dict


def read_item_features(path, item_col=None, separator="|", kinds=None, encoding="utf-8"):
    """Reads a features file (see the module docstring) as ``ItemFeatures``.

    Args:
        path: ``.csv``, ``.tsv``, or ``.jsonl`` / ``.json`` (one JSON object a line).
        item_col: the item id column (default: the first of ``ITEM_COLUMNS`` present,
            else the first column).
        separator: what splits a multi-valued field.
        kinds: ``{attribute: kind}`` for attributes whose kind is not to be inferred.
        encoding: the file's text encoding.

    Raises:
        DataError: naming the file and line: a row without an item id, two rows of
            an item that disagree, text in a numeric column, a column with one value
            only, a file without attribute columns.
    """
    path = os.fspath(path)
    records = list(_records(path, encoding))
    if not records:
        raise DataError(path, 0, "no rows")
    columns = list(dict.fromkeys(key for _, row in records for key in row))
    item_col = item_col or next((c for c in ITEM_COLUMNS if c in columns), columns[0])
    if item_col not in columns:
        raise DataError(path, 1, f"no item id column {item_col!r}; the columns are {columns}")
    attributes = [c for c in columns if c != item_col]
    if not attributes:
        raise DataError(path, 1, f"no attribute columns beside the item id column {item_col!r}")
    unknown = sorted(set(kinds or {}) - set(attributes))
    if unknown:
        raise DataError(
            path, 1, f"kinds given for {unknown}, which are not columns of the file ({attributes})"
        )
    raw = {}
    first_line = {}
    for line, row in records:
        item = _blank_to_none(row.get(item_col))
        if item is None:
            raise DataError(path, line, f"no item id (column {item_col!r})")
        item = str(item)
        values = {a: _blank_to_none(row.get(a)) for a in attributes}
        if item in raw and raw[item] != values:
            raise DataError(
                path, line, f"item {item!r} has another row at line {first_line[item]} that disagrees"
            )
        raw.setdefault(item, values)
        first_line.setdefault(item, line)
    found = {a: (kinds or {}).get(a) or _infer_kind(path, a, raw, first_line, separator) for a in attributes}
    for a, kind in found.items():
        if kind not in KINDS:
            raise ValueError(f"attribute {a!r}: kind must be one of {KINDS}, got {kind!r}")
    rows = {
        item: {a: _parse(path, first_line[item], a, found[a], v, separator) for a, v in values.items()}
        for item, values in raw.items()
    }
    for a, kind in found.items():
        distinct = {
            json.dumps(v) if kind == "numeric" else w
            for r in rows.values()
            if (v := r[a]) is not None
            for w in (v if isinstance(v, list) else [v])
        }
        if len(distinct) < 2:
            shown = f"one value only ({sorted(distinct)[0]!r})" if distinct else "no values"
            raise DataError(path, 0, f"column {a!r} has {shown}: it cannot tell items apart; drop it")
    return ItemFeatures(path, rows, found)


def encode(features, vocabulary, values=None):
    """``EncodedFeatures`` of ``vocabulary``'s items.

    Args:
        features: ``ItemFeatures``.
        vocabulary: the ``ItemVocabulary`` (reserved ids get slot 0: no vector).
        values: ``EncodedFeatures.values`` of a trained model: the value slots and
            numeric scaling to keep (a value outside them is "unknown"); ``None``
            makes them from the vocabulary's items.

    Raises:
        ValueError: when no item of the vocabulary has a row in the file.
    """
    matched = sum(1 for item in vocabulary.items if item in features.rows)
    if not matched:
        example = next(iter(features.rows), None)
        raise DataError(
            features.path,
            0,
            f"none of the {len(features.rows):,} items of the file (e.g. {example!r}) is one of the "
            f"data's {vocabulary.num_items:,} items (e.g. {vocabulary.items[0] if vocabulary.items else None!r}); "
            "are the ids of the same catalogue?",
        )
    size = vocabulary.size
    spec, tables, kept, missing, unknown = {}, {}, {}, {}, {}
    for name, kind in features.kinds.items():
        column = [features.rows.get(item, {}).get(name) for item in vocabulary.items]
        missing[name] = sum(v is None for v in column)
        if kind == "numeric":
            scale = (values or {}).get(name) or _scaling(column)
            table = np.zeros((size, 2), np.float32)
            for i, v in enumerate(column):
                row = vocab.NUM_RESERVED + i
                table[row] = (0.0, 1.0) if v is None else ((v - scale["mean"]) / scale["std"], 0.0)
            spec[name], tables[name], kept[name], unknown[name] = {"kind": kind}, table, scale, 0
            continue
        lists = [None if v is None else (v if isinstance(v, list) else [v]) for v in column]
        names = list((values or {}).get(name) or sorted({w for v in lists if v for w in v}))
        slot = {w: FIRST_VALUE + i for i, w in enumerate(names)}
        width = max([len(v) for v in lists if v] + [1])
        table = np.zeros((size, width), np.int32)
        unknown[name] = 0
        for i, v in enumerate(lists):
            row = vocab.NUM_RESERVED + i
            if not v:
                table[row, 0] = MISSING_SLOT
                continue
            slots = [slot.get(w, UNKNOWN_SLOT) for w in v]
            unknown[name] += sum(s == UNKNOWN_SLOT for s in slots)
            table[row, : len(slots)] = slots
        width_spec = {"kind": kind, "values": FIRST_VALUE + len(names), "width": width}
        spec[name], tables[name], kept[name] = width_spec, table, names
    report = {
        "items": vocabulary.num_items,
        "items_with_row": matched,
        "items_without_row": vocabulary.num_items - matched,
        "rows_without_item": sum(1 for item in features.rows if item not in vocabulary),
        "missing": missing,
        "unknown_values": unknown,
    }
    return EncodedFeatures(spec, tables, kept, report)


def report_lines(encoded, path):
    """The training log's lines about ``encoded`` (read from ``path``): what had no value."""
    r = encoded.report
    attributes = ", ".join(f"{a} ({s['kind']})" for a, s in encoded.spec.items())
    lines = [
        f"item features {path}: {attributes}; "
        f"{r['items_with_row']:,} of {r['items']:,} items have a row"
        + (
            f", {r['items_without_row']:,} have none (their own 'missing' slot)"
            if r["items_without_row"]
            else ""
        )
        + (f"; {r['rows_without_item']:,} rows name no item of the data" if r["rows_without_item"] else "")
    ]
    for name in encoded.spec:
        if r["missing"][name] or r["unknown_values"][name]:
            lines.append(
                f"item features {name}: {r['missing'][name]:,} items without a value, "
                f"{r['unknown_values'][name]:,} values the model was not trained with"
            )
    return lines


def from_item_text(raw_text):
    """``(columns, rows)``: the attributes of an item-text file (``readers.read_item_text``) that an
    id model reads, one row an item: MovieLens's genres and release year (from the title),
    Amazon's categories and brand; multi-valued fields joined by ``|``."""
    rows = {}
    for item, attributes in raw_text.items():
        row = {}
        if "genres" in attributes:
            row["genres"] = "|".join(g.strip() for g in attributes["genres"].split(",") if g.strip())
            year = re.search(r"\((\d{4})\)\s*$", attributes.get("title", ""))
            row["year"] = year.group(1) if year else ""
        if "categories" in attributes:
            row["categories"] = "|".join(c.strip() for c in attributes["categories"].split(",") if c.strip())
        if "brand" in attributes:
            row["brand"] = attributes["brand"].strip()
        rows[item] = row
    columns = list(dict.fromkeys(c for row in rows.values() for c in row))
    if not columns:
        raise ValueError("the item text has none of genres, title years, categories or brand")
    return columns, rows


def write_csv(path, columns, rows):
    """Writes ``rows`` (``{item: {column: value}}``) as a features CSV with an ``item_id`` column."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["item_id", *columns])
        for item, row in rows.items():
            writer.writerow([item, *(row.get(c, "") for c in columns)])


def _records(path, encoding):
    """Yields ``(line, {column: value})`` of each row of ``path``."""
    base = os.path.basename(path).lower()
    if base.endswith((".jsonl", ".json")):
        with open(path, encoding=encoding) as f:
            for line, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    row = json.loads(text)
                except json.JSONDecodeError as e:
                    raise DataError(path, line, f"not a JSON object: {e.msg}") from None
                if not isinstance(row, dict):
                    raise DataError(path, line, f"expected a JSON object, got {text.strip()[:60]!r}")
                yield line, row
        return
    if not base.endswith((".csv", ".tsv")):
        raise DataError(path, 0, "item features are read from .csv, .tsv or .jsonl files")
    with open(path, encoding=encoding, newline="") as f:
        reader = csv.reader(f, delimiter="\t" if base.endswith(".tsv") else ",")
        header = next(reader, None)
        if not header:
            raise DataError(path, 1, "no header row (an item id column and attribute columns)")
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise DataError(path, reader.line_num, f"{len(row)} fields, the header has {len(header)}")
            yield reader.line_num, dict(zip(header, row))


def _blank_to_none(value):
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, list) and not value:
        return None
    return value


def _is_number(value):
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return math.isfinite(value)
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _infer_kind(path, name, raw, first_line, separator):
    """``numeric`` when every value is a number, ``multi`` when a value is a list or holds the
    separator, else ``categorical``; a column of numbers with some text is an error."""
    present = [(item, v) for item, values in raw.items() if (v := values[name]) is not None]
    numbers = [item for item, v in present if _is_number(v)]
    if present and len(numbers) == len(present):
        return "numeric"
    if len(numbers) * 2 > len(present):
        item, value = next((item, v) for item, v in present if not _is_number(v))
        raise DataError(
            path,
            first_line[item],
            f"column {name!r} holds numbers but item {item!r} has {value!r}; fix the value, or give "
            f"the column's kind",
        )
    if any(isinstance(v, list) or separator in str(v) for _, v in present):
        return "multi"
    return "categorical"


def _parse(path, line, name, kind, value, separator):
    if value is None:
        return None
    if kind == "numeric":
        if not _is_number(value):
            raise DataError(path, line, f"column {name!r} is numeric; got {value!r}")
        return float(value)
    if kind == "multi":
        parts = value if isinstance(value, list) else str(value).split(separator)
        parts = list(dict.fromkeys(str(p).strip() for p in parts if str(p).strip()))
        return parts or None
    if isinstance(value, list):
        raise DataError(path, line, f"column {name!r} is categorical; got a list {value!r:.60}")
    return str(value).strip()


def _scaling(column):
    present = np.array([v for v in column if v is not None], np.float64)
    if not len(present):
        return {"mean": 0.0, "std": 1.0}
    std = float(present.std())
    return {"mean": float(present.mean()), "std": std if std > 0 else 1.0}
