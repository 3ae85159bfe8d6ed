"""Every model kind trained on a GPU with Keras 3's JAX backend: SASRec, BERT4Rec, HSTU, UniSRec, Recformer.

TensorFlow has no GPU build on the machine this project borrows a GPU from, so this
benchmark runs the backend-agnostic library (``tfseqrec.models``, ``tfseqrec.losses``,
``tfseqrec.metrics``, ``tfseqrec.data.numpy_pipeline``, ``tfseqrec.models.recformer.arrays``)
under ``KERAS_BACKEND=jax``, without TensorFlow.

Protocols (``--protocol``):

- ``sasrec-plus`` and ``rectools`` (``benchmarks/protocols.py``): ML-1M, leave-one-out with
  a validation item, full ranking with the whole history filtered; SASRec, BERT4Rec and
  HSTU with their ``ml1m`` presets;
- ``scientific``: Amazon Scientific (``amazon-scientific-text``), the same split rules;
  every kind, with the options ``tfseqrec train`` settles for the data (UniSRec its
  ``scientific`` preset; Recformer ``gpu_text.RECFORMER``: the paper's shape as far as
  all-MiniLM-L6-v2 allows; ``recformer-pretrained`` pre-trained on ML-1M's titles and
  genres for ``--pretrain-minutes`` first). The text models read what ``--prepare`` wrote
  on the CPU (``benchmarks/gpu_text.py``).

Each id model trains under a wall-clock budget of ``fit`` time (validation on every user
after every epoch included) with early stopping on validation NDCG@10 (the run's
``patience``, else 20); the best epoch's weights are evaluated on the test split.
Recformer aligns ``[CLS]``, then runs both fine-tuning stages, validated the same way.

Reported per model: seconds per training epoch (median; the first epoch, which compiles,
apart), minutes to validation NDCG@10 ``LEVELS[protocol]``, to 98% of the best and to the
best, the best validation NDCG@10 and the test NDCG@10 / HR@10 / MRR at it. BERT4Rec's
run also measures Cloze masking's share of its training step: the median step of its
epochs (masks drawn inside the compiled step) against epochs of the same windows masked
beforehand by the model's own masking, run after the test (their difference over the first).

``--json FILE`` holds a list of records (``benchmarks/records.py``'s schema), one per
trained model: a command appends its own to those already in the file, and rewrites the
file after each model, so a run cut short keeps what it measured. The GPU machine has no
git checkout: pass ``--commit``.

Usage (on the GPU machine, Keras, namex and optree installed beside its JAX):
    KERAS_BACKEND=jax python benchmarks/gpu.py --minutes 3 --json gpu.json --commit abc1234
    KERAS_BACKEND=jax python benchmarks/gpu.py --protocol rectools --models hstu \\
        --config '{"learning_rate": 4e-3}' --json gpu.json --commit abc1234
    python benchmarks/gpu.py --protocol scientific --prepare prepared      # on the CPU, once
    KERAS_BACKEND=jax python benchmarks/gpu.py --protocol scientific --prepared prepared \\
        --models sasrec,bert4rec,unisrec,recformer --minutes 10 --json gpu.json --commit abc1234
"""

import argparse
import json
import os
import platform
import shlex
import sys
import time

import gpu_text  # benchmarks/gpu_text.py
import keras
import machine  # benchmarks/machine.py
import numpy as np
import protocols  # benchmarks/protocols.py
import records  # benchmarks/records.py

from tfseqrec import losses, metrics, presets, ranking, registry
from tfseqrec.data import numpy_pipeline, readers, splits
from tfseqrec.models import HSTU, BERT4Rec, SASRec, UniSRec
from tfseqrec.schedules import WarmupLinearDecay

MODELS = {"sasrec": SASRec, "bert4rec": BERT4Rec, "hstu": HSTU, "unisrec": UniSRec}
KINDS = (*MODELS, "recformer", "recformer-pretrained")
TEXT_MODELS = ("unisrec", "recformer", "recformer-pretrained")
SCIENTIFIC = "amazon-scientific-text/Scientific.inter.json"
# Validation NDCG@10 a run is timed to: about SASRec's best at its published settings.
LEVELS = {"sasrec-plus": 0.18, "rectools": 0.18, "scientific": 0.08}
DEFAULT_MODELS = {"sasrec-plus": "sasrec,bert4rec,hstu", "rectools": "sasrec,bert4rec,hstu"}
PATIENCE = 20
MAX_EPOCHS = 200
MONITOR = "val_ndcg_10"


