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
  (``UniSRec.for_catalogue``): a dataset never used in training;
- ``recformer-zero-shot``: Recformer after ``[CLS]`` alignment on item text only;
- ``recformer``: Recformer fine-tuned in the paper's two stages.

SASRec and both UniSRec rows share one configuration (``ID_CONFIG``, the same
budget of ``--minutes``; best epoch by validation NDCG@10). Each row is also
evaluated on the cold test cases (the target never occurs in the training
sequences) and on the other ("warm") cases. Times are wall seconds on this machine;
UniSRec's include encoding the item text once.

Usage:
    python benchmarks/text.py --models sasrec,unisrec,unisrec-id --minutes 20
    python benchmarks/text.py --models recformer-zero-shot,recformer --recformer-minutes 120
Data: $TFSEQREC_DATA/amazon-scientific-text and $TFSEQREC_DATA/ml-1m (default ../shared/data).
"""

import argparse
import json
import os
import platform
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfseqrec import evaluation, training  # noqa: E402
from tfseqrec.data import readers, splits  # noqa: E402
from tfseqrec.data import text as text_lib  # noqa: E402
from tfseqrec.data import vocab as vocab_lib  # noqa: E402
from tfseqrec.models import SentenceEncoder  # noqa: E402
from tfseqrec.training import recformer as recformer_driver  # noqa: E402

MODELS = ("popularity", "sasrec", "unisrec", "unisrec-id", "unisrec-transfer", "recformer-zero-shot", "recformer")
# SASRec and UniSRec alike (learning rate: the kinds' default, 2e-3 for both).
ID_CONFIG = {"max_sequence_length": 50, "hidden_dim": 64, "num_layers": 2, "num_heads": 1, "dropout": 0.5,
             "batch_size": 128, "epochs": 200, "patience": 10, "seed": 0}


class Popularity:
    """Scores every item by its training count (the ``score(window)`` interface)."""

    max_sequence_length = 1

    def __init__(self, counts):
        self.counts = tf.constant(counts[vocab_lib.NUM_RESERVED :], tf.float32)

    def score(self, window):
        return tf.tile(self.counts[None, :], [tf.shape(window)[0], 1])


def subset(cases, keep):
    return splits.Cases(cases.histories.select(keep), cases.targets[keep])


def evaluate(model, cases, cold):
    out = {}
    for name, keep in (("all", np.ones(len(cases.targets), bool)), ("warm", ~cold), ("cold", cold)):
        r = evaluation.evaluate(model, subset(cases, keep), progress=False)
        out[name] = {k: r[k] for k in ("ndcg@10", "hr@10", "mrr")}
    return out


def text_vectors(item_text, vocabulary, attributes):
    """``(vectors [num_items, 384], encoder config, seconds)`` of the vocabulary's items."""
    start = time.monotonic()
    texts, missing = recformer_driver.item_texts(item_text, vocabulary, attributes)
    if missing:
        raise ValueError(f"{missing} items have no text")
    config = {"attributes": list(attributes), "max_attribute_tokens": 32, "num_layers": 6}
    vectors = SentenceEncoder.from_pretrained(**config).encode(texts[vocab_lib.NUM_RESERVED :], progress=False)
    return vectors, config, time.monotonic() - start


def fit_id_model(model, split, vocabulary, minutes, **model_kwargs):
    config = {**ID_CONFIG, "model": model, "max_train_minutes": minutes}
    if model == "unisrec" and model_kwargs.pop("use_id_embeddings", False):
        config["use_id_embeddings"] = True
    with tempfile.TemporaryDirectory() as tmp:
        fitted, history = training.fit(split, vocabulary, tmp, config, verbose=2, model_kwargs=model_kwargs)
    return fitted, len(history.history["loss"])


def ml1m_transfer(root, minutes, scientific_vectors, scientific_encoder):
    """UniSRec trained on ML-1M text, moved to Scientific's items: ``(model, epochs, seconds)``."""
    start = time.monotonic()
    ml1m = os.path.join(root, "ml-1m")
    split, vocabulary, _ = splits.prepare(readers.read_interactions(os.path.join(ml1m, "ml-1m.txt")))
    to_original = readers.read_id_map(os.path.join(ml1m, "sas_to_original_items.txt"))
    movies = readers.read_item_text(os.path.join(ml1m, "movies.dat"))
    item_text = {sas: movies[original] for sas, original in to_original.items() if original in movies}
    vectors, encoder, _ = text_vectors(item_text, vocabulary, text_lib.ATTRIBUTES["movielens"])
    model, epochs = fit_id_model("unisrec", split, vocabulary, minutes, text_dim=vectors.shape[1],
                                 text_embeddings=vectors, text_encoder=encoder)
    return model.for_catalogue(scientific_vectors, scientific_encoder), epochs, time.monotonic() - start


def recformer_rows(args, split, vocabulary, cold, results, seconds, chosen):
    config = training.RecformerConfig(
        attributes=list(recformer_driver.default_attributes(".json")), num_layers=args.layers,
        max_train_minutes=args.recformer_minutes, **json.loads(args.recformer_config or "{}"),
    )
    keras.utils.set_random_seed(config.seed)
    texts, _ = recformer_driver.item_texts(
        readers.read_item_text(os.path.join(args.data, "Scientific.item.json")), vocabulary, config.attributes
    )
    recommender = recformer_driver.build(config, vocabulary, texts)
    start = time.monotonic()
    recformer_driver.align(recommender, config, verbose=2)
    seconds["recformer-zero-shot"] = time.monotonic() - start
    if "recformer-zero-shot" in chosen:
        results["recformer-zero-shot"] = evaluate(recommender, split.test, cold)
        print("recformer-zero-shot", json.dumps(results["recformer-zero-shot"]), flush=True)
    if "recformer" in chosen:
        start = time.monotonic()
        rows = recformer_driver.finetune(recommender, split, config, verbose=2)
        seconds["recformer"] = time.monotonic() - start + seconds["recformer-zero-shot"]
        results["recformer"] = evaluate(recommender, split.test, cold)
        print("recformer", json.dumps(results["recformer"]), json.dumps(rows), flush=True)
    return config


