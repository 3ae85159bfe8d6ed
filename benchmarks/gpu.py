"""SASRec and HSTU trained on ML-1M on a GPU with Keras 3's JAX backend, and BERT4Rec's masking share.

TensorFlow has no GPU build on the machine this project borrows a GPU from, so this
benchmark runs the backend-agnostic core (``tfseqrec.models``, ``tfseqrec.losses``,
``tfseqrec.metrics``, ``tfseqrec.data.numpy_pipeline``) under ``KERAS_BACKEND=jax``,
without TensorFlow. It is the first measurement of tfseqrec's models on a GPU.

Protocol ``sasrec-plus`` (``benchmarks/protocols.py``): SASRec's 5-core ``ml-1m.txt``,
leave-one-out with a validation item, full ranking over all 3,416 items with the whole
history filtered. Each model has its ``ml1m`` preset (the sizes and training options
of ``benchmarks/ml1m.py``'s stored CPU runs), batch 128 and the fixed loss normaliser,
and trains under a wall-clock budget of ``fit`` time (validation on every user after
every epoch included) with early stopping (patience 20 on validation NDCG@10). The
best epoch's weights are evaluated on the test split with the same metrics.

Reported per model: seconds per training epoch (median; the first epoch, which
compiles, apart), minutes of ``fit`` to validation NDCG@10 0.18, to 98% of the best
validation NDCG@10 and to the best, the best validation NDCG@10 and the test
NDCG@10 / HR@10 at it. Anchors: SASRec+ (Klenitskiy & Vasilev, RecSys 2023) ran 540 s on a
GPU with the full softmax (the whole run, patience included) and 769 s with 3,000
negatives (``benchmarks/anchors.json``); RecTools' SASRec on ML-20M takes 122.5 s an epoch
on an RTX 3090 (another dataset: a scale reference, not a comparison).

BERT4Rec (ML-1M size: 3,416 items, length 200, hidden 64, 2 blocks, 2 heads, batch
256): milliseconds of a training step that masks inside the compiled step, and of the
same step on a batch masked beforehand; the masking's share of the step is their
difference over the first (``benchmarks/masking.py`` measures the same on the CPU).

``--json FILE`` holds a list of records (``benchmarks/records.py``'s schema), one per
trained model and one for the masking step: a command appends its own to those already in
the file, and rewrites the file after each part, so a run cut short keeps what it
measured. The GPU machine has no git checkout: pass ``--commit``.

Usage (on the GPU machine, Keras, namex and optree installed beside its JAX):
    KERAS_BACKEND=jax python benchmarks/gpu.py --minutes 3 --json gpu.json --commit abc1234
    KERAS_BACKEND=jax python benchmarks/gpu.py --protocol rectools --models hstu --no-masking \\
        --config '{"learning_rate": 4e-3}' --json gpu.json --commit abc1234
"""

import argparse
import inspect
import json
import os
import platform
import shlex
import sys
import time

import keras
import machine  # benchmarks/machine.py
import numpy as np
import protocols  # benchmarks/protocols.py
import records  # benchmarks/records.py

from tfseqrec import losses, metrics, presets, registry
from tfseqrec.data import numpy_pipeline, splits, vocab
from tfseqrec.models import HSTU, BERT4Rec, SASRec

MODELS = {"sasrec": SASRec, "hstu": HSTU}
TARGET_NDCG = 0.18
PATIENCE = 20
MONITOR = "val_ndcg_10"


def preset_options(cls):
    """``(model options, training options)`` of the class's ``ml1m`` preset (``tfseqrec.registry``),
    split by the backbone's arguments.

    The task model passes the options it does not take itself to its backbone
    (``cls.backbone_cls``); ``max_sequence_length`` is both, the model's and the windows'.
    """
    (name,) = [spec.name for spec in registry.MODELS.values() if spec.class_name == cls.__name__]
    preset = dict(registry.get(name).presets["ml1m"].options)
    accepted = set(inspect.signature(cls.backbone_cls.__init__).parameters)
    model = {k: v for k, v in preset.items() if k in accepted}
    training = {k: v for k, v in preset.items() if k not in accepted or k == "max_sequence_length"}
    return model, training


def make_loss(training, seed):
    """The preset's loss, built from its options as ``tfseqrec.training`` builds it."""
    return losses.build(
        training["loss"],
        seed=seed,
        num_negatives=training.get("num_negatives"),
        per_position=training.get("negatives_per_position"),
        sampler=training.get("sampler"),
        exclude_history=training.get("negatives_exclude_history"),
    )


