"""MovieLens-1M benchmark: accuracy, speed and time to quality of SASRec, BERT4Rec and HSTU.

Leave-one-out, test split, full ranking over all items, on the protocol ``--protocol``
names (``benchmarks/protocols.py``): ``sasrec-plus`` (the default: SASRec's 5-core
``ml-1m.txt``, 6,040 users and 3,416 items, a validation item, the whole history
filtered), ``rectools`` (the raw ratings, 3,706 items, a validation item, the whole
history filtered) or ``hstu-paper`` (the raw ratings, no validation split, the input
window filtered, sampled softmax with 128 uniform negatives per position for a fixed
101 epochs). Each result records its protocol. Each model trains with the library's
defaults (``tfseqrec.training.TrainConfig``, the configuration ``make main`` uses) and
the options the protocol fixes, under a wall-clock budget of ``fit`` time (validation
included). With a validation item, early stopping and the best epoch go by validation
NDCG@10; without one the last epoch is the model. It is evaluated on the test split:

- full-catalogue NDCG@10 / HR@10 / MRR, with the protocol's seen filtering and without;
- the sampled metrics of the papers, labelled as such: 100 uniform negatives (SASRec
  paper) and 100 popularity-sampled negatives (BERT4Rec paper);
- time to quality: minutes of ``fit`` until the best epoch, and until validation
  NDCG@10 first came within 2% of its best (with a validation item);
- seconds per training epoch, peak resident memory, and training FLOP/s (an analytic
  count of the matmuls actually run: 3x the forward pass) against the rate a large
  fp32 matmul reaches on the run's own host, measured before and after training
  (``machine.matmul_gflops``; the higher of the two is stored).

``--json`` writes one record a run (``benchmarks/records.py``'s schema). Several
``--seeds`` add a table of mean and spread. ``--ablation`` trains one
variant per change (each switched off, or on, against the defaults; see
``ABLATIONS``) and prints validation and test NDCG@10 with s/epoch: every choice is
made on validation NDCG@10, test is only reported.

Usage:
    python benchmarks/ml1m.py --model sasrec --minutes 30
    python benchmarks/ml1m.py --model sasrec --minutes 30 --seeds 0 1 2 --json out.json
    python benchmarks/ml1m.py --model sasrec --minutes 10 --ablation all
    python benchmarks/ml1m.py --model hstu --minutes 60 --json out.json
    python benchmarks/ml1m.py --model hstu --protocol hstu-paper --minutes 120 --json out.json
    python benchmarks/ml1m.py --report benchmarks/results/ml1m-bert4rec-*.json   # stored runs, no training
Data: the protocol's file under --data-root ($TFSEQREC_DATA, default ../shared/data).
"""

import argparse
import json
import os
import re
import shlex
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import machine  # noqa: E402  (benchmarks/machine.py)
import numpy as np  # noqa: E402
import protocols  # noqa: E402  (benchmarks/protocols.py)
import records  # noqa: E402  (benchmarks/records.py)

from tfseqrec import evaluation, kinds, training  # noqa: E402

