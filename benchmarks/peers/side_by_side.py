"""tfseqrec and RecTools side by side: the same split, the same ranking code, the same CPU and budget.

For each protocol (``benchmarks/protocols.py``) and model, one after the other in one
command:

1. tfseqrec trains the model with its defaults and the protocol's fixed options under
   the time budget (``tfseqrec.training.train``, as ``benchmarks/ml1m.py`` runs it), and
   its test split is ranked by ``tfseqrec.evaluation.evaluate``.
2. RecTools (0.19, PyTorch on the CPU) trains its own model of the same name with its
   own ML-1M settings (``rectools_runner.py`` says which and where they come from) on
   the identical split: the protocol's split, built here with tfseqrec's readers and
   splits (``protocols.load``), is written to a temporary folder and the runner is
   started with ``.venv-peers/bin/python`` (``benchmarks/peers/ensure_env.sh`` builds
   it). The runner writes RecTools' full score matrices (users x items), and this script
   ranks them with ``tfseqrec.evaluation.evaluate`` too: seen items are filtered as the
   protocol says (the whole history, or the input window) by the one ranking module.
   With a validation split, RecTools' validation scores are ranked after every epoch,
   early stopping uses tfseqrec's patience, and the test split is scored with the
   weights of its best validation epoch, as tfseqrec restores its own.

Each side's "minutes to 98%" is the fit time (validation included) until its
validation NDCG@10 first came within 2% of its own best. Without a validation split
(``hstu-paper``) both train to the protocol's epoch count or the budget, and the last
epoch is the model.

Usage (the package's own .venv):
    benchmarks/peers/ensure_env.sh
    python benchmarks/peers/side_by_side.py --protocol rectools --minutes 30 --models sasrec hstu bert4rec --json
    python benchmarks/peers/side_by_side.py --protocol rectools --minutes 30 --models hstu --json   # one model
        # at a time: its rows join (or replace) those of benchmarks/results/peers-rectools.json
    python benchmarks/peers/side_by_side.py --protocol sasrec-plus --minutes 0.5 --models sasrec \\
        --data ml-100k/u.data      # a quick check on another file (under the data root)
"""

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # benchmarks/: machine, protocols, ml1m

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import machine  # noqa: E402  (benchmarks/machine.py)
import ml1m  # noqa: E402  (benchmarks/ml1m.py: its epoch timer)
import numpy as np  # noqa: E402
import protocols  # noqa: E402  (benchmarks/protocols.py)
import records  # noqa: E402  (benchmarks/records.py)

from tfseqrec import evaluation, kinds, training  # noqa: E402
from tfseqrec.data import vocab  # noqa: E402

PEERS_PYTHON = os.path.join(ROOT, ".venv-peers", "bin", "python")
RUNNER = os.path.join(HERE, "rectools_runner.py")
KS = (10,)


class ScoreRows:
    """A score matrix as ``evaluation.evaluate`` reads a model with ``score``: rows in case order.

    ``evaluate`` scores the cases batch by batch, in order; each call hands out the next
    rows. Each batch's input window is checked against the cases the rows were written
    for (their newest item), so rows out of step with ``evaluate``'s batches fail instead
    of being ranked against other users' targets.
    """

    uses_timestamps = False

    def __init__(self, scores, cases, max_sequence_length):
        self.scores = scores
        self.max_sequence_length = max_sequence_length
        lengths = cases.histories.lengths
        ends = cases.histories.row_splits[1:] - 1
        self.newest = np.where(lengths > 0, cases.histories.values[np.maximum(ends, 0)], vocab.PAD_ID)
        self.next = 0

    def score(self, item_ids):
        window = np.asarray(item_ids)
        rows = slice(self.next, self.next + len(window))
        if not np.array_equal(window[:, -1], self.newest[rows]):
            raise ValueError("score rows and evaluation cases are out of step")
        self.next = rows.stop
        return self.scores[rows]


def rank(scores, cases, exclude_seen, max_sequence_length):
    """``evaluation.evaluate``'s metrics of a score matrix ``[len(cases), num_items]``."""
    rows = ScoreRows(scores, cases, max_sequence_length)
    out = evaluation.evaluate(rows, cases, ks=KS, exclude_seen=exclude_seen, progress=False)
    if rows.next != len(cases):
        raise ValueError(f"ranked {rows.next} score rows of {len(cases)} cases")
    return out


