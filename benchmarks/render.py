"""Markdown tables from the stored runs (``benchmarks/results/*.json``) and the anchors.

A table is data: ``benchmarks/tables.json`` names, for each table, its rows (which
records; one row each, or their mean) and its columns (a field of the record, or one of
``COMPUTED``). A page holds a table between ``<!-- table:NAME:begin -->`` and
``<!-- table:NAME:end -->``; everything outside the markers is written by hand.

Usage:
    python benchmarks/render.py           # rewrite the tables in PAGES in place
    python benchmarks/render.py --check   # exit 1 naming each table that differs; write nothing
    python benchmarks/render.py --stale   # rows and notes whose records predate a change to the code
"""

import argparse
import fnmatch
import json
import os
import re
import statistics
import sys

import records

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PAGES = [
    os.path.join(ROOT, "README.md"),
    os.path.join(HERE, "README.md"),
    os.path.join(HERE, "attributes.md"),
    os.path.join(HERE, "production.md"),
    os.path.join(HERE, "probes.md"),
    os.path.join(HERE, "report.md"),
    os.path.join(HERE, "results", "README.md"),
]
SPECS = os.path.join(HERE, "tables.json")
ANCHORS = os.path.join(HERE, "anchors.json")
BLOCK = re.compile(r"(<!-- table:([\w-]+):begin -->\n)(.*?)(<!-- table:\2:end -->)", re.S)
NOTE = re.compile(r"^\*(\d{4}-\d\d-\d\d)\.\*.*$", re.M)


def read_json(path):
    with open(path) as f:
        return json.load(f)


class Store:
    """The stored records by file (``stem``), read once each; ``results`` is the folder."""

    def __init__(self, results=records.RESULTS):
        self.results = results
        self.cache = {}

    def stems(self, pattern):
        return [s for s in records.stems(self.results) if fnmatch.fnmatch(s, pattern)]

    def load(self, stem):
        if stem not in self.cache:
            self.cache[stem] = records.load(stem, self.results)
        return self.cache[stem]

    def select(self, row):
        """``[(stem, record)]`` a row spec names: ``records`` (stems, globs allowed) filtered by ``where``."""
        patterns = row["records"] if isinstance(row["records"], list) else [row["records"]]
        found = []
        for pattern in patterns:
            stems = self.stems(pattern)
            if not stems:
                raise ValueError(f"no stored records match {pattern!r}")
            for stem in stems:
                found += [(stem, r) for r in self.load(stem) if _matches(r, row.get("where", {}))]
        if not found:
            raise ValueError(f"row {row} selects no record")
        return found


def _matches(rec, where):
    """Whether ``rec`` has each ``where`` value (a list: any of its values)."""
    return all(field(rec, k) in (v if isinstance(v, list) else [v]) for k, v in where.items())


def field(rec, path):
    """The value at ``path`` (``"metrics/ndcg@10"``) of ``rec``; ``None`` where absent."""
    value = rec
    for key in path.split("/"):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


# === Computed columns ===


def _options(rec):
    shown = {k: v for k, v in rec["options"].items() if k != "max_train_minutes"}
    return ", ".join(f"{k}={v}" for k, v in shown.items())


def _train_minutes(rec):
    for path, scale in (("extra/train_wall_seconds", 60), ("extra/seconds", 60), ("extra/fit_minutes", 1)):
        if field(rec, path) is not None:
            return field(rec, path) / scale
    return (rec["curve"][-1]["minutes"] if rec["curve"] else None) if rec["model"] != "popularity" else 0.0


COMPUTED = {
    "date": lambda rec: (rec["started"] or "")[:10] or None,
    "options": _options,
    "train_minutes": _train_minutes,
    "budget": lambda rec: rec["options"].get("max_train_minutes"),
}


def _val_at(rec, minutes):
    """The best validation NDCG@10 of ``rec``'s curve by ``minutes`` of training (``None``: no epoch
    yet, or a run whose budget ended before ``minutes``)."""
    budget = (rec.get("options") or {}).get("max_train_minutes")
    if budget is not None and budget < minutes:
        return None
    points = [
        c["val_ndcg@10"] for c in rec["curve"] if c["minutes"] <= minutes and c.get("val_ndcg@10") is not None
    ]
    return max(points) if points else None