# Each variant changes one thing against the defaults; "previous" is the
# configuration before the reference-code changes, all of them at once.
ABLATIONS = {
    "sasrec": {
        "default": {},
        "softmax over every item (history kept)": {"negatives_exclude_history": False},
        "positions from the newest item": {"position_origin": "newest"},
        "textbook pre-LN block": {"normalized_residual": False},
        "Keras default init": {"initializer_range": 0},
        "per-batch loss mean": {"loss_normalization": "batch"},
        "previous (all five)": {
            "negatives_exclude_history": False,
            "position_origin": "newest",
            "normalized_residual": False,
            "initializer_range": 0,
            "loss_normalization": "batch",
        },
        "BCE, negatives outside history": {"loss": "bce"},
        "BCE, any negative": {"loss": "bce", "negatives_exclude_history": False},
        "bfloat16": {"mixed_precision": True},
        "XLA": {"jit_compile": True},
        "cosine decay over 100 epochs": {
            "learning_rate_schedule": "cosine",
            "epochs": 100,
            "warmup_epochs": 1,
        },
    },
    "bert4rec": {
        "default": {},
        "Adam at 2e-3": {"learning_rate": 2e-3},
        "no warm-up (previous)": {"warmup_epochs": 0},
        "Adam at 1e-3 (previous)": {"learning_rate": 1e-3},
        "Keras default init": {"initializer_range": 0},
        "per-batch loss mean": {"loss_normalization": "batch"},
        "positions from the oldest item": {"position_origin": "oldest"},
        "softmax over every item (history kept)": {"negatives_exclude_history": False},
        "always [MASK] (original code)": {"mask_token_rate": 1.0, "random_token_rate": 0.0},
        "+ last-item-only samples 0.1": {"last_item_only_prob": 0.1},
        "bfloat16": {"mixed_precision": True},
        "XLA": {"jit_compile": True},
    },
    "hstu": {
        "default": {},
        "no relative position bias": {"relative_position_bias": False},
        "softmax attention": {"attention": "softmax"},
        # Log-uniform negatives with logQ correction, the library's sampler; the reference
        # draws uniform ones (--protocol hstu-paper does).
        "sampled softmax, 128 log-uniform negatives per position (logQ)": {"loss": "sampled_softmax"},
        "sampled softmax, 128 log-uniform negatives shared by the batch (logQ)": {
            "loss": "sampled_softmax",
            "negatives_per_position": False,
        },
        "SASRec's size (64 wide, 2 layers)": {"hidden_dim": 64, "num_layers": 2},
    },
}


class EpochTimer(keras.callbacks.Callback):
    """Training seconds of each epoch (validation excluded), and fit time at each epoch's end."""

    def __init__(self):
        super().__init__()
        self.seconds = []
        self.elapsed = []

    def on_train_begin(self, logs=None):
        self.fit_start = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_test_begin(self, logs=None):
        if hasattr(self, "start"):
            self.seconds.append(time.perf_counter() - self.start)
            del self.start

    def on_epoch_end(self, epoch, logs=None):
        self.on_test_begin()  # an epoch without validation (validation="none") ends here
        self.elapsed.append(time.perf_counter() - self.fit_start)


def training_flops_per_epoch(config, dataset, num_items, model):
    """Matmul FLOPs of one epoch of ``model`` over the batches ``dataset`` yields (forward x 3)."""
    total = 0.0
    for batch in dataset:
        x = batch[0] if isinstance(batch, tuple) else batch
        b, length = (int(n) for n in x["item_ids"].shape)
        if config.model == "bert4rec":
            targets = b * length * config.mask_prob  # expected masked positions
        else:
            targets = float(np.sum(batch[2]))
        total += sum(step_flops(config, b, length, targets, num_items, model).values())
    return total


def step_flops(config, batch_size, length, targets, num_items, model):
    """Matmul FLOPs of one training step (forward x 3) on a batch of ``batch_size`` windows of
    ``length`` with ``targets`` scored positions: ``{"attention", "dense", "scores"}``, the
    attention's ``Q K^T`` and ``A V``, the other layers, and the scores over the candidates."""
    net = model.backbone
    d, tokens = net.hidden_dim, batch_size * length
    attention = 2 * 2 * batch_size * length * length * d
    if config.model == "hstu":
        dense = 2 * tokens * 5 * d * d  # U, V, Q, K projection (d -> 4d at the default widths), output d -> d
    else:
        ff = net.intermediate_dim or d_ff_default(config, d)
        dense = 2 * tokens * (4 * d * d + 2 * d * ff)
    dense *= net.num_layers
    if config.model == "bert4rec":
        dense += 2 * tokens * d * d  # output projection
    candidates = num_items if config.loss == "softmax" else 1 + (config.num_negatives or 0)
    scores = 2 * targets * d * candidates  # over the catalogue or the sampled candidates
    return {"attention": 3 * net.num_layers * attention, "dense": 3 * dense, "scores": 3 * scores}


def d_ff_default(config, hidden_dim):
    """The feed-forward width the model builds when ``intermediate_dim`` is unset."""
    return hidden_dim if config.model == "sasrec" else 4 * hidden_dim


def trained_config(kind, model_dir):
    """The ``TrainConfig`` a run in ``model_dir`` recorded: its options as it settled them (batch size, time bias)."""
    with open(os.path.join(model_dir, kind.config_file)) as f:
        return training.TrainConfig.from_dict(json.load(f)["config"])


