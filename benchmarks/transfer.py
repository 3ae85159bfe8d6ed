"""Text models on datasets they never trained on, against each dataset's own popularity.

UniSRec text only is trained once on ML-1M (titles and genres; best epoch by ML-1M's
validation NDCG@10) and moved to each target's catalogue by its items' text
(``UniSRec.for_catalogue``): no interaction of the target is read. Recformer zero-shot
is all-MiniLM-L6-v2 mean-pooled over each history's text, with no training at all.
Popularity ranks by the target's own training counts (it reads the target's
interactions: the floor a transfer has to clear); ``ml1m-popularity`` (where titles
overlap) ranks the target's items by ML-1M's training counts of the same title: the
popularity a transfer could know without reading the target.

Targets (leave-one-out, test split, full ranking, history filtered):

- ``ml-100k``: the same domain, other users and years (1997-98 against 2000-03). Its
  catalogue overlaps ML-1M's: the table says how many of its items and test targets
  have a title ML-1M also has (their text vectors are the ones trained on);
- ``amazon-scientific-text``: another domain (lab and science products).

Usage:
    python benchmarks/transfer.py --epochs 20 --minutes 60 --json transfer.json
Data: $TFSEQREC_DATA/ml-1m, ml-100k and amazon-scientific-text (default ../shared/data).
"""

import argparse
import json
import os
import shlex
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import datasets  # noqa: E402  (benchmarks/datasets.py)
import keras  # noqa: E402
import machine  # noqa: E402  (benchmarks/machine.py)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)
import text as text_bench  # noqa: E402  (benchmarks/text.py: its UniSRec transfer and evaluation)

from tfseqrec import training  # noqa: E402
from tfseqrec.data import readers, splits  # noqa: E402
from tfseqrec.data import text as text_lib  # noqa: E402
from tfseqrec.data import vocab as vocab_lib  # noqa: E402
from tfseqrec.training import recformer as recformer_driver  # noqa: E402

# target name: its dataset in benchmarks/datasets.py (the names are those of the stored runs)
TARGETS = {"ml-100k": "ml-100k", "amazon-scientific-text": "scientific"}
ZERO_SHOT = {"num_layers": 6, "pooling": "mean", "align_epochs": 0, "max_tokens": 256}


def normalised_title(attrs):
    return " ".join(str(attrs.get("title", "")).lower().split())


def catalogue_overlap(source_text, target_text, vocabulary, targets):
    """``(items, share of test targets)`` of the target whose title the source catalogue also has.

    ``source_text``/``target_text``: ``{raw id: {"title": ...}}``; ``targets``: the
    test cases' item ids in ``vocabulary``'s numbering (``NUM_RESERVED`` first).
    """
    titles = {normalised_title(a) for a in source_text.values()} - {""}
    shared = np.zeros(vocabulary.size, bool)
    for i, raw in enumerate(vocabulary.items):
        attrs = target_text.get(raw)
        shared[vocab_lib.NUM_RESERVED + i] = attrs is not None and normalised_title(attrs) in titles
    return int(shared.sum()), float(shared[np.asarray(targets)].mean())


def title_counts(source_text, vocabulary, counts):
    """``{normalised title: training count}`` of a source catalogue (items sharing a title add up)."""
    out = {}
    for i, raw in enumerate(vocabulary.items):
        title = normalised_title(source_text.get(raw, {}))
        if title:
            out[title] = out.get(title, 0) + int(counts[vocab_lib.NUM_RESERVED + i])
    return out


def source_popularity(by_title, target_text, vocabulary):
    """Training counts ``[vocabulary.size]`` of the target's items, from the source by title (0: none)."""
    counts = np.zeros(vocabulary.size, np.int64)
    for i, raw in enumerate(vocabulary.items):
        counts[vocab_lib.NUM_RESERVED + i] = by_title.get(normalised_title(target_text.get(raw, {})), 0)
    return counts