def load(protocol, data_root):
    """``(split, vocabulary)``: an ML-1M protocol's (``protocols.load``), or Amazon Scientific's leave-one-out."""
    if protocol != "scientific":
        return protocols.load(protocol, data_root)
    events = readers.read_interactions(os.path.join(data_root, SCIENTIFIC), progress=False)
    split, vocabulary, _ = splits.prepare(events)
    return split, vocabulary


def data_file(protocol):
    return SCIENTIFIC if protocol == "scientific" else protocols.get(protocol).data_file


def run_options(name, protocol, sequences, config=None):
    """Every option of a run (``presets.resolve``): ``config`` over the protocol's preset of the
    model (``ml1m`` on ML-1M; UniSRec's ``scientific`` on Scientific) or the data's defaults."""
    preset = {"unisrec": "scientific"} if protocol == "scientific" else {n: "ml1m" for n in MODELS}
    given = dict(config or {})
    if preset.get(name) and preset[name] in registry.get(name).presets:
        given.setdefault("preset", preset[name])
    return presets.resolve(name, sequences, given)


def make_loss(training, seed):
    """The run's loss, built from its options as ``tfseqrec.training`` builds it."""
    return losses.build(
        training["loss"],
        seed=seed,
        num_negatives=training.get("num_negatives"),
        per_position=training.get("negatives_per_position"),
        sampler=training.get("sampler"),
        exclude_history=training.get("negatives_exclude_history"),
    )


def learning_rate(training, steps_per_epoch):
    """The run's rate: constant after a linear warm-up of ``warmup_epochs`` (the one schedule here)."""
    schedule = training.get("learning_rate_schedule") or "constant"
    if schedule != "constant":
        raise ValueError(
            f"gpu.py trains at a constant rate after the warm-up; got learning_rate_schedule={schedule!r}"
        )
    warmup = int(steps_per_epoch * (training.get("warmup_epochs") or 0))
    return WarmupLinearDecay(training["learning_rate"], None, warmup) if warmup else training["learning_rate"]


def training_batches(name, sequences, choices, seed, timestamps=False):
    """``(Batches, loss normaliser)`` of the run's training windows: Cloze windows, unmasked
    (BERT4Rec masks them inside its step), or next-item windows."""
    spec, length, batch_size = registry.get(name), choices["max_sequence_length"], choices["batch_size"]
    if spec.preparation == "cloze":
        data = numpy_pipeline.cloze_windows(sequences, length)
    else:
        data = numpy_pipeline.causal_windows(sequences, length, timestamps=timestamps)
    normalizer = losses.fixed_normalizer(presets.targets_per_window(spec, choices, sequences), batch_size)
    return numpy_pipeline.Batches(data, batch_size, seed=seed), normalizer


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
    """Per epoch: training seconds, validation seconds, validation NDCG@10; keeps the best weights;
    stops on budget or after ``patience`` epochs without a better one."""

    def __init__(self, budget_seconds, patience=PATIENCE):
        super().__init__()
        self.budget, self.patience = budget_seconds, patience
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
        if end - self.start > self.budget or epoch - self.best_epoch >= self.patience:
            self.model.stop_training = True


class EpochTimer(keras.callbacks.Callback):
    """Seconds of each training epoch (a ``fit`` without validation)."""

    def on_train_begin(self, logs=None):
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self.start)


def median(values):
    """The median, ``None`` without values (a run of one epoch has only the compiling one)."""
    return float(np.median(values)) if values else None


def first_minutes(rows, threshold):
    """Minutes of ``fit`` until validation NDCG@10 first reached ``threshold`` (``None``: never)."""
    return next((r["fit_minutes"] for r in rows if r["val_ndcg@10"] >= threshold), None)


