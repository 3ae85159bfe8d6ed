"""Scale benchmark: how each cost grows with the log and the catalogue.

For each size (events, items; users = events / 50), on a seeded synthetic log
(``tfseqrec data synthetic``: Zipf popularity, log-normal lengths, a learnable cycle),
each stage runs in a fresh Python process so that its peak resident memory is its own:

- ``generate``: the synthetic log, written as CSV;
- ``prepare``: ``read_interactions`` + ``splits.prepare`` (events/s, peak RSS);
- ``train``: two SASRec epochs (hidden 32, length 50, sampled softmax with 256
  log-uniform negatives and logQ correction; Adam row-sparse from 100,000 items, the
  library's default, or as ``--item-updates`` says), validation on a 1,000-user sample;
  s/epoch of training alone (the second epoch: the first also traces), peak RSS, and
  RSS before training (the data's share);
- ``evaluate``: full-catalogue ranking of ``--eval-users`` test users (users/s, peak
  RSS) against the matmul bound: ``2 * hidden * items`` FLOP a user at the rate a large
  fp32 matmul reaches on the run's host (``machine.matmul_gflops``);
- ``serve``: export a SavedModel, load it as TF Serving does (a TF1 session over the
  ``serve`` tag) and time ``serving_default`` at batch 1 (p50 / p99).

Every stage re-reads the CSV (that time is reported under ``prepare`` only).

Usage:
    python benchmarks/scale.py                                  # 1e5/1e4, 1e6/1e5, 1e7/1e6
    python benchmarks/scale.py --sizes 1000000:100000 --json runs/scale.json
"""

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

import machine  # benchmarks/machine.py
import records  # benchmarks/records.py
from machine import assumed_mark, assumed_note, matmul_gflops, peak_rss_gib

STAGES = ("generate", "prepare", "train", "evaluate", "serve")
HIDDEN = 32


def csv_path(work, events, items):
    return os.path.join(work, f"synthetic-{events}-{items}.csv")


def model_dir(work, events, items):
    return os.path.join(work, f"sasrec-{events}-{items}")


def read_and_prepare(path):
    from tfseqrec.data import readers, splits

    start = time.perf_counter()
    interactions = readers.read_interactions(path, progress=False)
    read = time.perf_counter() - start
    split, vocabulary, report = splits.prepare(interactions)
    return split, vocabulary, report, read, time.perf_counter() - start


def stage_generate(args):
    from tfseqrec.data import synthetic

    start = time.perf_counter()
    log = synthetic.generate(args.events, args.items, seed=0)
    generated = time.perf_counter() - start
    path = synthetic.write_csv(log, csv_path(args.work, args.events, args.items))
    return {
        "generate_s": generated,
        "write_csv_s": time.perf_counter() - start - generated,
        "csv_mib": os.path.getsize(path) / 2**20,
        "users": log.num_users,
    }


def stage_prepare(args):
    split, vocabulary, report, read, total = read_and_prepare(csv_path(args.work, args.events, args.items))
    return {
        "read_s": read,
        "read_events_per_s": args.events / read,
        "prepare_s": total - read,
        "read_prepare_events_per_s": args.events / total,
        "num_items": vocabulary.num_items,
        "num_users": report["num_users"],
        "peak_rss_gib": peak_rss_gib(),
    }


