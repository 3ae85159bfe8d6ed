"""The ``tfseqrec`` command's flags and help: argparse only, so that ``--help`` needs no TensorFlow.

Each subcommand is a ``_add_*`` function that declares its flags; its parser records the
command's name as ``args.run``, a key of ``tfseqrec.commands.COMMANDS``, and ``main``
imports that module (and TensorFlow with it) only once the arguments are parsed. ``main``
also decides where output goes: the command's result to stdout, everything else printed
while it runs (notes, Keras's progress bars) to stderr; and it maps errors to the exit
statuses of ``EXIT_STATUS``.
The model kinds (``--model``'s choices, their descriptions and presets in help) are
``tfseqrec.registry``'s; what each does is ``tfseqrec.kinds``'s.
"""

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import textwrap

from tfseqrec import registry
from tfseqrec.checks import check_number
from tfseqrec.data import events
from tfseqrec.data.readers import FORMATS, parse_timestamp
from tfseqrec.version import __version__

# The model kinds, one line each, and their presets (tuned configurations), for help: the
# registry's, which imports no TensorFlow.
MODELS = {name: spec.description for name, spec in registry.MODELS.items()}
PRESETS = {
    name: {key: preset.description for key, preset in spec.presets.items()}
    for name, spec in registry.MODELS.items()
    if spec.presets
}
# The kinds 'tfseqrec pretrain' pre-trains, and tfseqrec.distribute.STRATEGIES (which imports TensorFlow).
PRETRAINABLE = sorted(name for name, spec in registry.MODELS.items() if spec.pretrainable)
STRATEGIES = ("mirrored", "multi_worker")
# Each model's defaults, written by tfseqrec.training.config.write_defaults (which imports TensorFlow).
DEFAULTS_FILE = os.path.join(os.path.dirname(__file__), "defaults.json")
# What 'pipeline run --metric' may bless by: the metrics the RankingEvaluator computes
# (components.ranking_evaluator.BLESSING_METRICS, which imports TFX; a test checks them).
BLESSING_METRICS = ("ndcg@1", "ndcg@5", "ndcg@10", "ndcg@20", "hr@1", "hr@5", "hr@10", "hr@20", "mrr")

# Each command's one line, as 'tfseqrec --help' (or 'tfseqrec data --help') lists it.
SUMMARIES = {
    "data": "inspect, fetch and convert interaction data",
    "data stats": "counts and leave-one-out split sizes of a dataset",
    "data download": "fetch ml-1m or ml-100k from their publishers (checked)",
    "data item-text": "write item text as *.item.json, ids mapped (ml-1m.txt's ids)",
    "data item-features": "write item attributes as CSV for --item-features (genres, year; categories, brand)",
    "data synthetic": "write a seeded synthetic log as user_id,item_id,timestamp CSV",
    "data tfrecord": "write leave-one-out splits as TFRecord tf.Examples",
    "train": "train a model on leave-one-out splits; prints its test metrics",
    "pretrain": "pre-train unisrec or recformer on several datasets with item text",
    "evaluate": "full-catalogue ranking metrics of a trained model, as JSON",
    "plot": "PNGs: training curves and an attention map over a history",
    "report": "one HTML page: models' metrics side by side, curves, and what they recommend to whom",
    "recommend": "top-k next items for a history",
    "export": "write a SavedModel version for TensorFlow Serving",
    "pipeline": "the TFX pipeline (primary stack: Python 3.10, tfx 1.16)",
    "pipeline run": "run the pipeline locally (LocalDagRunner, SQLite ML Metadata)",
}

