"""Every user to a file: users per second of ``recommend --histories`` against evaluation's.

A SASRec (``--hidden-dim`` 64, two layers, windows of ``--length`` items) over a catalogue of
each ``--items`` size, untrained (the time scoring takes does not depend on the weights'
values), and ``--users`` seeded histories of ``--length`` uniform random items:

- ``bulk``: ``tfseqrec.bulk.recommend_file`` of the histories to a ``.jsonl`` file (top 10,
  the history excluded, ``--batch-size`` users a batch), reading and writing included;
- ``evaluate``: ``tfseqrec.evaluation.evaluate`` of the same histories, one target each
  (full ranking, the history filtered).

Each is timed once after a warm-up batch (tracing excluded); users per second.

Usage:
    python benchmarks/bulk.py --items 100000 1000000 --json benchmarks/results/bulk.json
    python benchmarks/bulk.py --items 10000 --users 2000      # a quick check
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import machine  # noqa: E402  (benchmarks/machine.py)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)

from tfseqrec import bulk, evaluation  # noqa: E402
from tfseqrec.data import ItemVocabulary, splits, vocab  # noqa: E402
from tfseqrec.models import SASRec  # noqa: E402


def measure(num_items, users, length, hidden_dim, batch_size, seed=0):
    """``{"bulk_users_per_second", "evaluate_users_per_second", ...}`` of one catalogue size."""
    rng = np.random.default_rng(seed)
    vocabulary = ItemVocabulary([str(i) for i in range(num_items)])
    model = SASRec(num_items=num_items, max_sequence_length=length, hidden_dim=hidden_dim)
    ids = rng.integers(vocab.NUM_RESERVED, vocab.NUM_RESERVED + num_items, size=(users, length))
    histories = [bulk.History(f"u{n}", vocabulary.to_raw(row)) for n, row in enumerate(ids)]
    cases = splits.Cases(
        splits.Sequences.from_list(range(users), ids.tolist()),
        rng.integers(vocab.NUM_RESERVED, vocab.NUM_RESERVED + num_items, size=users),
    )
    work = tempfile.mkdtemp(prefix="bulk-")
    # Warm-up: each path traced once on a batch of the same shape.
    bulk.recommend_file(
        model,
        vocabulary,
        histories[:batch_size],
        os.path.join(work, "warm.jsonl"),
        k=10,
        batch_size=batch_size,
        progress=False,
    )
    evaluation.evaluate(model, cases.select(np.arange(batch_size)), batch_size=batch_size, progress=False)
    start = time.perf_counter()
    bulk.recommend_file(
        model,
        vocabulary,
        histories,
        os.path.join(work, "recs.jsonl"),
        k=10,
        batch_size=batch_size,
        progress=False,
    )
    bulk_seconds = time.perf_counter() - start
    start = time.perf_counter()
    evaluation.evaluate(model, cases, batch_size=batch_size, progress=False)
    evaluate_seconds = time.perf_counter() - start
    return {
        "bulk_users_per_second": users / bulk_seconds,
        "evaluate_users_per_second": users / evaluate_seconds,
        "bulk_seconds": bulk_seconds,
        "evaluate_seconds": evaluate_seconds,
    }


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, nargs="+", default=[100_000, 1_000_000], help="catalogue sizes")
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--length", type=int, default=50, help="items a history (the model's window)")
    parser.add_argument("--hidden-dim", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--json", help="write the records here (rewritten after every size)")
    args = parser.parse_args()
    header = machine.run_header("bulk.py", matmul=True)
    out = []
    for num_items in args.items:
        figures = measure(num_items, args.users, args.length, args.hidden_dim, args.batch_size)
        print(
            f"{num_items:,} items: recommend --histories {figures['bulk_users_per_second']:,.0f} users/s, "
            f"evaluate {figures['evaluate_users_per_second']:,.0f} users/s",
            flush=True,
        )
        options = {
            "num_items": num_items,
            "users": args.users,
            "length": args.length,
            "hidden_dim": args.hidden_dim,
            "batch_size": args.batch_size,
        }
        out.append(
            records.record(
                "sasrec", "bulk", None, options=options, metrics=figures, ended=machine.now(), **header
            )
        )
        if args.json:
            records.write(args.json, out)


if __name__ == "__main__":
    main()
