"""Cloze masking speed: tfseqrec's dense ClozeMasking against a per-item Python loop.

Prints sequences per second at batch 1024, length 200 for

- ``ClozeMasking`` in a compiled ``tf.function`` (graph), with XLA, and as a
  ``tf.data`` map (the whole input pipeline: slicing, batching, masking);
- the per-item Python loop of the widely copied PyTorch ``BertTrainDataset``
  (``random.random()`` per item, 80/10/10 branches) followed by collating the batch,
  as a ``DataLoader`` does;

and the share of a ``tfseqrec.models.BERT4Rec`` training step (ML-1M size: 3,416
items, length 200, hidden 64, 2 blocks, 2 heads, batch 256, full softmax on masked
positions) that masking takes when it runs inside the step.

``--json`` writes one record (``benchmarks/records.py``'s schema) holding both tables'
figures with the run's command, the commit of the library code, start and end times and
the environment (``benchmarks/machine.py``); ``benchmarks/render.py`` renders it.

Usage: python benchmarks/masking.py [--batch-size 1024] [--length 200] [--json FILE]
"""

import argparse
import os
import random
import shlex
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import machine  # noqa: E402  (benchmarks/machine.py)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)
import tensorflow as tf  # noqa: E402

from tfseqrec.data import ClozeMasking, ClozePreprocessor, pipeline, splits, vocab  # noqa: E402
from tfseqrec.models import BERT4Rec  # noqa: E402

NUM_ITEMS = 3416  # ML-1M
LOOP = "per-item Python loop + collate (BertTrainDataset)"  # the row the others are set against


def make_batch(rng, batch_size, length):
    """Full-length histories: every position is a real item (the worst case)."""
    return rng.integers(vocab.NUM_RESERVED, vocab.NUM_RESERVED + NUM_ITEMS, size=(batch_size, length)).astype(
        np.int32
    )


def timed(fn, min_seconds=2.0, warmup=3):
    for _ in range(warmup):
        fn()
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / n


def python_loop_masking(seqs, mask_prob, length, rnd):
    """The per-item loop of PyTorch BERT4Rec ports' ``BertTrainDataset.__getitem__``."""
    batch_tokens, batch_labels = [], []
    for seq in seqs:
        tokens, labels = [], []
        for s in seq:
            prob = rnd.random()
            if prob < mask_prob:
                prob /= mask_prob
                if prob < 0.8:
                    tokens.append(vocab.MASK_ID)
                elif prob < 0.9:
                    tokens.append(rnd.randint(vocab.NUM_RESERVED, vocab.NUM_RESERVED + NUM_ITEMS - 1))
                else:
                    tokens.append(s)
                labels.append(s)
            else:
                tokens.append(s)
                labels.append(0)
        tokens, labels = tokens[-length:], labels[-length:]
        pad = length - len(tokens)
        batch_tokens.append([0] * pad + tokens)
        batch_labels.append([0] * pad + labels)
    # default_collate: stack the per-sample lists into batch arrays.
    return np.asarray(batch_tokens, np.int64), np.asarray(batch_labels, np.int64)


