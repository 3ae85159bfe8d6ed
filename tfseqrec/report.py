"""One self-contained HTML page of what models recommend and how they trained.

``write`` ranks each model's test cases once (``evaluation.evaluate`` with every
beyond-accuracy metric, its top-10 lists collected in the same pass) and writes: the
metrics side by side, the training curves (``history.csv``), accuracy by history length
and by target popularity, the popularity of what each model recommends against the
catalogue's, and a sample of users' latest histories beside each model's top 10 (the
test target marked), items named by their text or attributes. The plots are SVG drawn by
Matplotlib, inline; the page loads nothing from anywhere (no script, no link).
"""

import csv
import dataclasses
import html
import io
import os

import numpy as np

from tfseqrec import beyond_accuracy, evaluation, plot
from tfseqrec.data import features, readers, vocab
from tfseqrec.ranking import PAD_COLUMN

# The cut-off of the lists shown and of the metrics' table.
K = 10
# Rows of the metrics' table: evaluate's keys, in this order (those a model lacks are blank).
TABLE_KEYS = (
    "ndcg@10", "hr@10", "mrr", "ndcg@20", "hr@20", "coverage@10", "arp@10", "arp_ratio@10",
    "novelty@10", "diversity@10", "serendipity@10",
)  # fmt: skip
HISTORY_SHOWN = 10  # the latest items of a user's history shown


@dataclasses.dataclass
class Entry:
    """One model of the page: its label, the loaded model and vocabulary, its test cases and
    training sequences in its own ids (each model is ranked over its own catalogue), and its
    run directory's ``history.csv`` (``None``: no curves)."""

    label: str
    model: object
    vocabulary: object
    cases: object
    train: object
    history_csv: str = None


def run(entries, users, progress=False):
    """Each entry's ``evaluate`` result, the popularity of its items, and its users' lists.

    ``users``: raw user ids whose top-``K`` lists are kept. Returns ``[(result, counts,
    events, lists)]``: ``counts`` how often each item is in a top-``K`` list, ``events``
    its training events, ``lists`` ``{user: [vocabulary ids]}``.
    """
    return [_rank(entry, users, progress) for entry in entries]


def _rank(entry, users, progress):
    inputs = evaluation.beyond_accuracy_inputs(entry.model, entry.vocabulary, entry.train)
    popularity = inputs["popularity"]
    num_items = len(popularity.events)
    row_of = {str(u): i for i, u in enumerate(entry.cases.histories.users)}
    wanted = {row_of[u]: u for u in users if u in row_of}
    counts, lists = np.zeros(num_items, np.int64), {}

    def collect(rows, columns):
        top = np.asarray(columns)[:, :K]
        counts[:] += np.bincount(top[top != PAD_COLUMN], minlength=num_items)
        for row, items in zip(rows, top):
            if int(row) in wanted:
                lists[wanted[int(row)]] = [int(c) + vocab.NUM_RESERVED for c in items if c != PAD_COLUMN]

    result = evaluation.evaluate(
        entry.model,
        entry.cases,
        metrics="all",
        **inputs,
        lists=collect,
        progress=progress,
    )
    return result, counts, popularity.events, lists


def sample_users(cases, requested, count, seed):
    """``(users, unknown)``: the raw user ids to show; ``requested`` ones that ``cases`` lacks.

    Without ``requested``: a seeded sample of ``count`` users drawn across the history
    lengths' buckets (``beyond_accuracy.LENGTH_EDGES``), short and long histories alike.
    """
    known = [str(u) for u in cases.histories.users]
    if requested:
        present = set(known)
        return [u for u in requested if u in present], [u for u in requested if u not in present]
    lengths = np.diff(cases.histories.row_splits)
    bucket = np.searchsorted(beyond_accuracy.LENGTH_EDGES, lengths, side="right")
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(bucket == b) for b in np.unique(bucket)]
    chosen = []
    while len(chosen) < min(count, len(known)):
        for group in groups:
            left = np.setdiff1d(group, chosen)
            if len(left) and len(chosen) < count:
                chosen.append(int(rng.choice(left)))
    return [known[i] for i in sorted(chosen, key=lambda i: lengths[i])], []


