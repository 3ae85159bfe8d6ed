"""Recformer on NumPy inputs, on any Keras backend: JAX trains it without TensorFlow.

Item text is tokenized once, as data preparation, by ``tfseqrec.data.wordpiece`` (the ids
tensorflow-text gives in the exported graph); histories are packed per batch by
``wordpiece.pack_histories`` (the graph's packing). On these arrays:

- ``encode_items``: each item encoded as a one-item input (the item table);
- ``Pairs``: batches of packed histories and their next items' table rows (fine-tuning),
  or of packed histories and their packed next items (``pretraining=True``: the
  pre-training task's item-item contrast and masked language modelling);
- ``finetune``: the two fine-tuning stages, the table re-encoded after every stage-1
  epoch, then frozen.

A model trained here saves as ``.keras`` and loads on the TensorFlow backend, where
``tfseqrec.training.recformer`` builds its ``RecformerRecommender`` and export
(``tests/backends/test_jax.py``).

Example:

>>> from tfseqrec.models.recformer import Recformer, RecformerBackbone
>>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "title", "red", "blue", "pen", "ink"]
>>> texts = np.array([[""]] * 3 + [["red pen"], ["blue pen"], ["red ink"]], dtype=object)
>>> catalogue = Catalogue.of_texts(texts, vocabulary, ["title"], [4])
>>> catalogue.num_items, catalogue.tokens[3].tolist(), catalogue.types[3].tolist()
(3, [3, 4, 6], [1, 2, 2])
>>> backbone = RecformerBackbone(vocabulary_size=8, hidden_dim=8, num_layers=1, num_heads=2,
...                              intermediate_dim=16, max_tokens=12, max_sequence_length=3, attention_window=4)
>>> model = Recformer(backbone, num_items=3)
>>> encode_items(model, catalogue).shape
(3, 8)
"""

import keras
import numpy as np

from tfseqrec.data import vocab, wordpiece


class Catalogue:
    """The token ids and types of each vocabulary id's text (reserved ids: none).

    Args:
        tokens, types: per vocabulary id, int64 and int32 arrays (``wordpiece.item_tokens``).
        cls_id: the ``[CLS]`` token id.
    """

    def __init__(self, tokens, types, cls_id):
        self.tokens, self.types, self.cls_id = list(tokens), list(types), int(cls_id)

    @classmethod
    def of_texts(cls, texts, vocabulary, attributes, budgets, cls_token="[CLS]"):
        """The catalogue of ``texts`` (``[vocabulary.size, attributes]`` strings, as
        ``tfseqrec.data.text.item_texts`` lays them out) over a WordPiece ``vocabulary``."""
        tokenizer = wordpiece.WordPiece(vocabulary)
        if cls_token not in tokenizer.index:
            raise ValueError(f"the vocabulary has no {cls_token!r} token")
        tokens, types = wordpiece.item_tokens(texts, tokenizer, attributes, budgets)
        empty = [i for i in range(vocab.NUM_RESERVED, len(tokens)) if not len(tokens[i])]
        if empty:
            raise ValueError(
                f"{len(empty)} items have no text to read (vocabulary ids {empty[:5]}...): "
                "a Recformer cannot tell them apart"
            )
        return cls(tokens, types, tokenizer.index[cls_token])

    @property
    def num_items(self):
        return len(self.tokens) - vocab.NUM_RESERVED

    def pack(self, histories, backbone, max_tokens=None, pad_multiple=None):
        """``backbone``'s inputs of ``histories`` (vocabulary ids, oldest first)."""
        if backbone.cached_layers:
            raise ValueError(
                "NumPy inputs carry no cached token states: build the backbone without cached_layers"
            )
        return wordpiece.pack_histories(
            histories,
            self.tokens,
            self.types,
            self.cls_id,
            backbone.max_sequence_length,
            max_tokens or backbone.max_tokens,
            pad_multiple,
        )