# Each command's help after its summary, one string per paragraph.
DETAILS = {
    "data": [
        (
            "Every command reads the same formats: the SASRec text format (ml-1m.txt: 'user item' "
            "lines in time order), MovieLens (u.data, ratings.dat), CSV or TSV with a header "
            "(--user-col, --item-col, --time-col) and *.inter.json. The format is detected from "
            "the file unless --format names it; bad input stops with the file, the line and the "
            "problem."
        ),
    ],
    "data stats": [
        (
            "Reads a dataset as 'tfseqrec train' would and reports its users, items, "
            "interactions, history lengths and density, the sizes of its leave-one-out splits "
            "(each user's last item is the test case, the one before it the validation case) and "
            "what the k-core filters and repeat removal took out."
        ),
    ],
    "data download": [
        (
            "Downloads from GroupLens (and ml-1m.txt from the SASRec authors) into DIR/DATASET/, "
            "checks every file against the published file's checksum, resumes an interrupted "
            "download and, offline, says which URL to fetch by hand and where to put it. Prints "
            "JSON with the folder and the data root to set TFSEQREC_DATA to."
        ),
    ],
    "data item-text": [
        (
            "The text models (unisrec, recformer) read each item's attributes from --item-text. "
            "This writes them as *.item.json, keyed by the ids of the interaction file: with "
            "--id-map, ml-1m.txt's ids are mapped to movies.dat's. Prints a JSON summary."
        ),
    ],
    "data item-features": [
        (
            "The id models read item attributes from --item-features: a CSV with an item_id column "
            "and one column per attribute. This writes one from MovieLens's movies.dat or u.item "
            "(genres, release year) or an Amazon *.item.json (categories, brand), keyed by the ids "
            "of the interaction file (--id-map as for item-text). Prints a JSON summary."
        ),
    ],
    "data synthetic": [
        (
            "A log of any size for scale tests: Zipf item popularity, log-normal history lengths "
            "of at least 5 events, integer-second timestamps, and a learnable pattern (an event "
            "continues the previous item along a fixed cycle with --follow-prob), so a sequential "
            "model has something to beat popularity with. The same seed writes the same file."
        ),
    ],
    "data tfrecord": [
        (
            "Writes train, valid and test .tfrecord.gz files (one tf.train.Example per user: raw "
            "and numbered item ids, oldest first, event times where the data has them, and the "
            "target of each evaluation case) and the item vocabulary (item_vocab.tsv)."
        ),
    ],
    "train": [
        (
            "Trains on each user's history but the last two items, validates every epoch on the "
            "second-to-last (full-catalogue NDCG@10), keeps the best epoch and stops after "
            "--patience epochs without improvement; then prints the test metrics (NDCG@K, HR@K, "
            "MRR on each user's last item, already-seen items excluded) as one JSON object."
        ),
        (
            "The run works in OUTPUT.partial/ and becomes OUTPUT/ when it completes; a killed run "
            "resumes from its last finished epoch when the same command is run again. TensorBoard "
            "logs go to OUTPUT/logs."
        ),
        (
            "With --validation none there is no validation split: the second-to-last item is "
            "trained on like the others and the run trains exactly --epochs epochs."
        ),
        (
            "Every option below is also a key of --config JSON; each model has its own defaults, "
            "and an option the chosen model does not have is an error. Model options (the "
            "model's constructor arguments: --hidden-dim, --num-layers, ...) may also be given "
            "in --config JSON under model_options."
        ),
        (
            "--preset NAME starts from one of the model's tuned configurations (below); --config "
            "and flags override its options. The run's train_config.json records the preset and "
            "every resolved option."
        ),
    ],
    "pretrain": [
        (
            "Pre-trains a text model on the histories of several datasets at once, each with its "
            "items' text, and writes a checkpoint that 'tfseqrec train --init-from' starts from "
            "(on another dataset, or one of these). Prints a JSON summary."
        ),
    ],
    "evaluate": [
        (
            "Splits --data as training did (each user's last item the test case, the one before "
            "it the validation case), ranks every item of the catalogue for each case and prints "
            "NDCG@K and HR@K (K = 1, 5, 10, 20) and MRR as one JSON object. Ties count against "
            "the true item. Sampled metrics (sampled_*) are reported only with "
            "--sampled-negatives; they can order models differently from the full ranking."
        ),
    ],
    "plot": [
        (
            "Writes training_curves.png (loss and validation metrics per epoch, from the model "
            "directory's history.csv) and attention.png (each layer's attention over a history). "
            "Every model but recformer has attention maps. Prints the paths written as JSON."
        ),
    ],
    "report": [
        (
            "Ranks each --model-dir's test cases once, with every beyond-accuracy metric, and writes "
            "one self-contained HTML page (plots inline, nothing fetched when opened): the metrics "
            "side by side, training curves, accuracy by history length and by target popularity, "
            "the popularity of what each model recommends against the catalogue's, and a sample of "
            "users' latest histories beside each model's top 10, the test target marked. Items are "
            "named by --item-text or --item-features (ids where there is none). Prints a JSON "
            "summary."
        ),
    ],
    "recommend": [
        (
            "Prints the --k items a trained model ranks highest after --history, one 'rank, item "
            "id, score' line each (tab-separated), or one JSON object with --json. Item ids are "
            "the data file's own; ids the model does not know are ignored (with a note on "
            "stderr), and a history with no known item gets the most popular items."
        ),
        (
            "With --histories, every user of a log (or of a .jsonl file of histories) gets its "
            "--k items in --output, written a batch at a time with a progress bar on stderr; "
            "a rerun after a kill resumes where the file ends. Prints a JSON summary."
        ),
    ],
    "export": [
        (
            "Writes a trained model as OUTPUT/VERSION/, the layout TensorFlow Serving watches: a "
            "SavedModel whose signatures take raw item ids and return the top-k raw ids and "
            "scores (the vocabulary travels inside as an asset), with warm-up requests. Prints "
            "JSON with the path, the version and the signatures."
        ),
    ],
    "pipeline": [
        (
            "The TFX pipeline takes CSV events to a pushed TensorFlow Serving model: "
            "EventExampleGen, SequenceBuilder (group by user, vocabulary, leave-one-out), "
            "Trainer, RankingEvaluator (blesses a model that meets --threshold and beats the last "
            "blessed one) and Pusher."
        ),
    ],
    "pipeline run": [
        (
            "Runs every component in this process (Beam's DirectRunner unless --beam-arg says "
            "otherwise) and prints a JSON summary of the run: the evaluated model's metrics and "
            "whether it was pushed, and where."
        ),
    ],
}

