"""Ranking micro-benchmark: full-catalogue ranking by blocks against the matmul bound.

What ``evaluate`` does for every ``SequentialRecommender`` at scale, without a model:
random queries ``[users, hidden]`` and an output table ``[items, hidden]``, each user
with a target and a history of ``--history`` items to exclude, ranked by
``block_ranking.rank_targets_by_query`` in batches of ``--batch`` users (as ``evaluate``
does, one ``tf.function`` per batch shape). Rows of the table:

- ``matmul only``: the blocks' matmuls alone (each block's scores summed over one
  column, so the matmul is not pruned): this CPU's rate on these shapes;
- ``rank``: ``rank_targets_by_query`` (what ``evaluate`` and the exports run).

users/s against the bound ``host * 1e9 / (2 * hidden * items)``, where ``host`` is the
rate a large fp32 matmul reaches on the run's host (``machine.matmul_gflops``); the
issue's target is 70% of it at 10^6 items.

Usage:
    python benchmarks/ranking.py                          # hidden 32, 10^6 items
    python benchmarks/ranking.py --items 100000 --users 20000 --json runs/ranking.json

``--json`` writes a record a row (``benchmarks/records.py``'s schema).
"""

import argparse
import os
import platform
import shlex
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import machine  # noqa: E402  (benchmarks/machine.py)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)
import tensorflow as tf  # noqa: E402
from machine import matmul_gflops  # noqa: E402

from tfseqrec import block_ranking  # noqa: E402
from tfseqrec.data import vocab  # noqa: E402


def make_inputs(users, items, hidden, history, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.standard_normal((users, hidden)).astype(np.float32)
    table = (rng.standard_normal((items, hidden)) / np.sqrt(hidden)).astype(np.float32)
    targets = rng.integers(0, items, users).astype(np.int32) + vocab.NUM_RESERVED
    seen = rng.integers(0, items, (users, history)).astype(np.int32) + vocab.NUM_RESERVED
    return query, table, targets, seen


@tf.function(reduce_retracing=True)
def matmul_only(query, table, chunk):
    """The matmuls of ``query_blocks`` over every block of ``chunk`` items, and nothing else."""
    num_items = tf.shape(table)[0]

    def body(start, total):
        scores = tf.matmul(query, table[start : tf.minimum(start + chunk, num_items)], transpose_b=True)
        return start + chunk, total + scores[:, 0]

    _, total = tf.while_loop(lambda start, _: start < num_items, body, (0, tf.zeros(tf.shape(query)[:1])))
    return total


def time_row(name, fn, query, table, targets, seen, batch):
    """Seconds to run ``fn`` over every batch (after one untimed batch that traces)."""
    fn(query[:batch], table, targets[:batch], seen[:batch])
    start = time.perf_counter()
    for i in range(0, len(query), batch):
        fn(
            query[i : i + batch], table, targets[i : i + batch], seen[i : i + batch]
        ).numpy()  # .numpy(): wait for it
    seconds = time.perf_counter() - start
    return {"row": name, "seconds": seconds, "users_per_s": len(query) / seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--history", type=int, default=50, help="history items excluded per user")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--chunk", type=int, default=block_ranking.CHUNK_ITEMS, help="items a block")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    started = machine.now()

    query, table, targets, seen = make_inputs(args.users, args.items, args.hidden, args.history)
    query, table = tf.constant(query), tf.constant(table)
    rank = tf.function(
        lambda q, t, y, h: block_ranking.rank_targets_by_query(q, t, y, h, chunk_items=args.chunk),
        reduce_retracing=True,
    )
    rows = [
        time_row(
            "matmul only",
            lambda q, t, *_: matmul_only(q, t, args.chunk),
            query,
            table,
            targets,
            seen,
            args.batch,
        ),
        time_row("rank", rank, query, table, targets, seen, args.batch),
    ]
    host = matmul_gflops()
    bound = host * 1e9 / (2 * args.hidden * args.items)
    matmul_rate = rows[0]["users_per_s"]
    for row in rows:
        row.update(
            share_of_bound=row["users_per_s"] / bound, share_of_matmul=row["users_per_s"] / matmul_rate
        )
    print(
        f"{args.users:,} users x {args.items:,} items, hidden {args.hidden}, history {args.history}, "
        f"batch {args.batch}, blocks of {args.chunk}; TensorFlow {tf.__version__}, {os.cpu_count()} CPUs\n"
    )
    print(
        f"| row | seconds | users/s | share of the host's {host:.0f} GFLOP/s bound ({bound:,.0f} users/s) "
        "| share of matmul only |"
    )
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['row']} | {row['seconds']:.2f} | {row['users_per_s']:,.0f} | {100 * row['share_of_bound']:.0f}% "
            f"| {100 * row['share_of_matmul']:.0f}% |"
        )
    if args.json:
        options = {k: v for k, v in vars(args).items() if k != "json"}
        extra = {
            "bound_users_per_s": bound,
            "tensorflow": tf.__version__,
            "python": platform.python_version(),
        }
        provenance = {
            "commit": machine.code_version(),
            "host_matmul_gflops": host,
            "environment": machine.environment(),
            "started": started,
            "ended": machine.now(),
            "command": shlex.join(["python", "benchmarks/ranking.py", *sys.argv[1:]]),
        }
        records.write(
            args.json,
            [
                records.record(
                    "ranking",
                    "ranking",
                    None,
                    label=row["row"],
                    options=options,
                    metrics={k: v for k, v in row.items() if k != "row"},
                    extra=extra,
                    **provenance,
                )
                for row in rows
            ],
        )


if __name__ == "__main__":
    main()
