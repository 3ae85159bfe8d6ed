"""Do the defaults travel? Every id model with its defaults on three datasets, the same CPU budget each.

The defaults were tuned on ML-1M. This trains SASRec, BERT4Rec and HSTU exactly as a new
user's ``tfseqrec train --model NAME --data FILE`` would (``TrainConfig`` with nothing but
the model, the budget and the seed), and UniSRec with ids as its docs' command runs it
(``use_id_embeddings``; the items' text: ``u.item``, ML-1M's ``movies.dat`` under
``ml-1m.txt``'s ids, ``Scientific.item.json``), on:

- ``ml-100k``: ``ml-100k/u.data`` with its event times (protocol ``ml100k``);
- ``ml-1m``: SASRec's ``ml-1m/ml-1m.txt`` (protocol ``sasrec-plus``);
- ``scientific``: ``amazon-scientific-text/Scientific.inter.json`` (protocol ``scientific``);

each named once in ``benchmarks/datasets.py``.

Each model trains for at most ``--minutes`` of ``fit`` (validation included) with early
stopping on validation NDCG@10; the best epoch is evaluated on the test split (full
ranking, the user's whole history filtered), beside popularity (items by training count).
The table gives each model's NDCG@10 as a ratio to SASRec's on the same dataset (the
defaults should bring BERT4Rec and HSTU to 0.8x of it on each), and the wall minutes of
``training.train`` (reading the data, tracing and validation included, so a little over
the budget).

Usage:
    python benchmarks/defaults.py --minutes 10 --json benchmarks/results/defaults.json
    python benchmarks/defaults.py --datasets ml-100k --minutes 0.3      # a quick check, end to end
    python benchmarks/defaults.py --datasets ml-100k --models bert4rec --minutes 4 --config '{"batch_size": 32}'
    python benchmarks/defaults.py --datasets ml-1m --models sasrec,unisrec --minutes 10
    python benchmarks/defaults.py --datasets ml-100k --models sasrec --minutes 3 --item-features
    python benchmarks/defaults.py --report benchmarks/results/defaults.json   # stored run, no training
    python benchmarks/defaults.py --minutes 10 --seed 1 --json benchmarks/results/defaults-seed-1.json
    python benchmarks/defaults.py --report benchmarks/results/defaults.json benchmarks/results/defaults-seed-1.json
Data: under --data-root ($TFSEQREC_DATA, default ../shared/data).
"""

import argparse
import json
import os
import shlex
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import datasets  # noqa: E402  (benchmarks/datasets.py)
import machine  # noqa: E402  (benchmarks/machine.py)
import ml1m  # noqa: E402  (benchmarks/ml1m.py: its epoch timer and time to quality)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)
import text  # noqa: E402  (benchmarks/text.py: Popularity)

from tfseqrec import beyond_accuracy, evaluation, kinds, training  # noqa: E402
from tfseqrec.data import features, readers  # noqa: E402

DATASETS = tuple(datasets.DATASETS)  # what --datasets takes, in the order the table gives them
MODELS = ("sasrec", "bert4rec", "hstu", "unisrec")
# A row's own options, beside the model's defaults: UniSRec is run with ids, as its docs' command runs it.
MODEL_OPTIONS = {"unisrec": {"use_id_embeddings": True}}
METRICS = ("ndcg@10", "hr@10", "mrr")


def item_text(name, data_root, work):
    """The item-text file of dataset ``name`` (UniSRec's titles, genres, descriptions).

    ML-1M's ``movies.dat`` is keyed by MovieLens ids, ``ml-1m.txt`` by SASRec's: its text is
    written to ``work`` under ``ml-1m.txt``'s ids (as ``tfseqrec data item-text --id-map``
    writes it).
    """
    if name == "ml-1m":
        return text.ml1m_item_text(data_root, os.path.join(work, "ml-1m.item.json"))[1]
    return datasets.get(name).item_text_path(data_root)


def features_file(name, data_root, work):
    """``(path, columns)``: dataset ``name``'s item attributes as an item-features CSV written to
    ``work`` (``tfseqrec data item-features``: genres and year, or categories and brand)."""
    columns, rows = features.from_item_text(readers.read_item_text(item_text(name, data_root, work)))
    path = os.path.join(work, f"{name}.features.csv")
    features.write_csv(path, columns, rows)
    return path, columns


