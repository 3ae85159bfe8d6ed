"""The ``tfseqrec`` command: flag parsing and wiring only.

Each subcommand is a ``_add_*`` function (its flags) and a function that calls the
library; what a ``--model`` name means is ``tfseqrec.kinds``'s decision.
"""

import argparse
import json
import os
import sys

DATA_HELP = (
    "interaction file or dataset directory (ml-1m.txt, u.data, ratings.dat, *.csv, *.tsv, "
    "*.inter.json); relative paths may also be given against $TFSEQREC_DATA"
)


def main(argv=None):
    # TensorFlow's C++ start-up chatter (CUDA probing on CPU machines) is not for CLI users.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except (ValueError, OSError, OverflowError) as e:
        # DataError is a ValueError whose message already says file:line: problem.
        # OSError covers missing files, permissions and existing outputs.
        message = (
            str(e) if not isinstance(e, OSError) or not e.filename else f"{e.filename}: {e.strerror or e}"
        )
        print(f"tfseqrec: error: {message}", file=sys.stderr)
        return 1


def build_parser():
    parser = argparse.ArgumentParser(prog="tfseqrec", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    for add in (
        _add_data,
        _add_train,
        _add_pretrain,
        _add_evaluate,
        _add_plot,
        _add_recommend,
        _add_export,
        _add_pipeline,
    ):
        add(sub)
    return parser


# --- flags -------------------------------------------------------------------------


def _add_data(sub):
    data = sub.add_parser("data", help="inspect and convert interaction data")
    data_sub = data.add_subparsers(dest="data_command")
    stats = data_sub.add_parser("stats", help="counts and leave-one-out split sizes of a dataset")
    stats.add_argument("path", help=DATA_HELP)
    _add_format_flags(stats)
    stats.add_argument(
        "--min-user-interactions", type=_nonnegative_int, default=0, help="k-core: drop users with fewer"
    )
    stats.add_argument(
        "--min-item-interactions", type=_nonnegative_int, default=0, help="k-core: drop items with fewer"
    )
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(func=_data_stats)

    download = data_sub.add_parser("download", help="fetch ml-1m or ml-100k from their publishers (checked)")
    download.add_argument("dataset", choices=["ml-1m", "ml-100k"])
    download.add_argument(
        "--dir",
        default=None,
        help="data root (default $TFSEQREC_CACHE or ~/.cache/tfseqrec/data); then set TFSEQREC_DATA to it",
    )
    download.add_argument(
        "--base-url", default=None, help="fetch every file from this URL prefix instead (a mirror)"
    )
    download.set_defaults(func=_data_download)

    item_text = data_sub.add_parser(
        "item-text", help="write item text as *.item.json, ids mapped (ml-1m.txt's ids)"
    )
    item_text.add_argument("path", help="item text: *.item.json, movies.dat or u.item")
    item_text.add_argument(
        "--id-map",
        help="two columns 'id original_id' (ml-1m/sas_to_original_items.txt): "
        "the output is keyed by the first",
    )
    item_text.add_argument("--output", required=True, help="the *.item.json to write")
    item_text.set_defaults(func=_data_item_text)

    synth = data_sub.add_parser(
        "synthetic",
        help="write a seeded synthetic log (Zipf items, log-normal lengths) as user_id,item_id,timestamp CSV",
    )
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
    synth.set_defaults(func=_data_synthetic)

    convert = data_sub.add_parser("tfrecord", help="write leave-one-out splits as TFRecord tf.Examples")
    convert.add_argument("path", help=DATA_HELP)
    _add_format_flags(convert)
    convert.add_argument(
        "--output", required=True, help="directory for train/valid/test .tfrecord.gz and the vocabulary"
    )
    convert.set_defaults(func=_data_tfrecord)


def _add_train(sub):
    from tfseqrec import kinds
    from tfseqrec.training.distribute import STRATEGIES

    train = sub.add_parser(
        "train", help="train a model (SASRec, BERT4Rec, UniSRec, Recformer) on leave-one-out splits"
    )
    train.add_argument("--model", choices=sorted(kinds.KINDS), default="sasrec")
    train.add_argument(
        "--item-text", help="models that read item text (unisrec, recformer): *.item.json, movies.dat, u.item"
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
    _add_format_flags(train)
    for name, kind, help_text in TRAIN_FLAGS:
        train.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=_option_type(name, kind),
            default=None,
            help=help_text,
        )
    train.add_argument(
        "--bucket-boundaries",
        type=_int_list,
        default=None,
        help="comma-separated batch widths for length bucketing (default 50,100; '' for none)",
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
        "--strategy",
        choices=STRATEGIES,
        default=None,
        help="mirrored: train on every local device (GPUs); multi_worker: on every worker of the "
        "cluster in TF_CONFIG (run the same command on each; the chief writes --output)",
    )
    train.add_argument("--quiet", action="store_true", help="one line per epoch instead of a progress bar")
    train.set_defaults(func=_train)


def _add_pretrain(sub):
    p = sub.add_parser(
        "pretrain", help="pre-train unisrec or recformer on several (interactions, item text) datasets"
    )
    p.add_argument("--model", choices=["recformer", "unisrec"], required=True)
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
    p.set_defaults(func=_pretrain)


def _add_evaluate(sub):
    evaluate = sub.add_parser("evaluate", help="full-catalogue ranking metrics of a trained model, as JSON")
    evaluate.add_argument("--model-dir", required=True)
    evaluate.add_argument("--data", required=True, help=DATA_HELP)
    evaluate.add_argument("--split", choices=["test", "valid"], default="test")
    evaluate.add_argument(
        "--exclude-seen",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="remove each user's history from the candidates, the target excepted (default: yes)",
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
    evaluate.add_argument("--sampler", choices=["uniform", "popularity"], default="uniform")
    _add_format_flags(evaluate)
    evaluate.set_defaults(func=_evaluate)


def _add_plot(sub):
    plot = sub.add_parser("plot", help="PNGs: training curves and an attention heat map over a history")
    plot.add_argument("--model-dir", required=True)
    plot.add_argument("--output", help="directory for the PNGs (default: the model directory)")
    plot.add_argument("--history", help="raw item ids, oldest first; default: the last 20 items of --user")
    plot.add_argument("--user", help="a user of the training data (default: the first)")
    plot.add_argument(
        "--timestamps",
        type=_seconds_list,
        default=None,
        help="with --history, for a model that reads event times: one time in seconds per item",
    )
    plot.set_defaults(func=_plot)


def _add_recommend(sub):
    recommend = sub.add_parser("recommend", help="top-k next items for a history")
    recommend.add_argument("--model-dir", required=True)
    recommend.add_argument("--history", required=True, help='raw item ids, oldest first: "id1 id2 ..."')
    recommend.add_argument(
        "--timestamps",
        type=_seconds_list,
        default=None,
        help='the items\' times in seconds, one per --history item: "t1 t2 ..."; '
        "needed by (and only by) a model that reads event times (hstu with a time bias)",
    )
    recommend.add_argument("--k", type=_positive_int, default=10)
    recommend.add_argument("--exclude-seen", action=argparse.BooleanOptionalAction, default=True)
    recommend.add_argument("--json", action="store_true", help="print one JSON object")
    recommend.set_defaults(func=_recommend)


def _add_export(sub):
    export = sub.add_parser("export", help="write a SavedModel version for TensorFlow Serving")
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
    export.set_defaults(func=_export)


def _add_pipeline(sub):
    pipeline = sub.add_parser("pipeline", help="the TFX pipeline (primary stack: Python 3.10, tfx 1.16)")
    pipeline_sub = pipeline.add_subparsers(dest="pipeline_command")
    run = pipeline_sub.add_parser("run", help="run the pipeline locally (LocalDagRunner, SQLite ML Metadata)")
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
    run.add_argument("--pipeline-name", default="tfseqrec")
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
        "--metric", default="ndcg@10", help="blessing metric: ndcg@K, hr@K (K in 1,5,10,20) or mrr"
    )
    run.add_argument("--user-col", default="user_id")
    run.add_argument("--item-col", default="item_id")
    run.add_argument("--time-col", default="timestamp")
    run.add_argument(
        "--beam-arg",
        dest="beam_args",
        action="append",
        default=None,
        help="a Beam pipeline option, repeatable (default: the in-process DirectRunner)",
    )
    run.set_defaults(func=_pipeline_run)


# Training options settable as flags; each must be an option of the chosen model's kind.
TRAIN_FLAGS = [
    (
        "epochs",
        int,
        "maximum epochs (default 200; Recformer: of stage 1; early stopping on validation NDCG@10)",
    ),
    ("patience", int, "epochs without improvement before stopping (default 20)"),
    ("max_sequence_length", int, "items of history the model reads (default 200; Recformer 20)"),
    ("max_tokens", int, "Recformer: tokens per packed input (default 128)"),
    ("hidden_dim", int, "model width (default 64; HSTU 50)"),
    ("num_layers", int, "transformer blocks (default 2; HSTU 8)"),
    ("num_heads", int, "attention heads (SASRec 1, BERT4Rec 2, HSTU 2)"),
    ("intermediate_dim", int, "feed-forward width"),
    ("dropout", float, "dropout (default 0.1)"),
    (
        "num_time_buckets",
        int,
        "HSTU: buckets of the relative time bias (default 128 when the data has event "
        "times, else 0; 0 turns it off)",
    ),
    ("loss", str, "softmax (default), bce, sampled_softmax or gbce"),
    ("num_negatives", int, "negatives for sampled losses"),
    ("mask_prob", float, "BERT4Rec Cloze masking probability (default 0.2)"),
    ("last_item_only_prob", float, "BERT4Rec share of sequences with only the last item masked"),
    ("batch_size", int, "training batch size (default 128)"),
    (
        "learning_rate",
        float,
        "Adam learning rate (default: SASRec and UniSRec 2e-3, BERT4Rec 4e-3 after a "
        "5-epoch warm-up, HSTU 2e-3, Recformer 5e-5)",
    ),
    ("window_stride", int, "also train on earlier windows of long histories, this many items apart"),
    ("max_train_minutes", float, "stop after the first epoch past this much training time"),
    ("seed", int, "random seed (default 0)"),
    ("init_from", str, "unisrec, recformer: start from a directory written by 'tfseqrec pretrain'"),
]
TRAIN_SWITCHES = ["bucket_boundaries", "mixed_precision", "jit_compile", "sparse_item_updates"]
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
    """An argparse type: ``convert`` then ``training.config.check_number`` (the library's own check)."""

    def parse(text):
        from tfseqrec.training.config import check_number

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
    from tfseqrec.data.readers import FORMATS

    p.add_argument("--format", choices=FORMATS, default=None, help="input format (default: detect)")
    p.add_argument("--user-col", default="user_id", help="csv/tsv user column")
    p.add_argument("--item-col", default="item_id", help="csv/tsv item column")
    p.add_argument("--time-col", default="timestamp", help="csv/tsv timestamp column ('' for file order)")
    p.add_argument("--encoding", default="utf-8")


# --- wiring ------------------------------------------------------------------------


def _resolve(path):
    root = os.environ.get("TFSEQREC_DATA")
    if path and not os.path.exists(path) and root and os.path.exists(os.path.join(root, path)):
        return os.path.join(root, path)
    return path


def _read_kwargs(args):
    return {
        "format": args.format,
        "user_col": args.user_col,
        "item_col": args.item_col,
        "time_col": args.time_col or None,
        "encoding": args.encoding,
    }


def _load(args, vocabulary=None):
    from tfseqrec.data import readers, splits

    interactions = readers.read_interactions(
        _resolve(args.path if hasattr(args, "path") else args.data), **_read_kwargs(args)
    )
    split, vocabulary, report = splits.prepare(
        interactions,
        getattr(args, "min_user_interactions", 0),
        getattr(args, "min_item_interactions", 0),
        vocabulary,
    )
    return interactions, split, vocabulary, report


def _data_stats(args):
    interactions, _, _, report = _load(args)
    out = {
        "path": interactions.path,
        "format": interactions.format,
        "has_timestamps": interactions.has_time,
        "num_users": report["num_users"],
        "num_items": report["num_items"],
        "num_interactions": report["num_interactions"],
        "sequence_length": report["sequence_length"],
        "density": round(report["num_interactions"] / (report["num_users"] * report["num_items"]), 6),
        "splits": {
            key: report[key]
            for key in ("train_users", "train_interactions", "valid_cases", "test_cases", "train_only_users")
        },
        "removed": {k: v for k, v in report.items() if k.startswith("removed_") or k == "oov_interactions"},
    }
    if args.json:
        _print_json(out)
    else:
        width = max(len(k) for k in out)
        for key, value in out.items():
            print(f"{key:<{width}}  {value}")
    return 0


def _data_download(args):
    import dataclasses

    from tfseqrec.data import download

    sources = None
    if args.base_url:
        base = args.base_url.rstrip("/")
        sources = [
            dataclasses.replace(s, url=f"{base}/{s.filename}") for s in download.DATASETS[args.dataset]
        ]
    folder = download.download(args.dataset, args.dir, sources)
    _print_json(
        {
            "dataset": args.dataset,
            "folder": folder,
            "files": sorted(os.listdir(folder)),
            "data_root": os.path.dirname(folder),
        }
    )
    return 0


def _data_item_text(args):
    from tfseqrec.data import readers

    if not args.output.endswith(".item.json"):
        raise ValueError(
            f"--output {args.output}: the name must end in .item.json (that is how readers know it)"
        )
    text = readers.read_item_text(_resolve(args.path))
    missing = []
    if args.id_map:
        mapping = readers.read_id_map(_resolve(args.id_map))
        missing = [new for new, original in mapping.items() if original not in text]
        text = {new: text[original] for new, original in mapping.items() if original in text}
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(text, f, ensure_ascii=False)
    print(
        json.dumps(
            {
                "output": args.output,
                "items": len(text),
                "mapped_ids_without_text": len(missing),
                "attributes": sorted({a for attrs in text.values() for a in attrs}),
            }
        )
    )
    return 0


def _data_synthetic(args):
    from tfseqrec.data import synthetic

    if not args.output.endswith((".csv", ".csv.gz")):
        raise ValueError(f"--output {args.output}: the name must end in .csv or .csv.gz")
    log = synthetic.generate(
        args.events,
        args.items,
        args.users,
        seed=args.seed,
        zipf_exponent=args.zipf_exponent,
        follow_prob=args.follow_prob,
    )
    synthetic.write_csv(log, args.output)
    print(
        json.dumps(
            {
                "output": args.output,
                "events": len(log),
                "users": log.num_users,
                "items_used": log.num_items,
                "catalogue": args.items,
                "seed": args.seed,
            }
        )
    )
    return 0


def _data_tfrecord(args):
    from tfseqrec.data import tfrecord

    _, split, vocabulary, report = _load(args)
    os.makedirs(args.output, exist_ok=True)
    counts = {}
    for name, part in (("train", split.train), ("valid", split.valid), ("test", split.test)):
        counts[name] = tfrecord.write_examples(
            os.path.join(args.output, f"{name}.tfrecord.gz"), part, vocabulary, "GZIP"
        )
    vocabulary.save(args.output)
    print(json.dumps({"output": args.output, "records": counts, "num_items": vocabulary.num_items}))
    return 0


def _train(args):
    from tfseqrec import evaluation, kinds

    kind = kinds.get(args.model)
    if args.item_text and not kind.needs_item_text:
        raise ValueError(f"--item-text is for models that read item text; {args.model} reads item ids only")
    options = _json_option("--config", args.config) or {}
    for name in [f[0] for f in TRAIN_FLAGS] + TRAIN_SWITCHES:
        if getattr(args, name) is not None:
            if name not in kind.option_names():
                raise ValueError(
                    f"--{name.replace('_', '-')} is not an option of {args.model}; its options: "
                    f"{sorted(kind.option_names())} (--config JSON)"
                )
            options[name] = getattr(args, name)
    model, split, epochs = kind.train(
        _resolve(args.data),
        args.output,
        options,
        item_text=_resolve(args.item_text),
        verbose=2 if args.quiet else "auto",
        overwrite=args.overwrite,
        strategy=args.strategy,
        **_read_kwargs(args),
    )
    result = evaluation.evaluate(model, split.test, progress=not args.quiet and None)
    result["model_dir"] = args.output
    result["epochs"] = epochs
    _print_json(result)
    return 0


def _pretrain(args):
    from tfseqrec.training import pretrain

    if len(args.data) != len(args.item_text):
        raise ValueError(
            f"give one --item-text per --data, in the same order: got {len(args.data)} --data and "
            f"{len(args.item_text)} --item-text"
        )
    options = _json_option("--config", args.config) or {}
    for name in PRETRAIN_FLAGS:
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    datasets = [(_resolve(d), _resolve(t)) for d, t in zip(args.data, args.item_text)]
    rows = pretrain.pretrain(
        args.model,
        datasets,
        args.output,
        options,
        verbose=2 if args.quiet else "auto",
        overwrite=args.overwrite,
    )
    _print_json(
        {
            "output": args.output,
            "model": args.model,
            "datasets": len(datasets),
            "epochs": len(rows),
            "loss": rows[-1]["loss"] if rows else None,
        }
    )
    return 0


def _evaluate(args):
    import numpy as np

    from tfseqrec import evaluation, kinds

    model, vocabulary, _ = kinds.load(args.model_dir)
    _, split, _, report = _load(args, vocabulary)
    sampled = None
    if args.sampled_negatives:
        sampled = {"num_negatives": args.sampled_negatives, "sampler": args.sampler}
    result = evaluation.evaluate(
        model,
        split.test if args.split == "test" else split.valid,
        exclude_seen=args.exclude_seen,
        batch_size=args.batch_size,
        sampled=sampled,
        item_counts=vocabulary.counts,
    )
    if result["num_unknown_targets"]:
        print(
            f"tfseqrec: {result['num_unknown_targets']} cases predict an item the model's vocabulary "
            "lacks; they count as misses (num_unknown_targets)",
            file=sys.stderr,
        )
    result["split"] = args.split
    result["skipped_unknown_targets"] = 0  # kept for old readers: unknown targets are misses, none is skipped
    result["oov_interactions"] = report["oov_interactions"]
    _print_json(result)
    return 0 if np.isfinite(result["mrr"]) else 1


def _plot(args):
    from tfseqrec import kinds, plot
    from tfseqrec.data import readers, splits

    kind = kinds.for_model_dir(args.model_dir)
    if not kind.attention_maps:
        raise ValueError(
            f"plot draws attention maps, which {kind.name} models do not have; "
            "their training curves are in the model directory's history.csv"
        )
    model, vocabulary, info = kind.load(args.model_dir)
    out = args.output or args.model_dir
    os.makedirs(out, exist_ok=True)
    written = [
        plot.training_curves(
            os.path.join(args.model_dir, "history.csv"), os.path.join(out, "training_curves.png")
        )
    ]
    if not args.history:
        events = splits.sort_by_time(readers.read_interactions(info["data"], format=info["format"]))
        user = args.user if args.user is not None else events.users[0]
        mine = events.users == user
        args.history = " ".join(str(i) for i in events.items[mine][-20:])
        if not args.history:
            raise ValueError(f"user {user!r} is not in {info['data']}")
        if getattr(model, "uses_timestamps", False):
            args.timestamps = events.timestamps[mine][-20:].tolist()
    ids, times = _known_history(args, model, vocabulary)
    if not ids:
        raise ValueError("none of the history's items is in the model's vocabulary")
    written.append(
        plot.attention_map(
            model, ids, os.path.join(out, "attention.png"), labels=vocabulary.to_raw(ids), timestamps=times
        )
    )
    print(json.dumps({"written": written}))
    return 0


def _recommend(args):
    import numpy as np

    from tfseqrec import kinds, ranking
    from tfseqrec.data import vocab

    model, vocabulary, _ = kinds.load(args.model_dir)
    history, times = _known_history(args, model, vocabulary)
    if history:
        # Only a model that reads times takes them (a Recformer's recommend has no such argument).
        timed = {} if times is None else {"timestamps": [times]}
        top_ids, top_scores = model.recommend([history], k=args.k, exclude_seen=args.exclude_seen, **timed)
    else:
        # As the SavedModel answers a history with no known item: by popularity.
        print(
            "tfseqrec: no item of the history is known; recommending the most popular items", file=sys.stderr
        )
        top = ranking.top_k(vocabulary.popularity()[None], min(args.k, vocabulary.num_items))
        top_ids, top_scores = top.indices.numpy().astype(np.int64) + vocab.NUM_RESERVED, top.values.numpy()
    items = vocabulary.to_raw(top_ids[0])
    scores = [float(s) for s in top_scores[0]]
    if args.json:
        _print_json({"item_ids": items, "scores": scores})
    else:
        for rank, (item, score) in enumerate(zip(items, scores), start=1):
            print(f"{rank}\t{item}\t{score:.6f}")
    return 0


def _known_history(args, model, vocabulary):
    """``(ids, times)`` of ``--history``'s known items (``times``: of ``--timestamps``, or ``None``)."""
    from tfseqrec.data import vocab

    raw, times = args.history.split(), args.timestamps
    if getattr(model, "uses_timestamps", False):
        if times is None:
            raise ValueError(
                "this model reads the items' event times (a time bias): give --timestamps, "
                "one time in seconds per --history item"
            )
        if len(times) != len(raw):
            raise ValueError(
                f"--history has {len(raw)} items but --timestamps {len(times)} times (one per item)"
            )
    elif times is not None:
        raise ValueError(
            "--timestamps is for models that read event times (hstu trained with a time bias); "
            "this model reads item ids only"
        )
    ids = vocabulary.lookup(raw)
    unknown = [r for r, i in zip(raw, ids) if i == vocab.OOV_ID]
    if unknown:
        print(f"tfseqrec: ignoring {len(unknown)} unknown item id(s): {unknown[:10]}", file=sys.stderr)
    known = [n for n, i in enumerate(ids) if i != vocab.OOV_ID]
    return [int(ids[n]) for n in known], None if times is None else [times[n] for n in known]


def _export(args):
    from tfseqrec import export, kinds
    from tfseqrec.data import readers

    kind = kinds.for_model_dir(args.model_dir)
    model, vocabulary, info = kind.load(args.model_dir)
    added = []
    if args.item_text:
        model, vocabulary, added = kind.add_items(
            model, vocabulary, info, readers.read_item_text(_resolve(args.item_text))
        )
    path, version = export.export_version(
        model, vocabulary, args.output, args.version, k=args.k, warmup=args.warmup
    )
    print(
        json.dumps(
            {
                "path": path,
                "version": version,
                "k": min(args.k, vocabulary.num_items),
                "num_items": vocabulary.num_items,
                "added_items": len(added),
                "signatures": export.saved_signatures(path),
            }
        )
    )
    return 0


def _pipeline_run(args):
    try:
        from components import pipeline
    except ImportError as e:
        raise ValueError(
            f"the TFX pipeline needs the primary stack (pip install 'tfseqrec[tfx]'): {e}"
        ) from None

    if not os.path.isdir(args.data_root):
        raise FileNotFoundError(f"--data-root {args.data_root}: no such directory (it holds the CSV files)")
    summary = pipeline.run(
        data_root=os.path.abspath(args.data_root),
        pipeline_root=os.path.abspath(args.pipeline_root),
        metadata_path=os.path.abspath(args.metadata_path),
        serving_model_dir=os.path.abspath(args.serving_model_dir),
        custom_config=_json_option("--custom-config", args.custom_config),
        pipeline_name=args.pipeline_name,
        train_steps=args.train_steps,
        threshold=args.threshold,
        min_improvement=args.min_improvement,
        metric=args.metric,
        user_column=args.user_col,
        item_column=args.item_col,
        time_column=args.time_col,
        beam_pipeline_args=args.beam_args,
    )
    _print_json(summary)
    return 0


# --- output and option helpers -----------------------------------------------------


def _print_json(value):
    """Prints ``value`` as strict JSON: a non-finite float becomes ``null``, never ``-Infinity``."""
    import math

    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    print(json.dumps(clean(value), allow_nan=False))


def _json_option(flag, text):
    if not text:
        return None
    text = open(text).read() if os.path.exists(text) else text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{flag}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag}: expected a JSON object, got {type(value).__name__}")
    return value


if __name__ == "__main__":
    sys.exit(main())