def value(rec, column, peers=()):
    """Column ``column`` of ``rec``: a field, a ``COMPUTED`` name, ``val_at/M`` (``_val_at``), or
    ``vs_sasrec/COLUMN``: COLUMN over that of SASRec's record of the same dataset and seed in ``peers``."""
    name = column[1]
    if name.startswith("val_at/"):
        return _val_at(rec, float(name.split("/")[1]))
    if name.startswith("vs_sasrec/"):
        inner = [column[0], name.split("/", 1)[1]]
        same = [
            p
            for p in peers
            if (p["model"], p["dataset"], p["seed"]) == ("sasrec", rec["dataset"], rec["seed"])
        ]
        mine, base = value(rec, inner), (value(same[0], inner) if same else None)
        return mine / base if mine is not None and base else None
    return COMPUTED[name](rec) if name in COMPUTED else field(rec, name)


# === Cells ===


def fmt(v, spec=""):
    """A cell: ``v`` with the format ``spec`` (numbers), ``""`` for ``None``; ``|`` escaped."""
    if v is None or v == "":
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)) and spec:
        return format(v, spec)
    if isinstance(v, (dict, list)):
        v = json.dumps(v)
    return str(v).replace("|", "\\|")


def anchor_cell(anchor):
    if anchor is None:
        return ""
    return f"{fmt(anchor['ndcg@10'], '.4f')} / {fmt(anchor['hr@10'], '.4f')} ({anchor['model']}, {anchor['cite']})"


def aggregate(values):
    """A mean row's value: the mean of numbers, else the distinct values in order, joined."""
    present = [v for v in values if v is not None]
    if len(values) == 1:
        return values[0]
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return statistics.fmean(present)
    distinct = list(dict.fromkeys(fmt(v) for v in present))
    return ", ".join(distinct) if distinct else None


def record_links(stems, base):
    return ", ".join(f"[{s}]({base}{s}.json)" for s in dict.fromkeys(stems))


def row_cells(spec, row, selected, base, anchors, peers=()):
    """The cells of one rendered row: ``selected`` holds one record, or several for a mean;
    ``peers``: the records the row's spec selects (for ``vs_sasrec`` columns)."""
    cells = []
    for column in spec["columns"]:
        name, fmt_spec = column[1], (column[2] if len(column) > 2 else "")
        if name == "name":
            cells.append(fmt(row.get("name") or selected[0][1]["label"] or selected[0][1]["model"]))
        elif name == "record":
            cells.append(record_links([s for s, _ in selected], base))
        elif name == "runs":
            cells.append(str(len(selected)))
        elif name == "anchor":
            cells.append(anchor_cell(anchors.get(row.get("anchor"))))
        elif name == "seed" and len(selected) > 1:
            cells.append(", ".join(fmt(r["seed"]) for _, r in selected))
        else:
            v = aggregate([value(r, column, peers) for _, r in selected])
            cells.append(fmt(v, fmt_spec) if isinstance(v, (int, float)) else fmt(v))
    return cells