def train_row(
    model_name,
    data_path,
    minutes,
    seed,
    epochs=None,
    config=None,
    text_path=None,
    attributes=None,
    keep=None,
):
    """``(row, split, vocabulary)``: ``model_name`` trained with its defaults (but ``config``'s
    options and the row's own, ``MODEL_OPTIONS``), and its test metrics, accuracy and beyond
    (``test_metrics``); ``text_path``: the items' text, for UniSRec; ``attributes``: ``(path,
    columns)`` of an item-features file; ``keep``: the run directory to write (else a
    temporary one)."""
    values = {
        "model": model_name,
        "max_train_minutes": minutes,
        "seed": seed,
        **MODEL_OPTIONS.get(model_name, {}),
        **(config or {}),
    }
    if epochs is not None:
        values["epochs"] = epochs
    timer = ml1m.EpochTimer()
    out = keep or tempfile.mkdtemp(prefix=f"defaults-{model_name}-")
    start = time.perf_counter()
    model, history, split, vocabulary = training.train(
        kinds.get(model_name),
        data_path,
        out,
        values,
        callbacks=[timer],
        verbose=0,
        item_text=text_path,
        item_features=attributes and attributes[0],
    )
    wall = time.perf_counter() - start
    if attributes:  # recorded beside the options (the file itself is not a training option)
        values = {**values, "item_features": ",".join(attributes[1])}
    row = {
        "model": model_name,
        "config": values,
        **ml1m.time_to_quality(history, timer),
        "train_wall_seconds": wall,
        "test": test_metrics(model, split, vocabulary),
    }
    return row, split, vocabulary


def test_metrics(model, split, vocabulary):
    """``METRICS`` on the test split, and the beyond-accuracy metrics at 10 and the breakdowns
    (``tfseqrec.beyond_accuracy``) from the same ranking."""
    test = evaluation.evaluate(
        model,
        split.test,
        progress=False,
        metrics="all",
        popularity=beyond_accuracy.ItemPopularity.of(split.train, vocabulary.num_items),
        item_vectors=evaluation.item_vectors(model),
    )
    beyond = {k: v for k, v in test.items() if k.endswith("@10") or k.startswith("by_")}
    return {**beyond, **{k: test[k] for k in METRICS}}


def popularity_row(split, vocabulary):
    model = text.Popularity(split.train.item_counts(vocabulary.size))
    return {"model": "popularity", "train_wall_seconds": 0.0, "test": test_metrics(model, split, vocabulary)}


def dataset_rows(
    name, data_root, models, minutes, seed, epochs=None, config=None, attributes=False, keep=None
):
    """The rows of one dataset: each model's, then popularity's on the same split; ``attributes``:
    the id models read the dataset's item attributes (``features_file``); ``keep``: a folder
    for the run directories (``<dataset>-<model>``), kept (for ``tfseqrec report``)."""
    dataset = datasets.get(name)
    path, protocol = dataset.path(data_root), dataset.protocol
    rows, split = [], None
    work = tempfile.mkdtemp(prefix=f"defaults-{name}-")
    for model_name in models:
        text_path = item_text(name, data_root, work) if kinds.get(model_name).needs_item_text else None
        read = features_file(name, data_root, work) if attributes else None
        row, split, vocabulary = train_row(
            model_name,
            path,
            minutes,
            seed,
            epochs,
            config,
            text_path,
            attributes=read,
            keep=keep and os.path.join(keep, f"{name}-{model_name}"),
        )
        rows.append(row)
        print(f"{name} {model_name}: test NDCG@10 {row['test']['ndcg@10']:.4f}", flush=True)
    if split is not None:
        rows.append(popularity_row(split, vocabulary))
    info = {
        "dataset": name,
        "data": dataset.interactions,
        "protocol": protocol,
        "test_cases": len(split.test) if split else 0,
    }
    return [{**info, **row} for row in rows]


# The options of a row's config that are the run's own (model, budget, seed, epoch cap), not a probe's.
RUN_OPTIONS = ("model", "max_train_minutes", "seed", "epochs")