def target_rows(name, root, source, zero_shot):
    """A target's rows: popularity, ML-1M's popularity by title, UniSRec transferred, Recformer zero-shot.

    ``source``: ``(UniSRec trained on ML-1M, ML-1M's item text, ML-1M's training counts by title)``.
    """
    source_model, source_text, source_counts = source
    dataset = datasets.get(TARGETS[name])
    split, vocabulary, _ = splits.prepare(readers.read_interactions(dataset.path(root)))
    item_text = readers.read_item_text(dataset.item_text_path(root))
    attributes = text_lib.ATTRIBUTES[dataset.attributes]
    counts = split.train.item_counts(vocabulary.size)
    cold = counts[split.test.targets] == 0
    results, seconds = {}, {}
    results["popularity"] = text_bench.evaluate(text_bench.Popularity(counts), split.test, cold)
    by_source = source_popularity(source_counts, item_text, vocabulary)
    if by_source.any():  # ranks by what ML-1M's users watched: reads no interaction of the target
        results["ml1m-popularity"] = text_bench.evaluate(text_bench.Popularity(by_source), split.test, cold)
    start = time.monotonic()
    vectors, encoder, _ = text_bench.text_vectors(item_text, vocabulary, attributes)
    results["unisrec-transfer"] = text_bench.evaluate(
        source_model.for_catalogue(vectors, encoder), split.test, cold
    )
    seconds["unisrec-transfer"] = time.monotonic() - start
    if zero_shot:
        start = time.monotonic()
        config = training.RecformerConfig.from_dict({"attributes": list(attributes), **ZERO_SHOT})
        texts, _ = recformer_driver.item_texts(item_text, vocabulary, attributes)
        keras.utils.set_random_seed(config.seed)
        recommender = recformer_driver.build(config, vocabulary, texts)
        recformer_driver.align(recommender, config)  # align_epochs 0: encodes the item table only
        results["recformer-zero-shot"] = text_bench.evaluate(recommender, split.test, cold)
        seconds["recformer-zero-shot"] = time.monotonic() - start
    items, share = catalogue_overlap(source_text, item_text, vocabulary, split.test.targets)
    about = {
        "users": len(cold),
        "items": vocabulary.num_items,
        "items_titled_as_in_ml1m": items,
        "test_targets_titled_as_in_ml1m": share,
    }
    for row, r in results.items():
        print(name, row, json.dumps(r), flush=True)
    return {"results": results, "seconds": seconds, "about": about}


def print_tables(targets, source_seconds, source_epochs):
    for name, t in targets.items():
        a = t["about"]
        print(
            f"\n{name}: {a['users']} test cases, {a['items']} items; {a['items_titled_as_in_ml1m']} items and "
            f"{a['test_targets_titled_as_in_ml1m']:.1%} of the test targets have a title ML-1M has\n"
        )
        print("| row | NDCG@10 | Recall@10 | MRR | / popularity NDCG@10 | reads the target's interactions |")
        print("|---|---|---|---|---|---|")
        floor = t["results"]["popularity"]["all"]["ndcg@10"]
        for row, r in t["results"].items():
            x = r["all"]
            print(
                f"| {row} | {x['ndcg@10']:.4f} | {x['hr@10']:.4f} | {x['mrr']:.4f} | {x['ndcg@10'] / floor:.2f} | "
                f"{'yes' if row == 'popularity' else 'no'} |"
            )
    print(
        f"\nUniSRec trained on ML-1M: {source_epochs} epochs, {source_seconds:.0f} s (text encoding included)"
    )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    root = os.environ.get(
        "TFSEQREC_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
    )
    parser.add_argument("--data-root", default=root)
    parser.add_argument("--minutes", type=float, default=10.0, help="UniSRec's training budget on ML-1M")
    parser.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="UniSRec's epochs on ML-1M (default: as many as --minutes allows, at most 200)",
    )
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated of {list(TARGETS)}")
    parser.add_argument("--no-zero-shot", action="store_true", help="leave out the Recformer zero-shot rows")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    chosen = args.targets.split(",")
    unknown = sorted(set(chosen) - set(TARGETS))
    if unknown:
        parser.error(f"unknown targets {unknown}; known: {list(TARGETS)}")
    started = machine.now()
    start = time.monotonic()
    split, vocabulary, texts = data = text_bench.ml1m(args.data_root)  # read once: training and counts
    model, epochs, _ = text_bench.ml1m_unisrec(
        args.data_root, args.minutes, overrides={"epochs": args.epochs} if args.epochs else None, data=data
    )
    source_seconds = time.monotonic() - start
    source = (model, texts, title_counts(texts, vocabulary, split.train.item_counts(vocabulary.size)))
    targets = {name: target_rows(name, args.data_root, source, not args.no_zero_shot) for name in chosen}
    print_tables(targets, source_seconds, epochs)
    if args.json:
        result = {
            "targets": targets,
            "source": {
                "data": "ml-1m",
                "epochs": epochs,
                "seconds": source_seconds,
                "config": text_bench.ID_CONFIG,
            },
            "args": vars(args),
            "command": shlex.join(["python", "benchmarks/transfer.py", *sys.argv[1:]]),
            "commit": machine.code_version(),
            "started": started,
            "ended": machine.now(),
            "environment": machine.environment(),
        }
        records.write(args.json, records.from_transfer(result))


if __name__ == "__main__":
    main()
