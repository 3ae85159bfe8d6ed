"""Serving benchmark: latency and throughput of an exported model, loaded as TF Serving loads it.

The export is read with ``tfseqrec.serving.SavedModelPredictor`` (a TF1 session over
the ``serve`` tag, the signature run by tensor name, as the C++ server does) and
``serving_default`` is timed on real ML-1M histories of ``--history-length`` items:

- batch 1: p50 / p99 latency of single requests, one after another;
- batch ``--batch-size`` (256): users per second.

FLOPs per request are an analytic count of the matmuls the signature runs (the
transformer over the whole window, the output head, and scores over the catalogue at
the last position); GFLOP/s is that times users per second, against the rate a large
fp32 matmul reaches on the run's host (``machine.matmul_gflops``). Client-side proto
encoding and the network are not included (a real server adds them).

``--json`` writes one record (``benchmarks/records.py``'s schema) holding the figures of
both rows with the run's command, the commit of the library code, start and end times and
the environment (``benchmarks/machine.py``); ``benchmarks/render.py`` renders it.

Usage:
    python benchmarks/serving.py                          # trains a 1-epoch SASRec to time
    python benchmarks/serving.py --model-dir runs/sasrec-ml1m   # a model of `make main`
    python benchmarks/serving.py --json benchmarks/results/serving.json
Data: $TFSEQREC_DATA/ml-1m/ml-1m.txt (default ../shared/data).
"""

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import machine  # noqa: E402  (benchmarks/machine.py)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)
import tensorflow as tf  # noqa: E402

import tfseqrec  # noqa: E402
from tfseqrec import export, kinds, serving, training  # noqa: E402
from tfseqrec.data import readers, splits  # noqa: E402


def forward_flops(model, length, num_items):
    """Matmul FLOPs of one ``serving_default`` request over a window of ``length`` items."""
    net = model.backbone
    d = net.hidden_dim
    ff = net.intermediate_dim or (4 * d if model.__class__.__name__ == "BERT4Rec" else d)
    per_layer = 2 * length * (4 * d * d + 2 * d * ff) + 2 * 2 * length * length * d
    total = net.num_layers * per_layer
    if model.__class__.__name__ == "BERT4Rec":
        total += 2 * length * d * d  # GELU projection head over the window
    return total + 2 * d * num_items  # scores of every item at the last position


def histories(data_path, length, count):
    """Raw-id histories of ``length`` items: the newest of users with at least that many."""
    interactions = splits.sort_by_time(readers.read_interactions(data_path))
    by_user = {}
    for user, item in zip(interactions.users, interactions.items):
        by_user.setdefault(user, []).append(item)
    long_enough = [items[-length:] for items in by_user.values() if len(items) >= length]
    if not long_enough:
        raise ValueError(f"{data_path}: no user has {length} interactions")
    return [long_enough[i % len(long_enough)] for i in range(count)]


def time_calls(fn, args_list, warmup=20):
    for args in args_list[:warmup]:
        fn(*args)
    seconds = []
    for args in args_list:
        start = time.perf_counter()
        fn(*args)
        seconds.append(time.perf_counter() - start)
    return np.array(seconds)