def item_names(item_text=None, item_features=None):
    """``{raw_id: name}``: the ``title`` (else ``name``, else the first attribute) of each item."""
    rows = {}
    if item_text:
        rows = readers.read_item_text(item_text)
    elif item_features:
        rows = features.read_item_features(item_features).rows
    names = {}
    for raw, attributes in rows.items():
        value = attributes.get("title") or attributes.get("name") or next(iter(attributes.values()), None)
        if isinstance(value, list):
            value = ", ".join(value)
        if value not in (None, ""):
            names[str(raw)] = str(value)
    return names


def write(path, entries, data, names, users, unknown_users=(), progress=False):
    """Writes the page to ``path`` (through a temporary file); returns each model's
    ``evaluate`` result, as the page shows it."""
    ranked = run(entries, users, progress)
    results = [r[0] for r in ranked]
    sections = [
        _header(entries, data, names, unknown_users),
        _metrics_table(entries, results),
        _curves(entries),
        _breakdowns(entries, results),
        _popularity(entries, ranked),
        _users(entries, ranked, users, names),
    ]
    page = _PAGE.format(
        title=html.escape(f"tfseqrec report: {os.path.basename(str(data))}"), body="\n".join(sections)
    )
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(page)
    os.replace(tmp, path)
    return results


def _header(entries, data, names, unknown_users):
    rows = "".join(
        f"<tr><td>{html.escape(e.label)}</td><td>{html.escape(type(e.model).__name__)}</td>"
        f"<td>{e.vocabulary.num_items}</td><td>{len(e.cases)}</td></tr>"
        for e in entries
    )
    notes = []
    if len({tuple(e.vocabulary.items) for e in entries}) > 1:
        notes.append("The models' catalogues differ: each is ranked over its own.")
    catalogue = set().union(*(e.vocabulary.items for e in entries))
    unnamed = len(catalogue - set(names))
    if unnamed:
        notes.append(f"{unnamed} of {len(catalogue)} items have no name: shown by id.")
    if unknown_users:
        notes.append("Users not in the data, skipped: " + html.escape(", ".join(unknown_users)) + ".")
    note = "".join(f'<p class="note">{n}</p>' for n in notes)
    return (
        f"<h1>tfseqrec report</h1><p>Data: <code>{html.escape(str(data))}</code>; test cases ranked over "
        f"the whole catalogue, seen items excluded.</p>{note}"
        "<table><tr><th>model</th><th>class</th><th>items</th><th>test cases</th></tr>" + rows + "</table>"
    )


def _metrics_table(entries, results):
    head = "".join(f"<th>{html.escape(e.label)}</th>" for e in entries)
    rows = []
    for key in TABLE_KEYS:
        cells = "".join(
            f'<td data-key="{key}" data-model="{i}">{_number(r.get(key))}</td>' for i, r in enumerate(results)
        )
        rows.append(f"<tr><th>{key}</th>{cells}</tr>")
    return f'<h2>Metrics</h2><table id="metrics"><tr><th>metric</th>{head}</tr>{"".join(rows)}</table>'


def _number(value):
    return "" if value is None or not np.isfinite(value) else f"{value:.4f}"


def _curves(entries):
    runs = [(e.label, _history(e.history_csv)) for e in entries]
    runs = [(label, rows) for label, rows in runs if rows]
    if not runs:
        return "<h2>Training</h2><p>No training history recorded.</p>"
    plt = plot.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    for label, rows in runs:
        epochs = [int(r["epoch"]) + 1 for r in rows]
        if "loss" in rows[0]:
            left.plot(epochs, [float(r["loss"]) for r in rows], label=label)
        key = next((k for k in ("val_ndcg_10", "val_ndcg@10") if k in rows[0]), None)
        if key:
            right.plot(epochs, [float(r[key]) for r in rows], label=label)
    left.set(xlabel="epoch", title="training loss")
    right.set(xlabel="epoch", title="validation NDCG@10")
    for axis in (left, right):
        axis.legend(fontsize=8)
    return "<h2>Training</h2>" + _figure(plt, fig, "curves")