def fit_arrays(split, vocabulary, validates):
    """What RecTools fits on (``rectools_runner.py``'s ``fit.npz``): each user's test history
    (training items and validation item) where the user has a test case, else the
    training sequence; users are ``split.train``'s rows. With ``validates`` each validation
    user's last fitted item is its validation target (RecTools holds it out of training)."""
    row = {u: i for i, u in enumerate(split.train.users)}
    test_rows = np.array([row[u] for u in split.test.histories.users], np.int64)
    sequences = split.train.to_list()
    for i, r in enumerate(test_rows):
        sequences[r] = split.test.histories[i]
    lengths = np.array([len(s) for s in sequences], np.int64)
    val_users = split.valid.histories.users if validates else []
    val_rows = np.array([row[u] for u in val_users], np.int64)
    for i, r in enumerate(val_rows):  # the validation target is the last fitted item
        if sequences[r][-1] != split.valid.targets[i]:
            raise ValueError(f"user {split.train.users[r]}: validation target is not the last fitted item")
    return {
        "users": np.repeat(np.arange(len(sequences), dtype=np.int64), lengths),
        "items": np.concatenate(sequences).astype(np.int64),
        "val_users": val_rows,
        "test_users": test_rows,
        "num_items": np.int64(vocabulary.num_items),
        "num_reserved": np.int64(vocab.NUM_RESERVED),
    }


def curve_summary(values, elapsed, validates):
    """Best epoch, its value, and minutes to the best and to 98% of it, from a validation curve."""
    if not validates or not values:
        epochs = len(elapsed)
        return {"best_epoch": epochs, "best_val_ndcg@10": None, "minutes_to_best": elapsed[-1] / 60,
                "minutes_to_98pct_of_best": None}  # fmt: skip
    val = np.asarray(values)
    best = int(np.argmax(val))
    near = ml1m.near_best_epoch(val)
    return {
        "best_epoch": best + 1,
        "best_val_ndcg@10": float(val[best]),
        "minutes_to_best": elapsed[best] / 60,
        "minutes_to_98pct_of_best": elapsed[near] / 60,
    }


def run_tfseqrec(name, protocol, data_path, split, minutes, seed):
    """tfseqrec's side: ``training.train`` under the budget, the test split ranked by ``evaluate``."""
    values = protocol.training_options(dict(model=name, max_train_minutes=minutes, seed=seed))
    config = training.TrainConfig.from_dict(values)
    timer = ml1m.EpochTimer()
    out = tempfile.mkdtemp(prefix=f"peers-tfseqrec-{name}-")
    model, history, trained_split, _ = training.train(
        kinds.get(name), data_path, out, config, callbacks=[timer], verbose=2
    )
    same = np.array_equal(trained_split.test.targets, split.test.targets)
    if not same or trained_split.train.num_events != split.train.num_events:
        raise ValueError("tfseqrec trained on another split than the protocol's")
    test = evaluation.evaluate(
        model, split.test, ks=KS, exclude_seen=protocol.evaluation_exclude_seen, progress=False
    )
    curve = [float(v) for v in history.history.get("val_ndcg_10", [])]
    validates = protocol.validation == "last"
    return {
        "library": "tfseqrec",
        "config": values,
        "epochs": len(timer.elapsed),
        "val_ndcg@10": curve,
        "elapsed_seconds": timer.elapsed,
        **curve_summary(curve, timer.elapsed, validates),
        "test": test,
    }


class Runner:
    """``rectools_runner.py`` in ``.venv-peers``, spoken to over its stdin and stdout."""

    def __init__(self, name, work, minutes, epochs, seed, fixed):
        command = [PEERS_PYTHON, RUNNER, "--work", work, "--model", name, "--minutes", str(minutes)]
        command += ["--epochs", str(epochs), "--seed", str(seed)]
        if "loss" in fixed:  # the protocol fixes the loss (hstu-paper): for both libraries
            command += ["--loss", fixed["loss"], "--negatives", str(fixed.get("num_negatives") or 1)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def event(self):
        """The runner's next ``@@peer`` event; its other output is passed through to stderr."""
        for line in self.process.stdout:
            if line.startswith("@@peer "):
                return json.loads(line[len("@@peer ") :])
            sys.stderr.write(line)
        raise RuntimeError(f"the RecTools runner ended (exit {self.process.wait()}) without an answer")

    def say(self, line):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self):
        self.process.stdin.close()
        if self.process.wait() != 0:
            raise RuntimeError(f"the RecTools runner failed (exit {self.process.returncode})")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:  # this side failed: the runner must not train on alone
            self.process.kill()
            self.process.wait()


