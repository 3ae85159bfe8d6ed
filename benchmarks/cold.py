"""Cold items: items training never saw, recommended by their attributes or their text.

``splits.cold_start_split`` holds a seeded share of the items (``--cold-share``, 0.1) out of
every training sequence; each user's last item is a test case, a cold one when that item
was held out. Each model trains on the rest (each training user's last item validates),
over a vocabulary of the trained items only, and is then grown to the whole catalogue as
``tfseqrec export`` grows it, without retraining:

- ``popularity``: items by training count (a held-out item has none);
- ``sasrec`` (``ids``): the id model, its new items' rows zero (``with_items``): it
  cannot tell them apart;
- ``sasrec`` (``ids+attributes``): ids and item attributes, new items by their
  attributes (``export --item-features``);
- ``sasrec`` (``attributes``): attributes alone (``use_id_embeddings: false``);
- ``unisrec`` (``text``): UniSRec on text vectors alone, new items by their text
  (``export --item-text``).

Every test case is ranked over the whole catalogue (full ranking, the history filtered);
each row gives NDCG@10 on all, cold and warm cases. Each model trains for at most
``--minutes`` with its defaults, best epoch by validation NDCG@10.

Usage:
    python benchmarks/cold.py --datasets scientific --minutes 5 --json benchmarks/results/cold-seed-0.json
    python benchmarks/cold.py --datasets ml-100k --minutes 0.3      # a quick check, end to end
Data: under --data-root ($TFSEQREC_DATA, default ../shared/data).
"""

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import datasets  # noqa: E402  (benchmarks/datasets.py)
import defaults  # noqa: E402  (benchmarks/defaults.py: item text and attribute files)
import machine  # noqa: E402  (benchmarks/machine.py)
import ml1m  # noqa: E402  (benchmarks/ml1m.py: its epoch timer and time to quality)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)
import text  # noqa: E402  (benchmarks/text.py: Popularity)

from tfseqrec import evaluation, kinds  # noqa: E402
from tfseqrec.data import readers, splits, vocab  # noqa: E402
from tfseqrec.training import id_models  # noqa: E402

# Row label: (model kind, options over its defaults, what the items read).
ROWS = {
    "ids": ("sasrec", {}, None),
    "ids+attributes": ("sasrec", {}, "attributes"),
    "attributes": ("sasrec", {"use_id_embeddings": False}, "attributes"),
    "text": ("unisrec", {"use_id_embeddings": False}, "text"),
}
METRICS = ("ndcg@10", "hr@10", "mrr")


def remapped(sequences, source, target):
    """``sequences`` (ids of vocabulary ``source``) in ``target``'s ids (an unknown item: ``OOV_ID``)."""
    values = target.lookup(source.to_raw(sequences.values)).astype(np.int64)
    return splits.Sequences(sequences.users, values, sequences.row_splits, sequences.timestamps)


def remapped_cases(cases, source, target):
    targets = target.lookup(source.to_raw(cases.targets)).astype(np.int64)
    return splits.Cases(remapped(cases.histories, source, target), targets)


def cold_split(name, data_root, share, seed):
    """``(cold_start_split, full vocabulary, training vocabulary, inner split)``: the inner split
    is the training sequences (in the training vocabulary's ids) split leave-one-out for validation."""
    log = readers.read_interactions(datasets.get(name).path(data_root))
    events, _ = splits.drop_duplicates(splits.sort_by_time(log))
    sequences, full, _ = splits.build_sequences(events)
    cold = splits.cold_start_split(sequences, share, seed)
    counts = cold.train.item_counts(full.size)[vocab.NUM_RESERVED :]
    trained = vocab.ItemVocabulary.from_counts({raw: int(c) for raw, c in zip(full.items, counts) if c})
    inner = splits.leave_one_out(remapped(cold.train, full, trained))
    return cold, full, trained, inner