def run(model_name, protocol, data_root, minutes, seed, overrides, sampled=True):
    """Trains ``model_name`` on ``protocol`` (a ``protocols.Protocol``) and evaluates it on the test split."""
    values = protocol.training_options(
        dict(model=model_name, max_train_minutes=minutes, seed=seed, **overrides)
    )
    started = machine.now()
    host_gflops = machine.matmul_gflops()
    config = training.TrainConfig.from_dict(values)
    timer = EpochTimer()
    out = tempfile.mkdtemp(prefix=f"ml1m-{model_name}-")
    start = time.perf_counter()
    kind = kinds.get(config.model)
    data = protocols.data_path(protocol, data_root)
    model, history, split, vocabulary = training.train(kind, data, out, config, callbacks=[timer], verbose=2)
    train_wall = time.perf_counter() - start
    config = trained_config(kind, out)  # the batch size as the run settled it (None: by the data)
    flops = training_flops_per_epoch(
        config, kind.training_dataset(config, split.train), vocabulary.num_items, model
    )
    epoch_seconds = float(np.median(timer.seconds[1:] or timer.seconds))
    return {
        "model": model_name,
        "seed": seed,
        "protocol": protocol.name,
        "data": protocol.data_file,
        "commit": machine.code_version(),
        "started": started,
        "ended": machine.now(),
        "environment": machine.environment(),
        "config": values,
        **time_to_quality(history, timer),
        "train_wall_seconds": train_wall,
        "epoch_seconds_median": epoch_seconds,
        "peak_rss_gib": machine.peak_rss_gib(),
        "train_gflop_per_epoch": flops / 1e9,
        "train_gflops": flops / 1e9 / epoch_seconds,
        # A busy CPU only lowers a measurement, so the higher one is the host's rate.
        "host_matmul_gflops": max(host_gflops, machine.matmul_gflops()),
        "results": test_results(model, split, vocabulary, protocol, seed, sampled),
    }


def test_results(model, split, vocabulary, protocol, seed, sampled):
    """Test metrics: full ranking with the protocol's seen filtering and without, and the sampled ones."""
    results = {}
    for exclude in (protocol.evaluation_exclude_seen, False):
        results[f"full_exclude_seen={exclude}"] = evaluation.evaluate(
            model, split.test, exclude_seen=exclude, progress=False
        )
    for sampler in ("uniform", "popularity") if sampled else ():
        results[f"sampled_{sampler}"] = evaluation.evaluate(
            model,
            split.test,
            sampled={"num_negatives": 100, "sampler": sampler},
            item_counts=vocabulary.counts,
            seed=seed,
            progress=False,
        )
    return results


def near_best_epoch(val):
    """The index of the first epoch whose validation NDCG@10 is within 98% of the best."""
    val = np.asarray(val)
    return int(np.argmax(val >= 0.98 * val.max()))


def time_to_quality(history, timer):
    """Epochs, the best one by validation NDCG@10 and the minutes to it and to 98% of it; the
    validation NDCG@10 and the minutes of `fit` at the end of every epoch.

    Without a validation split (``validation="none"``) the last epoch is the model, and
    the validation fields are ``None``.
    """
    epochs = len(timer.elapsed)
    if "val_ndcg_10" not in history.history:
        return {
            "epochs": epochs,
            "best_epoch": epochs,
            "best_val_ndcg@10": None,
            "val_ndcg@10": [],
            "minutes_at_epoch": [t / 60 for t in timer.elapsed],
            "minutes_to_best": timer.elapsed[-1] / 60,
            "minutes_to_98pct_of_best": None,
        }
    val = np.asarray(history.history["val_ndcg_10"])
    best = int(np.argmax(val))
    near = near_best_epoch(val)
    return {
        "epochs": len(val),
        "best_epoch": best + 1,
        "best_val_ndcg@10": float(val[best]),
        "val_ndcg@10": val.tolist(),
        "minutes_at_epoch": [t / 60 for t in timer.elapsed],
        "minutes_to_best": timer.elapsed[best] / 60,
        "minutes_to_98pct_of_best": timer.elapsed[near] / 60,
    }


def protocol_of(run):
    """The protocol ``run`` was measured on; runs stored before protocols were recorded are ``sasrec-plus``."""
    return run.get("protocol", "sasrec-plus")


