"""Text models on Amazon Scientific: UniSRec and Recformer against SASRec and popularity.

Leave-one-out on ``amazon-scientific-text`` (8,317 users, 4,344 items), test split,
full ranking over all items with the user's history filtered. Rows (``--models``):

- ``popularity``: items by training-interaction count;
- ``sasrec``: this library's SASRec on the same split;
- ``unisrec``: UniSRec, text only (frozen all-MiniLM-L6-v2 vectors, MoE adaptor,
  SASRec's encoder), trained on this split;
- ``unisrec-id``: UniSRec with id embeddings added to the text vectors;
- ``unisrec-transfer``: UniSRec text only, trained on ML-1M (titles and genres) and
  evaluated here without reading any Scientific interaction
  (``UniSRec.for_catalogue``): a dataset never used in training (``benchmarks/transfer.py``
  also moves it to ML-100K);
- ``unisrec-pretrained``: ``unisrec`` started from ``tfseqrec pretrain --model unisrec``
  on ML-1M (titles and genres; ``--pretrain-minutes``), the paper's transfer;
- ``recformer-zero-shot``: Recformer after ``[CLS]`` alignment on item text only;
- ``recformer``: Recformer fine-tuned in the paper's two stages;
- ``recformer-pretrained``: ``recformer`` started from ``tfseqrec pretrain --model
  recformer`` on ML-1M (MLM and item-item contrast; ``--pretrain-minutes``).

Pre-trained rows count the pre-training in their wall time.

SASRec and both UniSRec rows share one configuration (``ID_CONFIG``, the same
budget of ``--minutes``; best epoch by validation NDCG@10). Each row is also
evaluated on the cold test cases (the target never occurs in the training
sequences) and on the other ("warm") cases. Times are wall seconds on this machine;
UniSRec's include encoding the item text once.

Usage:
    python benchmarks/text.py --models sasrec,unisrec,unisrec-id --minutes 20
    python benchmarks/text.py --models recformer-zero-shot,recformer --recformer-minutes 120
    python benchmarks/text.py --report benchmarks/results/text-*.json   # stored runs in one table, no training
    python benchmarks/text.py --report benchmarks/results/text-*.json --rows '["popularity", "sasrec"]'
Data: $TFSEQREC_DATA/amazon-scientific-text and $TFSEQREC_DATA/ml-1m (default ../shared/data).
"""

import argparse
import dataclasses
import json
import os
import shlex
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import datasets  # noqa: E402  (benchmarks/datasets.py)
import keras  # noqa: E402
import machine  # noqa: E402  (benchmarks/machine.py)
import numpy as np  # noqa: E402
import records  # noqa: E402  (benchmarks/records.py)
import tensorflow as tf  # noqa: E402

from tfseqrec import evaluation, kinds, training  # noqa: E402
from tfseqrec.data import readers, splits  # noqa: E402
from tfseqrec.data import text as text_lib  # noqa: E402
from tfseqrec.data import vocab as vocab_lib  # noqa: E402
from tfseqrec.models import SentenceEncoder  # noqa: E402
from tfseqrec.training import recformer as recformer_driver  # noqa: E402

MODELS = (
    "popularity",
    "sasrec",
    "unisrec",
    "unisrec-id",
    "unisrec-transfer",
    "unisrec-pretrained",
    "recformer-zero-shot",
    "recformer",
    "recformer-pretrained",
)
# SASRec and UniSRec alike (learning rate: the kinds' default, 2e-3 for both).
ID_CONFIG = {
    "max_sequence_length": 50,
    "hidden_dim": 64,
    "num_layers": 2,
    "num_heads": 1,
    "dropout": 0.5,
    "batch_size": 128,
    "epochs": 200,
    "patience": 10,
    "seed": 0,
}


class Popularity:
    """Scores every item by its training count (the ``score(window)`` interface)."""

    max_sequence_length = 1
    uses_timestamps = False

    def __init__(self, counts):
        self.counts = tf.constant(counts[vocab_lib.NUM_RESERVED :], tf.float32)

    def score(self, window):
        return tf.tile(self.counts[None, :], [tf.shape(window)[0], 1])


def evaluate(model, cases, cold):
    out = {}
    for name, keep in (("all", np.ones(len(cases.targets), bool)), ("warm", ~cold), ("cold", cold)):
        r = evaluation.evaluate(model, cases.select(keep), progress=False)
        out[name] = {k: r[k] for k in ("ndcg@10", "hr@10", "mrr")}
    return out