# Each command's examples, shown at the end of its help.
EXAMPLES = {
    "data": [
        "tfseqrec data download ml-100k",
        "tfseqrec data stats ml-100k --min-item-interactions 5 --json",
        "tfseqrec data tfrecord ml-100k --output /tmp/ml100k",
        "tfseqrec data synthetic --events 1000000 --items 100000 --output /tmp/synthetic.csv",
    ],
    "train": [
        "tfseqrec train --data ml-1m/ml-1m.txt --output runs/sasrec --max-train-minutes 30",
        "tfseqrec train --model bert4rec --data ml-1m/ml-1m.txt --output runs/bert4rec --epochs 100",
        "tfseqrec train --model unisrec --data amazon-scientific-text/Scientific.inter.json \\",
        "    --item-text amazon-scientific-text/Scientific.item.json --output runs/unisrec",
    ],
    "pretrain": [
        "tfseqrec pretrain --model unisrec --data ml-1m/ml-1m.txt --item-text runs/ml-1m.item.json \\",
        "    --data ml-100k --item-text ml-100k/u.item --output runs/unisrec-pre",
        "tfseqrec train --model unisrec --data amazon-scientific-text/Scientific.inter.json \\",
        "    --item-text amazon-scientific-text/Scientific.item.json --output runs/unisrec-ft \\",
        "    --init-from runs/unisrec-pre",
    ],
    "evaluate": [
        "tfseqrec evaluate --model-dir runs/sasrec --data ml-1m/ml-1m.txt --split valid",
    ],
    "plot": [
        'tfseqrec plot --model-dir runs/sasrec --history "1 48 150 260"',
    ],
    "report": [
        "tfseqrec report --model-dir runs/sasrec --model-dir runs/hstu --data ml-1m/ml-1m.txt \\",
        "    --item-text ml-1m/ml-1m.item.json --output report.html",
    ],
    "recommend": [
        'tfseqrec recommend --model-dir runs/sasrec --history "1 48 150 260" --k 10 --json',
        "tfseqrec recommend --model-dir runs/sasrec --histories ml-1m/ml-1m.txt --output recs.jsonl",
    ],
    "export": [
        "tfseqrec export --model-dir runs/sasrec --output saved_models/ml1m",
        "docker run -p 8501:8501 -v $PWD/saved_models/ml1m:/models/ml1m \\",
        "    -e MODEL_NAME=ml1m tensorflow/serving",
    ],
    "pipeline": [
        "tfseqrec pipeline run --data-root data/csv --train-steps 1000",
    ],
}

DATA_HELP = (
    "interaction file or dataset directory (ml-1m.txt, u.data, ratings.dat, *.csv, *.tsv, "
    "*.inter.json); relative paths may also be given against $TFSEQREC_DATA"
)

DESCRIPTION = """\
Transformer sequential recommenders: given each user's items in order, recommend
the next. tfseqrec reads interaction logs, trains a model on each user's history
(the last item held out for testing, the one before it for validation), ranks
the whole catalogue to evaluate it, recommends next items, and exports
SavedModels for TensorFlow Serving.
"""

EPILOG = """\
examples:
  tfseqrec data download ml-1m
  tfseqrec data stats ml-1m/ml-1m.txt
  tfseqrec train --model sasrec --data ml-1m/ml-1m.txt --output runs/sasrec
  tfseqrec evaluate --model-dir runs/sasrec --data ml-1m/ml-1m.txt
  tfseqrec recommend --model-dir runs/sasrec --history "1 48 150 260" --k 10
  tfseqrec export --model-dir runs/sasrec --output saved_models/ml1m

'tfseqrec COMMAND --help' describes a command and its flags. Data paths may be
given relative to $TFSEQREC_DATA. stdout carries the result alone (one JSON
object; 'data stats' and 'recommend' print text unless --json), so 'tfseqrec
train ... | jq' reads the metrics; notes, warnings, progress bars and errors go
to stderr.
"""

# The exit statuses main returns, as help and docs/cli.md list them. 2 is also what
# argparse exits with when the command line does not parse.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_STATUS = {
    EXIT_OK: "done: the result is on stdout",
    EXIT_FAILED: "the command failed: one 'tfseqrec: error: ...' line on stderr",
    EXIT_USAGE: "the command line does not parse, or a command lacks its subcommand",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C); 'train' resumes when run again",
}


def _table(title, rows):
    """A help block: ``title`` then one aligned ``name  text`` line per row."""
    width = max(len(name) for name in rows)
    return f"{title}:\n" + "".join(f"  {name:<{width}}  {text}\n" for name, text in rows.items())


def _defaults_help():
    """A help block: each training flag's default, by model, as ``tfseqrec/defaults.json`` holds
    them (written from the constructors and the registry: ``tfseqrec.training.config.defaults``)."""
    with open(DEFAULTS_FILE) as f:
        defaults = json.load(f)
    rows = {}
    for name in [flag[0] for flag in TRAIN_FLAGS] + ["bucket_boundaries"]:
        by_value = {}
        for model, values in defaults.items():
            if name in values:
                by_value.setdefault(json.dumps(values[name]), []).append(model)
        if not by_value:
            continue
        # The value most models share first, then the others with their models.
        ordered = sorted(by_value.items(), key=lambda item: -len(item[1]))
        parts = [_shown(ordered[0][0]) + ("" if len(ordered[0][1]) > 1 else f" ({ordered[0][1][0]})")]
        parts += [f"{', '.join(models)}: {_shown(value)}" for value, models in ordered[1:]]
        rows["--" + name.replace("_", "-")] = "; ".join(parts)
    title = "defaults (the constructors' and tfseqrec.registry's; tfseqrec.presets.for_data settles the rest)"
    return _table(title, rows)