def filtered(run):
    """The test metrics of ``run`` with its protocol's seen filtering (whole history or input window)."""
    results = run["results"]
    return results.get("full_exclude_seen=window") or results["full_exclude_seen=True"]


def header(runs):
    where = sorted({r.get("environment", "environment not recorded") for r in runs})
    print(f"ML-1M leave-one-out, test split, {'; '.join(where)}")
    print()


# The "seen filtered" cell of each ``exclude_seen``.
SEEN_LABELS = {True: "yes", "window": "input window", False: "no"}


def accuracy_table(runs):
    """Markdown: test metrics of each run, with and without seen items filtered, and the sampled ones."""
    lines = [
        "| model | seed | seen filtered | NDCG@10 | HR@10 | MRR | sampled NDCG@10 (100 uniform) | "
        "sampled NDCG@10 (100 popularity) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        res = r["results"]
        for full in (filtered(r), res["full_exclude_seen=False"]):
            exclude = full["exclude_seen"]
            sampled = ("", "")
            if exclude and "sampled_uniform" in res:
                sampled = tuple(
                    f"{res[f'sampled_{s}']['sampled_ndcg@10']:.4f}" for s in ("uniform", "popularity")
                )
            lines.append(
                f"| {r['model']} | {r['seed']} | {SEEN_LABELS[exclude]} | {full['ndcg@10']:.4f} | "
                f"{full['hr@10']:.4f} | {full['mrr']:.4f} | {sampled[0]} | {sampled[1]} |"
            )
    return "\n".join(lines)


def speed_table(runs):
    """Markdown: epochs, time to quality, s/epoch, memory and training FLOP/s of each run."""
    lines = [
        "| model | seed | epochs (best) | min to best | min to 98% of best | train wall (s) | s/epoch | "
        "peak RSS (GiB) | GFLOP/epoch | GFLOP/s | share of the host's fp32 matmul GFLOP/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['model']} | {r['seed']} | {r['epochs']} ({r['best_epoch']}) | {r['minutes_to_best']:.1f} | "
            f"{minutes_cell(r['minutes_to_98pct_of_best'])} | {r['train_wall_seconds']:.0f} | "
            f"{r['epoch_seconds_median']:.1f} | {r['peak_rss_gib']:.2f} | {r['train_gflop_per_epoch']:.0f} | "
            f"{r['train_gflops']:.1f} | {machine.share(r['train_gflops'], r)} |"
        )
    note = machine.assumed_note(runs)
    if note:
        lines += ["", note]
    return "\n".join(lines)


def minutes_cell(value):
    """One decimal, or empty where nothing was measured (no validation split)."""
    return "" if value is None else f"{value:.1f}"


def seed_summary(runs):
    """Markdown: mean and spread (sample standard deviation, min-max) over seeds, per model."""
    lines = [
        "| model | seeds | NDCG@10 mean ± std (min-max) | HR@10 mean ± std (min-max) | best epoch (mean) | "
        "min to best (mean) |",
        "|---|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(r["model"] for r in runs):
        group = [r for r in runs if r["model"] == name]
        cells = []
        for key in ("ndcg@10", "hr@10"):
            v = np.array([filtered(r)[key] for r in group])
            std = v.std(ddof=1) if len(v) > 1 else 0.0
            cells.append(f"{v.mean():.4f} ± {std:.4f} ({v.min():.4f}-{v.max():.4f})")
        seeds = ", ".join(str(r["seed"]) for r in group)
        lines.append(
            f"| {name} | {seeds} | {cells[0]} | {cells[1]} | {np.mean([r['best_epoch'] for r in group]):.0f} | "
            f"{np.mean([r['minutes_to_best'] for r in group]):.1f} |"
        )
    return "\n".join(lines)


def ablation_table(runs):
    """Markdown: one row a variant; "val NDCG@10 at epoch N" (N: the fewest epochs of any run) compares
    variants by epochs rather than minutes, which a CPU shared for part of the runs skews. Without a
    validation split (``validation="none"``) the validation cells are empty."""
    common = min(len(r["val_ndcg@10"]) for r in runs)
    lines = [
        "| model | variant | best val NDCG@10 | test NDCG@10 | test HR@10 | epochs (best) | s/epoch | "
        f"min to best | val NDCG@10 at epoch {common} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        full = filtered(r)
        at_common = r["val_ndcg@10"][common - 1] if common else None
        lines.append(
            f"| {r['model']} | {r['variant']} | {_value(r['best_val_ndcg@10'])} | {full['ndcg@10']:.4f} | "
            f"{full['hr@10']:.4f} | {r['epochs']} ({r['best_epoch']}) | {r['epoch_seconds_median']:.1f} | "
            f"{r['minutes_to_best']:.1f} | {_value(at_common)} |"
        )
    return "\n".join(lines)


def _value(value):
    """Four places, or empty where nothing was measured (no validation split)."""
    return "" if value is None else f"{value:.4f}"


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        choices=["sasrec", "bert4rec", "hstu", "both"],
        default="sasrec",
        help="'both': SASRec then BERT4Rec",
    )
    parser.add_argument(
        "--protocol",
        choices=list(protocols.PROTOCOLS),
        default="sasrec-plus",
        help="data file, validation, seen filtering and the training options it fixes "
        "(benchmarks/protocols.py; default sasrec-plus)",
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="training budget per model")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--config", default="{}", help="JSON overrides of the training options")
    parser.add_argument(
        "--ablation",
        help="variant names of ABLATIONS separated by commas without a space "
        "(a name may hold ', '), or 'all'",
    )
    parser.add_argument(
        "--data-root",
        default=os.environ.get("TFSEQREC_DATA", "../shared/data"),
        help="the folder holding ml-1m/ (default $TFSEQREC_DATA, else ../shared/data)",
    )
    parser.add_argument("--json", help="also write the results here (rewritten after every run)")
    parser.add_argument(
        "--report",
        nargs="+",
        metavar="JSON",
        help="train nothing: print the tables of runs stored by --json (several files, e.g. "
        "seeds run on different days, make one table)",
    )
    args = parser.parse_args()
    if args.report:
        report([records.to_run(r) for path in args.report for r in json.load(open(path))])
        return
    names = ["sasrec", "bert4rec"] if args.model == "both" else [args.model]
    protocol = protocols.get(args.protocol)
    overrides = json.loads(args.config)
    command = shlex.join(["python", "benchmarks/ml1m.py", *sys.argv[1:]])
    runs = []

    def record(result):
        runs.append({**result, "command": command})
        if args.json:
            records.write(args.json, [records.from_ml1m(r) for r in runs])

    for name in names:
        variants = chosen_variants(parser, name, args.ablation) if args.ablation else {None: {}}
        for variant, changes in variants.items():
            for seed in args.seeds:
                result = run(
                    name, protocol, args.data_root, args.minutes, seed, {**overrides, **changes}, not variant
                )
                record(result if variant is None else {**result, "variant": variant})
    report(runs)


def chosen_variants(parser, name, ablation):
    """``{variant: its changes}`` of ``ABLATIONS[name]`` that ``--ablation`` names."""
    variants = ABLATIONS[name]
    # Names may hold ", " ("BCE, any negative"): only a comma without a space separates.
    chosen = list(variants) if ablation == "all" else re.split(r",(?! )", ablation)
    unknown = [v for v in chosen if v not in variants]
    if unknown:
        parser.error(f"unknown {name} ablation variants {unknown}; known: {list(variants)}")
    return {v: variants[v] for v in chosen}


def report(runs):
    """The tables of ``runs``: the ablation table for variants, else results and the seed summary."""
    header(runs)
    print("| model | seed | protocol | variant | code (commit) | started | ended |")
    print("|---|---|---|---|---|---|---|")
    for r in runs:
        print(
            f"| {r['model']} | {r['seed']} | {protocol_of(r)} | {r.get('variant', '')} | "
            f"{r.get('commit', 'not recorded')} | {r.get('started', '')} | {r.get('ended', '')} |"
        )
    print()
    ablation = [r for r in runs if "variant" in r]
    if ablation:
        print(ablation_table(ablation))
    plain = [r for r in runs if "variant" not in r]
    if plain:
        if ablation:
            print()
        print(accuracy_table(plain))
        print()
        print(speed_table(plain))
        if len({r["seed"] for r in plain}) > 1:
            print()
            print(seed_summary(plain))


if __name__ == "__main__":
    main()