def text_vectors(item_text, vocabulary, attributes):
    """``(vectors [num_items, 384], encoder config, seconds)`` of the vocabulary's items."""
    start = time.monotonic()
    texts, missing = recformer_driver.item_texts(item_text, vocabulary, attributes)
    if missing:
        raise ValueError(f"{missing} items have no text")
    config = {"attributes": list(attributes), "max_attribute_tokens": 32, "num_layers": 6}
    vectors = SentenceEncoder.from_pretrained(**config).encode(
        texts[vocab_lib.NUM_RESERVED :], progress=False
    )
    return vectors, config, time.monotonic() - start


def fit_id_model(model, split, vocabulary, minutes, init_from=None, overrides=None, **model_kwargs):
    config = {
        **ID_CONFIG,
        **(overrides or {}),
        "model": model,
        "max_train_minutes": minutes,
        "init_from": init_from,
    }
    if model == "unisrec" and model_kwargs.pop("use_id_embeddings", False):
        config["use_id_embeddings"] = True
    with tempfile.TemporaryDirectory() as tmp:
        fitted, history = training.fit(
            kinds.get(model), split, vocabulary, tmp, config, verbose=2, model_kwargs=model_kwargs
        )
    return fitted, len(history.history["loss"])


def ml1m(root):
    """ML-1M's ``(split, vocabulary, item text)``: ``ml-1m.txt``'s split and ``datasets.ml1m_texts``."""
    split, vocabulary, _ = splits.prepare(readers.read_interactions(datasets.get("ml-1m").path(root)))
    return split, vocabulary, datasets.ml1m_texts(root)


def ml1m_unisrec(root, minutes, overrides=None, data=None):
    """UniSRec text only trained on ML-1M's titles and genres: ``(model, epochs, seconds)``.

    ``data``: ``ml1m(root)``, when the caller has read it already.
    """
    start = time.monotonic()
    split, vocabulary, texts = data or ml1m(root)
    vectors, encoder, _ = text_vectors(texts, vocabulary, text_lib.ATTRIBUTES["movielens"])
    model, epochs = fit_id_model(
        "unisrec",
        split,
        vocabulary,
        minutes,
        overrides=overrides,
        text_dim=vectors.shape[1],
        text_embeddings=vectors,
        text_encoder=encoder,
    )
    return model, epochs, time.monotonic() - start


def ml1m_transfer(root, minutes, scientific_vectors, scientific_encoder):
    """UniSRec trained on ML-1M text, moved to Scientific's items: ``(model, epochs, seconds)``."""
    model, epochs, seconds = ml1m_unisrec(root, minutes)
    return model.for_catalogue(scientific_vectors, scientific_encoder), epochs, seconds