def print_tables(result):
    """The two tables of a result (``main``'s, or a stored ``--json``): sequences/s a method, the step's share."""
    rows = result["rows"]
    loop_rate = rows[LOOP]
    print(f"| {'method':<52} | {'sequences/s':>12} | {'vs loop':>8} |")
    print(f"|{'-' * 54}|{'-' * 14}|{'-' * 10}|")
    for name, rate in rows.items():
        print(f"| {name:<52} | {rate:>12,.0f} | {rate / loop_rate:>7.1f}x |")
    print()
    print(
        f"tfseqrec.models.BERT4Rec training step (batch {result['step_batch_size']}, length {result['length']}, "
        "hidden 64, 2 blocks, 2 heads, full softmax on masked positions):"
    )
    print()
    print(f"| {'measure':<52} | {'value':>12} |")
    print(f"|{'-' * 54}|{'-' * 14}|")
    print(f"| {'step with masking inside (ms)':<52} | {result['step_ms']:>12.1f} |")
    print(f"| {'step on pre-masked batch (ms)':<52} | {result['premasked_step_ms']:>12.1f} |")
    print(f"| {'masking alone, same batch (ms)':<52} | {result['masking_ms']:>12.2f} |")
    print(f"| {'masking share of the step':<52} | {result['masking_share']:>11.2%} |")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--length", type=int, default=200)
    parser.add_argument("--mask-prob", type=float, default=0.2)
    parser.add_argument("--step-batch-size", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=3.0, help="minimum timing window per row")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    command = shlex.join(["python", "benchmarks/masking.py", *sys.argv[1:]])
    started = machine.now()
    rng = np.random.default_rng(0)
    ids = make_batch(rng, args.batch_size, args.length)
    x = tf.constant(ids)
    rows = []

    for name, jit in (
        ("ClozeMasking, tf.function (graph)", False),
        ("ClozeMasking, tf.function + XLA", True),
    ):
        layer = ClozeMasking(NUM_ITEMS, args.mask_prob, seed=0)
        fn = tf.function(lambda t, layer=layer: layer(t), jit_compile=jit)
        seconds = timed(lambda fn=fn: fn(x)[2].numpy(), args.seconds)
        rows.append((name, args.batch_size / seconds))

    # The whole input pipeline: windows sliced from a Sequences table, shuffled,
    # batched as `cloze_dataset` serves them to fit, and masked in the pipeline by the
    # preprocessor BERT4Rec otherwise calls in its training step (a ClozeMasking).
    num_seqs = 16 * args.batch_size
    seqs = splits.Sequences.from_list(
        [str(i) for i in range(num_seqs)], list(make_batch(rng, num_seqs, args.length))
    )
    masking = ClozePreprocessor(NUM_ITEMS, args.mask_prob, seed=0)
    ds = pipeline.cloze_dataset(seqs, args.length, args.batch_size, seed=0).map(masking).repeat()
    it = iter(ds)
    seconds = timed(lambda: next(it), args.seconds)
    rows.append(("cloze_dataset + ClozeMasking (tf.data map)", args.batch_size / seconds))

    rnd = random.Random(0)
    seq_lists = ids.tolist()
    seconds = timed(
        lambda: python_loop_masking(seq_lists, args.mask_prob, args.length, rnd), args.seconds, warmup=1
    )
    loop_rate = args.batch_size / seconds
    rows.append((LOOP, loop_rate))

    # Share of a real BERT4Rec training step (ML-1M size). train_on_batch on an
    # unlabeled batch masks inside the compiled step; on (masked, labels, weights)
    # it trains on a batch masked beforehand.
    keras.utils.set_random_seed(0)
    model = BERT4Rec(
        num_items=NUM_ITEMS,
        max_sequence_length=args.length,
        hidden_dim=64,
        num_layers=2,
        num_heads=2,
        mask_prob=args.mask_prob,
        seed=0,
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    step_ids = make_batch(rng, args.step_batch_size, args.length)
    x = {"item_ids": step_ids, "padding_mask": (step_ids != 0).astype(np.int32)}
    step_seconds = timed(lambda: model.train_on_batch(x), args.seconds)
    x_masked, labels, weights = model.masking(x)
    premasked_seconds = timed(lambda: model.train_on_batch(x_masked, labels, weights), args.seconds)
    step_masking = ClozeMasking(NUM_ITEMS, args.mask_prob, seed=1)
    mask_fn = tf.function(lambda t: step_masking(t))
    step_tensor = tf.constant(step_ids)
    mask_seconds = timed(lambda: mask_fn(step_tensor)[2].numpy(), args.seconds)

    result = {
        "batch_size": args.batch_size,
        "length": args.length,
        "num_items": NUM_ITEMS,
        "mask_prob": args.mask_prob,
        "step_batch_size": args.step_batch_size,
        "rows": {name: rate for name, rate in rows},
        "step_ms": step_seconds * 1e3,
        "premasked_step_ms": premasked_seconds * 1e3,
        "masking_ms": mask_seconds * 1e3,
        "masking_share": mask_seconds / step_seconds,
        "command": command,
        "commit": machine.code_version(),
        "started": started,
        "ended": machine.now(),
        "environment": machine.environment(),
    }
    print(
        f"Cloze masking, batch {args.batch_size} x length {args.length}, {NUM_ITEMS} items, "
        f"mask_prob {args.mask_prob}; {result['environment']}"
    )
    print()
    print_tables(result)
    if args.json:
        records.write(args.json, records.from_masking(result))


if __name__ == "__main__":
    main()