def summary(name, options, rows, test, level):
    """A run's figures from its epochs' ``rows`` (``fit_minutes``, ``val_ndcg@10``, seconds) and test metrics."""
    best = max(rows, key=lambda r: r["val_ndcg@10"])
    return {
        "model": name,
        "options": options,
        "epochs": len(rows),
        "best_epoch": rows.index(best) + 1,
        "best_val_ndcg@10": best["val_ndcg@10"],
        "first_epoch_seconds": rows[0]["train_seconds"],
        "epoch_seconds_median": median([r["train_seconds"] for r in rows[1:]]),
        "validation_seconds_median": median(
            [r["validation_seconds"] for r in rows[1:] if "validation_seconds" in r]
        ),
        "level": level,
        "minutes_to_level": first_minutes(rows, level),
        "minutes_to_98pct_of_best": first_minutes(rows, 0.98 * best["val_ndcg@10"]),
        "minutes_to_best": best["fit_minutes"],
        "fit_minutes": rows[-1]["fit_minutes"],
        "test": {k: test[k] for k in ("ndcg@10", "hr@10", "mrr")},
        "curve": rows,
    }


def train_model(name, split, num_items, minutes, seed, protocol, config=None, text_vectors=None):
    """An id model (or UniSRec over ``text_vectors``) trained and tested: its ``summary``."""
    choices = run_options(name, protocol, split.train, config)
    model_options, training = dict(choices.model_options), choices.training
    times = bool(model_options.get("num_time_buckets"))
    train, normalizer = training_batches(name, split.train, choices, seed, times)
    shown = {**model_options, **training}
    if name == "unisrec":
        model_options.update(text_dim=text_vectors.shape[1], text_embeddings=text_vectors)
    keras.utils.set_random_seed(seed)
    model = MODELS[name](
        num_items=num_items, loss=make_loss(training, seed), loss_normalizer=normalizer, **model_options
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate(training, len(train))),
        metrics=metrics.default_metrics(),
    )
    clock = Clock(minutes * 60, training.get("patience") or PATIENCE)
    length = choices["max_sequence_length"]
    valid = eval_batches(split.valid, length, 512, times)
    model.fit(
        train,
        validation_data=valid,
        epochs=training.get("epochs") or MAX_EPOCHS,
        callbacks=[clock],
        verbose=0,
    )
    model.set_weights(clock.best_weights)
    test = model.evaluate(eval_batches(split.test, length, 512, times), return_dict=True, verbose=0)
    test = {"ndcg@10": float(test["ndcg_10"]), "hr@10": float(test["hr_10"]), "mrr": float(test["mrr"])}
    run = summary(name, shown, clock.rows, test, LEVELS[protocol])
    if name == "bert4rec":
        run["masking"] = masking_share(model, train, clock.rows)
    return run


def masking_share(model, train, rows, epochs=3):
    """Cloze masking's share of BERT4Rec's training step, on its own run: the median epoch of
    ``rows`` (masks drawn inside the step; the compiling first epoch apart) against ``epochs``
    more epochs of the same windows masked beforehand by the model's masking (the first of
    them compiles the step without masking and is left out). ``None`` under two epochs."""
    masked = keras.tree.map_structure(keras.ops.convert_to_numpy, model.masking(train.data))
    premasked = numpy_pipeline.Batches(tuple(masked), train.batch_size, seed=0)
    timer = EpochTimer()
    model.fit(premasked, epochs=epochs, callbacks=[timer], verbose=0)
    in_step = median([r["train_seconds"] for r in rows[1:]])
    if in_step is None:
        return None
    step, before = in_step / len(train), median(timer.seconds[1:]) / len(premasked)
    return {
        "step_ms": 1e3 * step,
        "premasked_step_ms": 1e3 * before,
        "masking_share": (step - before) / step,
        "epochs_masking_in_step": len(rows) - 1,
        "epochs_premasked": epochs - 1,
    }


def train_recformer(split, manifest, prepared, minutes, seed, config=None, pretraining=None):
    """Recformer (``gpu_text.train_recformer``) as a ``summary``: its curve counts the minutes of
    its start (alignment, or pre-training with ``pretraining``, ``(data root, minutes)``)."""
    options, began, epochs, ranks = gpu_text.train_recformer(
        split, manifest, prepared, minutes, seed, config, pretraining
    )
    rows, before = [], 0.0
    for row in epochs:
        rows.append(
            {
                **row,
                "epoch": len(rows) + 1,
                "stage_epoch": row["epoch"],
                "train_seconds": row["seconds"] - before,
                "fit_minutes": (began["seconds"] + row["seconds"]) / 60,
            }
        )
        before = row["seconds"]
    name = "recformer-pretrained" if pretraining else "recformer"
    run = summary(name, options, rows, ranking.metrics_from_ranks(ranks, ks=(10,)), LEVELS["scientific"])
    return {**run, "start": began}