def eval_batches(cases, length, batch_size, timestamps=False):
    """Evaluation inputs as ``Batches``: the window, its mask (and times) and the whole history (right-padded) to filter."""
    inputs = numpy_pipeline.pad_left(cases.histories, length)
    history = numpy_pipeline.pad_left(cases.histories, int(cases.histories.lengths.max()))[:, ::-1]
    # pad_left pads on the left; reversed, every row's padding is on the right, as eval_dataset's.
    x = {
        "item_ids": inputs,
        "padding_mask": numpy_pipeline.padding_mask(inputs),
        "history": np.ascontiguousarray(history),
    }
    if timestamps:
        x["timestamps"] = numpy_pipeline.pad_left_times(cases.histories, length)
    return numpy_pipeline.Batches((x, cases.targets.astype(np.int32)), batch_size, shuffle=False)


class Clock(keras.callbacks.Callback):
    """Per epoch: training seconds, validation seconds, validation NDCG@10; keeps the best weights; stops on budget."""

    def __init__(self, budget_seconds):
        super().__init__()
        self.budget = budget_seconds
        self.rows, self.best, self.best_epoch, self.best_weights = [], -1.0, 0, None

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_start = time.perf_counter()

    def on_test_begin(self, logs=None):
        self.test_start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        end = time.perf_counter()
        ndcg = float(logs[MONITOR])
        self.rows.append(
            {
                "epoch": epoch + 1,
                "train_seconds": self.test_start - self.epoch_start,
                "validation_seconds": end - self.test_start,
                "fit_minutes": (end - self.start) / 60,
                "loss": float(logs["loss"]),
                "val_ndcg@10": ndcg,
            }
        )
        if ndcg > self.best:
            self.best, self.best_epoch, self.best_weights = ndcg, epoch, self.model.get_weights()
        if end - self.start > self.budget or epoch - self.best_epoch >= PATIENCE:
            self.model.stop_training = True


def median(values):
    """The median, ``None`` without values (a run of one epoch has only the compiling one)."""
    return float(np.median(values)) if values else None


def first_minutes(rows, threshold):
    """Minutes of ``fit`` until validation NDCG@10 first reached ``threshold`` (``None``: never)."""
    return next((r["fit_minutes"] for r in rows if r["val_ndcg@10"] >= threshold), None)


def train_model(name, split, num_items, minutes, seed, config=None):
    cls = MODELS[name]
    model_options, training = preset_options(cls)
    for key, value in (config or {}).items():
        (training if key in training else model_options)[key] = value
    # HSTU's time bias, as tfseqrec.kinds settles it: TIME_BUCKETS buckets when the data has event times.
    times = name == "hstu" and split.train.timestamps is not None
    if times:
        model_options.setdefault("num_time_buckets", presets.TIME_BUCKETS)
    length, batch_size = training["max_sequence_length"], training["batch_size"]
    # The windows once: the batches serve them, and the fixed loss normaliser (tfseqrec.training's
    # default) counts their targets.
    windows = numpy_pipeline.causal_windows(split.train, length, timestamps=times)
    train = numpy_pipeline.Batches(windows, batch_size, seed=seed)
    normalizer = losses.fixed_normalizer(np.sum(windows[2] > 0, axis=1), batch_size)
    keras.utils.set_random_seed(seed)
    model = cls(
        num_items=num_items,
        loss=make_loss(training, seed),
        loss_normalizer=normalizer,
        **model_options,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(training["learning_rate"]), metrics=metrics.default_metrics()
    )
    clock = Clock(minutes * 60)
    valid = eval_batches(split.valid, length, 512, times)
    model.fit(train, validation_data=valid, epochs=200, callbacks=[clock], verbose=0)
    model.set_weights(clock.best_weights)
    test = model.evaluate(eval_batches(split.test, length, 512, times), return_dict=True, verbose=0)
    rows = clock.rows
    best = max(rows, key=lambda r: r["val_ndcg@10"])
    return {
        "model": name,
        "options": {**model_options, **training},
        "epochs": len(rows),
        "best_epoch": best["epoch"],
        "best_val_ndcg@10": best["val_ndcg@10"],
        "first_epoch_seconds": rows[0]["train_seconds"],
        "epoch_seconds_median": median([r["train_seconds"] for r in rows[1:]]),
        "validation_seconds_median": median([r["validation_seconds"] for r in rows[1:]]),
        "minutes_to_ndcg_0.18": first_minutes(rows, TARGET_NDCG),
        "minutes_to_98pct_of_best": first_minutes(rows, 0.98 * best["val_ndcg@10"]),
        "minutes_to_best": best["fit_minutes"],
        "fit_minutes": rows[-1]["fit_minutes"],
        "test": {"ndcg@10": float(test["ndcg_10"]), "hr@10": float(test["hr_10"]), "mrr": float(test["mrr"])},
        "curve": rows,
    }


def timed(fn, seconds=3.0, warmup=3):
    for _ in range(warmup):
        fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return (time.perf_counter() - start) / n


