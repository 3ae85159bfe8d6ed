"""Recommendations for every user, streamed to a file: the overnight batch job.

``recommend_file`` reads histories (``read_histories``: an interaction log, or JSON lines
of one history each), scores them a batch at a time with the model's own ``recommend``
(the history's items excluded, as everywhere; ``exclude``: items never recommended) and
appends each batch to the output before reading on, so memory does not grow with the
number of users. Three output forms (``OUTPUTS``):

- ``.jsonl``: a line per user, ``{"user_id", "item_ids", "scores"}``, best first;
- ``.csv``: a row per recommendation, ``user_id,rank,item_id,score`` (rank from 1);
- ``.parquet``: a row per user, ``user_id``, ``item_ids`` and ``scores`` (lists), written a
  batch at a time as part files beside it (``OUTPUT.parts/``) and joined at the end.

Rerun on an output a killed run left, it resumes. A ``.jsonl`` or ``.csv`` file keeps the
users written before the batch of its last user (whose lines may have been cut) and scoring
starts again at that batch, so with the same ``batch_size`` the file ends byte for byte as
one uninterrupted run writes it; a ``.parquet`` output goes on after its last whole part.
A history none of whose items the model
knows gets the most popular items, as the SavedModel answers it.

Example:

>>> import json, os, tempfile
>>> from tfseqrec.data import ItemVocabulary
>>> from tfseqrec.models import SASRec
>>> vocabulary = ItemVocabulary(["a", "b", "c", "d"], [4, 3, 2, 1])
>>> model = SASRec(num_items=4, max_sequence_length=5, hidden_dim=8)
>>> out = os.path.join(tempfile.mkdtemp(), "recs.jsonl")
>>> done = recommend_file(model, vocabulary, [History("u1", ["a", "b"]), History("u2", ["zz"])], out, k=2)
>>> done["users"], [json.loads(line)["item_ids"] for line in open(out)][1]  # u2: nothing known, popular
(2, ['a', 'b'])
"""

import csv
import dataclasses
import errno
import io
import json
import os
import shutil

import numpy as np
import pyarrow
import pyarrow.parquet

from tfseqrec import ranking
from tfseqrec.data import events as events_lib
from tfseqrec.data import readers, splits, vocab
from tfseqrec.progress import progress_bar

OUTPUTS = (".jsonl", ".csv", ".parquet")
CSV_HEADER = ("user_id", "rank", "item_id", "score")


@dataclasses.dataclass
class History:
    """One user's history: raw item ids, oldest first, with the events' times and context
    (``{column: raw values}``) when the model reads them."""

    user_id: str
    items: list
    timestamps: list = None
    events: dict = None


@dataclasses.dataclass
class Histories:
    """An iterable of ``History`` (read once, as it is streamed) and how many there are
    (``total``; ``None`` when unknown before the end)."""

    rows: object
    total: int = None

    def __iter__(self):
        return iter(self.rows)


def read_histories(path, model=None, **read_kwargs):
    """The histories of ``path`` (``Histories``), one ``History`` a user, in a fixed order (a rerun's).

    A ``.jsonl`` file holds one history a line, ``{"user_id", "items"[, "timestamps"][, "events"]}``,
    read as it is streamed; anything else is an interaction log (``readers.read_interactions``,
    ``read_kwargs``), each user's events in time order, users in order of first appearance.
    ``model``: the event columns it reads are read from the log.
    """
    path = os.fspath(path)
    if path.endswith(".jsonl"):
        return Histories(_json_histories(path))
    columns = list(getattr(model, "event_features", None) or ())
    log = readers.read_interactions(path, event_columns=columns or None, **read_kwargs)
    log, _ = splits.drop_duplicates(splits.sort_by_time(log))
    starts = np.flatnonzero(splits.user_boundaries(log.users))
    return Histories(_log_histories(log, columns, starts), len(starts))


def _json_histories(path):
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                history = History(
                    str(row["user_id"]),
                    [str(i) for i in row["items"]],
                    row.get("timestamps"),
                    row.get("events"),
                )
            except (ValueError, KeyError, TypeError) as e:
                raise readers.DataError(
                    path, line_no, f'expected {{"user_id": ..., "items": [...]}} a line ({e})'
                ) from None
            yield history


def _log_histories(log, columns, starts):
    ends = np.append(starts[1:], len(log.users))
    for start, end in zip(starts, ends):
        context = {c: log.events[c][start:end].tolist() for c in columns} if columns else None
        times = log.timestamps[start:end].tolist() if log.has_time else None
        yield History(str(log.users[start]), log.items[start:end].tolist(), times, context)


