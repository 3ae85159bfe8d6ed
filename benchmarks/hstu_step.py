"""Where an HSTU training step's time goes on the CPU, and what ``--xla`` and ``--mixed-precision`` do to it.

Times ``tfseqrec.models.HSTU`` at its ML-1M size (3,416 items, length 200, width 50,
8 layers, 2 heads, dropout 0.2; the full softmax without the sequence's items) on one
batch of 128 windows for each of the widths the training batches of long histories
have (``bucket_boundaries`` 50 and 100, then 200), each window's length drawn between
half the width and the width, left-padded as the pipeline pads them:

- the training step (``train_on_batch``: forward, loss, backward, Adam) in float32, as
  ``tfseqrec train`` runs it by default, with XLA (``--xla``) and with bfloat16
  activations (``--mixed-precision`` on a CPU);
- the backbone's forward and backward alone (float32): the rest of the step is the
  loss over the catalogue and Adam.

Each is called once in turn, ``--rounds`` times, and its median kept: this CPU is a
shared virtual machine whose speed drifts by 10-20% within minutes, and taking turns
slows every variant alike. For each width, too, the step's matmul FLOPs split between
the attention's two ``[n, n]`` products (``Q K^T`` and ``A V``), the dense layers and
the scores over the catalogue (``ml1m.step_flops``, the count of the ML-1M runs'
GFLOP/s), with the rate the step reaches as a share of the host's fp32 matmul rate
(``machine.matmul_gflops``).

``--json`` writes a record a width (``benchmarks/records.py``'s schema) with the run's
command, the commit of the library code, start and end times, the environment and the
host's rate; ``benchmarks/render.py`` renders them.

Usage: python benchmarks/hstu_step.py [--batch-size 128] [--widths 50 100 200] [--rounds 15] [--json FILE]
"""

import argparse
import os
import shlex
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import machine  # noqa: E402  (benchmarks/machine.py)
import ml1m  # noqa: E402  (benchmarks/ml1m.py: its FLOP count)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)
import tensorflow as tf  # noqa: E402

from tfseqrec import training  # noqa: E402
from tfseqrec.data import vocab  # noqa: E402
from tfseqrec.models import HSTU  # noqa: E402

NUM_ITEMS = 3416  # ML-1M (ml-1m.txt)
LENGTH = 200
# The variants of the training step: (name, jit_compile, dtype policy).
VARIANTS = (
    ("float32 (the default)", False, "float32"),
    ("XLA (--xla)", True, "float32"),
    ("bfloat16 activations (--mixed-precision)", False, "mixed_bfloat16"),
)
BASE = VARIANTS[0][0]  # the variant the others are set against
BACKBONE = "backbone forward and backward, float32"