def print_tables(result):
    """The table of a result (``main``'s, or a stored ``--json``): a row at batch 1, a row at the batch size."""
    print(
        "| batch | p50 (ms) | p99 (ms) | users/s | MFLOP/request | GFLOP/s | share of the host's fp32 matmul GFLOP/s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    p50, p99, mflop = result["p50_ms_batch1"], result["p99_ms_batch1"], result["mflop_per_request"]
    print(
        f"| 1 | {p50:.2f} | {p99:.2f} | {1e3 / p50:,.0f} | {mflop:.1f} | {result['gflops_batch1']:.1f} | "
        f"{machine.share(result['gflops_batch1'], result)} |"
    )
    print(
        f"| {result['batch_size']} | {result['p50_ms_batch']:.1f} | {result['p99_ms_batch']:.1f} | "
        f"{result['users_per_s_batch']:,.0f} | {mflop:.1f} | "
        f"{result['gflops_batch']:.1f} | {machine.share(result['gflops_batch'], result)} |"
    )
    note = machine.assumed_note([result])
    if note:
        print()
        print(note)
    print()
    print(
        "targets: p50 <= 5 ms at batch 1:",
        "met" if p50 <= 5 else "NOT met",
        f"| >= 1,000 users/s at batch {result['batch_size']}:",
        "met" if result["users_per_s_batch"] >= 1000 else "NOT met",
    )


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model-dir", help="a trained model directory (default: train SASRec for 1 epoch)")
    parser.add_argument(
        "--data",
        default=os.path.join(os.environ.get("TFSEQREC_DATA", "../shared/data"), "ml-1m", "ml-1m.txt"),
    )
    parser.add_argument("--history-length", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--requests", type=int, default=1000, help="batch-1 requests timed")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--batches", type=int, default=20, help="large batches timed")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "benchmarks/serving.py", *(sys.argv[1:] if argv is None else argv)])
    started = machine.now()

    work = tempfile.mkdtemp(prefix="tfseqrec-serving-")
    model_dir = args.model_dir
    if model_dir is None:
        model_dir = os.path.join(work, "model")
        # Latency does not depend on how well the weights are trained.
        training.train(
            kinds.get("sasrec"),
            args.data,
            model_dir,
            {"model": "sasrec", "epochs": 1, "max_sequence_length": 200},
            verbose=0,
        )
    model, vocabulary, _ = tfseqrec.load(model_dir)
    path, _ = export.export_version(
        kinds.for_model(model), model, vocabulary, os.path.join(work, "saved_models", "bench"), k=args.k
    )
    predictor = serving.SavedModelPredictor(path)
    fn = predictor.callable("serving_default")  # inputs: history; outputs: item_ids, scores

    users = histories(args.data, args.history_length, max(args.requests, args.batch_size * args.batches))
    single = [(serving.pad_histories([h]),) for h in users[: args.requests]]
    latency = time_calls(fn, single)
    batches = [
        (serving.pad_histories(users[i * args.batch_size : (i + 1) * args.batch_size]),)
        for i in range(args.batches)
    ]
    batch_seconds = time_calls(fn, batches, warmup=2)

    flops = forward_flops(model, min(args.history_length, model.max_sequence_length), vocabulary.num_items)
    users_per_second = args.batch_size / float(np.median(batch_seconds))
    result = {
        "model": model.__class__.__name__,
        "signature": "serving_default",
        "history_length": args.history_length,
        "k": args.k,
        "num_items": vocabulary.num_items,
        "p50_ms_batch1": 1e3 * float(np.percentile(latency, 50)),
        "p99_ms_batch1": 1e3 * float(np.percentile(latency, 99)),
        "users_per_s_batch": users_per_second,
        "batch_size": args.batch_size,
        "p50_ms_batch": 1e3 * float(np.median(batch_seconds)),
        "p99_ms_batch": 1e3 * float(np.percentile(batch_seconds, 99)),
        "mflop_per_request": flops / 1e6,
        "gflops_batch1": flops / float(np.percentile(latency, 50)) / 1e9,
        "gflops_batch": flops * users_per_second / 1e9,
        "host_matmul_gflops": machine.matmul_gflops(),
        "tensorflow": tf.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "command": command,
        "commit": machine.code_version(),
        "started": started,
        "ended": machine.now(),
        "environment": machine.environment(),
    }
    print(
        f"Serving benchmark ({result['model']}, ML-1M vocabulary of {result['num_items']:,} items, "
        f"history {args.history_length}, k = {args.k}; TF {tf.__version__} session loader, {os.cpu_count()} CPUs)"
    )
    print()
    print_tables(result)
    if args.json:
        records.write(args.json, records.from_serving(result))
    return result


if __name__ == "__main__":
    main()
