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
both fine-tuning stages with validation NDCG@10 after every epoch, the best kept.
"""

import json
import os
import time

import keras
import numpy as np

from tfseqrec.data import vocab
from tfseqrec.models.recformer import Recformer, RecformerBackbone, arrays, load_bert_weights

PREPARED = "prepared.json"
VECTORS = "text_vectors.npy"
CHECKPOINT = "minilm"
ITEM_TEXT = "amazon-scientific-text/Scientific.item.json"
ATTRIBUTES = ("title", "brand", "categories")  # tfseqrec.data.text.ATTRIBUTES["amazon"]
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
}


def prepare(out, split, vocabulary, data_root):
    """Writes ``out`` (see the module's docstring): on the CPU, with TensorFlow."""
    # Here, not above: TensorFlow's side, which the GPU machine does not have.
    import shutil

    from safetensors.numpy import save_file

    from tfseqrec.data import readers, text
    from tfseqrec.models import SentenceEncoder
    from tfseqrec.models.recformer import convert

    item_text = readers.read_item_text(os.path.join(data_root, ITEM_TEXT))
    texts, missing = text.item_texts(item_text, vocabulary, ATTRIBUTES)
    if missing:
        raise ValueError(f"{missing} items of the split have no text in {ITEM_TEXT}")
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
        "texts": texts[vocab.NUM_RESERVED :].tolist(),
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


def catalogue(manifest, prepared, options):
    """Recformer's ``arrays.Catalogue`` of the prepared texts, ``max_attribute_tokens`` each."""
    with open(os.path.join(prepared, CHECKPOINT, "vocab.txt"), encoding="utf-8") as f:
        wordpieces = [line.rstrip("\n") for line in f]
    texts = np.array(
        [[""] * len(manifest["attributes"])] * vocab.NUM_RESERVED + manifest["texts"], dtype=object
    )
    budgets = [options["max_attribute_tokens"]] * len(manifest["attributes"])
    return arrays.Catalogue.of_texts(texts, wordpieces, manifest["attributes"], budgets)


def train_recformer(split, manifest, prepared, minutes, seed, config=None):
    """Recformer from all-MiniLM-L6-v2 on the split: alignment, both stages; the run's figures."""
    options = {**RECFORMER, **(config or {})}
    unknown = sorted(set(options) - set(RECFORMER))
    if unknown:
        raise ValueError(f"unknown Recformer options {unknown}; known: {sorted(RECFORMER)}")
    keras.utils.set_random_seed(seed)
    items = catalogue(manifest, prepared, options)
    items.check(options["max_tokens"])
    backbone = RecformerBackbone(
        num_layers=options["num_layers"], max_tokens=options["max_tokens"],
        max_sequence_length=options["max_sequence_length"], attention_window=options["attention_window"],
        dropout=options["dropout"],
    )  # fmt: skip
    load_bert_weights(backbone, os.path.join(prepared, CHECKPOINT))
    model = Recformer(backbone, temperature=options["temperature"], num_items=len(manifest["items"]))
    start = time.perf_counter()
    aligned = arrays.align(
        model, items, options["align_epochs"], options["align_learning_rate"], seed=seed
    ) if options["align_epochs"] else []  # fmt: skip
    histories, targets = arrays.training_pairs(_lists(split.train), options["examples_per_user"])
    pairs = arrays.Pairs(items, model.backbone, histories, targets, options["batch_size"], seed)
    valid = (_lists(split.valid.histories), split.valid.targets)
    rows = arrays.finetune(
        model, items, pairs, options["epochs"], options["stage2_epochs"], options["learning_rate"],
        validation=valid, patience=options["patience"], seconds=minutes * 60 - (time.perf_counter() - start),
    )  # fmt: skip
    test_ranks = arrays.ranks(model, items, _lists(split.test.histories), split.test.targets)
    return model, options, aligned, rows, test_ranks


def _lists(sequences):
    return [sequences[u].tolist() for u in range(len(sequences))]
