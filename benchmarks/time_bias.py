"""HSTU with and without its relative time bias, on data with event times (MovieLens-100K).

ML-1M's benchmark file (the SASRec ``ml-1m.txt``) has no timestamps, so the time bias
of HSTU (Zhai et al., 2024) is measured here on ML-100K's ``u.data`` (943 users,
1,682 items, 100,000 ratings with their times): leave-one-out, the library's HSTU
defaults (``tfseqrec.training.TrainConfig(model="hstu")``), a fixed number of epochs
with early stopping on validation NDCG@10; the best epoch is evaluated on the test
split (full ranking, seen items filtered). The variants differ only in
``num_time_buckets``: 128 (the default on data with times) against 0.

Usage:
    python benchmarks/time_bias.py --epochs 60 --seeds 0 1 2 --json out.json
Data: $TFSEQREC_DATA/ml-100k (default ../shared/data).
"""

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)

from tfseqrec import evaluation, kinds, training  # noqa: E402

VARIANTS = {"time bias (128 buckets)": 128, "no time bias": 0}


def run(data, variant, seed, epochs):
    """One training run: its validation and test metrics, epochs and seconds per epoch."""
    config = {
        "model": "hstu",
        "epochs": epochs,
        "patience": epochs,
        "seed": seed,
        "num_time_buckets": VARIANTS[variant],
    }
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        model, history, split, _ = training.train(kinds.get("hstu"), data, out, config, verbose=0)
        seconds = time.perf_counter() - start
    test = evaluation.evaluate(model, split.test, progress=False)
    val = history.history["val_ndcg_10"]
    return {
        "variant": variant,
        "seed": seed,
        "num_time_buckets": VARIANTS[variant],
        "val_ndcg@10": float(max(val)),
        "best_epoch": int(np.argmax(val)) + 1,
        "epochs": len(val),
        "test_ndcg@10": test["ndcg@10"],
        "test_hr@10": test["hr@10"],
        "test_mrr": test["mrr"],
        "seconds_per_epoch": seconds / len(val),
    }


def table(rows):
    """Markdown: one line per run, then mean ± std per variant."""
    lines = [
        "| variant | seed | val NDCG@10 | test NDCG@10 | HR@10 | MRR | best epoch | s/epoch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['seed']} | {r['val_ndcg@10']:.4f} | {r['test_ndcg@10']:.4f} | "
            f"{r['test_hr@10']:.4f} | {r['test_mrr']:.4f} | {r['best_epoch']} of {r['epochs']} | "
            f"{r['seconds_per_epoch']:.1f} |"
        )
    for variant in VARIANTS:
        ndcg = [r["test_ndcg@10"] for r in rows if r["variant"] == variant]
        hr = [r["test_hr@10"] for r in rows if r["variant"] == variant]
        if ndcg:
            lines.append(
                f"| {variant} | mean ± std | | {np.mean(ndcg):.4f} ± {np.std(ndcg):.4f} | "
                f"{np.mean(hr):.4f} ± {np.std(hr):.4f} | | | |"
            )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--json", help="write the runs here")
    parser.add_argument("--report", nargs="+", help="print the table of stored runs, no training")
    args = parser.parse_args()
    if args.report:
        rows = [run_of(r) for path in args.report for r in json.load(open(path))]
        print(table(rows))
        return
    data = os.path.join(os.environ.get("TFSEQREC_DATA", "../shared/data"), "ml-100k")
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.abspath(__file__)),
    ).stdout.strip()
    rows = []
    for seed in args.seeds:
        for variant in VARIANTS:
            rows.append(run(data, variant, seed, args.epochs))
            print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    if args.json:
        result = {
            "epochs": args.epochs,
            "command": shlex.join(["python", "benchmarks/time_bias.py", *sys.argv[1:]]),
            "commit": commit,
            "started": started,
            "ended": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "runs": rows,
        }
        records.write(args.json, records.from_time_bias(result, os.path.join("ml-100k", "u.data")))


def run_of(rec):
    """A stored record (``records.from_time_bias``'s) as the row ``table`` reads."""
    metrics = {f"test_{k}": v for k, v in rec["metrics"].items()}
    return {"variant": rec["label"], "seed": rec["seed"], **rec["extra"], **metrics}


if __name__ == "__main__":
    main()