def make_batch(rng, batch_size, width):
    """``(item_ids, targets, weights)`` of ``batch_size`` left-padded windows, each of
    between ``width // 2 + 1`` and ``width`` items; every real position has a target."""
    lengths = rng.integers(width // 2 + 1, width + 1, size=batch_size)
    ids = np.zeros((batch_size, width), np.int32)
    targets = np.zeros((batch_size, width), np.int32)
    for row, n in enumerate(lengths):
        items = rng.integers(vocab.NUM_RESERVED, vocab.NUM_RESERVED + NUM_ITEMS, size=n + 1)
        ids[row, width - n :] = items[:-1]
        targets[row, width - n :] = items[1:]
    return ids, targets, (targets != vocab.PAD_ID).astype(np.float32)


def interleaved(fns, rounds, warmup=2):
    """``{name: median seconds}`` of each of ``fns`` (``{name: callable}``), timed one call each
    in turn for ``rounds`` rounds after ``warmup`` calls each: a host whose speed drifts
    (a shared virtual machine) slows every one of them alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def model_for(policy):
    keras.mixed_precision.set_global_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        return HSTU(num_items=NUM_ITEMS, max_sequence_length=LENGTH)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def training_step(batch, jit_compile, policy):
    """A call of one training step (``train_on_batch``) of a new model, compiled as the trainer compiles it."""
    ids, targets, weights = batch
    model = model_for(policy)
    model.compile(optimizer=keras.optimizers.Adam(4e-3), jit_compile=jit_compile)
    return lambda: model.train_on_batch({"item_ids": ids}, targets, weights)


def backbone_step(batch):
    """A call of the backbone's forward and backward (float32, dropout on) on ``batch``'s inputs."""
    backbone, ids = model_for("float32").backbone, tf.constant(batch[0])

    @tf.function
    def forward_backward():
        with tf.GradientTape() as tape:
            out = backbone(ids, training=True)
            loss = tf.reduce_sum(out * out)
        return [tf.convert_to_tensor(g) for g in tape.gradient(loss, backbone.trainable_variables)]

    return lambda: [g.numpy() for g in forward_backward()]


def print_tables(result):
    """The tables of a result (``main``'s, or a stored ``--json``): milliseconds a step, and its FLOPs."""
    host = result["host_matmul_gflops"]
    print(
        f"| width | {'step':<42} | {'ms':>7} | {'vs float32':>10} | {'GFLOP/s':>8} | share of {host:.0f} GFLOP/s |"
    )
    print(f"|---|{'-' * 44}|{'-' * 9}|{'-' * 12}|{'-' * 10}|---|")
    for row in result["widths"]:
        gflop = sum(row["flops"].values()) / 1e9
        base = row["ms"][BASE]
        for name, ms in row["ms"].items():
            rate = gflop / (ms / 1e3)
            shown = f"{rate:>8.1f}" if name != BACKBONE else f"{'':>8}"
            share = f"{100 * rate / host:.0f}%" if name != BACKBONE else ""
            print(f"| {row['width']} | {name:<42} | {ms:>7.1f} | {ms / base:>9.2f}x | {shown} | {share} |")
    print()
    print(
        "| width | matmul GFLOP a step | attention's two [n, n] products | dense layers | scores over "
        f"the {result['num_items']:,} items | the loss and Adam's share of the float32 step |"
    )
    print("|---|---|---|---|---|---|")
    for row in result["widths"]:
        flops = row["flops"]
        total = sum(flops.values())
        rest = 1 - row["ms"][BACKBONE] / row["ms"][BASE]
        print(
            f"| {row['width']} | {total / 1e9:.1f} | {100 * flops['attention'] / total:.0f}% | "
            f"{100 * flops['dense'] / total:.0f}% | {100 * flops['scores'] / total:.0f}% | {100 * rest:.0f}% |"
        )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--widths", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--rounds", type=int, default=15, help="calls of each variant, in turn")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    command = shlex.join(["python", "benchmarks/hstu_step.py", *sys.argv[1:]])
    started = machine.now()
    host = machine.matmul_gflops()
    rng = np.random.default_rng(0)
    rows = []
    for width in args.widths:
        batch = make_batch(rng, args.batch_size, width)
        fns = {name: training_step(batch, jit, policy) for name, jit, policy in VARIANTS}
        fns[BACKBONE] = backbone_step(batch)
        ms = {name: 1e3 * seconds for name, seconds in interleaved(fns, args.rounds).items()}
        config = training.TrainConfig.from_dict({"model": "hstu", "loss": "softmax"})
        flops = ml1m.step_flops(
            config, args.batch_size, width, float(batch[2].sum()), NUM_ITEMS, model_for("float32")
        )
        rows.append({"width": width, "ms": ms, "flops": flops})
        print(f"width {width}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items()), flush=True)
    result = {
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "length": LENGTH,
        "num_items": NUM_ITEMS,
        "widths": rows,
        "command": command,
        "commit": machine.code_version(),
        "started": started,
        "ended": machine.now(),
        "environment": machine.environment(),
        # The higher of two measures, before and after, as ml1m.py stores it.
        "host_matmul_gflops": max(host, machine.matmul_gflops()),
    }
    print(f"HSTU at ML-1M's size, batch {args.batch_size}; {result['environment']}")
    print()
    print_tables(result)
    if args.json:
        records.write(args.json, records.from_hstu_step(result))


if __name__ == "__main__":
    main()
