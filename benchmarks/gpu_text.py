"""The text models of ``benchmarks/gpu.py``: what is prepared on the CPU, and Recformer's run on JAX.

The GPU machine has no TensorFlow, so the two steps that need it run on the CPU first
(``gpu.py --prepare DIR``), and ``DIR`` travels with the command (``carry``):

- ``prepared.json``: the split's vocabulary (raw item ids in id order), the item text
  attributes and each item's text, so that the GPU side can check it builds the same ids;
- ``text_vectors.npy``: UniSRec's frozen all-MiniLM-L6-v2 vectors of the items (as
  ``tfseqrec train --model unisrec`` encodes them), float32 ``[num_items, 384]``;
- ``minilm/``: the checkpoint's ``vocab.txt`` and its weights in half precision (45 MB:
  the float32 file is over what a command may carry), read back as float32
  (``convert.read_bert_checkpoint``): Recformer's pretrained start.

On JAX, Recformer is tokenized by ``tfseqrec.data.wordpiece`` (the ids of tensorflow-text's
tokenizer) and trained by ``tfseqrec.models.recformer.arrays``: ``[CLS]`` alignment, then
both fine-tuning stages with validation NDCG@10 after every epoch, the best kept. With
``--pretrain-minutes``, ``recformer-pretrained`` first pre-trains on the other text data at
hand, ML-1M's titles and genres (``tfseqrec pretrain --model recformer``'s steps: alignment
on its items, then masked language modelling with item-item contrast), and fine-tunes
without a second alignment, as a ``tfseqrec pretrain`` checkpoint is fine-tuned.
"""

import json
import os
import time

import datasets  # benchmarks/datasets.py
import keras
import numpy as np
import protocols  # benchmarks/protocols.py

from tfseqrec.data import vocab, wordpiece
from tfseqrec.models.recformer import (
    Recformer,
    RecformerBackbone,
    RecformerPretrainer,
    arrays,
    load_bert_weights,
)

PREPARED = "prepared.json"
VECTORS = "text_vectors.npy"
CHECKPOINT = "minilm"
ATTRIBUTES = ("title", "brand", "categories")  # tfseqrec.data.text.ATTRIBUTES["amazon"]
ML1M_ATTRIBUTES = ("title", "genres")  # tfseqrec.data.text.ATTRIBUTES["movielens"]
# The paper's shape as far as all-MiniLM-L6-v2 allows (Li et al., KDD 2023; the reference's
# defaults: 50 items, 32 tokens an attribute, 1,024 tokens, window 64): its 6 layers and
# 512 token positions. The schedule is `tfseqrec train`'s (RecformerConfig).
RECFORMER = {
    "num_layers": 6,
    "max_sequence_length": 50,
    "max_tokens": 512,
    "max_attribute_tokens": 32,
    "attention_window": 64,
    "dropout": 0.1,
    "temperature": 0.05,
    "align_epochs": 2,
    "align_learning_rate": 5e-4,
    "batch_size": 32,
    "learning_rate": 5e-5,
    "epochs": 4,
    "stage2_epochs": 2,
    "patience": 2,
    "examples_per_user": 1,
    "mlm_weight": 0.1,  # pre-training only
}