def validated_epochs(runner, valid, protocol, patience, window):
    """The runner's epochs: each one's validation scores ranked, early stopping by tfseqrec's
    rule (``patience`` epochs without a better validation NDCG@10). Returns the validation
    curve, the fit seconds at each epoch's end, the seconds of each validation (the runner's
    scoring, this side's ranking; part of the fit seconds), and the runner's "trained" event."""
    curve, elapsed, validation, best, wait = [], [], [], -np.inf, 0
    event = runner.event()
    while event["event"] == "epoch":
        elapsed.append(event["elapsed"])
        if event["scores"]:
            start = time.perf_counter()
            ndcg = rank(np.load(event["scores"]), valid, protocol.evaluation_exclude_seen, window)["ndcg@10"]
            os.remove(event["scores"])
            validation.append(event["scoring"] + time.perf_counter() - start)
            curve.append(ndcg)
            best, wait = (ndcg, 0) if ndcg > best else (best, wait + 1)
        runner.say("stop" if wait >= patience else "continue")
        event = runner.event()
    return curve, elapsed, validation, event


def run_rectools(name, protocol, split, vocabulary, minutes, seed, window):
    """RecTools' side: the runner trains; its validation and test scores are ranked here."""
    config = training.TrainConfig.from_dict(dict(model=name, **protocol.training_options()))
    work = tempfile.mkdtemp(prefix=f"peers-rectools-{name}-")
    np.savez(os.path.join(work, "fit.npz"), **fit_arrays(split, vocabulary, protocol.validation == "last"))
    with Runner(name, work, minutes, config.epochs, seed, protocol.training) as runner:
        curve, elapsed, validation, trained = validated_epochs(
            runner, split.valid, protocol, config.patience, window
        )
        summary = curve_summary(curve, elapsed, protocol.validation == "last")
        runner.say(f"score {summary['best_epoch']}")
        event = runner.event()
        test = rank(np.load(event["scores"]), split.test, protocol.evaluation_exclude_seen, window)
        runner.close()
    shutil.rmtree(work)  # every epoch's weights and the score matrices
    return {
        "library": "RecTools 0.19",
        "config": trained["options"],
        "torch_threads": trained["threads"],
        "epochs": len(elapsed),
        "val_ndcg@10": curve,
        "elapsed_seconds": elapsed,
        "validation_seconds": validation,
        **summary,
        "test": test,
    }


def cell(value, digits=4):
    return "n/a" if value is None else f"{value:.{digits}f}"


def anchor(record):
    """The published figure a stored record compares with, as ``protocols.py`` words it today."""
    if not record["anchored"]:
        return "no published figure (another data file)"
    return protocols.get(record["protocol"]["name"]).anchor


def hosts(record):
    """The line saying each model's host's fp32 matmul rate: the two libraries' minutes compare
    within a model's rows (one host, one after the other), not across models run on other hosts."""
    rates = [
        f"{model} {run['host_matmul_gflops']:.0f}" if "host_matmul_gflops" in run else f"{model} not measured"
        for model, run in record["model_runs"].items()
    ]
    return f"Host fp32 matmul (GFLOP/s) while each model ran: {', '.join(rates)}."