def stage_train(args):
    import keras

    from tfseqrec import kinds, training

    split, vocabulary, _, _, _ = read_and_prepare(csv_path(args.work, args.events, args.items))
    data_rss = peak_rss_gib()
    config = training.TrainConfig.from_dict(
        dict(
            model="sasrec",
            hidden_dim=HIDDEN,
            max_sequence_length=50,
            loss="sampled_softmax",
            num_negatives=256,
            epochs=2,
            validation_users=1000,
            seed=0,
            sparse_item_updates={"auto": None, "sparse": True, "dense": False}[args.item_updates],
        )
    )
    sparse = training.id_models.sparse_item_updates(config, vocabulary.num_items)

    class Timer(keras.callbacks.Callback):
        """Training seconds of each epoch, validation excluded."""

        seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_test_begin(self, logs=None):
            self.seconds.append(time.perf_counter() - self.start)

    timer = Timer()
    start = time.perf_counter()
    model, history = training.fit(
        kinds.get(config.model),
        split,
        vocabulary,
        model_dir(args.work, args.events, args.items),
        config,
        callbacks=[timer],
        verbose=0,
    )
    first, second = timer.seconds
    return {
        "first_epoch_s": first,
        "train_epoch_s": second,
        "fit_s": time.perf_counter() - start,
        "train_events": split.train.num_events,
        "train_events_per_s": split.train.num_events / second,
        "val_ndcg@10": float(history.history["val_ndcg_10"][-1]),
        "data_rss_gib": data_rss,
        "peak_rss_gib": peak_rss_gib(),
        "embedding_mib": vocabulary.size * HIDDEN * 4 / 2**20,
        "adam": "row-sparse" if sparse else "dense",
    }


def stage_evaluate(args):
    import tfseqrec
    from tfseqrec import evaluation

    split, vocabulary, _, _, _ = read_and_prepare(csv_path(args.work, args.events, args.items))
    model, _, _ = tfseqrec.load(model_dir(args.work, args.events, args.items))
    cases = split.test.sample(args.eval_users, seed=0)
    warm = evaluation.BLOCK_RANKED_BATCH_SIZE + 300  # trace: a full batch, then any size
    evaluation.evaluate(model, cases.select(range(min(warm, len(cases)))), progress=False)
    data_rss = peak_rss_gib()
    start = time.perf_counter()
    metrics = evaluation.evaluate(model, cases, progress=False)
    seconds = time.perf_counter() - start
    users_per_s = len(cases) / seconds
    host = matmul_gflops()
    bound = host * 1e9 / (2 * HIDDEN * vocabulary.num_items)
    return {
        "host_matmul_gflops": host,
        "eval_users": len(cases),
        "eval_s": seconds,
        "users_per_s": users_per_s,
        "matmul_bound_users_per_s": bound,
        "share_of_bound": users_per_s / bound,
        "ndcg@10": metrics["ndcg@10"],
        "data_rss_gib": data_rss,
        "peak_rss_gib": peak_rss_gib(),
    }


def stage_serve(args):
    import numpy as np

    import tfseqrec
    from tfseqrec import export, kinds, serving

    split, vocabulary, _, _, _ = read_and_prepare(csv_path(args.work, args.events, args.items))
    model, _, _ = tfseqrec.load(model_dir(args.work, args.events, args.items))
    start = time.perf_counter()
    path, _ = export.export_version(
        kinds.for_model(model),
        model,
        vocabulary,
        os.path.join(args.work, f"saved-{args.events}-{args.items}"),
    )
    export_s = time.perf_counter() - start
    fn = serving.SavedModelPredictor(path).callable("serving_default")
    cases = split.test.sample(args.requests, seed=0)
    requests = [
        serving.pad_histories([vocabulary.to_raw(cases.histories[i][-50:])]) for i in range(len(cases))
    ]
    for r in requests[:20]:
        fn(r)
    seconds = []
    for r in requests:
        t = time.perf_counter()
        fn(r)
        seconds.append(time.perf_counter() - t)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    return {
        "export_s": export_s,
        "saved_model_mib": size / 2**20,
        "p50_ms": 1e3 * float(np.percentile(seconds, 50)),
        "p99_ms": 1e3 * float(np.percentile(seconds, 99)),
        "requests": len(requests),
        "peak_rss_gib": peak_rss_gib(),
    }