def ml1m_item_text(root, path):
    """``(interactions, item text)`` paths of ML-1M, the text written to ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(datasets.ml1m_texts(root), f)
    return datasets.get("ml-1m").path(root), path


def pretrained(model, root, work, minutes, options):
    """``(checkpoint directory, seconds)`` of ``tfseqrec pretrain --model MODEL`` on ML-1M for ``minutes``."""
    from tfseqrec.training import pretrain

    start = time.monotonic()
    dataset = ml1m_item_text(root, os.path.join(work, "ml-1m.item.json"))
    out = os.path.join(work, f"{model}-pretrained")
    rows = pretrain.pretrain(
        kinds.get(model), [dataset], out, {**options, "max_train_minutes": minutes, "epochs": 1000}, verbose=2
    )
    print(
        f"{model} pre-training: {len(rows)} epochs ({sum(r['steps'] for r in rows)} steps), loss "
        f"{rows[0]['loss']:.4f} -> {rows[-1]['loss']:.4f}",
        flush=True,
    )
    return out, time.monotonic() - start


def recformer_rows(args, split, vocabulary, cold, results, seconds, chosen, histories):
    config = training.RecformerConfig.from_dict(
        {
            "attributes": list(text_lib.ATTRIBUTES["amazon"]),
            "num_layers": args.layers,
            "max_train_minutes": args.recformer_minutes,
            **json.loads(args.recformer_config or "{}"),
        }
    )
    if "recformer-pretrained" in chosen:
        recformer_pretrained(args, config, split, vocabulary, cold, results, seconds, histories)
        if not {"recformer-zero-shot", "recformer"} & set(chosen):
            return config
    keras.utils.set_random_seed(config.seed)
    texts, _ = recformer_driver.item_texts(
        readers.read_item_text(os.path.join(args.data, "Scientific.item.json")), vocabulary, config.attributes
    )
    recommender = recformer_driver.build(config, vocabulary, texts)
    start = time.monotonic()
    if recformer_driver.aligns(config):  # the library's rule, as `tfseqrec train` applies it
        recformer_driver.align(recommender, config, verbose=2)
    else:
        recommender.refresh_item_embeddings()
    seconds["recformer-zero-shot"] = time.monotonic() - start
    if "recformer-zero-shot" in chosen:
        results["recformer-zero-shot"] = evaluate(recommender, split.test, cold)
        print("recformer-zero-shot", json.dumps(results["recformer-zero-shot"]), flush=True)
    if "recformer" in chosen:
        start = time.monotonic()
        # the item table is encoded already (align ends by encoding it)
        rows = recformer_driver.finetune(recommender, split, config, verbose=2, encode_items=False)
        seconds["recformer"] = time.monotonic() - start + seconds["recformer-zero-shot"]
        results["recformer"], histories["recformer"] = evaluate(recommender, split.test, cold), rows
        print("recformer", json.dumps(results["recformer"]), json.dumps(rows), flush=True)
    return config


def recformer_pretrained(args, config, split, vocabulary, cold, results, seconds, histories):
    """The ``recformer-pretrained`` row: pre-training on ML-1M, then ``recformer``'s fine-tuning."""
    # The sizes and the vector of an input (pooling) are the fine-tuning's; so is alignment.
    sizes = {
        name: getattr(config, name)
        for name in (
            "num_layers",
            "max_tokens",
            "max_sequence_length",
            "attention_window",
            "max_attribute_tokens",
            "batch_size",
            "pooling",
            "align_epochs",
        )
    }
    with tempfile.TemporaryDirectory() as work:
        checkpoint, pretrain_seconds = pretrained(
            "recformer", os.path.dirname(args.data), work, args.pretrain_minutes, sizes
        )
        tuned = dataclasses.replace(config, init_from=checkpoint)
        texts, _ = recformer_driver.item_texts(
            readers.read_item_text(os.path.join(args.data, "Scientific.item.json")),
            vocabulary,
            tuned.attributes,
        )
        keras.utils.set_random_seed(tuned.seed)
        recommender = recformer_driver.build(tuned, vocabulary, texts)
        start = time.monotonic()
        rows = recformer_driver.finetune(recommender, split, tuned, verbose=2)
    seconds["recformer-pretrained"] = time.monotonic() - start + pretrain_seconds
    results["recformer-pretrained"] = evaluate(recommender, split.test, cold)
    histories["recformer-pretrained"] = rows
    print("recformer-pretrained", json.dumps(results["recformer-pretrained"]), json.dumps(rows), flush=True)


def unisrec_rows(args, split, vocabulary, chosen, record):
    """The UniSRec rows: text vectors of Scientific's items, encoded once, under each variant."""
    if not {"unisrec", "unisrec-id", "unisrec-pretrained", "unisrec-transfer"} & set(chosen):
        return
    item_text = readers.read_item_text(os.path.join(args.data, "Scientific.item.json"))
    vectors, encoder, encode_seconds = text_vectors(item_text, vocabulary, text_lib.ATTRIBUTES["amazon"])
    print(f"item text encoded in {encode_seconds:.0f} s", flush=True)
    for name, ids in (("unisrec", False), ("unisrec-id", True)):
        for overrides in variants(args.unisrec_config) if name in chosen else ():
            start = time.monotonic() - encode_seconds
            model, n = fit_id_model(
                "unisrec",
                split,
                vocabulary,
                args.minutes,
                overrides=overrides,
                text_dim=vectors.shape[1],
                text_embeddings=vectors,
                text_encoder=encoder,
                use_id_embeddings=ids,
            )
            record(name + variant_name(overrides), model, start, n)
    if "unisrec-pretrained" in chosen:
        with tempfile.TemporaryDirectory() as work:
            # Pre-trained at the fine-tuning's sizes (its overrides), for as long as --pretrain-minutes.
            overrides = {**ID_CONFIG, **variants(args.unisrec_config)[0]}
            options = {k: v for k, v in overrides.items() if k not in ("epochs", "patience")}
            checkpoint, pretrain_seconds = pretrained(
                "unisrec", os.path.dirname(args.data), work, args.pretrain_minutes, options
            )
            start = time.monotonic() - encode_seconds - pretrain_seconds
            model, n = fit_id_model(
                "unisrec",
                split,
                vocabulary,
                args.minutes,
                init_from=checkpoint,
                overrides=variants(args.unisrec_config)[0],
                text_dim=vectors.shape[1],
                text_embeddings=vectors,
                text_encoder=encoder,
            )
        record("unisrec-pretrained", model, start, n)
    if "unisrec-transfer" in chosen:
        start = time.monotonic() - encode_seconds
        model, n, _ = ml1m_transfer(os.path.dirname(args.data), args.minutes, vectors, encoder)
        record("unisrec-transfer", model, start, n)