def metrics_of(model, cold, full, grown):
    """``{"all", "cold", "warm"}`` metrics of the test cases, in the grown vocabulary's ids."""
    out, sizes = {}, {}
    for part, cases in (("cold", cold.test_cold), ("warm", cold.test_warm)):
        result = evaluation.evaluate(model, remapped_cases(cases, full, grown), progress=False)
        out[part], sizes[part] = {k: result[k] for k in METRICS}, len(cases)
    total = sum(sizes.values())
    out["all"] = {k: sum(out[p][k] * sizes[p] for p in sizes) / total for k in METRICS}
    return out


def model_row(label, name, data_root, minutes, seed, parts, work):
    """A row: the model of ``ROWS[label]`` trained on the inner split, grown to every item, ranked."""
    cold, full, trained, inner = parts
    kind_name, options, reads = ROWS[label]
    kind = kinds.get(kind_name)
    out = os.path.join(work, label)
    config = id_models.options(
        kind, {"model": kind_name, "max_train_minutes": minutes, "seed": seed, **options}
    )
    kwargs = {}
    if reads == "attributes":
        path, _ = defaults.features_file(name, data_root, work)
        kwargs = id_models.feature_inputs(kind, path, trained, out, verbose=0)
    elif reads == "text":
        text_path = defaults.item_text(name, data_root, work)
        config, kwargs = id_models.model_inputs(kind, config, trained, text_path, out, verbose=0)
    timer = ml1m.EpochTimer()
    model, history = id_models.fit(
        kind, inner, trained, out, config, callbacks=[timer], verbose=0, model_kwargs=kwargs
    )
    missing = [raw for raw in full.items if raw not in trained]
    if reads == "attributes":
        model, grown, added = id_models.add_featured_items(model, trained, out, path)
    elif reads == "text":
        model, grown, added = kind.add_items(model, trained, {}, readers.read_item_text(text_path))
    else:
        grown, added = trained.with_items(missing)
        model = model.with_items(grown.num_items)
    result = metrics_of(model, cold, full, grown)
    print(
        f"{name} {label}: cold NDCG@10 {result['cold']['ndcg@10']:.4f}, warm {result['warm']['ndcg@10']:.4f}"
    )
    return {
        "model": kind_name,
        "label": label,
        "options": {**options, "max_train_minutes": minutes},
        "metrics": result.pop("all"),
        "extra": {**result, **ml1m.time_to_quality(history, timer), "added_items": len(added)},
    }


def popularity_row(parts):
    cold, full, trained, inner = parts
    grown, _ = trained.with_items([raw for raw in full.items if raw not in trained])
    counts = remapped(cold.train, full, grown).item_counts(grown.size)
    result = metrics_of(text.Popularity(counts), cold, full, grown)
    return {"model": "popularity", "label": "popularity", "metrics": result.pop("all"), "extra": result}


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--datasets", default="scientific", help=f"comma-separated of {list(datasets.DATASETS)}"
    )
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated of {list(ROWS)}")
    parser.add_argument("--minutes", type=float, default=5.0, help="training budget of each model")
    parser.add_argument("--cold-share", type=float, default=0.1, help="the share of items held out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-root", default=os.environ.get("TFSEQREC_DATA", "../shared/data"))
    parser.add_argument("--json", help="write the records here (rewritten after every dataset)")
    args = parser.parse_args()
    header = machine.run_header("cold.py")
    out = []
    for name in args.datasets.split(","):
        dataset = datasets.get(name)
        work = tempfile.mkdtemp(prefix=f"cold-{name}-")
        parts = cold_split(name, args.data_root, args.cold_share, args.seed)
        report = parts[0].report
        print(
            f"{name}: {report['cold_items']} cold items, {report['test_cold_cases']} cold test cases",
            flush=True,
        )
        rows = [popularity_row(parts)]
        rows += [
            model_row(label, name, args.data_root, args.minutes, args.seed, parts, work)
            for label in args.rows.split(",")
        ]
        for row in rows:
            extra = {**row["extra"], "report": report, "cold_share": args.cold_share}
            fields = {**row, "extra": extra, "seed": args.seed, "ended": machine.now(), **header}
            out.append(records.record(protocol="cold-items", dataset=dataset.interactions, **fields))
        if args.json:
            records.write(args.json, out)


if __name__ == "__main__":
    main()