def masking_share(num_items, batch_size=256, length=200, seed=0):
    """BERT4Rec's step with in-step masking against the same step on a batch masked beforehand."""
    keras.utils.set_random_seed(seed)
    model = BERT4Rec(
        num_items=num_items, max_sequence_length=length, hidden_dim=64, num_layers=2, num_heads=2, seed=seed
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    ids = np.random.default_rng(seed).integers(
        vocab.NUM_RESERVED, vocab.NUM_RESERVED + num_items, (batch_size, length)
    )
    x = {"item_ids": ids.astype(np.int32), "padding_mask": np.ones((batch_size, length), np.int32)}
    step = timed(lambda: model.train_on_batch(x))
    x_masked, labels, weights = model.masking(x)
    premasked = timed(lambda: model.train_on_batch(x_masked, labels, weights))
    return {
        "num_items": num_items,
        "batch_size": batch_size,
        "length": length,
        "step_ms": step * 1e3,
        "premasked_step_ms": premasked * 1e3,
        "masking_share": (step - premasked) / step,
    }


def _minutes(value):
    return "" if value is None else f"{value:.2f}"


def table(records):
    """Markdown: one row per trained model of ``records`` (``--json``'s list), then BERT4Rec's masking share."""
    lines = [
        "| model | options | seed | epochs (best) | s/epoch | validation s | min to val 0.18 "
        "| min to 98% of best | min to best | best val NDCG@10 | test NDCG@10 | test HR@10 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        for run in record["runs"]:
            lines.append(
                f"| {run['model']} | {record.get('config') or 'preset ml1m'} | {record['seed']} "
                f"| {run['epochs']} ({run['best_epoch']}) | {run['epoch_seconds_median']:.2f} "
                f"| {run['validation_seconds_median']:.2f} | {_minutes(run['minutes_to_ndcg_0.18'])} "
                f"| {_minutes(run['minutes_to_98pct_of_best'])} | {_minutes(run['minutes_to_best'])} "
                f"| {run['best_val_ndcg@10']:.4f} | {run['test']['ndcg@10']:.4f} | {run['test']['hr@10']:.4f} |"
            )
    for record in records:
        if "masking" in record:
            m = record["masking"]
            lines.append(
                f"\nBERT4Rec's training step (batch {m['batch_size']} x length {m['length']}, "
                f"{m['num_items']:,} items): {m['step_ms']:.2f} ms masking inside the step, "
                f"{m['premasked_step_ms']:.2f} ms on a batch masked beforehand; masking's share "
                f"{100 * m['masking_share']:.1f}% (the difference over the first)."
            )
    return "\n".join(lines)


def environment():
    import jax  # here, not above: the tests import this module for ``table`` without JAX

    device = jax.devices()[0]
    return (
        f"{device.device_kind} ({device.platform}), {os.cpu_count()} CPU cores, JAX {jax.__version__}, "
        f"Keras {keras.__version__} ({keras.backend.backend()} backend), Python {platform.python_version()}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=os.environ.get("TFSEQREC_DATA", "../shared/data"))
    parser.add_argument("--models", default="sasrec,hstu")
    parser.add_argument("--minutes", type=float, default=3.0, help="fit budget of each model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--commit", default=None, help="the code's commit (default: git's)")
    parser.add_argument(
        "--masking", action=argparse.BooleanOptionalAction, default=True, help="BERT4Rec's step"
    )
    parser.add_argument("--protocol", default="sasrec-plus", choices=["sasrec-plus", "rectools"])
    parser.add_argument("--config", default=None, help="JSON: options over the ml1m preset")
    parser.add_argument("--users", type=int, default=None, help="only the first N users (a quick check)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if keras.backend.backend() != "jax":
        parser.error(f"run with KERAS_BACKEND=jax (Keras's backend here is {keras.backend.backend()!r})")
    earlier = []
    if args.json and os.path.exists(args.json):
        with open(args.json) as f:
            earlier = json.load(f)
    record = {
        "protocol": args.protocol,
        "config": args.config,
        "command": "python " + shlex.join(sys.argv),
        "commit": args.commit or machine.code_version(),
        "started": machine.now(),
        "environment": environment(),
        "budget_minutes": args.minutes,
        "seed": args.seed,
        "runs": [],
    }

    def save():
        record["ended"] = machine.now()
        if args.json:
            data = protocols.get(args.protocol).data_file
            records.write(args.json, [*earlier, *records.from_gpu(record, data)])

    print(record["environment"], flush=True)
    split, vocabulary = protocols.load(args.protocol, args.data_root)
    if args.users:
        rows = np.arange(args.users)
        split = splits.Split(split.train.select(rows), split.valid.select(rows), split.test.select(rows), {})
        record["users"] = args.users
    if args.masking:
        record["masking"] = masking_share(vocabulary.num_items)
        print("masking", json.dumps(record["masking"]), flush=True)
        save()
    for name in args.models.split(","):
        run = train_model(
            name, split, vocabulary.num_items, args.minutes, args.seed, json.loads(args.config or "{}")
        )
        record["runs"].append(run)
        print(name, json.dumps({k: v for k, v in run.items() if k != "curve"}), flush=True)
        save()


if __name__ == "__main__":
    main()