def variants(config):
    """``--unisrec-config``'s or ``--sasrec-config``'s override dicts: one (``{}`` if absent), or a list's."""
    if isinstance(config, list):
        return config
    return [config or {}]


def variant_name(overrides):
    """A row's suffix naming its overrides: ``""``, or `` [hidden_dim=128]``."""
    return f" [{', '.join(f'{k}={v}' for k, v in overrides.items())}]" if overrides else ""


def table(results, seconds, epochs):
    """Markdown: the rows of ``results``; ratios against the best SASRec row (by NDCG@10) among them."""
    lines = [
        "| model | NDCG@10 | Recall@10 | MRR | NDCG@10 / SASRec | Recall@10 / SASRec | cold NDCG@10 | "
        "warm NDCG@10 | cold / warm | epochs | train wall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    sasrec = [r["all"] for name, r in results.items() if name.startswith("sasrec")]
    base = max(sasrec, key=lambda a: a["ndcg@10"]) if sasrec else None
    for name, r in results.items():
        a = r["all"]
        ratio = r["cold"]["ndcg@10"] / r["warm"]["ndcg@10"] if r["warm"]["ndcg@10"] else float("nan")
        vs = f"{a['ndcg@10'] / base['ndcg@10']:.2f} | {a['hr@10'] / base['hr@10']:.2f}" if base else " | "
        wall = f"{seconds[name]:.0f}" if name in seconds else ""
        lines.append(
            f"| {name} | {a['ndcg@10']:.4f} | {a['hr@10']:.4f} | {a['mrr']:.4f} | {vs} | "
            f"{r['cold']['ndcg@10']:.4f} | {r['warm']['ndcg@10']:.4f} | {ratio:.2f} | {epochs.get(name) or ''} | "
            f"{wall} |"
        )
    return "\n".join(lines)


def print_table(results, seconds, epochs, header):
    """Print ``header``, then ``table``'s rows."""
    print(f"\n{header}\n")
    print(table(results, seconds, epochs))


def stored_rows(paths, rows=None):
    """The rows of stored runs (``--json`` files): ``(results, seconds, epochs, runs)``.

    A row name two runs share gets its file's name in brackets; ``runs`` says where each file's rows
    come from (commit, start, end). ``rows``: the row names to keep, in that order (all when ``None``);
    an unknown one is an error.
    """
    results, seconds, epochs, runs = {}, {}, {}, []
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        if isinstance(run, list):  # records (benchmarks/records.py), a row each
            run = run_of(run)
        stem = os.path.splitext(os.path.basename(path))[0]
        runs.append(
            f"{stem}: commit {run.get('commit', 'not recorded')}, {run.get('started', '')} to "
            f"{run.get('ended', '')}"
        )
        for name, row in run["results"].items():
            key = name if name not in results else f"{name} ({stem})"
            results[key] = row
            if name in run.get("seconds", {}):
                seconds[key] = run["seconds"][name]
            epochs[key] = run.get("epochs", {}).get(name)
    if rows is not None:
        unknown = [name for name in rows if name not in results]
        if unknown:
            raise ValueError(f"rows {unknown} are in none of the runs; their rows: {list(results)}")
        results = {name: results[name] for name in rows}
    return results, seconds, epochs, runs


def run_of(stored):
    """Stored records (``records.from_text``'s) as the one result ``stored_rows`` reads."""
    rows = {r["label"]: r for r in stored}
    return {
        "results": {name: {"all": r["metrics"], **_cases(r["extra"])} for name, r in rows.items()},
        "seconds": {name: r["extra"]["seconds"] for name, r in rows.items() if "seconds" in r["extra"]},
        "epochs": {name: r["extra"].get("epochs") for name, r in rows.items()},
        **{k: stored[0][k] for k in ("commit", "started", "ended")},
    }


def _cases(extra):
    return {k: extra[k] for k in ("warm", "cold")}


def report(paths, rows=None):
    """Print one table of the rows of stored runs (``--json`` files), with where they come from."""
    results, seconds, epochs, runs = stored_rows(paths, rows)
    print_table(
        results,
        seconds,
        epochs,
        "Amazon Scientific leave-one-out, test split, full ranking, seen filtered; "
        "stored runs:\n" + "\n".join(f"- {r}" for r in runs),
    )


def build_parser():
    """The command line."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    root = os.environ.get(
        "TFSEQREC_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
    )
    parser.add_argument("--data", default=os.path.join(root, "amazon-scientific-text"))
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated rows of {MODELS}")
    parser.add_argument(
        "--minutes", type=float, default=20.0, help="training budget of SASRec and each UniSRec"
    )
    parser.add_argument("--recformer-minutes", type=float, default=120.0, help="Recformer fine-tuning budget")
    parser.add_argument("--layers", type=int, default=2, help="Recformer: MiniLM layers kept")
    parser.add_argument(
        "--pretrain-minutes",
        type=float,
        default=30.0,
        help="pre-training budget on ML-1M of the *-pretrained rows",
    )
    parser.add_argument("--recformer-config", default=None, help="JSON of RecformerConfig overrides")
    parser.add_argument(
        "--sasrec-config",
        type=json.loads,
        default=None,
        help="JSON of training-option overrides of ID_CONFIG for the SASRec row (in its "
        "name); a list of them runs a SASRec row per entry, e.g. seeds",
    )
    parser.add_argument(
        "--unisrec-config",
        type=json.loads,
        default=None,
        help="JSON of training-option overrides of ID_CONFIG for the UniSRec rows, e.g. "
        "'{\"hidden_dim\": 128}'; a list of them runs each UniSRec row once per entry, "
        "its overrides in the row's name",
    )
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--report",
        nargs="+",
        metavar="JSON",
        help="print one table of stored runs (--json files) and exit; nothing is trained",
    )
    parser.add_argument(
        "--rows",
        type=json.loads,
        default=None,
        help="with --report: JSON list of the row names to print, in order (a name two runs "
        "share carries its file's name in brackets, as the full report prints it)",
    )
    return parser


def main():
    parser = build_parser()
    args = parser.parse_args()
    if args.report:
        return report(args.report, args.rows)
    chosen = args.models.split(",")
    unknown = sorted(set(chosen) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; known: {list(MODELS)}")

    split, vocabulary, _ = splits.prepare(
        readers.read_interactions(os.path.join(args.data, "Scientific.inter.json"))
    )
    counts = split.train.item_counts(vocabulary.size)
    cold = counts[split.test.targets] == 0
    print(f"test cases {len(cold)}, cold (target never in training) {int(cold.sum())}", flush=True)
    results, seconds, epochs, histories = {}, {}, {}, {}  # histories: Recformer's per-epoch rows
    started = machine.now()

    def record(name, model, start, n_epochs=None):
        seconds[name] = time.monotonic() - start
        epochs[name] = n_epochs
        results[name] = evaluate(model, split.test, cold)
        print(name, json.dumps(results[name]), flush=True)

    if "popularity" in chosen:
        record("popularity", Popularity(counts), time.monotonic())
    for overrides in variants(args.sasrec_config) if "sasrec" in chosen else ():
        start = time.monotonic()
        model, n = fit_id_model("sasrec", split, vocabulary, args.minutes, overrides=overrides)
        record("sasrec" + variant_name(overrides), model, start, n)
    unisrec_rows(args, split, vocabulary, chosen, record)
    config = None
    if {"recformer-zero-shot", "recformer", "recformer-pretrained"} & set(chosen):
        config = recformer_rows(args, split, vocabulary, cold, results, seconds, chosen, histories)
        epochs.update({name: len(rows) for name, rows in histories.items()})

    print_table(
        results,
        seconds,
        epochs,
        f"Amazon Scientific leave-one-out, test split ({len(cold)} cases, "
        f"{int(cold.sum())} cold), full ranking over {vocabulary.num_items} items, seen filtered; "
        f"{machine.environment()}",
    )
    print(f"\nSASRec and UniSRec: {json.dumps(ID_CONFIG)}, at most {args.minutes:g} minutes each.")
    if args.unisrec_config:
        print(f"UniSRec overrides: {json.dumps(args.unisrec_config)}")
    if config is not None:
        print(
            f"Recformer: {config.num_layers} of 6 MiniLM layers, {config.max_tokens} tokens, "
            f"{config.max_sequence_length} items per history, window {config.attention_window}, batch "
            f"{config.batch_size}, lr {config.learning_rate}"
        )
    if args.json:
        result = {
            "results": results,
            "seconds": seconds,
            "epochs": epochs,
            "history": histories,
            "args": vars(args),
            "command": shlex.join(["python", "benchmarks/text.py", *sys.argv[1:]]),
            "commit": machine.code_version(),
            "started": started,
            "ended": machine.now(),
            "environment": machine.environment(),
        }
        records.write(args.json, records.from_text(result))


if __name__ == "__main__":
    main()