def changed_options(row):
    """``"batch_size=32"``: the options ``--config`` set for the row; ``"defaults"`` when none.
    The epoch cap is the run's own, unless a learning-rate schedule decays over it."""
    own = MODEL_OPTIONS.get(row["model"], {})
    config = row.get("config", {})
    scheduled = config.get("learning_rate_schedule", "constant") != "constant"
    changed = {
        k: v
        for k, v in config.items()
        if (k not in RUN_OPTIONS or (k == "epochs" and scheduled)) and not (k in own and own[k] == v)
    }
    return options_text(changed)


def options_text(options):
    """``"batch_size=32, learning_rate=0.004"``: options as the tables print them; "defaults" when none."""
    text = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in options.items())
    return text or "defaults"


def ratios(rows):
    """Each row's NDCG@10 against SASRec's with its defaults on the same dataset (``None`` without one)."""
    sasrec = {
        r["dataset"]: r["test"]["ndcg@10"]
        for r in rows
        if r["model"] == "sasrec" and changed_options(r) == "defaults"
    }
    return [r["test"]["ndcg@10"] / sasrec[r["dataset"]] if sasrec.get(r["dataset"]) else None for r in rows]


def table(rows):
    """Markdown: a row per dataset, model and options, NDCG@10 against SASRec's with its defaults
    on the same dataset (``ratios``)."""
    lines = [
        "| dataset | protocol | model | options | NDCG@10 | HR@10 | MRR | NDCG@10 / SASRec | "
        "epochs (best) | minutes to 98% of best validation | train minutes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, ratio in zip(rows, ratios(rows)):
        test = r["test"]
        ratio = "" if ratio is None else f"{ratio:.2f}"
        epochs = f"{r['epochs']} ({r['best_epoch']})" if "epochs" in r else ""
        options = changed_options(r) if "config" in r else ""
        to_98 = r.get("minutes_to_98pct_of_best")
        to_98 = "" if to_98 is None else f"{to_98:.1f}"
        lines.append(
            f"| {r['dataset']} | {r['protocol']} | {r['model']} | {options} | {test['ndcg@10']:.4f} | "
            f"{test['hr@10']:.4f} | {test['mrr']:.4f} | {ratio} | {epochs} | {to_98} | "
            f"{r['train_wall_seconds'] / 60:.1f} |"
        )
    return "\n".join(lines)


def by_seed(runs, metric=lambda row: row["test"]["ndcg@10"]):
    """``{(dataset, model): {seed: metric(row)}}`` of stored ``defaults.py`` records, each of one
    seed, in the order they ran: a later run of a seed replaces that seed's rows of the
    datasets and models it ran."""
    values = {}
    for run in runs:
        for r in run["rows"]:
            values.setdefault((r["dataset"], r["model"]), {})[run["args"]["seed"]] = metric(r)
    return values


def seed_ratios(runs):
    """``{(dataset, model): (NDCG@10 by seed, mean / SASRec's mean, lowest seed's ratio)}``.

    ``runs``: stored records of ``defaults.py`` with the defaults (no ``--config``), each of
    one seed, in the order they ran: a later run of a seed replaces that seed's rows of the
    datasets and models it ran (a model rerun after its defaults changed). The ratio is
    the model's mean NDCG@10 over the seeds SASRec also ran on the dataset, against
    SASRec's mean over them; the lowest is the smallest of the seeds' own ratios (seed by
    seed, each model against SASRec of the same seed). Both are ``None`` for SASRec, and
    where SASRec has no seed in common with the model.
    """
    for run in runs:
        for r in run["rows"]:
            if "config" in r and changed_options(r) != "defaults":
                raise ValueError(
                    f"seed {run['args']['seed']}: a probe row ({changed_options(r)}) is not the defaults"
                )
    ndcg = by_seed(runs)  # (dataset, model) -> {seed: NDCG@10}
    result = {}
    for (dataset, model), mine in ndcg.items():
        base = ndcg.get((dataset, "sasrec"), {})
        common = [s for s in mine if s in base]
        ratio = lowest = None
        if common and model != "sasrec":
            ratio = np.mean([mine[s] for s in common]) / np.mean([base[s] for s in common])
            lowest = min(mine[s] / base[s] for s in common)
        result[(dataset, model)] = (mine, ratio, lowest)
    return result


def seeds_table(runs):
    """Markdown: each dataset and model's test NDCG@10 over the seeds of ``runs``, against SASRec's.

    A row gives each seed's NDCG@10, their mean ± sd, the ratio of the mean to SASRec's
    mean on the dataset, and the lowest of the seeds' own ratios (``seed_ratios``): the
    0.8x the defaults should reach must hold for the mean and for every seed.
    """
    seeds = list(dict.fromkeys(run["args"]["seed"] for run in runs))
    header = " | ".join(f"seed {s}" for s in seeds)
    lines = [
        f"| dataset | model | {header} | mean ± sd | mean / SASRec's mean | lowest seed's / SASRec |",
        "|---|---|" + "---|" * len(seeds) + "---|---|---|",
    ]
    for (dataset, model), (by_seed, ratio, lowest) in seed_ratios(runs).items():
        values = np.array([by_seed[s] for s in seeds if s in by_seed])
        cells = " | ".join(f"{by_seed[s]:.4f}" if s in by_seed else "" for s in seeds)
        sd = values.std(ddof=1) if len(values) > 1 else 0.0
        ratio, lowest = ("" if v is None else f"{v:.2f}" for v in (ratio, lowest))
        lines.append(
            f"| {dataset} | {model} | {cells} | {values.mean():.4f} ± {sd:.4f} | {ratio} | {lowest} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--minutes", type=float, default=10.0, help="training budget of each model (fit time)"
    )
    parser.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated of {list(DATASETS)}")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated of {list(MODELS)}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--epochs", type=int, default=None, help="at most this many epochs (default: the model's, 200)"
    )
    parser.add_argument(
        "--data-root",
        default=os.environ.get("TFSEQREC_DATA", "../shared/data"),
        help="the folder holding the datasets (default $TFSEQREC_DATA, else ../shared/data)",
    )
    parser.add_argument(
        "--config",
        type=json.loads,
        default=None,
        help="JSON of options set for every model: a probe of one change against the defaults",
    )
    parser.add_argument(
        "--item-features",
        action="store_true",
        help="the id models read each dataset's item attributes (genres and year; categories and brand)",
    )
    parser.add_argument("--json", help="also write the results here (rewritten after every dataset)")
    parser.add_argument("--keep", help="write the run directories here (<dataset>-<model>), for a report")
    parser.add_argument(
        "--report",
        metavar="JSON",
        nargs="+",
        help="train nothing: print the table of a stored run (of several runs: their seeds table, "
        "a later run of a seed replacing the rows it reran)",
    )
    args = parser.parse_args()
    if args.report:
        runs = []
        for path in args.report:
            with open(path) as f:
                stored = json.load(f)  # records (benchmarks/records.py): one a dataset and model
            runs.append({"args": stored[0]["extra"]["args"], "rows": [records.to_run(r) for r in stored]})
        print(table(runs[0]["rows"]) if len(runs) == 1 else seeds_table(runs))
        return
    names, models = args.datasets.split(","), args.models.split(",")
    for chosen, known in ((names, DATASETS), (models, MODELS)):
        if set(chosen) - set(known):
            parser.error(f"unknown {sorted(set(chosen) - set(known))}; known: {list(known)}")
    run = {
        "command": shlex.join(["python", "benchmarks/defaults.py", *sys.argv[1:]]),
        "commit": machine.code_version(),
        "started": machine.now(),
        "environment": machine.environment(),
        "args": vars(args),
        "rows": [],
    }
    for name in names:
        run["rows"] += dataset_rows(
            name,
            args.data_root,
            models,
            args.minutes,
            args.seed,
            args.epochs,
            args.config,
            args.item_features,
            args.keep,
        )
        run["ended"] = machine.now()
        if args.json:
            records.write(args.json, records.from_defaults(run))
    print(f"\n{run['environment']}; {args.minutes:g} minutes a model\n")
    print(table(run["rows"]))


if __name__ == "__main__":
    main()
