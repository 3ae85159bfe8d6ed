"""Recformer benchmark on Amazon Scientific: fine-tuned, zero-shot and cold start.

Leave-one-out on ``amazon-scientific-text`` (8,317 users, 4,344 items), test split,
full ranking over all items with the user's history filtered. Rows:

- popularity: items by training-interaction count;
- SASRec trained by this library on the same split (best epoch by validation NDCG@10);
- Recformer zero-shot: all-MiniLM-L6-v2 (first ``--layers`` layers) after ``[CLS]``
  alignment on item text only; no interaction of this dataset is read;
- Recformer fine-tuned: the two stages of the paper on the training sequences.

Each row is also evaluated on the cold test cases (the target never occurs in the
training sequences) and on the other ("warm") cases. Times are wall seconds on this
machine.

Usage:
    python benchmarks/recformer.py --minutes 60
Data: $TFSEQREC_DATA/amazon-scientific-text (default ../shared/data).
"""

import argparse
import json
import os
import platform
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfseqrec import evaluation, training  # noqa: E402
from tfseqrec.training import recformer as recformer_driver  # noqa: E402
from tfseqrec.data import readers, splits  # noqa: E402
from tfseqrec.data import vocab as vocab_lib  # noqa: E402


class Popularity:
    """Scores every item by its training count (the ``score(window)`` interface)."""

    max_sequence_length = 1

    def __init__(self, counts):
        self.counts = tf.constant(counts[vocab_lib.NUM_RESERVED :], tf.float32)

    def score(self, window):
        return tf.tile(self.counts[None, :], [tf.shape(window)[0], 1])


def subset(cases, keep):
    return splits.Cases(cases.histories.select(keep), cases.targets[keep])


def evaluate(model, cases, cold):
    out = {}
    for name, keep in (("all", np.ones(len(cases.targets), bool)), ("warm", ~cold), ("cold", cold)):
        r = evaluation.evaluate(model, subset(cases, keep), progress=False)
        out[name] = {k: r[k] for k in ("ndcg@10", "hr@10", "mrr")}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.environ.get("TFSEQREC_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    parser.add_argument("--data", default=os.path.join(root, "amazon-scientific-text"))
    parser.add_argument("--minutes", type=float, default=60.0, help="Recformer fine-tuning budget")
    parser.add_argument("--sasrec-minutes", type=float, default=10.0)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--config", default=None, help="JSON of RecformerConfig overrides")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--skip-sasrec", action="store_true")
    args = parser.parse_args()

    split, vocabulary, _ = splits.prepare(readers.read_interactions(os.path.join(args.data, "Scientific.inter.json")))
    counts = np.bincount(split.train.values, minlength=vocabulary.size)
    cold = counts[split.test.targets] == 0
    print(f"test cases {len(cold)}, cold (target never in training) {int(cold.sum())}", flush=True)
    results, seconds = {}, {}
    results["popularity"] = evaluate(Popularity(counts), split.test, cold)
    print("popularity", json.dumps(results["popularity"]), flush=True)

    if not args.skip_sasrec:
        start = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            sasrec, _ = training.fit(
                split, vocabulary, tmp,
                {"model": "sasrec", "max_sequence_length": 50, "hidden_dim": 64, "num_layers": 2, "num_heads": 1,
                 "dropout": 0.5, "batch_size": 128, "learning_rate": 1e-3, "epochs": 200, "patience": 10, "seed": 0,
                 "max_train_minutes": args.sasrec_minutes},
                verbose=2,
            )
            seconds["sasrec"] = time.monotonic() - start
            results["sasrec"] = evaluate(sasrec, split.test, cold)
        print("sasrec", json.dumps(results["sasrec"]), flush=True)

    config = training.RecformerConfig(
        attributes=list(recformer_driver.default_attributes(".json")), num_layers=args.layers,
        max_train_minutes=args.minutes, **json.loads(args.config or "{}"),
    )
    keras.utils.set_random_seed(config.seed)
    texts, _ = recformer_driver.item_texts(
        readers.read_item_text(os.path.join(args.data, "Scientific.item.json")), vocabulary, config.attributes
    )
    recommender = recformer_driver.build(config, vocabulary, texts)
    start = time.monotonic()
    recformer_driver.align(recommender, config, verbose=2)
    seconds["recformer zero-shot"] = time.monotonic() - start
    results["recformer zero-shot"] = evaluate(recommender, split.test, cold)
    print("recformer zero-shot", json.dumps(results["recformer zero-shot"]), flush=True)
    start = time.monotonic()
    rows = recformer_driver.finetune(recommender, split, config, verbose=2)
    seconds["recformer fine-tuned"] = time.monotonic() - start
    results["recformer fine-tuned"] = evaluate(recommender, split.test, cold)
    print("recformer fine-tuned", json.dumps(results["recformer fine-tuned"]), flush=True)
    for row in rows:
        print(json.dumps(row))

    print(f"\nAmazon Scientific leave-one-out, test split ({len(cold)} cases, {int(cold.sum())} cold), full ranking "
          f"over {vocabulary.num_items} items, seen filtered; {os.cpu_count()} CPUs, TensorFlow {tf.__version__}, "
          f"Keras {keras.__version__}, Python {platform.python_version()}\n")
    print("| model | NDCG@10 | Recall@10 | MRR | cold NDCG@10 | warm NDCG@10 | cold / warm | train wall (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        ratio = r["cold"]["ndcg@10"] / r["warm"]["ndcg@10"] if r["warm"]["ndcg@10"] else float("nan")
        wall = f"{seconds[name]:.0f}" if name in seconds else ""
        print(f"| {name} | {r['all']['ndcg@10']:.4f} | {r['all']['hr@10']:.4f} | {r['all']['mrr']:.4f} | "
              f"{r['cold']['ndcg@10']:.4f} | {r['warm']['ndcg@10']:.4f} | {ratio:.2f} | {wall} |")
    print(f"\nRecformer: {config.num_layers} of 6 MiniLM layers, {config.max_tokens} tokens, {config.max_sequence_length} "
          f"items per history, window {config.attention_window}, batch {config.batch_size}, lr {config.learning_rate}; "
          f"epochs run: {len(rows)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "seconds": seconds, "rows": rows,
                       "config": vars(config) if hasattr(config, "__dict__") else None}, f, indent=2)


if __name__ == "__main__":
    main()