def table(record):
    """Markdown: one row per model and library."""
    p = record["protocol"]
    seen = "whole history" if p["exclude_seen"] == "history" else "input window"
    lines = [
        f"Protocol `{p['name']}`: {record['data']}, validation {p['validation']}, seen items filtered "
        f"({seen}), {record['minutes']:g} min budget each, one after the other; {record['environment']}.",
        f"Comparable with: {anchor(record)}.",
        hosts(record),
        "",
        "| model | library | NDCG@10 | HR@10 | best val NDCG@10 | epochs (best) | min to 98% of best | min to best |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for model, sides in record["models"].items():
        for r in sides:
            lines.append(
                f"| {model} | {r['library']} | {r['test']['ndcg@10']:.4f} | {r['test']['hr@10']:.4f} | "
                f"{cell(r['best_val_ndcg@10'])} | {r['epochs']} ({r['best_epoch']}) | "
                f"{cell(r['minutes_to_98pct_of_best'], 1)} | {r['minutes_to_best']:.1f} |"
            )
    return "\n".join(lines)


def compare(protocol, data_root, models, minutes, seed, previous=None, save=None):
    """Both libraries on one protocol, model by model: the record ``--json`` stores.

    ``previous``: a stored record of the same protocol, data, budget and seed (an
    earlier command's, say another model's): its models are kept, those run now
    replaced, so a table can be filled one model at a time. ``save(record)`` is called
    after every model, so a run stopped later keeps the models it finished.
    """
    data_path = protocols.data_path(protocol, data_root)
    split, vocabulary = protocols.load(protocol, data_root)
    command = " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])
    record = {
        "command": command,
        "commit": machine.code_version(),
        "started": machine.now(),
        "environment": machine.environment() + ", " + peers_versions(),
        "protocol": dataclasses.asdict(protocol),
        "data": os.path.relpath(data_path, data_root),
        "anchored": protocol.choices() == protocols.get(protocol.name).choices(),
        "minutes": minutes,
        "seed": seed,
        "models": {},
        "model_runs": {},  # each model's command, commit, start and end
    }
    if previous is not None:
        check_same_run(previous, record)
        record["models"] = dict(previous["models"])
        record["model_runs"] = dict(previous["model_runs"])
    for name in models:
        started = machine.now()
        host = machine.matmul_gflops()
        tf_side = run_tfseqrec(name, protocol, data_path, split, minutes, seed)
        peer = run_rectools(name, protocol, split, vocabulary, minutes, seed, WINDOW)
        record["models"][name] = [tf_side, peer]
        record["ended"] = machine.now()
        record["model_runs"][name] = {
            "command": command,
            "commit": record["commit"],
            "started": started,
            "ended": record["ended"],
            # Hosts differ by twice in speed: both libraries' minutes hold on this one only.
            "host_matmul_gflops": max(host, machine.matmul_gflops()),
        }
        if save is not None:
            save(record)
    return record


def check_same_run(previous, record):
    """``ValueError`` unless a stored record was run as ``record`` is (protocol, data, budget, seed).

    The protocols are compared by their choices, not by how their anchor was worded.
    """
    for key in ("protocol", "data", "minutes", "seed"):
        before, now = previous.get(key), record[key]
        if key == "protocol":
            before, now = (protocols.without_anchor(p) for p in (before, now))
        if before != now:
            raise ValueError(
                f"the stored record's {key} is {previous.get(key)!r}, this run's {record[key]!r}: "
                "a table compares runs made alike; write elsewhere (--results) or remove the file"
            )


# RecTools' input window (``session_max_len`` in rectools_runner.py): the items
# ``exclude_seen="window"`` filters for it.
WINDOW = 200


def peers_versions():
    """RecTools' and PyTorch's versions in .venv-peers, for the table's header."""
    code = "import rectools, torch; print(f'RecTools {rectools.__version__}, PyTorch {torch.__version__}')"
    result = subprocess.run([PEERS_PYTHON, "-c", code], capture_output=True, text=True, check=True)
    return result.stdout.strip()


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--protocol", nargs="+", required=True, choices=sorted(protocols.PROTOCOLS))
    parser.add_argument("--minutes", type=float, default=30.0, help="training budget per model and library")
    parser.add_argument("--models", nargs="+", default=["sasrec", "hstu", "bert4rec"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--data-root", default=os.environ.get("TFSEQREC_DATA", os.path.join(ROOT, "..", "shared", "data"))
    )
    parser.add_argument(
        "--data", help="another interaction file under the data root, in place of the protocol's"
    )
    parser.add_argument(
        "--json", action="store_true", help="also write benchmarks/results/peers-<protocol>.json"
    )
    parser.add_argument(
        "--results", default=os.path.join(ROOT, "benchmarks", "results"), help="where --json writes"
    )
    args = parser.parse_args()
    if not os.path.exists(PEERS_PYTHON):
        parser.error(f"{PEERS_PYTHON} is missing: run benchmarks/peers/ensure_env.sh first")
    for name in args.protocol:
        protocol = protocols.get(name)
        if args.data:
            protocol = dataclasses.replace(protocol, data_file=args.data)
        # Another seed's run goes beside seed 0's; another model's joins the stored record.
        suffix = f"-seed-{args.seed}" if args.seed else ""
        path = os.path.join(args.results, f"peers-{name}{suffix}.json") if args.json else None
        previous, kept = None, []
        if path and os.path.exists(path):
            with open(path) as f:
                stored = json.load(f)  # records (benchmarks/records.py), one a model and library
            previous = stored_run(stored)
            kept = [r for r in stored if r["model"] not in args.models]
        start = time.perf_counter()
        record = compare(
            protocol,
            args.data_root,
            args.models,
            args.minutes,
            args.seed,
            previous,
            save=(lambda r, path=path, kept=kept: write_record([*kept, *records.from_side_by_side(r)], path))
            if path
            else None,
        )
        record["wall_minutes"] = (time.perf_counter() - start) / 60
        print(table(record), flush=True)
        print()
        if path:
            write_record([*kept, *records.from_side_by_side(record)], path)
            print(f"wrote {os.path.relpath(path, ROOT)}")


def stored_run(stored):
    """What ``check_same_run`` compares, of stored records: their protocol, data, budget and seed."""
    first = stored[0]
    return {
        "protocol": first["extra"]["protocol_choices"],
        "data": first["dataset"],
        "minutes": first["extra"]["minutes"],
        "seed": first["seed"],
        "models": {},
        "model_runs": {},
    }


def write_record(record, path):
    """``record`` as JSON at ``path``, whole or not at all (written beside it, then moved)."""
    with open(path + ".partial", "w") as f:
        json.dump(record, f, indent=2)
    os.replace(path + ".partial", path)


if __name__ == "__main__":
    main()
