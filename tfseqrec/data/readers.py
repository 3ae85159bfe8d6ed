"""Readers for interaction logs and item text.

Interaction formats (``format=`` names one; ``None`` detects it from the path):

    ``sasrec``     "user item" per line, lines in time order per user (the SASRec /
                   BERT4Rec ``ml-1m.txt``); plain or ``.gz``. No timestamps: the line
                   number orders events. No header: a first line of column names
                   ("user item") is refused.
    ``movielens``  MovieLens raw ratings: ``u.data`` (tab separated) or
                   ``ratings.dat`` (``::`` separated): user, item, rating, timestamp.
                   No header either.
    ``csv``/``tsv`` a header row with user, item and timestamp columns (names set by
                   ``user_col``, ``item_col``, ``time_col``; ``time_col=None`` orders by
                   line). Timestamps are numbers or ISO-8601 dates.
    ``inter_json`` LC-Rec ``*.inter.json``: ``{"user": [item, item, ...]}`` in time order;
                   an item is a string or an integer.

A directory is accepted where it holds exactly one interaction file (see
``resolve_interactions_path``); with several, it is refused with their names.

Timestamps (``parse_timestamp``, the one parser) are seconds within the int64 range:
anything beyond (``1e26``, ``-1e30``) is refused, so no time can wrap when written as
int64. Item ids hold no tab or line break (the vocabulary stores one per line). A
truncated or corrupt ``.gz`` is one ``DataError`` naming the file.

Item text formats (``read_item_text``): LC-Rec ``*.item.json``, MovieLens ``movies.dat``
(ML-1M) and ``u.item`` (ML-100K), both latin-1.

Every problem is reported as ``DataError`` naming the file, the line and what was
wrong. Nothing is dropped without being counted.
"""

import csv
import dataclasses
import datetime
import glob
import gzip
import itertools
import json
import math
import os
import re
import zlib

import numpy as np
import pyarrow
import pyarrow.compute as pc
import pyarrow.csv

from tfseqrec.data.vocab import factorize

FORMATS = ("sasrec", "movielens", "csv", "tsv", "inter_json")


class DataError(ValueError):
    """Bad input data; the message starts with ``file:line:``."""

    def __init__(self, path, line, problem):
        self.path, self.line, self.problem = path, line, problem
        where = f"{path}:{line}" if line else f"{path}"
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):
        # Rebuilt from its three parts where it crosses processes (a Beam or Dask worker's error).
        return type(self), (self.path, self.line, self.problem)


@dataclasses.dataclass
class Interactions:
    """A flat interaction log: parallel arrays, one entry per event.

    Attributes:
        users: raw user ids (str), shape ``[n]``.
        items: raw item ids (str), shape ``[n]``.
        timestamps: int64 or float64 event times, shape ``[n]``; for formats without
            times, the event's line (or list position) index.
        has_time: whether ``timestamps`` are real times.
        path: the file read.
        format: the format it was read as.
        events: ``{column: raw values (str), shape [n]}``, the event columns read
            (``event_columns``; ``tfseqrec.data.events``), or ``None``.
    """

    users: np.ndarray
    items: np.ndarray
    timestamps: np.ndarray
    has_time: bool = False
    path: str = ""
    format: str = ""
    events: dict = None

    def __len__(self):
        return len(self.users)

    @property
    def num_users(self):
        return len(factorize(self.users)[0])

    @property
    def num_items(self):
        return len(factorize(self.items)[0])

    def select(self, keep):
        """The events where the boolean array ``keep`` is true."""
        events = None if self.events is None else {k: v[keep] for k, v in self.events.items()}
        return dataclasses.replace(
            self,
            users=self.users[keep],
            items=self.items[keep],
            timestamps=self.timestamps[keep],
            events=events,
        )