def print_table(results, seconds, epochs, split, cold, vocabulary):
    print(f"\nAmazon Scientific leave-one-out, test split ({len(cold)} cases, {int(cold.sum())} cold), full ranking "
          f"over {vocabulary.num_items} items, seen filtered; {os.cpu_count()} CPUs, TensorFlow {tf.__version__}, "
          f"Keras {keras.__version__}, Python {platform.python_version()}\n")
    print("| model | NDCG@10 | Recall@10 | MRR | NDCG@10 / SASRec | Recall@10 / SASRec | cold NDCG@10 | "
          "warm NDCG@10 | cold / warm | epochs | train wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    base = results.get("sasrec", {}).get("all")
    for name, r in results.items():
        a = r["all"]
        ratio = r["cold"]["ndcg@10"] / r["warm"]["ndcg@10"] if r["warm"]["ndcg@10"] else float("nan")
        vs = (f"{a['ndcg@10'] / base['ndcg@10']:.2f} | {a['hr@10'] / base['hr@10']:.2f}" if base else " | ")
        wall = f"{seconds[name]:.0f}" if name in seconds else ""
        print(f"| {name} | {a['ndcg@10']:.4f} | {a['hr@10']:.4f} | {a['mrr']:.4f} | {vs} | "
              f"{r['cold']['ndcg@10']:.4f} | {r['warm']['ndcg@10']:.4f} | {ratio:.2f} | {epochs.get(name) or ''} | "
              f"{wall} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.environ.get("TFSEQREC_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    parser.add_argument("--data", default=os.path.join(root, "amazon-scientific-text"))
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated rows of {MODELS}")
    parser.add_argument("--minutes", type=float, default=20.0, help="training budget of SASRec and each UniSRec")
    parser.add_argument("--recformer-minutes", type=float, default=120.0, help="Recformer fine-tuning budget")
    parser.add_argument("--layers", type=int, default=2, help="Recformer: MiniLM layers kept")
    parser.add_argument("--recformer-config", default=None, help="JSON of RecformerConfig overrides")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    chosen = args.models.split(",")
    unknown = sorted(set(chosen) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; known: {list(MODELS)}")

    split, vocabulary, _ = splits.prepare(readers.read_interactions(os.path.join(args.data, "Scientific.inter.json")))
    counts = np.bincount(split.train.values, minlength=vocabulary.size)
    cold = counts[split.test.targets] == 0
    print(f"test cases {len(cold)}, cold (target never in training) {int(cold.sum())}", flush=True)
    results, seconds, epochs = {}, {}, {}

    def record(name, model, start, n_epochs=None):
        seconds[name] = time.monotonic() - start
        epochs[name] = n_epochs
        results[name] = evaluate(model, split.test, cold)
        print(name, json.dumps(results[name]), flush=True)

    if "popularity" in chosen:
        record("popularity", Popularity(counts), time.monotonic())
    if "sasrec" in chosen:
        start = time.monotonic()
        model, n = fit_id_model("sasrec", split, vocabulary, args.minutes)
        record("sasrec", model, start, n)
    if {"unisrec", "unisrec-id", "unisrec-transfer"} & set(chosen):
        item_text = readers.read_item_text(os.path.join(args.data, "Scientific.item.json"))
        vectors, encoder, encode_seconds = text_vectors(item_text, vocabulary, text_lib.ATTRIBUTES["amazon"])
        print(f"item text encoded in {encode_seconds:.0f} s", flush=True)
        for name, ids in (("unisrec", False), ("unisrec-id", True)):
            if name in chosen:
                start = time.monotonic() - encode_seconds
                model, n = fit_id_model("unisrec", split, vocabulary, args.minutes, text_dim=vectors.shape[1],
                                        text_embeddings=vectors, text_encoder=encoder, use_id_embeddings=ids)
                record(name, model, start, n)
        if "unisrec-transfer" in chosen:
            start = time.monotonic() - encode_seconds
            model, n, _ = ml1m_transfer(os.path.dirname(args.data), args.minutes, vectors, encoder)
            record("unisrec-transfer", model, start, n)
    config = None
    if {"recformer-zero-shot", "recformer"} & set(chosen):
        config = recformer_rows(args, split, vocabulary, cold, results, seconds, chosen)

    print_table(results, seconds, epochs, split, cold, vocabulary)
    print(f"\nSASRec and UniSRec: {json.dumps(ID_CONFIG)}, at most {args.minutes:g} minutes each.")
    if config is not None:
        print(f"Recformer: {config.num_layers} of 6 MiniLM layers, {config.max_tokens} tokens, "
              f"{config.max_sequence_length} items per history, window {config.attention_window}, batch "
              f"{config.batch_size}, lr {config.learning_rate}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "seconds": seconds, "epochs": epochs, "args": vars(args)}, f, indent=2)


if __name__ == "__main__":
    main()