def _history(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return list(csv.DictReader(f)) or None


def _breakdowns(entries, results):
    parts = ["<h2>Accuracy by history length and by target popularity</h2>"]
    plt = plot.pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for axis, key, title in zip(
        axes, ("by_history_length", "by_target_popularity"), ("history length", "target popularity")
    ):
        buckets = list(dict.fromkeys(b for r in results for b in r[key]))
        width = 0.8 / len(entries)
        for i, (entry, result) in enumerate(zip(entries, results)):
            values = [result[key].get(b, {}).get("ndcg@10", 0.0) for b in buckets]
            axis.bar(np.arange(len(buckets)) + i * width, values, width, label=entry.label)
        axis.set_xticks(np.arange(len(buckets)) + width * (len(entries) - 1) / 2, buckets)
        axis.set(title=f"NDCG@10 by {title}")
        axis.legend(fontsize=8)
        parts.append(_breakdown_table(entries, results, key, buckets))
    parts.insert(1, _figure(plt, fig, "breakdowns"))
    return "".join(parts)


def _breakdown_table(entries, results, key, buckets):
    head = "".join(f"<th>{html.escape(e.label)} NDCG@10</th>" for e in entries)
    rows = []
    for bucket in buckets:
        cases = next((r[key][bucket]["cases"] for r in results if bucket in r[key]), 0)
        cells = "".join(
            f'<td data-key="{key}/{bucket}" data-model="{i}">{_number(r[key].get(bucket, {}).get("ndcg@10"))}</td>'
            for i, r in enumerate(results)
        )
        rows.append(f"<tr><td>{html.escape(bucket)}</td><td>{cases}</td>{cells}</tr>")
    return f'<table id="{key}"><tr><th>bucket</th><th>cases</th>{head}</tr>{"".join(rows)}</table>'


def _popularity(entries, ranked):
    """Cumulative share of the top-10 slots against items by training popularity, with the
    catalogue's own (its training events) as the reference."""
    plt = plot.pyplot()
    fig, axis = plt.subplots(figsize=(6, 3.6))
    _, _, events, _ = ranked[0]
    order = np.argsort(-events, kind="stable")
    x = np.arange(1, len(order) + 1) / len(order)
    axis.plot(x, np.cumsum(events[order]) / max(events.sum(), 1), "k--", label="training events")
    for entry, (_, counts, events, _) in zip(entries, ranked):
        order = np.argsort(-events, kind="stable")
        x = np.arange(1, len(order) + 1) / len(order)
        axis.plot(x, np.cumsum(counts[order]) / max(counts.sum(), 1), label=f"{entry.label} top-{K}")
    axis.set(xlabel="items, most trained first (share of the catalogue)", ylabel="cumulative share")
    axis.legend(fontsize=8)
    return f"<h2>Popularity of what is recommended</h2>{_figure(plt, fig, 'popularity')}"


def _users(entries, ranked, users, names):
    if not users:
        return "<h2>Users</h2><p>No users to show.</p>"
    first = entries[0]
    row_of = {str(u): i for i, u in enumerate(first.cases.histories.users)}
    blocks = ["<h2>Users</h2>"]
    for user in users:
        row = row_of.get(user)
        if row is None:
            continue
        history = first.cases.histories[row][-HISTORY_SHOWN:][::-1]
        target = first.vocabulary.to_raw([first.cases.targets[row]])[0]
        shown = "".join(f"<li>{_name(first.vocabulary.to_raw([i])[0], names)}</li>" for i in history)
        columns = [f'<td><ol class="history">{shown}</ol></td>']
        for entry, (_, _, _, lists) in zip(entries, ranked):
            items = entry.vocabulary.to_raw(lists.get(user, [])) if lists.get(user) else []
            cells = "".join(
                f"<li{' class=target' if str(raw) == str(target) else ''}>{_name(raw, names)}</li>"
                for raw in items
            )
            columns.append(f"<td><ol>{cells}</ol></td>")
        head = "".join(f"<th>{html.escape(e.label)} top {K}</th>" for e in entries)
        length = len(first.cases.histories[row])
        blocks.append(
            f"<h3>user {html.escape(user)} ({length} events; target: {_name(target, names)})</h3>"
            f'<table class="user" data-user="{html.escape(user)}"><tr><th>latest history, newest first</th>'
            f"{head}</tr><tr>{''.join(columns)}</tr></table>"
        )
    return "".join(blocks)


def _name(raw, names):
    raw = str(raw)
    name = names.get(raw)
    return html.escape(f"{name} ({raw})" if name else raw)


def _figure(plt, fig, name):
    """The figure as inline SVG (its fonts as paths: nothing to fetch) in a ``<figure>``."""
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    return f'<figure class="plot" data-plot="{name}">{svg}</figure>'


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; }}
td, th {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }}
td[data-key] {{ text-align: right; font-variant-numeric: tabular-nums; }}
li.target {{ font-weight: bold; background: #ffe58a; }}
.note {{ color: #8a4b00; }}
figure svg {{ max-width: 100%; height: auto; }}
</style></head>
<body>
{body}
</body></html>
"""
