"""Warm start on a grown log against training the whole log from scratch.

A log grows; ``tfseqrec train --warm-start`` carries yesterday's model onto today's log. Here,
on ``--dataset``:

- the old log: each user's history less its last 10% of events, by time on ML-100K, by
  position in ML-1M's (SASRec's ``ml-1m.txt``) (``old_log``);
- ``old``: SASRec with its defaults on the old log (at most ``--minutes`` of ``fit``);
- ``full``: the same on the whole log, from scratch (at most ``--minutes``);
- ``warm``: from ``old``'s model on the whole log, for a quarter of ``full``'s epochs (its
  epochs take as long as ``full``'s, so it takes about a quarter of ``full``'s minutes,
  its first epoch's tracing beside; a budget in minutes would finish the epoch that
  crosses it), and ``warm [...]`` once more for
  each ``--warm-config`` (options of the warm run only, as a probe of them).

``full`` and ``warm`` are tested on the whole log's leave-one-out test split (full ranking,
the history filtered); the target is ``warm`` at 99% or more of ``full``'s test NDCG@10 in a
quarter of its time. Each record keeps its run's validation curve.

Usage:
    python benchmarks/warm.py --dataset ml-100k --minutes 5 --json benchmarks/results/warm-ml100k-seed-0.json
    python benchmarks/warm.py --dataset ml-100k --minutes 0.3      # a quick check, end to end
    python benchmarks/warm.py --dataset ml-100k --minutes 3 --warm-config '{"learning_rate": 5e-4}'
"""

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import datasets  # noqa: E402  (benchmarks/datasets.py)
import machine  # noqa: E402  (benchmarks/machine.py)
import ml1m  # noqa: E402  (benchmarks/ml1m.py: its epoch timer and time to quality)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)

from tfseqrec import evaluation, kinds, training  # noqa: E402
from tfseqrec.data import readers, splits  # noqa: E402

DATASETS = ("ml-100k", "ml-1m")
METRICS = ("ndcg@10", "hr@10", "mrr")


def old_log(events):
    """The mask of ``events`` (``readers.Interactions``, a user's events together, in order: by
    time on ML-100K, by position in SASRec's ``ml-1m.txt``) in the old log: each user's history
    less its last 10% of events (at least one; none of a one-event history)."""
    users = np.asarray(events.users, object)
    row_splits = np.r_[np.flatnonzero(splits.user_boundaries(users)), len(users)]
    lengths = np.diff(row_splits)
    held = np.where(lengths > 1, np.maximum(1, lengths // 10), 0)
    return splits.ragged_mask(row_splits, lengths - held)


def write_log(path, events, keep):
    """The events of ``keep`` as a ``user_id,item_id,timestamp`` CSV (ML-1M's times: positions)."""
    times = events.timestamps if events.has_time else np.arange(len(events.items))
    with open(path, "w") as f:
        f.write("user_id,item_id,timestamp\n")
        for user, item, when in zip(events.users[keep], events.items[keep], np.asarray(times)[keep]):
            f.write(f"{user},{item},{int(when)}\n")
    return path


def run(label, data, out, options, warm_start=None):
    """``(row, split)``: SASRec trained on ``data`` into ``out`` and its test metrics."""
    timer = ml1m.EpochTimer()
    start = time.perf_counter()
    model, history, split, _ = training.train(
        kinds.get("sasrec"), data, out, options, callbacks=[timer], verbose=0, warm_start=warm_start
    )
    wall = time.perf_counter() - start
    test = evaluation.evaluate(model, split.test, progress=False)
    quality = ml1m.time_to_quality(history, timer)
    row = {"label": label, "options": options, "test": {k: test[k] for k in METRICS}, "wall": wall, **quality}
    print(f"{label}: test NDCG@10 {test['ndcg@10']:.4f} after {quality['minutes_at_epoch'][-1]:.2f} minutes")
    return row


def to_record(row, name, header):
    curve = [
        {"epoch": n + 1, "minutes": m, "val_ndcg@10": v}
        for n, (m, v) in enumerate(zip(row["minutes_at_epoch"], row["val_ndcg@10"]))
    ]
    extra = {
        "dataset": name,
        "run": row["label"],
        "epochs": row["epochs"],
        "best_epoch": row["best_epoch"],
        "train_minutes": row["minutes_at_epoch"][-1],
        "train_wall_seconds": row["wall"],
    }
    return records.record(
        "sasrec",
        "warm-start",
        datasets.get(name).interactions,
        label=row["label"],
        options=row["options"],
        curve=curve,
        metrics=row["test"],
        extra=extra,
        **header,
    )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", choices=DATASETS, default="ml-100k")
    parser.add_argument("--minutes", type=float, default=5.0, help="budget of the old and from-scratch runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--warm-config",
        action="append",
        type=json.loads,
        default=[],
        help="a further warm run's options (JSON)",
    )
    parser.add_argument("--data-root", default=os.environ.get("TFSEQREC_DATA", "../shared/data"))
    parser.add_argument("--json", help="write the three records here")
    args = parser.parse_args()
    header = {**machine.run_header("warm.py", matmul=True), "seed": args.seed}
    events = splits.sort_by_time(readers.read_interactions(datasets.get(args.dataset).path(args.data_root)))
    work = tempfile.mkdtemp(prefix="warm-")
    keep = old_log(events)
    old = write_log(os.path.join(work, "old.csv"), events, keep)
    whole = write_log(os.path.join(work, "whole.csv"), events, np.ones(len(keep), bool))
    options = {"model": "sasrec", "max_train_minutes": args.minutes, "seed": args.seed}
    rows = [run("old", old, os.path.join(work, "old"), options)]
    rows.append(run("full", whole, os.path.join(work, "full"), options))
    quarter = {"model": "sasrec", "epochs": max(1, rows[1]["epochs"] // 4), "seed": args.seed}
    for n, extra in enumerate([{}, *args.warm_config]):
        label = "warm" + (f" {json.dumps(extra, sort_keys=True)}" if extra else "")
        out = os.path.join(work, f"warm-{n}")
        rows.append(run(label, whole, out, {**quarter, **extra}, warm_start=os.path.join(work, "old")))
        share = rows[-1]["test"]["ndcg@10"] / rows[1]["test"]["ndcg@10"]
        time_share = rows[-1]["minutes_at_epoch"][-1] / rows[1]["minutes_at_epoch"][-1]
        print(f"{label} / full: {share:.3f} of the test NDCG@10 in {time_share:.2f} of the training minutes")
    if args.json:
        header["ended"] = machine.now()
        records.write(args.json, [to_record(r, args.dataset, header) for r in rows])


if __name__ == "__main__":
    main()