def resolve_interactions_path(path):
    """Picks the interaction file of a dataset directory.

    Returns ``(file, format)``. A directory qualifies when it holds exactly one
    interaction file: a ``*.inter.json``, ``ratings.dat``, ``u.data``,
    ``<directory name>.txt`` (the SASRec convention), ``*.csv`` or ``*.tsv``. With
    several (the GroupLens ``ratings.dat`` beside the SASRec ``ml-1m.txt``, say), none
    is picked: the ``DataError`` lists them, to name one. A file is returned as is
    with ``format=None``.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        return path, None
    name = os.path.basename(os.path.normpath(path))
    rules = [
        ("*.inter.json", "inter_json"),
        ("ratings.dat", "movielens"),
        ("u.data", "movielens"),
        (f"{glob.escape(name)}.txt", "sasrec"),
        ("*.csv", "csv"),
        ("*.tsv", "tsv"),
    ]
    found = [
        (file, fmt)
        for pattern, fmt in rules
        for file in sorted(glob.glob(os.path.join(glob.escape(path), pattern)))
    ]
    if len(found) == 1:
        return found[0]
    if found:
        names = [os.path.basename(file) for file, _ in found]
        raise DataError(
            path,
            0,
            f"holds {len(found)} interaction files {names}, so none is read: give the path of "
            f"the one to read (e.g. {found[0][0]})",
        )
    listing = sorted(os.listdir(path))
    raise DataError(
        path, 0, f"no interaction file found (looked for {[r[0] for r in rules]}); it holds {listing}"
    )


def detect_format(path):
    """Guesses the format of an interaction file from its name and first line."""
    base = os.path.basename(path).lower()
    if base.endswith(".inter.json") or base.endswith(".json"):
        return "inter_json"
    if base in ("u.data", "ratings.dat") or base.endswith(".dat"):
        return "movielens"
    if base.endswith(".csv") or base.endswith(".csv.gz"):
        return "csv"
    if base.endswith(".tsv") or base.endswith(".tsv.gz"):
        return "tsv"
    first = _first_line(path)
    fields = first.split()
    if len(fields) == 2:
        return "sasrec"
    if "::" in first or (len(fields) == 4 and all(_is_number(f) for f in fields)):
        return "movielens"
    raise DataError(
        path,
        1,
        f"cannot tell the format from the name or first line {first!r}; pass format= one of {FORMATS}",
    )


def read_interactions(
    path,
    format=None,
    user_col="user_id",
    item_col="item_id",
    time_col="timestamp",
    encoding="utf-8",
    progress=None,
    event_columns=None,
):
    """Reads an interaction log.

    Args:
        path: a file, or a dataset directory (see ``resolve_interactions_path``).
        format: one of ``FORMATS``; ``None`` detects it.
        user_col, item_col, time_col: column names for ``csv``/``tsv``; ``time_col=None``
            orders events by line.
        encoding: text encoding; a decoding failure names the line and suggests another.
        progress: show a progress bar; ``None`` shows one on a terminal.
        event_columns: names of per-event columns to read as text (``Interactions.events``):
            header names for ``csv``/``tsv``; ``rating`` for ``movielens``. An empty field
            is no value.

    Returns:
        ``Interactions``, in file order (sort with ``splits.sort_by_time``).

    Raises:
        DataError: empty file, wrong field count, non-numeric ids or timestamps,
            missing columns, bad encoding; the message names file and line.
    """
    path, dir_format = resolve_interactions_path(path)
    if not os.path.exists(path):
        raise DataError(path, 0, "no such file")
    format = format or dir_format or detect_format(path)
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {FORMATS}")
    event_columns = list(event_columns or ())
    events = None
    if event_columns and format in ("inter_json", "sasrec"):
        raise DataError(
            path,
            0,
            f"event columns {event_columns}: the {format} format has no columns besides user and item",
        )
    if format == "inter_json":
        users, items, times = _read_inter_json(path, encoding)
        has_time = False
    elif format == "sasrec":
        users, items, times = _read_sasrec(path, encoding, progress)
        has_time = False
    elif format == "movielens":
        wrong = [c for c in event_columns if c != "rating"]
        if wrong:
            raise DataError(
                path,
                1,
                f"missing event column(s) {wrong}: a movielens file has user, item, rating, timestamp",
            )
        users, items, times, ratings = _read_movielens(path, encoding, progress)
        has_time = True
        events = {"rating": np.asarray(ratings, dtype=object)} if event_columns else None
    else:
        delimiter = "\t" if format == "tsv" else ","
        columns = _read_csv_columnar(path, delimiter, user_col, item_col, time_col, encoding, event_columns)
        users, items, times, has_time, events = columns or _read_csv(
            path, delimiter, user_col, item_col, time_col, encoding, progress, event_columns
        )
        events = events if event_columns else None
    if not len(users):
        raise DataError(path, 0, "no interactions: the file is empty")
    return Interactions(
        users=np.asarray(users, dtype=object),
        items=np.asarray(items, dtype=object),
        timestamps=np.asarray(times),
        has_time=has_time,
        path=path,
        format=format,
        events=events,
    )


def read_item_text(path, encoding=None):
    """Reads item attributes as ``{raw_item_id: {attribute: text}}``, attribute order kept.

    Supports ``*.item.json`` (LC-Rec: title, description, brand, categories),
    MovieLens ``movies.dat`` (title, genres; latin-1) and ``u.item`` (title, genres;
    latin-1, genre names from the ``u.genre`` beside it, else ML-100K's fixed list).
    """
    path = os.fspath(path)
    base = os.path.basename(path)
    if base.endswith(".json"):
        data = _load_json(path, encoding or "utf-8")
        out = {}
        for key, value in data.items():
            if not isinstance(value, dict):
                raise DataError(path, 0, f"item {key!r}: expected an object of attributes, got {value!r:.60}")
            out[str(key)] = {str(k): _text(v) for k, v in value.items()}
        return out
    if base == "movies.dat":
        out = {}
        for line_no, line in _lines(path, encoding or "latin-1"):
            parts = line.split("::")
            if len(parts) != 3:
                raise DataError(path, line_no, f"expected MovieID::Title::Genres, got {line!r}")
            out[parts[0]] = {"title": parts[1], "genres": parts[2].replace("|", ", ")}
        return out
    if base == "u.item":
        genre_names = _ml100k_genres(os.path.join(os.path.dirname(path), "u.genre"))
        out = {}
        for line_no, line in _lines(path, encoding or "latin-1"):
            parts = line.split("|")
            if len(parts) != 5 + len(genre_names):
                raise DataError(
                    path, line_no, f"expected {5 + len(genre_names)} '|'-separated fields, got {len(parts)}"
                )
            flags = parts[5:]
            genres = [g for g, flag in zip(genre_names, flags) if flag == "1"]
            out[parts[0]] = {"title": parts[1], "genres": ", ".join(genres)}
        return out
    raise DataError(path, 0, "unknown item-text file; expected *.item.json, movies.dat or u.item")


def read_id_map(path):
    """Reads a two-column ``"from to"`` id map (e.g. ``sas_to_original_items.txt``)."""
    path = os.fspath(path)
    out = {}
    for line_no, line in _lines(path, "utf-8"):
        parts = line.split()
        if len(parts) != 2:
            raise DataError(path, line_no, f"expected two ids, got {line!r}")
        if parts[0] in out:
            raise DataError(path, line_no, f"id {parts[0]} is mapped twice")
        out[parts[0]] = parts[1]
    return out


# --- internals ---------------------------------------------------------------------


def _open_binary(path):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _lines(path, encoding, progress=False):
    """Yields ``(line_no, line)`` without the newline; blank lines are skipped.

    Decodes line by line so an encoding error names its line.
    """
    path = os.fspath(path)
    size = os.path.getsize(path)
    bar = _progress_bar(size, path, progress)
    line_no = 0
    try:
        with _open_binary(path) as f:
            for chunk in f:
                if bar is not None:
                    bar.update(len(chunk))
                # \n, \r\n and a bare \r (old Mac files) all end a line, as in Python's
                # universal newlines.
                for raw in chunk.splitlines():
                    line_no += 1
                    try:
                        line = raw.decode(encoding)
                    except UnicodeDecodeError as e:
                        raise DataError(
                            path,
                            line_no,
                            f"not valid {encoding} ({e.reason} at byte {e.start}); pass encoding='latin-1' "
                            "or the file's real encoding",
                        ) from None
                    if line_no == 1:
                        line = line.lstrip("\ufeff")  # a UTF-8 byte-order mark (Excel writes one)
                    if line.strip():
                        yield line_no, line
    # A truncated or corrupt .gz is one line naming the file, not a traceback.
    except EOFError:
        raise DataError(
            path,
            0,
            f"truncated gzip file: the compressed data ends early (after line {line_no}); "
            "copy or download it again",
        ) from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise DataError(path, 0, f"corrupt gzip file ({e}; after line {line_no})") from None
    if bar is not None:
        bar.close()


def _progress_bar(size, path, progress):
    if progress is False or (progress is None and size < 32 * 2**20):
        return None
    try:
        import tqdm  # optional: without it, no bar
    except ImportError:
        return None
    return tqdm.tqdm(
        total=size,
        unit="B",
        unit_scale=True,
        desc=os.path.basename(path),
        disable=None if progress is None else False,
    )


def _first_line(path):
    for _, line in _lines(path, "utf-8"):
        return line
    raise DataError(path, 0, "no interactions: the file is empty")


# Column names a header line of a headerless format is made of ("user item", "userId
# movieId rating timestamp", ...): a first line of only these is refused as a header.
_COLUMN_NAME = re.compile(
    r"(user|item|session|customer|visitor|movie|product|track|song|artist|book|business|article"
    r"|query|target|rating|score|time|timestamp|date|datetime)s?([ _.-]?ids?)?|uid|iid|sid",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z_]+")


def _header_error(path, line, fmt):
    return DataError(
        path,
        1,
        f"the first line {line!r} looks like a header (column names), but the {fmt} format has "
        "none; delete that line, or read the file as csv/tsv (format=, --format), which have one",
    )


def _read_sasrec(path, encoding, progress):
    users, items = [], []
    first = None
    for line_no, line in _lines(path, encoding, progress):
        parts = line.split()
        if len(parts) != 2:
            raise DataError(path, line_no, f"expected 'user item', got {len(parts)} fields: {line!r}")
        if first is None:
            first = line
            if all(_COLUMN_NAME.fullmatch(p) for p in parts):
                raise _header_error(path, line, "sasrec")
        users.append(parts[0])
        items.append(parts[1])
    if _named_column(users) or _named_column(items):
        raise _header_error(path, first, "sasrec")
    return users, items, np.arange(len(users), dtype=np.int64)


def _named_column(values):
    """Whether ``values[0]`` reads as a column name over integer ids.

    A word (letters only) over a column whose every other value is an integer id
    (``user`` over ``1, 1, 2, ...``): a real first event's id looks like the others.
    """
    if len(values) < 2 or not _WORD.fullmatch(values[0]):
        return False
    return all(v.isdigit() for v in itertools.islice(values, 1, None))


_INTEGER = re.compile(r"[+-]?[0-9]+")


def _read_movielens(path, encoding, progress):
    users, items, times, ratings = [], [], [], []
    sep = None
    for line_no, line in _lines(path, encoding, progress):
        if sep is None:
            sep = "::" if "::" in line else "\t"
        parts = line.split(sep)
        if len(parts) != 4:
            raise DataError(
                path,
                line_no,
                f"expected user{sep}item{sep}rating{sep}timestamp, got {len(parts)} fields: {line!r}",
            )
        if not users and not any(_is_number(p) for p in parts):
            raise _header_error(path, line, "movielens")
        if not _INTEGER.fullmatch(parts[3].strip()):
            raise DataError(path, line_no, f"timestamp {parts[3]!r} is not an integer")
        if not -(2**63) <= int(parts[3]) < 2**63:
            raise DataError(path, line_no, f"timestamp {parts[3]!r} is out of the int64 range")
        users.append(parts[0].strip())
        items.append(parts[1].strip())
        ratings.append(parts[2].strip())
        times.append(int(parts[3]))
    return users, items, np.asarray(times, dtype=np.int64), ratings


def _csv_rows(path, delimiter, encoding, progress):
    """``(line number, fields)`` of each record, numbered by the line it starts on.

    A malformed record is a ``DataError`` at the line it starts on (where a quote
    left open begins), saying where the csv module gave up.
    """
    where = [0, 0]  # the line the current record starts on, the line read up to

    def text():
        for line_no, line in _lines(path, encoding, progress):
            where[0] = where[0] or line_no
            where[1] = line_no
            yield line + "\n"

    # One csv.reader over the whole file, so a quoted field may hold a newline.
    reader = csv.reader(text(), delimiter=delimiter, strict=True)
    while True:
        where[0] = 0
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            start, end = where[0] or where[1], where[1]
            span = f"; the record runs on to line {end}: a quote left open?" if end > start else ""
            raise DataError(path, start, f"malformed CSV ({e}){span}") from None
        yield where[0], row


def _read_csv(path, delimiter, user_col, item_col, time_col, encoding, progress, event_columns=()):
    records = _csv_rows(path, delimiter, encoding, progress)
    try:
        header_no, header = next(records)
    except StopIteration:
        raise DataError(path, 0, "no interactions: the file is empty") from None
    header = [h.strip() for h in header]
    wanted = [c for c in (user_col, item_col, time_col) if c is not None]
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DataError(
            path,
            header_no,
            f"missing column(s) {missing}; the header has {header} "
            "(set user_col/item_col/time_col, or --user-col/--item-col/--time-col)",
        )
    missing = [c for c in event_columns if c not in header]
    if missing:
        raise DataError(path, header_no, f"missing event column(s) {missing}; the header has {header}")
    ui, ii = header.index(user_col), header.index(item_col)
    ti = header.index(time_col) if time_col is not None else None
    event_index = [header.index(c) for c in event_columns]
    users, items, times = [], [], []
    events = [[] for _ in event_columns]
    parse_time = None
    for line_no, row in records:
        if len(row) != len(header):
            raise DataError(path, line_no, f"expected {len(header)} fields as in the header, got {len(row)}")
        users.append(row[ui].strip())
        items.append(row[ii].strip())
        if "\n" in items[-1] or "\r" in items[-1] or "\t" in items[-1]:
            raise DataError(path, line_no, _bad_item(item_col, items[-1]))
        if ti is not None:
            value = row[ti].strip()
            if parse_time is None:
                parse_time = _seconds if _is_number(value) else _iso_seconds
            try:
                times.append(parse_time(value))
            except ValueError as e:
                raise DataError(path, line_no, f"column {time_col!r}: {e}") from None
        if not users[-1] or not items[-1]:
            raise DataError(path, line_no, f"empty {user_col if not users[-1] else item_col!r}")
        for column, index in zip(events, event_index):
            column.append(row[index].strip())
    events = {c: np.asarray(v, dtype=object) for c, v in zip(event_columns, events)}
    if ti is None:
        return users, items, np.arange(len(users), dtype=np.int64), False, events
    return users, items, _integral_times(times), True, events


def _bad_item(column, item):
    """The problem with an item id holding a tab or line break (the vocabulary file stores one per line)."""
    what = "tab" if "\t" in item else "line break (a quoted field spanning lines)"
    return (
        f"{column!r}: item id {item!r:.60} holds a {what}; item ids are stored one per line, "
        "tab-separated, in the vocabulary"
    )


# A field the fast path leaves to the line-by-line reader: a quote, a carriage return or
# NUL anywhere, or, at either end, a character that ``str.strip`` removes (RE2 syntax).
_SPACE = r"[\p{Z}\t-\r\x{1c}-\x{1f}\x{85}]"
_NOT_PLAIN = rf'["\r\x{{0}}]|^{_SPACE}|{_SPACE}$'


def _read_csv_columnar(path, delimiter, user_col, item_col, time_col, encoding, event_columns=()):
    """The fast path of ``_read_csv``: Arrow's multi-threaded columnar CSV reader.

    It takes only files it reads exactly as the line-by-line reader does: UTF-8,
    no quote characters anywhere, no surrounding white space or carriage returns in
    any field, non-empty ids, and times that Arrow's number cast (a subset of the
    forms Python's ``float`` takes) or ``parse_timestamp`` reads. Anything else, and
    any file Arrow refuses, returns ``None``, and the line-by-line reader reads it or
    raises the ``DataError`` that names the line. So the fast path changes speed, never
    a result or an error message (tested on the same files both ways).

    Returns:
        ``(users, items, times, has_time, events)`` as ``_read_csv``, or ``None``.
    """
    if encoding.lower().replace("-", "").replace("_", "") not in ("utf8", "utf8sig"):
        return None
    header = next(_csv_rows(path, delimiter, encoding, False), (0, []))[1]
    names = [h.strip() for h in header]
    wanted = [c for c in (user_col, item_col, time_col) if c is not None]
    wanted += [c for c in event_columns if c not in wanted]
    if len(set(names)) != len(names) or any(c not in names for c in wanted):
        return None
    try:
        table = pyarrow.csv.read_csv(
            path,
            parse_options=pyarrow.csv.ParseOptions(delimiter=delimiter, quote_char=False),
            convert_options=pyarrow.csv.ConvertOptions(
                column_types={h: pyarrow.string() for h in header}, strings_can_be_null=False
            ),
        )
    except (pyarrow.ArrowInvalid, OSError):
        return None
    if table.column_names != header or table.num_rows == 0:
        return None
    used = {c: table.column(header[names.index(c)]).combine_chunks().dictionary_encode() for c in wanted}
    unused = [table.column(h) for h, n in zip(header, names) if n not in wanted]
    # Checks run on each used column's distinct values only (a log repeats its ids).
    if any(pc.any(pc.match_substring_regex(c.dictionary, _NOT_PLAIN)).as_py() for c in used.values()):
        return None
    if any(pc.any(pc.match_substring_regex(c, '["\\r\\x{0}]')).as_py() for c in unused):
        return None
    if any(pc.any(pc.equal(pc.utf8_length(used[c].dictionary), 0)).as_py() for c in (user_col, item_col)):
        return None
    if pc.any(pc.match_substring(used[item_col].dictionary, "\t")).as_py():
        return None
    # Each distinct id becomes one Python string, shared by all its events.
    users, items, *columns = (
        used[c].dictionary.to_numpy(zero_copy_only=False)[used[c].indices.to_numpy()]
        for c in (user_col, item_col, *event_columns)
    )
    events = dict(zip(event_columns, columns))
    if time_col is None:
        return users, items, np.arange(len(users), dtype=np.int64), False, events
    seconds = _columnar_seconds(used[time_col])
    return None if seconds is None else (users, items, seconds, True, events)


def _columnar_seconds(text):
    """Times of a dictionary-encoded column as ``_read_csv`` reads them, or ``None`` to leave it to it."""
    if _is_number(text.dictionary[text.indices[0].as_py()].as_py()):
        try:
            seconds = pc.cast(text.dictionary, pyarrow.float64()).to_numpy(zero_copy_only=False)
        except pyarrow.ArrowInvalid:
            return None
        # NaN, inf and times near or beyond int64 (checked exactly there) are left to _read_csv.
        if not np.all(np.abs(seconds) < 2.0**62):
            return None
    else:
        try:
            seconds = np.asarray([_iso_seconds(u) for u in text.dictionary.to_pylist()], np.float64)
        except ValueError:
            return None
    return _integral_times(seconds[text.indices.to_numpy()])


def _integral_times(times):
    """float64 seconds as int64 when every one is a whole number in range, else as they are."""
    times = np.asarray(times, dtype=np.float64)
    if np.all(times == np.round(times)) and np.all(np.abs(times) < 2**63):
        return times.astype(np.int64)
    return times


def parse_timestamp(text):
    """Seconds since the epoch of a timestamp field: the one parser of the project.

    A number (integer or decimal seconds) as it is; otherwise an ISO 8601 date and
    time, where a time without a UTC offset is UTC (never the machine's local time
    zone, so the split does not change with ``TZ``). The readers and the TFX
    SequenceBuilder both call this.

    ISO 8601 is parsed here, not by ``datetime.fromisoformat`` (Python 3.10's takes
    only what ``isoformat`` writes, 3.11's more), so every Python reads the same
    times: a calendar (``2020-01-31``), week (``2020-W05-5``) or ordinal
    (``2020-031``) date, extended or basic; then optionally ``T`` (or a space) and
    ``hh[:mm[:ss[.f]]]`` or ``hhmm[ss[.f]]``, any number of fraction digits after
    ``.`` or ``,``; then optionally ``Z``, ``+hh``, ``+hh:mm`` or ``+hhmm``. A bare
    number is always seconds (``20200131`` is not a date).

    >>> parse_timestamp("2020-01-01T00:00:02.5Z"), parse_timestamp("2020-01-01T01:00:00+0100")
    (1577836802.5, 1577836800.0)

    Raises:
        ValueError: not a finite number and not an ISO 8601 date (``nan`` and
            ``inf`` are refused: an event must have a place in time), or seconds
            beyond the int64 range (``1e26``), which no int64 record could hold.
    """
    text = text.strip()
    if _is_number(text):
        value = float(text)
        if not math.isfinite(value):
            overflow = text.lower().lstrip("+-") not in ("inf", "infinity", "nan")
            raise ValueError(
                f"timestamp {text!r:.40} is not a finite number"
                + (" (it overflows a float); times are seconds within the int64 range" if overflow else "")
            )
    else:
        value = _iso8601_seconds(text)
    exact = abs(value) < 2.0**62 or not _INTEGER.fullmatch(text) or -(2**63) <= int(text) < 2**63
    if not (exact and -(2.0**63) <= value < 2.0**63):
        raise ValueError(
            f"timestamp {text!r:.40} is out of the int64 range of seconds (|t| < 2**63, "
            "about 9.2e18, as a float64): times are stored as int64 seconds"
        )
    return value


_ISO_DATE = (
    r"(?P<year>[0-9]{4})(?:"
    r"-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})|(?P<bmonth>[0-9]{2})(?P<bday>[0-9]{2})"
    r"|-[Ww](?P<week>[0-9]{2})-(?P<weekday>[0-9])|[Ww](?P<bweek>[0-9]{2})(?P<bweekday>[0-9])"
    r"|-?(?P<yday>[0-9]{3}))"
)
_ISO_TIME = (
    r"(?P<hour>[0-9]{2})(?:(?P<colon>:?)(?P<minute>[0-9]{2})"
    r"(?:(?P=colon)(?P<second>[0-9]{2})(?:[.,](?P<fraction>[0-9]+))?)?)?"
)
_ISO_OFFSET = r"(?P<utc>[Zz])|(?P<sign>[+-])(?P<off_hour>[0-9]{2})(?::?(?P<off_minute>[0-9]{2}))?"
_ISO8601 = re.compile(rf"{_ISO_DATE}(?:[Tt ]{_ISO_TIME}(?:{_ISO_OFFSET})?)?")
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()


def _iso8601_seconds(text):
    """Seconds since the epoch of an ISO 8601 date and time (see ``parse_timestamp``)."""
    match = _ISO8601.fullmatch(text)
    if not match:
        raise ValueError(f"cannot parse timestamp {text!r:.60} (expected a number or an ISO 8601 date)")
    g = match.groupdict()

    def number(*names):  # the extended or the basic form's field, whichever matched
        value = next((g[n] for n in names if g[n] is not None), None)
        return 0 if value is None else int(value)

    year = number("year")
    try:
        if g["week"] is not None or g["bweek"] is not None:
            date = datetime.date.fromisocalendar(year, number("week", "bweek"), number("weekday", "bweekday"))
        elif g["yday"] is not None:
            date = datetime.date(year, 1, 1) + datetime.timedelta(days=number("yday") - 1)
            if date.year != year:
                raise ValueError(f"day {g['yday']} of year {year} does not exist")
        else:
            date = datetime.date(year, number("month", "bmonth"), number("day", "bday"))
    except (ValueError, OverflowError) as e:
        raise ValueError(f"cannot parse timestamp {text!r:.60} ({e})") from None
    hour, minute, second = number("hour"), number("minute"), number("second")
    off_hour, off_minute = number("off_hour"), number("off_minute")
    if hour > 23 or minute > 59 or second > 59 or off_hour > 23 or off_minute > 59:
        raise ValueError(f"cannot parse timestamp {text!r:.60} (hour, minute or second out of range)")
    offset = (off_hour * 3600 + off_minute * 60) * (-1 if g["sign"] == "-" else 1)
    whole = (date.toordinal() - _EPOCH_ORDINAL) * 86400 + hour * 3600 + minute * 60 + second - offset
    return float(whole) + (float("0." + g["fraction"]) if g["fraction"] else 0.0)


def _iso_seconds(value):
    if _is_number(value):
        raise ValueError(
            f"cannot parse timestamp {value!r} (expected an ISO 8601 date, as in the column's first row)"
        )
    return parse_timestamp(value)


def _seconds(value):
    if not _is_number(value):
        raise ValueError(
            f"cannot parse timestamp {value!r} (expected a number, as in the column's first row)"
        )
    return parse_timestamp(value)


def _read_inter_json(path, encoding):
    data = _load_json(path, encoding)
    if not isinstance(data, dict):
        raise DataError(path, 0, f"expected an object mapping user -> item list, got {type(data).__name__}")
    users, items, times = [], [], []
    for user, seq in data.items():
        if not isinstance(seq, list):
            raise DataError(path, 0, f"user {user!r}: expected a list of items, got {seq!r:.60}")
        for pos, item in enumerate(seq):
            # An id is a string or an integer: a float (1e30, 2.0) or a boolean has no one
            # spelling as a raw id.
            if not isinstance(item, (str, int)) or isinstance(item, bool) or item == "":
                raise DataError(
                    path,
                    0,
                    f"user {user!r}, position {pos}: bad item {item!r:.60} (item ids are strings or integers)",
                )
            item = str(item)
            if "\n" in item or "\r" in item or "\t" in item:
                raise DataError(path, 0, f"user {user!r}, position {pos}: " + _bad_item("item", item))
            users.append(str(user))
            items.append(item)
            times.append(pos)
    return users, items, np.asarray(times, dtype=np.int64)


def _load_json(path, encoding):
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    if not raw.strip():
        raise DataError(path, 0, "the file is empty")
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(path, line, f"not valid {encoding} ({e.reason})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(path, e.lineno, f"invalid JSON: {e.msg} (column {e.colno})") from None


def _ml100k_genres(path):
    if os.path.exists(path):
        names = []
        for line_no, line in _lines(path, "latin-1"):
            name, _, index = line.partition("|")
            if not index.isdigit() or int(index) != len(names):
                raise DataError(path, line_no, f"expected 'name|index' in order, got {line!r}")
            names.append(name)
        return names
    return [
        "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
        "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery",
        "Romance", "Sci-Fi", "Thriller", "War", "Western",
    ]  # fmt: skip


def _text(value):
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)


def _is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False
