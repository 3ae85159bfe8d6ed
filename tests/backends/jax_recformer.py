"""Trains a tiny Recformer on the JAX backend, in a process of its own, and saves it.

Run by ``tests/backends/test_jax.py`` as ``KERAS_BACKEND=jax python jax_recformer.py OUT``:
item text tokenized by ``tfseqrec.data.wordpiece`` (no TensorFlow), both fine-tuning
stages (``arrays.finetune``) and a few pre-training steps (``RecformerPretrainer``: MLM
and item-item contrast), ``OUT/recformer.keras``, and one JSON line with the losses, the
model's top 5 for ``HISTORIES`` (its own scores, seen items excluded) and whether
TensorFlow was imported (it may not be).
"""

import json
import pathlib
import sys

import keras
import numpy as np

from tfseqrec.data import vocab
from tfseqrec.models.recformer import Recformer, RecformerBackbone, RecformerPretrainer, arrays

COLOURS = ["red", "blue", "green", "black", "white"]
THINGS = ["pen", "ink", "cup", "lamp"]
NUM_ITEMS = len(COLOURS) * len(THINGS)
WORDPIECES = ["[PAD]", "[UNK]", "[CLS]", "[MASK]", "title", *COLOURS, *THINGS]
# Vocabulary ids of items (3 is the first); item j is COLOURS[j // 4] THINGS[j % 4].
HISTORIES = [[3, 4, 5], [10, 11], [20, 21, 22, 3]]


def texts():
    """``[vocabulary size, 1]`` titles, the reserved rows empty."""
    titles = [f"{c} {t}" for c in COLOURS for t in THINGS]
    return np.array([[""]] * vocab.NUM_RESERVED + [[t] for t in titles], dtype=object)


def sequences(num_users=64, length=6, seed=0):
    """Walks ``i, i + 1, ...`` over the catalogue (vocabulary ids): 320 training pairs, ten batches of 32."""
    starts = np.random.default_rng(seed).integers(0, NUM_ITEMS, num_users)
    return [[vocab.NUM_RESERVED + (s + j) % NUM_ITEMS for j in range(length)] for s in starts]


def backbone():
    return RecformerBackbone(
        vocabulary_size=len(WORDPIECES), hidden_dim=16, num_layers=1, num_heads=2, intermediate_dim=32,
        max_tokens=24, max_sequence_length=4, attention_window=8,
    )  # fmt: skip


def top5(model, catalogue):
    vectors = model(catalogue.pack(HISTORIES, model.backbone), training=False)
    scores = keras.ops.convert_to_numpy(model.scores(vectors))
    for row, history in enumerate(HISTORIES):
        scores[row, np.asarray(history) - vocab.NUM_RESERVED] = -np.inf
    order = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    return (order + vocab.NUM_RESERVED).tolist(), np.take_along_axis(scores, order, axis=1).tolist()


def main(out):
    catalogue = arrays.Catalogue.of_texts(texts(), WORDPIECES, ["title"], [4])
    histories, targets = arrays.training_pairs(sequences(), examples_per_user=None)
    model = Recformer(backbone(), num_items=NUM_ITEMS)
    pairs = arrays.Pairs(catalogue, model.backbone, histories, targets, batch_size=32)
    rows = arrays.finetune(model, catalogue, pairs, epochs=6, stage2_epochs=2, learning_rate=1e-2)
    pretrainer = RecformerPretrainer(backbone(), mask_token_id=3, first_word_piece_id=4, seed=0)
    pretrainer.compile(optimizer=keras.optimizers.AdamW(3e-3, weight_decay=0.0))
    pretraining = arrays.Pairs(
        catalogue, pretrainer.backbone, histories, targets, batch_size=32, pretraining=True
    )
    pretrained = pretrainer.fit(pretraining, epochs=4, verbose=0).history["loss"]
    ids, scores = top5(model, catalogue)
    tensorflow_imported = "tensorflow" in sys.modules  # before saving: Keras's writer looks it up
    model.save(pathlib.Path(out) / "recformer.keras")
    result = {
        "backend": keras.backend.backend(),
        "finetune": rows,
        "pretrain": [float(v) for v in pretrained],
        "ids": ids,
        "scores": scores,
        "tensorflow_imported": tensorflow_imported,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
