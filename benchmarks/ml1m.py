"""MovieLens-1M benchmark: accuracy and speed of SASRec and BERT4Rec on this machine.

Leave-one-out on the SASRec ``ml-1m.txt`` (6,040 users, 3,416 items), test split,
full ranking over all items. Each model trains under a wall-clock budget (default 30
minutes of ``fit`` time, validation included) with early stopping on validation
NDCG@10, then the best weights are evaluated:

- full-catalogue NDCG@10 / HR@10 / MRR, with and without already-seen items filtered;
- the sampled metrics of the papers, labelled as such: 100 uniform negatives (SASRec
  paper) and 100 popularity-sampled negatives (BERT4Rec paper);
- seconds per training epoch, peak resident memory, and training FLOP/s (an analytic
  count of the matmuls actually run: 3x the forward pass) against the ~130 GFLOP/s
  a large fp32 matmul reaches on this CPU.

Usage:
    python benchmarks/ml1m.py --model sasrec --minutes 30
    python benchmarks/ml1m.py --model bert4rec --minutes 30 --json out.json
Data: $TFSEQREC_DATA/ml-1m/ml-1m.txt (default ../shared/data).
"""

import argparse
import json
import os
import platform
import resource
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfseqrec import evaluation, training  # noqa: E402

PEAK_GFLOPS = 130.0
DEFAULTS = {
    "sasrec": {"model": "sasrec", "hidden_dim": 64, "num_layers": 2, "num_heads": 1, "dropout": 0.1,
               "batch_size": 128, "learning_rate": 1e-3},
    "bert4rec": {"model": "bert4rec", "hidden_dim": 64, "num_layers": 2, "num_heads": 2, "dropout": 0.1,
                 "batch_size": 128, "learning_rate": 1e-3, "mask_prob": 0.2},
}


class EpochTimer(keras.callbacks.Callback):
    """Training seconds of each epoch, validation excluded."""

    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_test_begin(self, logs=None):
        if hasattr(self, "start"):
            self.seconds.append(time.perf_counter() - self.start)
            del self.start


def training_flops_per_epoch(config, dataset, num_items):
    """Matmul FLOPs of one epoch over the batches ``dataset`` yields (forward x 3)."""
    d, ff = config.hidden_dim, config.intermediate_dim or (d_ff_default(config))
    total = 0.0
    for batch in dataset:
        x = batch[0] if isinstance(batch, tuple) else batch
        ids = x["item_ids"]
        b, length = int(ids.shape[0]), int(ids.shape[1])
        tokens = b * length
        per_layer = 2 * tokens * (4 * d * d + 2 * d * ff) + 2 * 2 * b * length * length * d
        forward = config.num_layers * per_layer
        if config.model == "bert4rec":
            targets = tokens * config.mask_prob  # expected masked positions
            forward += 2 * tokens * d * d  # output projection
        else:
            targets = float(np.sum(batch[2]))
        forward += 2 * targets * d * num_items  # scores over the catalogue
        total += 3 * forward
    return total


def d_ff_default(config):
    return config.hidden_dim if config.model == "sasrec" else 4 * config.hidden_dim


def run(model_name, data, minutes, seed, overrides):
    values = dict(DEFAULTS[model_name], epochs=1000, patience=20, max_train_minutes=minutes, seed=seed, **overrides)
    config = training.TrainConfig.from_dict(values)
    timer = EpochTimer()
    out = tempfile.mkdtemp(prefix=f"ml1m-{model_name}-")
    start = time.perf_counter()
    model, history, split, vocabulary = training.train(data, out, config, callbacks=[timer], verbose=2)
    train_wall = time.perf_counter() - start
    flops = training_flops_per_epoch(config, training.training_dataset(config, split.train), vocabulary.num_items)
    results = {}
    for exclude in (True, False):
        results[f"full_exclude_seen={exclude}"] = evaluation.evaluate(model, split.test, exclude_seen=exclude, progress=False)
    for sampler in ("uniform", "popularity"):
        results[f"sampled_{sampler}"] = evaluation.evaluate(
            model, split.test, sampled={"num_negatives": 100, "sampler": sampler}, item_counts=vocabulary.counts,
            seed=seed, progress=False,
        )
    epoch_seconds = float(np.median(timer.seconds[1:] or timer.seconds))
    val = history.history["val_ndcg_10"]
    return {
        "model": model_name,
        "config": values,
        "epochs": len(val),
        "best_epoch": int(np.argmax(val)) + 1,
        "best_val_ndcg@10": float(np.max(val)),
        "train_wall_seconds": train_wall,
        "epoch_seconds_median": epoch_seconds,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "train_gflop_per_epoch": flops / 1e9,
        "train_gflops": flops / 1e9 / epoch_seconds,
        "results": results,
    }


def print_table(runs):
    print(f"ML-1M leave-one-out, test split, {os.cpu_count()} CPU cores, TensorFlow {tf.__version__}, "
          f"Keras {keras.__version__}, Python {platform.python_version()}")
    print()
    print("| model | seen filtered | NDCG@10 | HR@10 | MRR | sampled NDCG@10 (100 uniform) | "
          "sampled NDCG@10 (100 popularity) |")
    print("|---|---|---|---|---|---|---|")
    for r in runs:
        res = r["results"]
        for exclude in (True, False):
            full = res[f"full_exclude_seen={exclude}"]
            sampled = (f"{res['sampled_uniform']['sampled_ndcg@10']:.4f}", f"{res['sampled_popularity']['sampled_ndcg@10']:.4f}") if exclude else ("", "")
            print(f"| {r['model']} | {'yes' if exclude else 'no'} | {full['ndcg@10']:.4f} | {full['hr@10']:.4f} | "
                  f"{full['mrr']:.4f} | {sampled[0]} | {sampled[1]} |")
    print()
    print("| model | epochs (best) | train wall (s) | s/epoch | peak RSS (GiB) | GFLOP/epoch | GFLOP/s | % of 130 GFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(f"| {r['model']} | {r['epochs']} ({r['best_epoch']}) | {r['train_wall_seconds']:.0f} | "
              f"{r['epoch_seconds_median']:.1f} | {r['peak_rss_gib']:.2f} | {r['train_gflop_per_epoch']:.0f} | "
              f"{r['train_gflops']:.1f} | {100 * r['train_gflops'] / PEAK_GFLOPS:.0f}% |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["sasrec", "bert4rec", "both"], default="sasrec")
    parser.add_argument("--minutes", type=float, default=30.0, help="training budget per model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="{}", help="JSON overrides of the training options")
    parser.add_argument("--data", default=os.path.join(os.environ.get("TFSEQREC_DATA", "../shared/data"), "ml-1m", "ml-1m.txt"))
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    names = ["sasrec", "bert4rec"] if args.model == "both" else [args.model]
    runs = [run(name, args.data, args.minutes, args.seed, json.loads(args.config)) for name in names]
    print_table(runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=2)


if __name__ == "__main__":
    main()