def prepare(out, split, vocabulary, data_root):
    """Writes ``out`` (see the module's docstring): on the CPU, with TensorFlow."""
    # Here, not above: TensorFlow's side, which the GPU machine does not have.
    import shutil

    from safetensors.numpy import save_file

    from tfseqrec.data import readers
    from tfseqrec.models import SentenceEncoder
    from tfseqrec.models.recformer import convert

    source_text = datasets.get("scientific").item_text_path(data_root)
    texts, missing = wordpiece.item_texts(readers.read_item_text(source_text), vocabulary, ATTRIBUTES)
    if missing:
        raise ValueError(f"{source_text}: {missing} items of the split have no text")
    encoder = {"attributes": list(ATTRIBUTES), "max_attribute_tokens": 32, "num_layers": 6}
    vectors = SentenceEncoder.from_pretrained(**encoder).encode(texts[vocab.NUM_RESERVED :], progress=False)
    os.makedirs(os.path.join(out, CHECKPOINT), exist_ok=True)
    np.save(os.path.join(out, VECTORS), vectors.astype(np.float32))
    source = convert.minilm_path()
    shutil.copy(os.path.join(source, "vocab.txt"), os.path.join(out, CHECKPOINT, "vocab.txt"))
    _, weights = convert.read_bert_checkpoint(source)
    half = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in weights.items()}
    save_file(half, os.path.join(out, CHECKPOINT, "model.safetensors"))
    manifest = {
        "items": list(vocabulary.items),
        "attributes": list(ATTRIBUTES),
        "texts": texts.tolist(),  # per vocabulary id, the reserved rows empty
        "text_encoder": encoder,
    }
    with open(os.path.join(out, PREPARED), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    return manifest


def load(prepared, vocabulary):
    """``(manifest, text vectors)`` of a ``--prepare`` directory made for ``vocabulary``'s split."""
    path = os.path.join(prepared, PREPARED)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist: run `gpu.py --prepare {prepared}` on the CPU first")
    with open(path, encoding="utf-8") as f:
        manifest = json.load(f)
    if manifest["items"] != list(vocabulary.items):
        raise ValueError(f"{path} was prepared for another split ({len(manifest['items'])} items, not these)")
    vectors = np.load(os.path.join(prepared, VECTORS))
    if vectors.shape[0] != vocabulary.num_items:
        raise ValueError(
            f"{prepared}/{VECTORS} holds {vectors.shape[0]} vectors for {vocabulary.num_items} items"
        )
    return manifest, vectors


def catalogue(texts, attributes, prepared, options):
    """Recformer's ``arrays.Catalogue`` of ``texts`` (``[vocabulary size, attributes]``) over the
    prepared checkpoint's vocabulary, ``max_attribute_tokens`` each; refused if it cannot be read."""
    with open(os.path.join(prepared, CHECKPOINT, "vocab.txt"), encoding="utf-8") as f:
        wordpieces = [line.rstrip("\n") for line in f]
    budgets = [options["max_attribute_tokens"]] * len(attributes)
    items = arrays.Catalogue.of_texts(np.asarray(texts, dtype=object), wordpieces, list(attributes), budgets)
    items.check(options["max_tokens"])
    return items


def ml1m_pretraining(data_root):
    """ML-1M's titles and genres (``[vocabulary size, 2]``) and training sequences: the other text data at hand."""
    split, vocabulary = protocols.load("sasrec-plus", data_root)
    texts, missing = wordpiece.item_texts(datasets.ml1m_texts(data_root), vocabulary, ML1M_ATTRIBUTES)
    if missing:
        raise ValueError(f"{missing} of ML-1M's items have no title in movies.dat")
    return texts, _lists(split.train)


class StopAfter(keras.callbacks.Callback):
    """Stops ``fit`` at the first batch past a deadline (pre-training has no validation to wait for)."""

    def __init__(self, seconds):
        super().__init__()
        self.deadline = time.perf_counter() + seconds

    @property
    def passed(self):
        return time.perf_counter() > self.deadline

    def on_train_batch_end(self, batch, logs=None):
        if self.passed:
            self.model.stop_training = True


def pretrain(model, data_root, prepared, options, minutes, seed):
    """Recformer's pre-training on ML-1M's text, ``model``'s backbone trained in place, for
    ``minutes`` in all: ``[CLS]`` alignment on its items, then masked language modelling with
    item-item contrast (``tfseqrec pretrain --model recformer``'s steps)."""
    texts, sequences = ml1m_pretraining(data_root)
    items = catalogue(texts, ML1M_ATTRIBUTES, prepared, options)
    stop = StopAfter(minutes * 60)
    aligned = arrays.align(
        model, items, options["align_epochs"], options["align_learning_rate"], seed=seed, callbacks=[stop]
    )
    histories, targets = arrays.training_pairs(sequences, options["examples_per_user"])
    task = RecformerPretrainer(
        model.backbone, temperature=options["temperature"], mlm_weight=options["mlm_weight"], seed=seed
    )
    task.compile(optimizer=keras.optimizers.AdamW(options["learning_rate"], weight_decay=0.0))
    pairs = arrays.Pairs(
        items, model.backbone, histories, targets, options["batch_size"], seed, pretraining=True
    )
    losses = [] if stop.passed else task.fit(pairs, epochs=1000, callbacks=[stop], verbose=0).history["loss"]
    return {
        "align_losses": aligned,
        "losses": [float(v) for v in losses],
        "items": items.num_items,
        "pairs": len(targets),
    }


def train_recformer(split, manifest, prepared, minutes, seed, config=None, pretraining=None):
    """Recformer from all-MiniLM-L6-v2 on the split: alignment (or, with ``pretraining``
    ``(data root, minutes)``, ``pretrain``), then both stages. Returns ``(options, what the
    start did, epochs' rows, test ranks)``; the rows' seconds count from the start."""
    options = {**RECFORMER, **(config or {})}
    unknown = sorted(set(options) - set(RECFORMER))
    if unknown:
        raise ValueError(f"unknown Recformer options {unknown}; known: {sorted(RECFORMER)}")
    keras.utils.set_random_seed(seed)
    items = catalogue(manifest["texts"], manifest["attributes"], prepared, options)
    backbone = RecformerBackbone(
        num_layers=options["num_layers"], max_tokens=options["max_tokens"],
        max_sequence_length=options["max_sequence_length"], attention_window=options["attention_window"],
        dropout=options["dropout"],
    )  # fmt: skip
    load_bert_weights(backbone, os.path.join(prepared, CHECKPOINT))
    model = Recformer(backbone, temperature=options["temperature"], num_items=len(manifest["items"]))
    start = time.perf_counter()
    if pretraining:
        data_root, pretrain_minutes = pretraining
        began = pretrain(model, data_root, prepared, options, pretrain_minutes, seed)
    else:
        aligned = arrays.align(
            model, items, options["align_epochs"], options["align_learning_rate"], seed=seed
        )
        began = {"align_losses": aligned}
    histories, targets = arrays.training_pairs(_lists(split.train), options["examples_per_user"])
    pairs = arrays.Pairs(items, model.backbone, histories, targets, options["batch_size"], seed)
    valid = (_lists(split.valid.histories), split.valid.targets)
    rows = arrays.finetune(
        model, items, pairs, options["epochs"], options["stage2_epochs"], options["learning_rate"],
        validation=valid, patience=options["patience"], seconds=minutes * 60,
    )  # fmt: skip
    began["seconds"] = time.perf_counter() - start - rows[-1]["seconds"]
    test_ranks = arrays.ranks(model, items, _lists(split.test.histories), split.test.targets)
    return options, began, rows, test_ranks


def _lists(sequences):
    return [sequences[u].tolist() for u in range(len(sequences))]
