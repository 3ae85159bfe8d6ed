"""The ``tfseqrec`` command: flag parsing and wiring only."""

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
    except (ValueError, FileNotFoundError) as e:
        # DataError is a ValueError whose message already says file:line: problem.
        print(f"tfseqrec: error: {e}", file=sys.stderr)
        return 1


def build_parser():
    parser = argparse.ArgumentParser(prog="tfseqrec", description=__doc__)
    sub = parser.add_subparsers(dest="command")

    data = sub.add_parser("data", help="inspect and convert interaction data")
    data_sub = data.add_subparsers(dest="data_command")
    stats = data_sub.add_parser("stats", help="counts and leave-one-out split sizes of a dataset")
    stats.add_argument("path", help=DATA_HELP)
    _add_format_flags(stats)
    stats.add_argument("--min-user-interactions", type=int, default=0, help="k-core: drop users with fewer")
    stats.add_argument("--min-item-interactions", type=int, default=0, help="k-core: drop items with fewer")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(func=_data_stats)

    convert = data_sub.add_parser("tfrecord", help="write leave-one-out splits as TFRecord tf.Examples")
    convert.add_argument("path", help=DATA_HELP)
    _add_format_flags(convert)
    convert.add_argument("--output", required=True, help="directory for train/valid/test .tfrecord.gz and the vocabulary")
    convert.set_defaults(func=_data_tfrecord)
    return parser


def _add_format_flags(p):
    from tfseqrec.data.readers import FORMATS

    p.add_argument("--format", choices=FORMATS, default=None, help="input format (default: detect)")
    p.add_argument("--user-col", default="user_id", help="csv/tsv user column")
    p.add_argument("--item-col", default="item_id", help="csv/tsv item column")
    p.add_argument("--time-col", default="timestamp", help="csv/tsv timestamp column ('' for file order)")
    p.add_argument("--encoding", default="utf-8")


def _load(args):
    from tfseqrec.data import readers, splits

    path = args.path
    root = os.environ.get("TFSEQREC_DATA")
    if not os.path.exists(path) and root and os.path.exists(os.path.join(root, path)):
        path = os.path.join(root, path)
    interactions = readers.read_interactions(
        path,
        format=args.format,
        user_col=args.user_col,
        item_col=args.item_col,
        time_col=args.time_col or None,
        encoding=args.encoding,
    )
    split, vocabulary, report = splits.prepare(
        interactions,
        getattr(args, "min_user_interactions", 0),
        getattr(args, "min_item_interactions", 0),
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
        print(json.dumps(out))
    else:
        width = max(len(k) for k in out)
        for key, value in out.items():
            print(f"{key:<{width}}  {value}")
    return 0


def _data_tfrecord(args):
    from tfseqrec.data import tfrecord

    _, split, vocabulary, report = _load(args)
    os.makedirs(args.output, exist_ok=True)
    counts = {}
    for name, part in (("train", split.train), ("valid", split.valid), ("test", split.test)):
        counts[name] = tfrecord.write_examples(os.path.join(args.output, f"{name}.tfrecord.gz"), part, vocabulary, "GZIP")
    vocabulary.save(args.output)
    print(json.dumps({"output": args.output, "records": counts, "num_items": vocabulary.num_items}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