def recommend_file(model, vocabulary, histories, output, k=10, exclude=(), batch_size=512, progress=None):
    """Writes the top-``k`` items of every history of ``histories`` to ``output``, resuming a
    killed run's file.

    Args:
        model: a trained model (as ``tfseqrec.load`` returns it).
        vocabulary: its ``ItemVocabulary``.
        histories: ``History`` objects (``read_histories``), in the same order on a rerun.
        output: a ``.jsonl``, ``.csv`` or ``.parquet`` path (``OUTPUTS``).
        k: items a user.
        exclude: raw ids of items never to recommend (those the model does not know are ignored).
        batch_size: users scored at once.
        progress: a progress bar on stderr (``None``: on a terminal).

    Returns:
        ``{"output", "users", "resumed_users", "excluded_items"}``: users written in all,
        those a previous run had written.
    """
    output = os.fspath(output)
    sink = _sink(output)
    excluded = {int(i) for i in vocabulary.lookup(list(exclude)) if i >= vocab.NUM_RESERVED}
    done = sink.resume(batch_size)
    total = getattr(histories, "total", None)
    bar = progress_bar(
        None if total is None else -(-max(total - done, 0) // batch_size), progress, "recommend"
    )
    users, batch = done, []
    for n, history in enumerate(histories):
        if n < done:
            continue
        batch.append(history)
        if len(batch) == batch_size:
            users += sink.write(batch, *top_items(model, vocabulary, batch, k, excluded), vocabulary, users)
            bar.update(1)
            batch = []
    if batch:
        users += sink.write(batch, *top_items(model, vocabulary, batch, k, excluded), vocabulary, users)
        bar.update(1)
    sink.close()
    bar.close()
    return {"output": output, "users": users, "resumed_users": done, "excluded_items": len(excluded)}


def _sink(output):
    form = os.path.splitext(output)[1]
    if form not in OUTPUTS:
        raise ValueError(f"--output {output!r}: write recommendations to a file ending in one of {OUTPUTS}")
    return _ParquetSink(output) if form == ".parquet" else _TextSink(output, form)


class _TextSink:
    """A ``.jsonl`` or ``.csv`` output, appended a batch at a time (one write, flushed)."""

    def __init__(self, output, form):
        self.output, self.form, self.file = output, form, None

    def resume(self, batch_size):
        done = _resume(self.output, self.form, batch_size)
        # Unbuffered: a batch is on disk whole when write returns, or cut back on an error.
        self.file = open(self.output, "ab", buffering=0)
        if self.form == ".csv" and self.file.tell() == 0:
            self._append((",".join(CSV_HEADER) + "\r\n").encode("utf-8"), 0)
        return done

    def _append(self, data, users):
        """Appends ``data`` whole; on an error (a full disk) the file is cut back to where it was,
        so that it holds whole batches only, ``users`` of them: a rerun resumes after them."""
        start = self.file.tell()
        view = memoryview(data)
        try:
            while view:
                view = view[self.file.write(view) :]
        except OSError as error:
            os.ftruncate(self.file.fileno(), start)
            self.file.close()
            raise OSError(
                error.errno,
                f"{self.output}: {error.strerror or error} after {users:,} users; the file holds their "
                "recommendations whole: free space and run the same command again to go on from there",
            ) from error

    def write(self, batch, ids, scores, vocabulary, users=0):
        text = io.StringIO()
        writer = csv.writer(text) if self.form == ".csv" else None
        for history, row_ids, row_scores in zip(batch, ids, scores):
            items = vocabulary.to_raw(row_ids)
            if writer is None:
                row = {"user_id": history.user_id, "item_ids": items, "scores": row_scores}
                text.write(json.dumps(row) + "\n")
            else:
                writer.writerows(
                    (history.user_id, r, i, s) for r, (i, s) in enumerate(zip(items, row_scores), 1)
                )
        self._append(text.getvalue().encode("utf-8"), users)
        return len(batch)

    def close(self):
        self.file.close()


class _ParquetSink:
    """A ``.parquet`` output: each batch a part file in ``OUTPUT.parts/`` (written whole, then
    renamed), joined into ``OUTPUT`` at the end a part at a time; a killed run's parts are kept."""

    SCHEMA = pyarrow.schema(
        [
            ("user_id", pyarrow.string()),
            ("item_ids", pyarrow.list_(pyarrow.string())),
            ("scores", pyarrow.list_(pyarrow.float32())),
        ]
    )

    def __init__(self, output):
        self.output, self.parts = output, output + ".parts"

    def _names(self):
        return sorted(n for n in os.listdir(self.parts) if n.endswith(".parquet"))

    def resume(self, batch_size):
        if os.path.exists(self.output):
            raise FileExistsError(
                f"{self.output} exists (a finished run's): remove it, or choose another --output"
            )
        os.makedirs(self.parts, exist_ok=True)
        return sum(pyarrow.parquet.read_metadata(os.path.join(self.parts, n)).num_rows for n in self._names())

    def write(self, batch, ids, scores, vocabulary, users=0):
        table = pyarrow.table(
            {
                "user_id": [h.user_id for h in batch],
                "item_ids": [vocabulary.to_raw(row) for row in ids],
                "scores": [list(row) for row in scores],
            },
            schema=self.SCHEMA,
        )
        path = os.path.join(self.parts, f"part-{len(self._names()):08d}.parquet")
        try:
            pyarrow.parquet.write_table(table, path + ".partial")
        except OSError as error:
            if os.path.exists(path + ".partial"):
                os.remove(path + ".partial")
            raise OSError(
                errno.ENOSPC if os.strerror(errno.ENOSPC) in str(error) else error.errno,
                f"{self.parts}: {error} after {users:,} users; their parts are whole: free space and run "
                "the same command again to go on from there",
            ) from error
        os.replace(path + ".partial", path)
        return len(batch)

    def close(self):
        with pyarrow.parquet.ParquetWriter(self.output + ".partial", self.SCHEMA) as writer:
            for name in self._names():
                writer.write_table(pyarrow.parquet.read_table(os.path.join(self.parts, name)))
        os.replace(self.output + ".partial", self.output)
        shutil.rmtree(self.parts)


def top_items(model, vocabulary, batch, k, excluded=frozenset()):
    """``(ids, scores)``: lists of each history's top-``k`` vocabulary ids and scores, best first,
    its own items and ``excluded`` (vocabulary ids) left out."""
    context = events_lib.EventVocabulary.of_model(model)
    known = [_known(model, vocabulary, context, h) for h in batch]
    wanted = min(k + len(excluded), vocabulary.num_items)
    out_ids, out_scores = [[] for _ in batch], [[] for _ in batch]
    rows = [n for n, (ids, _, _) in enumerate(known) if ids]
    if rows:
        side = {}
        if getattr(model, "uses_timestamps", False):
            side["timestamps"] = [known[n][1] for n in rows]
        if getattr(model, "event_features", None):
            side["events"] = {c: [known[n][2][c] for n in rows] for c in model.event_features}
        top_ids, top_scores = model.recommend([known[n][0] for n in rows], k=wanted, **side)
        for n, row_ids, row_scores in zip(rows, top_ids, top_scores):
            out_ids[n], out_scores[n] = _kept(row_ids, row_scores, k, excluded)
    empty = [n for n, (ids, _, _) in enumerate(known) if not ids]
    if empty:
        row_ids, row_scores = popular_items(vocabulary, wanted)
        popular = _kept(row_ids[0], row_scores[0], k, excluded)
        for n in empty:
            out_ids[n], out_scores[n] = popular
    return out_ids, out_scores


def popular_items(vocabulary, k):
    """``(ids [1, n], scores [1, n])``: the ``k`` items with the largest share of training events,
    as the SavedModel answers a history with no known item."""
    top = ranking.top_k(vocabulary.popularity()[None], min(k, vocabulary.num_items))
    return ranking.drop_padding(ranking.vocabulary_ids(top.indices.numpy()), top.values.numpy())


def _kept(ids, scores, k, excluded):
    pairs = [(int(i), float(s)) for i, s in zip(ids, scores) if i != vocab.PAD_ID and int(i) not in excluded]
    return [i for i, _ in pairs[:k]], [s for _, s in pairs[:k]]


def _known(model, vocabulary, columns, history):
    """``(ids, times, context)`` of the history's items the vocabulary knows (context as slots of
    the event vocabulary ``columns``, or ``None``)."""
    ids = vocabulary.lookup(history.items)
    keep = [n for n, i in enumerate(ids) if i != vocab.OOV_ID]
    times = None
    if getattr(model, "uses_timestamps", False):
        if history.timestamps is None or len(history.timestamps) != len(history.items):
            raise ValueError(f"user {history.user_id!r}: the model reads event times; one per item is needed")
        times = [int(history.timestamps[n]) for n in keep]
    context = None
    if columns is not None:
        given = history.events or {}
        if any(len(given.get(c, ())) != len(history.items) for c in columns.columns):
            raise ValueError(f"user {history.user_id!r}: the model reads each event's {columns.columns}")
        slots = columns.encode({c: np.asarray(given[c], object) for c in columns.columns})
        context = {c: [int(slots[c][n]) for n in keep] for c in columns.columns}
    return [int(ids[n]) for n in keep], times, context


def _resume(output, form, batch_size):
    """The users a previous run wrote to ``output`` before the batch of its last user (whose
    lines may have been cut); the file is cut to them. 0 for a new file."""
    if not os.path.exists(output) or os.path.getsize(output) == 0:
        return 0
    with open(output, "rb") as f:
        data = f.read()
    complete = data[: data.rfind(b"\n") + 1]
    lines = complete.splitlines(keepends=True)
    if form == ".csv":
        header, lines = lines[:1], lines[1:]
        users = [next(csv.reader([line.decode("utf-8")]))[0] for line in lines]
    else:
        header, users = [], [json.loads(line)["user_id"] for line in lines]
    # Users in the order written; the last one may have been cut short: its batch is redone,
    # the same users scored together as before (a batch's scores may differ in the last bit
    # with its company).
    order = list(dict.fromkeys(users))
    done = max(len(order) - 1, 0) // batch_size * batch_size
    finished = set(order[:done])
    keep = sum(1 for u in users if u in finished)
    with open(output, "wb") as f:
        f.write(b"".join(header + lines[:keep]))
    return done