def encode_items(model, catalogue, batch_size=256):
    """Each item's vector, encoded as a one-item input by ``model`` (a ``RecformerTask``):
    ``[num_items, hidden_dim]``, row ``i`` vocabulary id ``i + NUM_RESERVED``."""
    ids = np.arange(vocab.NUM_RESERVED, vocab.NUM_RESERVED + catalogue.num_items)
    width = min(1 + max((len(t) for t in catalogue.tokens), default=0), model.backbone.max_tokens)
    out = []
    for start in range(0, len(ids), batch_size):
        inputs = catalogue.pack(ids[start : start + batch_size, None], model.backbone, width)
        out.append(keras.ops.convert_to_numpy(model(inputs, training=False)))
    return np.concatenate(out) if out else np.zeros((0, model.backbone.hidden_dim), np.float32)


def training_pairs(sequences, examples_per_user=1, rng=None):
    """``(histories, targets)`` of each sequence's next items (vocabulary ids).

    The last ``examples_per_user`` of each sequence (``None``: every position after
    the first); with ``rng`` (a NumPy generator) one position drawn at random per
    sequence instead.
    """
    histories, targets = [], []
    for u in range(len(sequences)):
        seq = sequences[u]
        if len(seq) < 2:
            continue
        if rng is not None:
            positions = [int(rng.integers(1, len(seq)))]
        else:
            positions = range(
                1 if examples_per_user is None else max(1, len(seq) - examples_per_user), len(seq)
            )
        for t in positions:
            histories.append(seq[:t])
            targets.append(seq[t])
    return histories, np.asarray(targets, np.int64)


class Pairs(keras.utils.PyDataset):
    """Batches of packed histories and their next items, shuffled every epoch (seeded).

    ``y`` is the next item's table row (``Recformer.fit``) or, with ``pretraining``, the
    next item packed as a one-item input (``RecformerPretrainer.fit``).
    """

    def __init__(self, catalogue, backbone, histories, targets, batch_size=32, seed=0, pretraining=False):
        super().__init__()
        self.catalogue, self.backbone = catalogue, backbone
        self.histories, self.targets = list(histories), np.asarray(targets, np.int64)
        self.batch_size, self.pretraining = int(batch_size), bool(pretraining)
        self.rng = np.random.default_rng(seed)
        self.order = self.rng.permutation(len(self.targets))

    def __len__(self):
        return -(-len(self.targets) // self.batch_size)

    def __getitem__(self, index):
        rows = self.order[index * self.batch_size : (index + 1) * self.batch_size]
        x = self.catalogue.pack([self.histories[r] for r in rows], self.backbone)
        if self.pretraining:
            return x, self.catalogue.pack(self.targets[rows, None], self.backbone)
        return x, self.targets[rows] - vocab.NUM_RESERVED

    def on_epoch_end(self):
        self.order = self.rng.permutation(len(self.targets))


def finetune(
    model, catalogue, pairs, epochs=1, stage2_epochs=1, learning_rate=5e-5, stage2_learning_rate=None
):
    """Recformer's two fine-tuning stages on ``pairs`` (a ``Pairs``); returns each epoch's loss.

    Stage 1 re-encodes the item table before every epoch; stage 2 keeps the last table
    frozen, at ``stage2_learning_rate`` (default half the first). AdamW without weight
    decay, as ``tfseqrec train``. No validation: the caller picks epochs or stops.

    Returns:
        ``[(stage, epoch, loss)]``.
    """
    rows = []
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate, weight_decay=0.0))
    for epoch in range(epochs):
        model.set_item_embeddings(encode_items(model, catalogue))
        history = model.fit(pairs, epochs=1, verbose=0)
        rows.append((1, epoch + 1, float(history.history["loss"][-1])))
    model.set_item_embeddings(encode_items(model, catalogue))
    if stage2_epochs > 0:
        model.compile(
            optimizer=keras.optimizers.AdamW(stage2_learning_rate or learning_rate / 2, weight_decay=0.0)
        )
        history = model.fit(pairs, epochs=stage2_epochs, verbose=0)
        rows += [(2, e + 1, float(loss)) for e, loss in enumerate(history.history["loss"])]
    return rows