def markdown(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def render_table(spec, store, base, anchors):
    """The markdown of table ``spec``; links to records relative to ``base`` (the page's path to results/)."""
    if spec.get("source") == "anchors":
        rows = [
            [fmt(a.get(c[1]), c[2] if len(c) > 2 else "") for c in spec["columns"]] for a in anchors.values()
        ]
        return markdown([c[0] for c in spec["columns"]], rows)
    if spec.get("source") == "files":
        return files_table(store, base)
    rows = []
    for row in spec["rows"]:
        selected = store.select(row)
        groups = [selected] if row.get("mean") else [[s] for s in selected]
        peers = [r for _, r in selected]
        rows += [row_cells(spec, row, group, base, anchors, peers) for group in groups]
    return markdown([c[0] for c in spec["columns"]], rows)


def files_table(store, base):
    """One row per stored file: its records' models, protocols, commits and dates."""
    rows = []
    for stem in records.stems(store.results):
        recs = store.load(stem)
        cells = [f"[{stem}]({base}{stem}.json)", str(len(recs))]
        for key in ("model", "protocol", "commit", "date"):
            get = COMPUTED.get(key) or (lambda r, key=key: r[key])
            cells.append(", ".join(dict.fromkeys(fmt(get(r)) for r in recs)))
        rows.append(cells)
    return markdown(["file", "records", "models", "protocols", "code (commit)", "started"], rows)


# === Pages ===


def load_anchors(path=ANCHORS):
    return {a["id"]: a for a in read_json(path)}


def results_base(page):
    """The relative link from ``page``'s folder to ``benchmarks/results/``."""
    rel = os.path.relpath(os.path.join(HERE, "results"), os.path.dirname(page))
    return "" if rel == "." else rel + "/"


def render_page(text, specs, store, base, anchors):
    """``text`` with every marked table rendered again; an unknown table name is an error."""

    def replace(match):
        name = match.group(2)
        if name not in specs:
            raise ValueError(f"no table {name!r} in tables.json")
        return match.group(1) + render_table(specs[name], store, base, anchors) + "\n" + match.group(4)

    return BLOCK.sub(replace, text)


def outputs(pages=PAGES, specs=None, store=None, anchors=None):
    """``{page: its text with the tables rendered}`` for each page."""
    specs = read_json(SPECS) if specs is None else specs
    store, anchors = store or Store(), anchors or load_anchors()
    out = {}
    for page in pages:
        with open(page, encoding="utf-8") as f:
            out[page] = render_page(f.read(), specs, store, results_base(page), anchors)
    return out


# === Staleness ===


def stale_report(pages=PAGES, specs=None, store=None, repo=ROOT):
    """Lines naming each table row and dated note whose record ran before a later change to the code.

    A record is stale when commits after its own touched ``records.CODE_PATHS``; one whose
    commit git cannot resolve is "unknown".
    """
    specs = read_json(SPECS) if specs is None else specs
    store = store or Store()
    cache = {}

    def state(stem):
        commits = {r["commit"] for r in store.load(stem)}
        found = []
        for commit in sorted(commits, key=str):
            if commit not in cache:
                cache[commit] = records.later_commits(commit, repo)
            later = cache[commit]
            found.append(
                f"{stem} ({commit}): unknown commit"
                if later is None
                else f"{stem} ({commit}): {len(later)} later commits touch the code ({', '.join(later[:3])})"
                if later
                else None
            )
        return [f for f in found if f]

    lines = []
    for page in pages:
        text = open(page, encoding="utf-8").read()
        for name in BLOCK.findall(text):
            for row in specs[name[1]].get("rows", []):
                stems = dict.fromkeys(s for s, _ in store.select(row))
                lines += [
                    f"table {name[1]}, row {row.get('name', row['records'])}: {s}"
                    for st in stems
                    for s in state(st)
                ]
        for note in NOTE.finditer(text):
            named = [
                s for s in re.findall(r"`([\w.-]+)`", note.group(0)) if s in records.stems(store.results)
            ]
            lines += [f"note of {note.group(1)}: {s}" for st in named for s in state(st)]
    return list(dict.fromkeys(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed table differs")
    parser.add_argument(
        "--stale", action="store_true", help="list rows and notes on records older than the code"
    )
    args = parser.parse_args(argv)
    if args.stale:
        for line in stale_report():
            print(line)
        return 0
    differ = []
    for page, text in outputs().items():
        with open(page, encoding="utf-8") as f:
            if f.read() == text:
                continue
        differ.append(os.path.relpath(page, ROOT))
        if not args.check:
            with open(page, "w", encoding="utf-8") as f:
                f.write(text)
    if args.check and differ:
        print(f"tables differ from the records in: {', '.join(differ)} (run python benchmarks/render.py)")
        return 1
    for page in differ:
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
