"""Stored benchmark runs: one record per run, in ``benchmarks/results/NAME.json`` (a list of records).

The schema is ``SCHEMA`` (documented in ``benchmarks/results/README.md``). Each script that
writes ``--json`` turns what it measured into records with one of the ``from_*`` functions
below and writes them with ``write``; ``benchmarks/render.py`` reads them with ``load``.
This module imports nothing heavier than the standard library, so rendering needs no
TensorFlow.
"""

import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")

_NUMBER = (int, float)
_OPTIONAL_STR = (str, type(None))
# Field: (the JSON types it may hold, what it means). Every record holds every field.
SCHEMA = {
    "model": ((str,), "the model's kind name: sasrec, bert4rec, hstu, unisrec, recformer, popularity, ..."),
    "library": ((str,), "'tfseqrec', or the peer library and version that trained it ('RecTools 0.19')"),
    "label": (_OPTIONAL_STR, "the script's name for the variant (an ablation, a text model's row), or null"),
    "dataset": (_OPTIONAL_STR, "the interaction file under the data root, or null (synthetic input)"),
    "protocol": ((str,), "how it was measured: a protocol of benchmarks/README.md"),
    "options": ((dict,), "the options the run set over the defaults (training config, sizes)"),
    "seed": ((int, type(None)), "the seed, or null"),
    "commit": (_OPTIONAL_STR, "the library code it ran ('+dirty' when tfseqrec/ had changes), or null"),
    "host_matmul_gflops": ((*_NUMBER, type(None)), "the host's fp32 matmul GFLOP/s, or null (not measured)"),
    "environment": (_OPTIONAL_STR, "cores, TensorFlow, Keras, Python (and accelerator)"),
    "started": (_OPTIONAL_STR, "UTC start, 'YYYY-MM-DD HH:MM UTC'"),
    "ended": (_OPTIONAL_STR, "UTC end"),
    "command": (_OPTIONAL_STR, "the command that wrote it"),
    "curve": ((list,), "per epoch: {'epoch', 'minutes' (of fit, or null), 'val_ndcg@10' (or null), ...}"),
    "metrics": ((dict,), "test-split metrics (ndcg@10, hr@10, mrr, ...) or a cost benchmark's figures"),
    "extra": ((dict,), "everything else the script measured (epochs, best_epoch, minutes_to_best, ...)"),
    "note": (_OPTIONAL_STR, "provenance written by hand: what shared the host, what the run replaced"),
}
# The code a result depends on: a commit to any of these after a record's makes it stale.
CODE_PATHS = (
    "tfseqrec/models",
    "tfseqrec/layers",
    "tfseqrec/losses.py",
    "tfseqrec/data",
    "tfseqrec/training",
    "tfseqrec/evaluation.py",
    "tfseqrec/ranking.py",
    "tfseqrec/block_ranking.py",
)


def record(model, protocol, dataset=None, **fields):
    """A record: ``SCHEMA``'s fields, those not given null (or empty); an unknown field is an error."""
    unknown = sorted(set(fields) - set(SCHEMA))
    if unknown:
        raise ValueError(f"not record fields: {unknown}")
    empty = {"library": "tfseqrec", "options": {}, "curve": [], "metrics": {}, "extra": {}}
    out = {name: empty.get(name) for name in SCHEMA}
    out.update(model=model, protocol=protocol, dataset=dataset, **fields)
    return out


def validate(rec):
    """The problems of ``rec`` against ``SCHEMA``, as sentences; ``[]`` when it conforms."""
    if not isinstance(rec, dict):
        return ["not an object"]
    problems = [f"unknown field {k!r}" for k in rec if k not in SCHEMA]
    for name, (types, _) in SCHEMA.items():
        if name not in rec:
            problems.append(f"no field {name!r}")
        elif not isinstance(rec[name], types) or isinstance(rec[name], bool):
            problems.append(f"{name!r} is {type(rec[name]).__name__}")
    for i, point in enumerate(rec.get("curve") or []):
        if not isinstance(point, dict) or not {"epoch", "minutes", "val_ndcg@10"} <= set(point):
            problems.append(f"curve point {i} lacks epoch, minutes or val_ndcg@10")
    return problems