def run_stage(stage, events, items, args):
    """One stage in a fresh process; its last stdout line is the result as JSON."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--stage",
        stage,
        "--events",
        str(events),
        "--items",
        str(items),
        "--work",
        args.work,
        "--eval-users",
        str(args.eval_users),
        "--requests",
        str(args.requests),
        "--item-updates",
        args.item_updates,
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(
            f"stage {stage} at {events:,} events / {items:,} items failed:\n{result.stderr[-4000:]}"
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def print_tables(rows):
    print(
        "| events | items (used) | users | read events/s | read + prepare events/s | prepare peak RSS (GiB) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        p = r["prepare"]
        print(
            f"| {r['events']:,} | {r['items']:,} ({p['num_items']:,}) | {p['num_users']:,} | "
            f"{p['read_events_per_s']:,.0f} | {p['read_prepare_events_per_s']:,.0f} | {p['peak_rss_gib']:.2f} |"
        )
    print()
    print(
        "| events | items | Adam | first epoch (s) | train s/epoch | train events/s | RSS before training (GiB) | "
        "train peak RSS (GiB) | item table (MiB) | val NDCG@10 (1,000 users) |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t = r["train"]
        print(
            f"| {r['events']:,} | {r['items']:,} | {t.get('adam', 'dense')} | {t['first_epoch_s']:.1f} | "
            f"{t['train_epoch_s']:.1f} | "
            f"{t['train_events_per_s']:,.0f} | {t['data_rss_gib']:.2f} | {t['peak_rss_gib']:.2f} | {t['embedding_mib']:.0f} | "
            f"{t['val_ndcg@10']:.4f} |"
        )
    print()
    print(
        "| events | items | eval users | users/s | matmul bound users/s | share of bound | eval peak RSS (GiB) | "
        "test NDCG@10 | export (s) | SavedModel (MiB) | serve p50 / p99 (ms) | serve peak RSS (GiB) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        e, s = r["evaluate"], r["serve"]
        print(
            f"| {r['events']:,} | {r['items']:,} | {e['eval_users']:,} | {e['users_per_s']:,.0f} | "
            f"{e['matmul_bound_users_per_s']:,.0f} | {100 * e['share_of_bound']:.0f}%{assumed_mark(e)} | "
            f"{e['peak_rss_gib']:.2f} | "
            f"{e['ndcg@10']:.4f} | {s['export_s']:.1f} | {s['saved_model_mib']:.0f} | "
            f"{s['p50_ms']:.1f} / {s['p99_ms']:.1f} | {s['peak_rss_gib']:.2f} |"
        )
    note = assumed_note([r["evaluate"] for r in rows])
    if note:
        print()
        print(note)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=["100000:10000", "1000000:100000", "10000000:1000000"],
        help="EVENTS:ITEMS pairs",
    )
    parser.add_argument("--eval-users", type=int, default=10_000)
    parser.add_argument(
        "--item-updates",
        choices=["auto", "sparse", "dense"],
        default="auto",
        help="Adam on the item table: the library's default (row-sparse from 100,000 items), or either",
    )
    parser.add_argument("--requests", type=int, default=200, help="batch-1 serving requests timed")
    parser.add_argument(
        "--work", default=None, help="directory for logs and models (default: a temporary one)"
    )
    parser.add_argument("--json", help="also write the results here (rewritten after each size)")
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--events", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--items", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        print(json.dumps(globals()[f"stage_{args.stage}"](args)))
        return
    args.work = args.work or tempfile.mkdtemp(prefix="tfseqrec-scale-")
    os.makedirs(args.work, exist_ok=True)
    rows, started = [], machine.now()
    for size in args.sizes:
        events, items = (int(float(x)) for x in size.split(":"))
        row = {"events": events, "items": items}
        for stage in STAGES:
            start = time.perf_counter()
            row[stage] = run_stage(stage, events, items, args)
            row[stage]["process_s"] = time.perf_counter() - start
            print(
                f"{events:,} events / {items:,} items: {stage} {json.dumps(row[stage])}",
                file=sys.stderr,
                flush=True,
            )
        rows.append(row)
        if args.json:
            result = {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "rows": rows,
                "command": shlex.join(["python", "benchmarks/scale.py", *sys.argv[1:]]),
                "commit": machine.code_version(),
                "started": started,
                "ended": machine.now(),
                "environment": machine.environment(),
            }
            records.write(args.json, records.from_scale(result))
    print(f"Scale benchmark: synthetic logs, {machine.environment()}")
    print()
    print_tables(rows)


if __name__ == "__main__":
    main()