def environment():
    import jax  # here, not above: the tests import this module without JAX

    device = jax.devices()[0]
    return (
        f"{device.device_kind} ({device.platform}), {os.cpu_count()} CPU cores, JAX {jax.__version__}, "
        f"Keras {keras.__version__} ({keras.backend.backend()} backend), Python {platform.python_version()}"
    )


def build_parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=os.environ.get("TFSEQREC_DATA", "../shared/data"))
    parser.add_argument("--protocol", default="sasrec-plus", choices=sorted(LEVELS))
    parser.add_argument(
        "--models",
        default=None,
        help=f"of {', '.join(KINDS)} (default: the protocol's id models, or all on scientific)",
    )
    parser.add_argument("--minutes", type=float, default=3.0, help="fit budget of each model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--commit", default=None, help="the code's commit (default: git's)")
    parser.add_argument(
        "--config", default=None, help="JSON: options of the id models and UniSRec over their preset"
    )
    parser.add_argument("--recformer-config", default=None, help="JSON: over gpu_text.RECFORMER")
    parser.add_argument(
        "--pretrain-minutes",
        type=float,
        default=10.0,
        help="recformer-pretrained: pre-training on ML-1M's text",
    )
    parser.add_argument("--users", type=int, default=None, help="only the first N users (a quick check)")
    parser.add_argument(
        "--prepare",
        default=None,
        metavar="DIR",
        help="on the CPU: write the text models' inputs to DIR, then exit",
    )
    parser.add_argument(
        "--prepared", default=None, metavar="DIR", help="what --prepare wrote (unisrec, recformer)"
    )
    parser.add_argument("--json", default=None)
    return parser


def chosen_models(parser, args):
    names = (args.models or DEFAULT_MODELS.get(args.protocol, ",".join(KINDS))).split(",")
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        parser.error(f"unknown models {unknown}; expected some of {', '.join(KINDS)}")
    text = [n for n in names if n in TEXT_MODELS]
    if text and args.protocol != "scientific":
        parser.error(f"{', '.join(text)} read item text: run them with --protocol scientific")
    if text and not args.prepared:
        parser.error(f"{', '.join(text)} need --prepared DIR (written by --prepare DIR on the CPU)")
    return names


def main():
    parser = build_parser()
    args = parser.parse_args()
    split, vocabulary = load(args.protocol, args.data_root)
    if args.prepare:
        if args.protocol != "scientific":
            parser.error("--prepare writes the text models' inputs: use --protocol scientific")
        gpu_text.prepare(args.prepare, split, vocabulary, args.data_root)
        print(f"prepared {args.prepare} for {vocabulary.num_items:,} items", flush=True)
        return
    if keras.backend.backend() != "jax":
        parser.error(f"run with KERAS_BACKEND=jax (Keras's backend here is {keras.backend.backend()!r})")
    names = chosen_models(parser, args)
    manifest, vectors = gpu_text.load(args.prepared, vocabulary) if args.prepared else (None, None)
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
    print(record["environment"], flush=True)
    if args.users:
        rows = np.arange(args.users)
        split = splits.Split(split.train.select(rows), split.valid.select(rows), split.test.select(rows), {})
        record["users"] = args.users
    for name in names:
        if name.startswith("recformer"):
            pretraining = (args.data_root, args.pretrain_minutes) if name == "recformer-pretrained" else None
            config = json.loads(args.recformer_config or "{}")
            run = train_recformer(
                split, manifest, args.prepared, args.minutes, args.seed, config, pretraining
            )
        else:
            config = json.loads(args.config or "{}")
            run = train_model(
                name, split, vocabulary.num_items, args.minutes, args.seed, args.protocol, config, vectors
            )
        record["runs"].append(run)
        print(name, json.dumps({k: v for k, v in run.items() if k != "curve"}), flush=True)
        if args.json:
            record["ended"] = machine.now()
            records.write(args.json, [*earlier, *records.from_gpu(record, data_file(args.protocol))])


if __name__ == "__main__":
    main()