def write(path, records):
    """Writes ``records`` (a list) to ``path`` through a temporary file; each must validate."""
    for i, rec in enumerate(records):
        problems = validate(rec)
        if problems:
            raise ValueError(f"record {i}: {'; '.join(problems)}")
    with open(path + ".partial", "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    os.replace(path + ".partial", path)


def load(stem, results=RESULTS):
    """The records of ``results/STEM.json``."""
    with open(os.path.join(results, f"{stem}.json")) as f:
        return json.load(f)


def stems(results=RESULTS):
    """The names of the stored files, sorted."""
    return sorted(name[:-5] for name in os.listdir(results) if name.endswith(".json"))


# === Staleness ===


def later_commits(commit, repo=ROOT, paths=CODE_PATHS):
    """Commits after ``commit`` up to HEAD that touched ``paths``; ``None`` if ``commit`` is unknown."""
    if not commit:
        return None
    sha = commit.split("+")[0]
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=repo, capture_output=True
    ).returncode
    if known != 0:
        return None
    log = subprocess.run(
        ["git", "log", "--format=%h", f"{sha}..HEAD", "--", *paths],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return log.stdout.split()


# === From what each script measured ===

_RUN = ("commit", "started", "ended", "environment", "command", "note", "host_matmul_gflops")


def _take(source, keys):
    """The entries of ``source`` named in ``keys`` (those present)."""
    return {k: source[k] for k in keys if k in source}


def _rest(source, used):
    """The entries of ``source`` not named in ``used``."""
    return {k: v for k, v in source.items() if k not in used}


def curve(val_ndcg=(), minutes=(), **per_epoch):
    """Curve points from per-epoch lists (either may be empty: a missing value is null)."""
    n = max(len(val_ndcg), len(minutes), *(len(v) for v in per_epoch.values()), 0)
    at = lambda values, i: values[i] if i < len(values) else None  # noqa: E731
    return [
        {
            "epoch": i + 1,
            "minutes": at(minutes, i),
            "val_ndcg@10": at(val_ndcg, i),
            **{k: at(v, i) for k, v in per_epoch.items()},
        }
        for i in range(n)
    ]


def to_run(rec):
    """A record in the shape ``ml1m.py``'s and ``defaults.py``'s tables read (``from_ml1m``'s inverse)."""
    extra = dict(rec["extra"])
    others = extra.pop("results", {})
    run = {
        **extra,
        **_take(rec, _RUN),
        "model": rec["model"],
        "seed": rec["seed"],
        "protocol": rec["protocol"],
        "data": rec["dataset"],
        "test": rec["metrics"],
        "val_ndcg@10": [p["val_ndcg@10"] for p in rec["curve"] if p["val_ndcg@10"] is not None],
        "minutes_at_epoch": [p["minutes"] for p in rec["curve"] if p["minutes"] is not None],
    }
    if rec["curve"] or rec["options"]:  # a trained model (popularity has neither)
        run["config"] = {"model": rec["model"], "seed": rec["seed"], **rec["options"]}
    if rec["label"] is not None:
        run["variant"] = rec["label"]
    if "exclude_seen" in rec["metrics"]:
        run["results"] = {f"full_exclude_seen={rec['metrics']['exclude_seen']}": rec["metrics"], **others}
    return run


def _options(config, seed):
    """A training config without the fields a record holds on its own (model; seed, when equal)."""
    config = config or {}
    return {k: v for k, v in config.items() if k != "model" and not (k == "seed" and v == seed)}


def from_ml1m(run):
    """``benchmarks/ml1m.py``'s run: metrics are the protocol's filtered full ranking."""
    results = dict(run.get("results") or {})
    key = "full_exclude_seen=window" if "full_exclude_seen=window" in results else "full_exclude_seen=True"
    metrics = results.pop(key, {})
    used = {"model", "seed", "protocol", "data", "config", "variant", "val_ndcg@10", "minutes_at_epoch"}
    extra = _rest(run, used | set(_RUN) | {"results"})
    if results:
        extra["results"] = results
    return record(
        run["model"],
        run.get("protocol", "sasrec-plus"),
        run.get("data", "ml-1m/ml-1m.txt"),
        label=run.get("variant"),
        options=_options(run.get("config"), run.get("seed")),
        seed=run.get("seed"),
        curve=curve(run.get("val_ndcg@10") or [], run.get("minutes_at_epoch") or []),
        metrics=metrics,
        extra=extra,
        **_take(run, _RUN),
    )


def from_defaults(result):
    """``benchmarks/defaults.py``'s result: a record per row (dataset and model)."""
    header = _take(result, _RUN)
    shared = _take(result, ("args", "recorded_by"))
    out = []
    for row in result["rows"]:
        config = row.get("config") or {}
        seed = config.get("seed", (result.get("args") or {}).get("seed"))
        used = {"model", "data", "protocol", "config", "val_ndcg@10", "minutes_at_epoch", "test"}
        out.append(
            record(
                row["model"],
                row["protocol"],
                row["data"],
                options=_options(config, seed),
                seed=seed,
                curve=curve(row.get("val_ndcg@10") or [], row.get("minutes_at_epoch") or []),
                metrics=row["test"],
                extra={**_rest(row, used | set(_RUN)), **shared},
                **{**header, **_take(row, _RUN)},
            )
        )
    return out


def _row_options(name):
    """``{"hidden_dim": 128}`` from a row name ``"unisrec-id [hidden_dim=128]"`` (values as JSON)."""
    match = re.search(r"\[(.*)\]$", name)
    options = {}
    for part in match.group(1).split(", ") if match else ():
        key, value = part.split("=", 1)
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _history_curve(rows):
    """Recformer's per-epoch rows (``seconds`` each) as curve points, minutes summed."""
    points, total = [], 0.0
    for i, row in enumerate(rows):
        total += row.get("seconds") or 0.0
        rest = {("stage_epoch" if k == "epoch" else k): v for k, v in row.items() if k != "val_ndcg_10"}
        points.append({"epoch": i + 1, "minutes": total / 60, "val_ndcg@10": row.get("val_ndcg_10"), **rest})
    return points


def _kind(name):
    """The model kind of a text or transfer row name: ``unisrec`` of ``"unisrec-id [hidden_dim=128]"``."""
    kinds = ("unisrec", "recformer", "sasrec", "popularity")
    return next((kind for kind in kinds if kind in name.split(" [")[0]), name.split(" [")[0])


def from_text(result, dataset="amazon-scientific-text/Scientific.inter.json", protocol="scientific"):
    """``benchmarks/text.py``'s result: a record per row name (its overrides from the name)."""
    header = _take(result, _RUN)
    out = []
    for name, row in result["results"].items():
        options = _row_options(name)
        model = _kind(name)
        default_seed = 0 if model in ("sasrec", "unisrec") else None  # text.py's ID_CONFIG seed
        extra = {k: v for k, v in row.items() if k != "all"}
        for key in ("seconds", "epochs"):
            if name in (result.get(key) or {}):
                extra[key] = result[key][name]
        extra.update(_take(result, ("args", "added_from_log")))
        unstored = {k: v for k, v in (result.get("seconds") or {}).items() if k not in result["results"]}
        if unstored:  # a row timed whose results the run did not keep
            extra["seconds_of_rows_not_stored"] = unstored
        out.append(
            record(
                model,
                protocol,
                dataset,
                label=name,
                options=options,
                seed=options.pop("seed", default_seed),
                curve=_history_curve((result.get("history") or {}).get(name, [])),
                metrics=row["all"],
                extra=extra,
                **header,
            )
        )
    return out


def from_gpu(result, dataset):
    """``benchmarks/gpu.py``'s record of one command: a record per trained model (and masking)."""
    header = _take(result, _RUN)
    shared = _take(result, ("config", "budget_minutes"))
    out = []
    for run in result.get("runs", []):
        points = [
            {"epoch": p["epoch"], "minutes": p.get("fit_minutes"), "val_ndcg@10": p.get("val_ndcg@10"), **p}
            for p in run.get("curve", [])
        ]
        for p in points:
            p.pop("fit_minutes", None)
        used = {"model", "options", "test", "curve"}
        out.append(
            record(
                run["model"],
                result["protocol"],
                dataset,
                options=run.get("options") or {},
                seed=result.get("seed"),
                curve=points,
                metrics=run.get("test") or {},
                extra={**_rest(run, used), **shared},
                **header,
            )
        )
    if result.get("masking"):
        masking = result["masking"]
        figures = ("step_ms", "premasked_step_ms", "masking_share")
        out.append(
            record(
                "bert4rec",
                "masking",
                None,
                label="Cloze masking's share of a training step",
                seed=result.get("seed"),
                metrics=_take(masking, figures),
                extra=_rest(masking, figures),
                **header,
            )
        )
    return out


def from_side_by_side(result):
    """``benchmarks/peers/side_by_side.py``'s record: a record per model and library."""
    protocol = dict(result["protocol"])
    protocol.pop("anchor", None)  # published figures live in benchmarks/anchors.json
    shared = {"protocol_choices": protocol, **_take(result, ("minutes", "anchored", "wall_minutes"))}
    out = []
    for model, runs in result["models"].items():
        provenance = {**_take(result, _RUN), **(result.get("model_runs") or {}).get(model, {})}
        for run in runs:
            seconds = run.get("elapsed_seconds") or []
            per_epoch = {"seconds": seconds}
            if run.get("validation_seconds"):
                per_epoch["validation_seconds"] = run["validation_seconds"]
            used = {"library", "config", "val_ndcg@10", "elapsed_seconds", "validation_seconds", "test"}
            out.append(
                record(
                    model,
                    result["protocol"]["name"],
                    result.get("data"),
                    library="tfseqrec" if run["library"] == "tfseqrec" else run["library"],
                    options=_options(run.get("config"), result.get("seed")),
                    seed=result.get("seed"),
                    curve=curve(run.get("val_ndcg@10") or [], [s / 60 for s in seconds], **per_epoch),
                    metrics=run.get("test") or {},
                    extra={**_rest(run, used), **shared},
                    **_take(provenance, _RUN),
                )
            )
    return out


def from_serving(result, dataset="ml-1m/ml-1m.txt"):
    """``benchmarks/serving.py``'s result: one record, its latencies and rates as metrics."""
    figures = ("p50_ms_batch1", "p99_ms_batch1", "users_per_s_batch", "p50_ms_batch", "p99_ms_batch")
    figures += ("gflops_batch1", "gflops_batch")
    return [
        record(
            "sasrec",
            "serving",
            dataset,
            label=result.get("signature"),
            metrics=_take(result, figures),
            extra=_rest(result, set(figures) | set(_RUN) | {"model", "signature"}),
            **_take(result, _RUN),
        )
    ]


def from_masking(result):
    """``benchmarks/masking.py``'s result: one record; sequences per second by method, the step's share."""
    figures = ("step_ms", "premasked_step_ms", "masking_ms", "masking_share")
    return [
        record(
            "bert4rec",
            "masking",
            None,
            label="Cloze masking",
            metrics={"sequences_per_s": result["rows"], **_take(result, figures)},
            extra=_rest(result, set(figures) | set(_RUN) | {"rows"}),
            **_take(result, _RUN),
        )
    ]


def from_hstu_step(result):
    """``benchmarks/hstu_step.py``'s result: a record per width, milliseconds a step as metrics."""
    shared = _take(result, ("batch_size", "rounds", "length", "num_items"))
    return [
        record(
            "hstu",
            "hstu-step",
            None,
            label=f"width {row['width']}",
            options={"width": row["width"]},
            metrics=row["ms"],
            extra={"flops": row["flops"], **shared},
            **_take(result, _RUN),
        )
        for row in result["widths"]
    ]


def from_scale(result):
    """``benchmarks/scale.py``'s result: a record per size, each stage's figures as metrics."""
    shared = _take(result, ("python", "cpus", "recorded_by"))
    return [
        record(
            "sasrec",
            "synthetic",
            None,
            label=f"{row['events']:,} events",
            options={"events": row["events"], "items": row["items"]},
            metrics=_rest(row, {"events", "items"}),
            extra=shared,
            **_take(result, _RUN),
        )
        for row in result["rows"]
    ]


def from_transfer(result):
    """``benchmarks/transfer.py``'s result: a record per target dataset and model."""
    shared = {"source": result.get("source"), **_take(result, ("args",))}
    out = []
    for target, rows in result["targets"].items():
        for name, row in rows["results"].items():
            extra = {k: v for k, v in row.items() if k != "all"}
            if name in rows.get("seconds", {}):
                extra["seconds"] = rows["seconds"][name]
            out.append(
                record(
                    _kind(name),
                    "transfer",
                    target,
                    label=name,
                    metrics=row["all"],
                    extra={**extra, "about": rows.get("about"), **shared},
                    **_take(result, _RUN),
                )
            )
    return out


def from_time_bias(result, dataset="ml-100k/u.data"):
    """``benchmarks/time_bias.py``'s result: a record per variant and seed."""
    metrics = {"test_ndcg@10": "ndcg@10", "test_hr@10": "hr@10", "test_mrr": "mrr"}
    return [
        record(
            "hstu",
            "ml100k",
            dataset,
            label=run["variant"],
            options={"num_time_buckets": run.get("num_time_buckets"), "epochs": result.get("epochs")},
            seed=run.get("seed"),
            metrics={new: run[old] for old, new in metrics.items() if old in run},
            extra=_rest(run, {"variant", "seed", "num_time_buckets", *metrics}),
            **_take(result, _RUN),
        )
        for run in result["runs"]
    ]