def _shown(value):
    """A default from ``defaults.json`` (JSON text) as help shows it."""
    value = json.loads(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _commands_help(parent=""):
    """The commands under ``parent`` ('' for the top level, or 'data'), as a help block."""
    depth = len(parent.split()) + 1
    rows = {
        name.split()[-1]: text
        for name, text in SUMMARIES.items()
        if len(name.split()) == depth and name.startswith(parent)
    }
    return _table("commands", rows)


def main(argv=None):
    # TensorFlow's INFO and WARNING notices (oneDNN, CUDA probing on a CPU machine) are not
    # for users; a user who sets the level gets what it lets through.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        # A usage error, as argparse's own are: the help goes to stderr.
        getattr(args, "help_parser", parser).print_help(sys.stderr)
        return EXIT_USAGE
    # The command writes its result to `result`, the real stdout; whatever else is printed
    # while it runs (the library's notes, Keras's progress bars, which Keras writes to
    # sys.stdout) goes to stderr, so that a pipe reads the result alone.
    result = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        return _run(args, result)


def _run(args, result):
    """Runs the command ``args`` was parsed for, its result written to ``result``; the exit status."""
    try:
        with _tensorflow_start_up_hidden():
            # Imported here, once the arguments are parsed: keeps `tfseqrec --help` free of TensorFlow.
            from tfseqrec import commands
        return commands.run(args, result)
    except (ValueError, OSError, OverflowError) as e:
        # DataError is a ValueError whose message already says file:line: problem.
        # OSError covers missing files, permissions and existing outputs.
        message = (
            str(e) if not isinstance(e, OSError) or not e.filename else f"{e.filename}: {e.strerror or e}"
        )
        print(f"tfseqrec: error: {message}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("tfseqrec: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


# What TensorFlow writes to stderr while it loads that TF_CPP_MIN_LOG_LEVEL does not stop:
# INFO and WARNING lines logged before its logging is set up (absl's "before
# absl::InitializeLog()" banner with them), and the TF 2.16 wheels' duplicate CUDA plugin
# registrations, logged as errors on every machine but harmless.
_START_UP_NOTICE = re.compile(
    rb"^WARNING: All log messages before absl::InitializeLog\(\) is called"
    rb"|^[IW]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] "
    rb"|^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IW] "
    rb"|Unable to register cu(DNN|FFT|BLAS) factory: Attempting to register factory for plugin"
)


@contextlib.contextmanager
def _tensorflow_start_up_hidden():
    """Drops TensorFlow's start-up notices from stderr while TensorFlow loads in the block.

    Every other line written to stderr meanwhile is written back after the block. A user
    who asked for notices (``TF_CPP_MIN_LOG_LEVEL`` 0 or 1) sees them all.
    """
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") in ("0", "1"):
        yield
        return
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to filter
        saved = None
    if saved is None:
        yield
        return
    # The notices come from C++ and go to file descriptor 2, so that is what is redirected.
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().splitlines(True)
            kept = b"".join(line for line in lines if not _START_UP_NOTICE.search(line))
            while kept:
                kept = kept[os.write(2, kept) :]


def build_parser():
    exit_status = _table("exit status", {str(code): text for code, text in EXIT_STATUS.items()})
    parser = argparse.ArgumentParser(
        prog="tfseqrec",
        usage="%(prog)s [-h] [--version] COMMAND ...",
        description=f"{DESCRIPTION}\n{_commands_help()}\n{_table('models (train --model)', MODELS)}",
        epilog=f"{EPILOG}\n{exit_status}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # The commands are listed in the description (argparse's own list misaligns them).
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS, prog="tfseqrec")
    for add in (
        _add_data,
        _add_train,
        _add_pretrain,
        _add_evaluate,
        _add_plot,
        _add_report,
        _add_recommend,
        _add_export,
        _add_pipeline,
    ):
        add(sub)
    return parser


def _command(sub, name, models=False):
    """The parser of command ``name`` ('data stats'), its help from ``SUMMARIES``,
    ``DETAILS`` and ``EXAMPLES``; ``models``: its help lists the model kinds.

    A command with subcommands (``data``, ``pipeline``) lists them after its details; a
    command without records its name as ``args.run``.
    """
    summary = SUMMARIES[name]
    paragraphs = [summary[0].upper() + summary[1:] + ".", *DETAILS[name]]
    description = "\n\n".join(textwrap.fill(p, 78, break_on_hyphens=False) for p in paragraphs)
    nested = any(other.startswith(name + " ") for other in SUMMARIES)
    if nested:
        description += "\n\n" + _commands_help(name)
    epilog = _table("models (--model)", MODELS) + "\n" if models else ""
    if name == "train":
        presets = {
            f"{model} {preset}": text for model, rows in PRESETS.items() for preset, text in rows.items()
        }
        epilog += _table("presets (--model MODEL --preset NAME)", presets) + "\n"
        epilog += _defaults_help() + "\n"
    if name in EXAMPLES:
        epilog += "examples:\n" + "".join(f"  {line}\n" for line in EXAMPLES[name])
    parser = sub.add_parser(
        name.split()[-1],
        usage=f"tfseqrec {name} [-h] COMMAND ..." if nested else None,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # main runs commands.COMMANDS[run], or prints help_parser's help when no subcommand is given.
    parser.set_defaults(**({"help_parser": parser} if nested else {"run": name}))
    return parser


# --- flags -------------------------------------------------------------------------


def _add_data(sub):
    data_sub = _command(sub, "data").add_subparsers(
        dest="data_command", metavar="COMMAND", help=argparse.SUPPRESS, prog="tfseqrec data"
    )
    for add in (
        _add_data_stats,
        _add_data_download,
        _add_data_item_text,
        _add_data_item_features,
        _add_data_synthetic,
        _add_data_tfrecord,
    ):
        add(data_sub)


def _add_data_stats(data_sub):
    stats = _command(data_sub, "data stats")
    stats.add_argument("path", help=DATA_HELP)
    _add_format_flags(stats)
    stats.add_argument(
        "--min-user-interactions", type=_nonnegative_int, default=0, help="k-core: drop users with fewer"
    )
    stats.add_argument(
        "--min-item-interactions", type=_nonnegative_int, default=0, help="k-core: drop items with fewer"
    )
    _add_split_flags(stats)
    stats.add_argument("--json", action="store_true", help="print one JSON object")


def _add_data_download(data_sub):
    download = _command(data_sub, "data download")
    download.add_argument("dataset", choices=["ml-1m", "ml-100k"])
    download.add_argument(
        "--dir",
        default=None,
        help="data root (default $TFSEQREC_CACHE or ~/.cache/tfseqrec/data); then set TFSEQREC_DATA to it",
    )
    download.add_argument(
        "--base-url", default=None, help="fetch every file from this URL prefix instead (a mirror)"
    )


def _add_data_item_text(data_sub):
    item_text = _command(data_sub, "data item-text")
    item_text.add_argument("path", help="item text: *.item.json, movies.dat or u.item")
    item_text.add_argument(
        "--id-map",
        help="two columns 'id original_id' (ml-1m/sas_to_original_items.txt): "
        "the output is keyed by the first",
    )
    item_text.add_argument("--output", required=True, help="the *.item.json to write")


def _add_data_item_features(data_sub):
    item_features = _command(data_sub, "data item-features")
    item_features.add_argument("path", help="item text: movies.dat, u.item or *.item.json")
    item_features.add_argument(
        "--id-map",
        help="two columns 'id original_id' (ml-1m/sas_to_original_items.txt): the output is keyed by the first",
    )
    item_features.add_argument("--output", required=True, help="the .csv to write")


def _add_data_synthetic(data_sub):
    synth = _command(data_sub, "data synthetic")
    synth.add_argument("--events", type=_positive_int, required=True, help="events in the log")
    synth.add_argument("--items", type=_positive_int, required=True, help="catalogue size")
    synth.add_argument("--users", type=_positive_int, default=None, help="users (default: events / 50)")
    synth.add_argument("--seed", type=_checked(int), default=0)
    synth.add_argument(
        "--zipf-exponent",
        type=_checked(float, minimum=0),
        default=1.0,
        help="popularity skew (1: Zipf's law, 0: uniform)",
    )
    synth.add_argument(
        "--follow-prob",
        type=_checked(float, minimum=0, maximum=1),
        default=0.5,
        help="share of events that continue the previous item's cycle (the learnable part)",
    )
    synth.add_argument("--output", required=True, help="the CSV to write (.csv or .csv.gz)")


def _add_data_tfrecord(data_sub):
    convert = _command(data_sub, "data tfrecord")
    convert.add_argument("path", help=DATA_HELP)
    _add_format_flags(convert)
    convert.add_argument(
        "--output", required=True, help="directory for train/valid/test .tfrecord.gz and the vocabulary"
    )


def _add_train(sub):
    train = _command(sub, "train", models=True)
    train.add_argument(
        "--model", choices=sorted(MODELS), default="sasrec", help="the model to train (default sasrec; below)"
    )
    train.add_argument(
        "--item-text", help="models that read item text (unisrec, recformer): *.item.json, movies.dat, u.item"
    )
    train.add_argument(
        "--item-features",
        help="id models: a CSV, TSV or JSON-lines file of item attributes (an item id column, then "
        "categorical, multi-valued 'a|b' or numeric columns), embedded beside the item ids; "
        "--config '{\"use_id_embeddings\": false}' for attributes alone",
    )
    train.add_argument("--data", required=True, help=DATA_HELP)
    train.add_argument(
        "--output",
        required=True,
        help="model directory, written when the run completes; an unfinished run (OUTPUT.partial) resumes",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a model already in --output (kept until the new run completes)",
    )
    train.add_argument("--config", help="JSON object or file of training options (flags override it)")
    train.add_argument(
        "--preset", help="a tuned configuration of the model (below); --config and flags override it"
    )
    train.add_argument(
        "--warm-start",
        metavar="DIR",
        help="id models: start from the model DIR holds (its weights and architecture), its "
        "vocabulary grown by --data's new items, for the epochs or minutes given",
    )
    _add_format_flags(train)
    for name, kind, help_text in TRAIN_FLAGS:
        train.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=_option_type(name, kind),
            default=None,
            help=help_text,
        )
    _add_train_switches(train)
    train.add_argument("--quiet", action="store_true", help="one line per epoch instead of a progress bar")
    train.set_defaults(option_flags=[f[0] for f in TRAIN_FLAGS] + TRAIN_SWITCHES)


def _add_train_switches(train):
    """``tfseqrec train``'s options that are not ``TRAIN_FLAGS``: lists, switches and choices."""
    _add_split_flags(train)
    train.add_argument(
        "--event-features",
        type=_name_list,
        default=None,
        help="id models: comma-separated per-event columns of the log (an event type, a device; "
        "'rating' of a MovieLens file), embedded and added to each event's input, never to the "
        "scored items",
    )
    train.add_argument(
        "--bucket-boundaries",
        type=_int_list,
        default=None,
        help="comma-separated batch widths for length bucketing ('' for none)",
    )
    train.add_argument(
        "--mixed-precision", action="store_true", default=None, help="bfloat16 on CPU, float16 on GPU"
    )
    train.add_argument(
        "--xla", dest="jit_compile", action="store_true", default=None, help="compile steps with XLA"
    )
    train.add_argument(
        "--sparse-item-updates",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Adam updates only the item rows a batch touched (default: with a sampled loss over "
        "100,000 items or more)",
    )
    train.add_argument(
        "--validation",
        choices=["last", "none"],
        default=None,
        help="last (default): each user's second-to-last item validates every epoch, the best epoch "
        "is kept and --patience stops the run; none: no validation split (that item is trained on) "
        "and exactly --epochs epochs",
    )
    train.add_argument(
        "--sampler",
        choices=["log_uniform", "uniform"],
        default=None,
        help="how --loss sampled_softmax draws its negatives: log_uniform (default, logQ-corrected) "
        "or uniform (as the HSTU reference draws them)",
    )
    train.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default=None,
        help="mirrored: train on every local device (GPUs); multi_worker: on every worker of the "
        "cluster in TF_CONFIG (run the same command on each; the chief writes --output)",
    )


def _add_split_flags(parser, choose=True):
    """``--split`` (unless ``choose`` is false), ``--test-start``, ``--valid-start``, ``--targets``."""
    if choose:
        parser.add_argument(
            "--split",
            choices=["leave_one_out", "temporal"],
            default=None,
            help="leave_one_out (default): each user's last item tests, the one before validates; "
            "temporal: the events from --test-start on test (needs event times)",
        )
    parser.add_argument(
        "--test-start",
        type=_timestamp,
        default=None,
        help="a temporal split's test period start (ISO 8601, e.g. 1998-03-01, or epoch seconds); "
        "each test user's earlier events are the history",
    )
    parser.add_argument(
        "--valid-start",
        type=_timestamp,
        default=None,
        help="the validation period's start, before --test-start (default: each user's last event "
        "before --test-start validates)",
    )
    parser.add_argument(
        "--targets",
        choices=["all", "first"],
        default=None,
        help="a temporal split's targets: every event of the period (default), or each user's first",
    )


def _name_list(text):
    """An argparse type: comma-separated column names (``tfseqrec.data.events.check_names``)."""
    try:
        return events.check_names(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _timestamp(text):
    """An argparse type: seconds since the epoch of ISO 8601 or a number (``readers.parse_timestamp``)."""
    try:
        return parse_timestamp(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_pretrain(sub):
    p = _command(sub, "pretrain")
    p.add_argument("--model", choices=PRETRAINABLE, required=True)
    p.add_argument(
        "--data",
        action="append",
        required=True,
        help=DATA_HELP + "; repeat it, with one --item-text each, for several datasets",
    )
    p.add_argument(
        "--item-text",
        action="append",
        required=True,
        help="the items' text of each --data, in the same order (*.item.json, movies.dat, u.item)",
    )
    p.add_argument("--output", required=True, help="checkpoint directory, for 'tfseqrec train --init-from'")
    p.add_argument("--overwrite", action="store_true", help="replace a checkpoint already in --output")
    p.add_argument("--config", help="JSON object or file of the model's options (flags override it)")
    flags = {f[0]: f[1:] for f in TRAIN_FLAGS}
    for name in PRETRAIN_FLAGS:
        p.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            default=None,
            type=_option_type(name, flags[name][0]),
            help=PRETRAIN_HELP.get(name, flags[name][1]),
        )
    p.add_argument("--quiet", action="store_true", help="one line per epoch instead of a progress bar")
    p.set_defaults(option_flags=PRETRAIN_FLAGS)


def _add_evaluate(sub):
    evaluate = _command(sub, "evaluate")
    evaluate.add_argument("--model-dir", required=True, help="a directory written by 'tfseqrec train'")
    evaluate.add_argument("--data", required=True, help=DATA_HELP)
    evaluate.add_argument(
        "--split", choices=["test", "valid"], default="test", help="the cases to rank (default test)"
    )
    # A temporal split other than the one the model was trained on (its train_config.json).
    _add_split_flags(evaluate, choose=False)
    evaluate.add_argument(
        "--exclude-seen",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="remove each user's history from the candidates, the target excepted",
    )
    evaluate.add_argument(
        "--exclude-seen-window",
        action="store_true",
        help="remove only the items of the model's input window (the last max_sequence_length "
        "of the history) instead of the whole history, as the HSTU paper's protocol does",
    )
    evaluate.add_argument(
        "--batch-size",
        type=_positive_int,
        default=None,
        help="test cases scored at once (default: 1024 users, ranked a block of "
        "4,096 items at a time; 256 for Recformer, ranked on its score matrix)",
    )
    evaluate.add_argument(
        "--sampled-negatives",
        type=_positive_int,
        default=None,
        help="also report sampled_* metrics against N negatives",
    )
    evaluate.add_argument(
        "--sampler",
        choices=["uniform", "popularity"],
        default="uniform",
        help="how --sampled-negatives are drawn (default uniform)",
    )
    evaluate.add_argument(
        "--metrics",
        default="all",
        help="comma-separated: accuracy (always computed), coverage, popularity, novelty, "
        "diversity, serendipity, by_length, by_popularity, or all (default); see docs/training.md",
    )
    evaluate.add_argument(
        "--allow-other-data",
        action="store_true",
        help="evaluate on data other than the model's training data (refused by default: "
        "the model directory records what it was trained on)",
    )
    _add_format_flags(evaluate)


def _add_plot(sub):
    plot = _command(sub, "plot")
    plot.add_argument("--model-dir", required=True, help="a directory written by 'tfseqrec train'")
    plot.add_argument("--output", help="directory for the PNGs (default: the model directory)")
    plot.add_argument("--history", help="raw item ids, oldest first; default: the last 20 items of --user")
    plot.add_argument("--user", help="a user of the training data (default: the first)")
    plot.add_argument(
        "--timestamps",
        type=_seconds_list,
        default=None,
        help="with --history, for a model that reads event times: one time in seconds per item",
    )


def _add_report(sub):
    report = _command(sub, "report")
    report.add_argument(
        "--model-dir", required=True, action="append", help="a directory written by 'tfseqrec train' (repeat)"
    )
    report.add_argument("--data", required=True, help=DATA_HELP)
    names = report.add_mutually_exclusive_group()
    names.add_argument("--item-text", help="item text (*.item.json, movies.dat, u.item): names the items")
    names.add_argument(
        "--item-features", help="an item-features file: its title or name column names the items"
    )
    report.add_argument("--output", required=True, help="the HTML file to write")
    report.add_argument("--users", help="comma-separated raw user ids to show (default: a seeded sample)")
    report.add_argument(
        "--sample", type=_positive_int, default=8, help="users shown without --users (default 8)"
    )
    report.add_argument("--seed", type=_checked(int), default=0, help="the sample's seed")
    _add_format_flags(report)


def _add_recommend(sub):
    recommend = _command(sub, "recommend")
    recommend.add_argument("--model-dir", required=True, help="a directory written by 'tfseqrec train'")
    given = recommend.add_mutually_exclusive_group(required=True)
    given.add_argument("--history", help='raw item ids, oldest first: "id1 id2 ..."')
    given.add_argument(
        "--histories",
        help='every user\'s history: an interaction log, or a .jsonl file of one {"user_id", '
        '"items"} a line; recommendations go to --output',
    )
    recommend.add_argument(
        "--output",
        help="with --histories: a .jsonl (a line a user), .csv (a row a recommendation) or "
        ".parquet file; rerun after a kill, it resumes where the file ends",
    )
    recommend.add_argument(
        "--exclude", help="a file of raw item ids, one a line, never to recommend (with --histories)"
    )
    recommend.add_argument(
        "--batch-size",
        type=_positive_int,
        default=512,
        help="with --histories: users scored at once (default 512)",
    )
    recommend.add_argument(
        "--timestamps",
        type=_seconds_list,
        default=None,
        help='the items\' times in seconds, one per --history item: "t1 t2 ..."; '
        "needed by (and only by) a model that reads event times (hstu with a time bias)",
    )
    recommend.add_argument(
        "--event",
        action="append",
        default=None,
        metavar='COLUMN="v1 v2 ..."',
        help="for a model trained with --event-features: each --history item's value of COLUMN "
        "(repeat the flag for each column)",
    )
    recommend.add_argument("--k", type=_positive_int, default=10, help="items to recommend (default 10)")
    recommend.add_argument(
        "--exclude-seen",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="never recommend an item of the history",
    )
    recommend.add_argument("--json", action="store_true", help="print one JSON object")
    _add_format_flags(recommend)


def _add_export(sub):
    export = _command(sub, "export")
    export.add_argument("--model-dir", required=True, help="a directory written by 'tfseqrec train'")
    export.add_argument(
        "--output",
        required=True,
        help="the TF Serving model base path, e.g. saved_models/ml1m; writes OUTPUT/VERSION/",
    )
    export.add_argument(
        "--version", type=_positive_int, default=None, help="version number (default: the next free one)"
    )
    export.add_argument(
        "--k", type=_positive_int, default=10, help="items per serving_default answer (default 10)"
    )
    export.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="skip assets.extra/tf_serving_warmup_requests",
    )
    export.add_argument(
        "--item-text",
        help="models that read item text (recformer): add the items of this file "
        "the model has not seen to the served index (encoded by the trained encoder; no retraining)",
    )
    export.add_argument(
        "--item-features",
        help="id models trained with --item-features: add the items of this file the model has not "
        "seen, represented by their attributes (no retraining)",
    )


def _add_pipeline(sub):
    pipeline = _command(sub, "pipeline")
    pipeline_sub = pipeline.add_subparsers(
        dest="pipeline_command", metavar="COMMAND", help=argparse.SUPPRESS, prog="tfseqrec pipeline"
    )
    run = _command(pipeline_sub, "pipeline run")
    run.add_argument("--data-root", required=True, help="directory of CSV files: user_id,item_id,timestamp")
    run.add_argument(
        "--pipeline-root",
        default=os.path.join("tfx", "pipelines", "tfseqrec"),
        help="artifact directory (default tfx/pipelines/tfseqrec)",
    )
    run.add_argument(
        "--metadata-path",
        default=os.path.join("tfx", "metadata", "tfseqrec", "metadata.db"),
        help="SQLite ML Metadata file (default tfx/metadata/tfseqrec/metadata.db)",
    )
    run.add_argument(
        "--serving-model-dir",
        default=os.path.join("saved_models", "tfseqrec"),
        help="where the Pusher pushes blessed models (default saved_models/tfseqrec)",
    )
    run.add_argument(
        "--custom-config", help="JSON object or file of training options (TrainConfig keys, serving_k)"
    )
    run.add_argument("--pipeline-name", default="tfseqrec", help="the pipeline's name in ML Metadata")
    run.add_argument("--train-steps", type=_positive_int, default=None, help="cap on training steps")
    run.add_argument(
        "--threshold", type=_finite_float, default=0.0, help="least --metric a model needs to be pushed"
    )
    run.add_argument(
        "--min-improvement",
        type=_finite_float,
        default=0.0,
        help="how much it must beat the last blessed model by",
    )
    run.add_argument(
        "--metric",
        default="ndcg@10",
        choices=BLESSING_METRICS,
        metavar="METRIC",
        help="blessing metric: ndcg@K, hr@K (K in 1,5,10,20) or mrr",
    )
    _add_pipeline_data_flags(run)


def _add_pipeline_data_flags(run):
    """``pipeline run``'s flags on the data's columns, warm start, inference and Beam."""
    run.add_argument("--user-col", default="user_id", help="the CSV files' user column")
    run.add_argument("--item-col", default="item_id", help="the CSV files' item column")
    run.add_argument("--time-col", default="timestamp", help="the CSV files' timestamp column")
    run.add_argument(
        "--event-features",
        type=_name_list,
        default=None,
        help="comma-separated per-event columns of the CSV files the model reads as context "
        "(custom config's event_features)",
    )
    run.add_argument(
        "--bulk-inference",
        action="store_true",
        help="also write every user's recommendations (TFX's BulkInferrer on the blessed model)",
    )
    run.add_argument(
        "--report",
        action="store_true",
        help="also write the report page of the trained model beside the last blessed one "
        "(tfseqrec report's page, a pipeline artifact; the summary's 'report')",
    )
    run.add_argument(
        "--no-warm-start",
        dest="warm_start",
        action="store_false",
        help="train anew instead of from the last blessed model",
    )
    run.add_argument(
        "--beam-arg",
        dest="beam_args",
        action="append",
        default=None,
        help=(
            "a Beam pipeline option, repeatable (default: the in-process DirectRunner; "
            "--beam-arg=--runner=DaskRunner --beam-arg=--dask_client_address=HOST:PORT: a Dask cluster)"
        ),
    )


# Training options settable as flags; each must be an option of the chosen model's kind.
TRAIN_FLAGS = [
    ("epochs", int, "maximum epochs (Recformer: of stage 1); early stopping on validation NDCG@10"),
    ("patience", int, "epochs without improvement before stopping"),
    ("max_sequence_length", int, "items of history the model reads"),
    ("max_tokens", int, "Recformer: tokens per packed input"),
    ("hidden_dim", int, "model width"),
    ("num_layers", int, "transformer blocks"),
    ("num_heads", int, "attention heads"),
    ("intermediate_dim", int, "feed-forward width"),
    ("dropout", float, "dropout"),
    ("num_time_buckets", int, "HSTU: buckets of the relative time bias (0 turns it off)"),
    ("loss", str, "softmax, bce, sampled_softmax or gbce"),
    ("num_negatives", int, "negatives for sampled losses"),
    ("mask_prob", float, "BERT4Rec Cloze masking probability"),
    ("last_item_only_prob", float, "BERT4Rec share of sequences with only the last item masked"),
    ("batch_size", int, "training batch size"),
    ("learning_rate", float, "Adam learning rate"),
    ("window_stride", int, "also train on earlier windows of long histories, this many items apart"),
    ("max_train_minutes", float, "stop after the first epoch past this much training time"),
    ("seed", int, "random seed"),
    ("init_from", str, "unisrec, recformer: start from a directory written by 'tfseqrec pretrain'"),
]
TRAIN_SWITCHES = [
    "event_features",
    "split",
    "test_start",
    "valid_start",
    "targets",
    "bucket_boundaries",
    "mixed_precision",
    "jit_compile",
    "sparse_item_updates",
    "validation",
    "sampler",
]
PRETRAIN_FLAGS = ["epochs", "learning_rate", "batch_size", "max_train_minutes", "seed"]
PRETRAIN_HELP = {
    "max_train_minutes": "stop at the first training step past this much time (there is "
    "no validation to wait for; one epoch of a large dataset can "
    "outlast any budget)",
    "epochs": "passes over the datasets' training sequences (default: unisrec 200, recformer 4)",
    "batch_size": "batch size (default: unisrec 128, recformer 32)",
    "learning_rate": "learning rate (default: unisrec 2e-3, recformer 5e-5)",
}


def _checked(convert, **bounds):
    """An argparse type: ``convert`` then ``tfseqrec.checks.check_number`` (the library's own check)."""

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if convert is int else 'a number'}, got {text!r}"
            ) from None
        try:
            return check_number("the value", value, integer=convert is int, **bounds)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e).replace("the value must", "must")) from None

    return parse


_positive_int = _checked(int, minimum=1)
_nonnegative_int = _checked(int, minimum=0)
_finite_float = _checked(float)
# Ranges of the training flags; the options dataclasses hold the same rules for --config files.
FLAG_RANGES = {
    "patience": _nonnegative_int,
    "num_time_buckets": _nonnegative_int,
    "seed": _checked(int),
    "dropout": _checked(float, minimum=0, maximum=1, exclusive_maximum=True),
    "mask_prob": _checked(float, minimum=0, maximum=1, exclusive_minimum=True),
    "last_item_only_prob": _checked(float, minimum=0, maximum=1),
    "learning_rate": _checked(float, minimum=0, exclusive_minimum=True),
    "max_train_minutes": _checked(float, minimum=0, exclusive_minimum=True),
}


def _option_type(name, kind):
    if name in FLAG_RANGES:
        return FLAG_RANGES[name]
    return _positive_int if kind is int else kind


def _int_list(text):
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _seconds_list(text):
    try:
        return [int(v) for v in text.split()]
    except ValueError:
        message = f"expected integer seconds separated by spaces, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def _add_format_flags(p):
    p.add_argument("--format", choices=FORMATS, default=None, help="input format (default: detect)")
    p.add_argument("--user-col", default="user_id", help="csv/tsv user column")
    p.add_argument("--item-col", default="item_id", help="csv/tsv item column")
    p.add_argument("--time-col", default="timestamp", help="csv/tsv timestamp column ('' for file order)")
    p.add_argument("--encoding", default="utf-8", help="the file's text encoding (default utf-8)")


if __name__ == "__main__":
    sys.exit(main())
