"""Recformer on NumPy inputs, on any Keras backend: JAX trains it without TensorFlow.

Item text is tokenized once, as data preparation, by ``tfseqrec.data.wordpiece`` (the ids
tensorflow-text gives in the exported graph); histories are packed per batch by
``wordpiece.pack_histories`` (the graph's packing). On these arrays:

- ``encode_items``: each item encoded as a one-item input (the item table);
- ``Pairs``: batches of packed histories and their next items' table rows (fine-tuning),
  or of packed histories and their packed next items (``pretraining=True``: the
  pre-training task's item-item contrast and masked language modelling);
- ``finetune``: the two fine-tuning stages, the table re-encoded after every stage-1
  epoch, then frozen; with validation cases, the best epoch kept;
- ``align``: ``[CLS]`` alignment on the items' text before fine-tuning;
- ``ranks``: each case's rank among all items (``tfseqrec.ranking``'s rules), as validation
  and evaluation rank them.

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

import time

import keras
import numpy as np

from tfseqrec import ranking
from tfseqrec.data import vocab, wordpiece
from tfseqrec.models.recformer.tasks import RecformerAligner


class Catalogue:
    """The token ids and types of each vocabulary id's text (reserved ids: none).

    Args:
        tokens, types: per vocabulary id, int64 and int32 arrays (``wordpiece.item_tokens``).
        cls_id: the ``[CLS]`` token id; ``unk_id`` the ``[UNK]`` one.
    """

    def __init__(self, tokens, types, cls_id, unk_id=None):
        self.tokens, self.types, self.cls_id = list(tokens), list(types), int(cls_id)
        self.unk_id = unk_id

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
        return cls(tokens, types, tokenizer.index[cls_token], tokenizer.unk_id)

    def item_width(self, max_tokens):
        """Tokens of the widest one-item input (``[CLS]`` and the longest item), at most ``max_tokens``."""
        return min(1 + max((len(t) for t in self.tokens), default=0), max_tokens)

    def check(self, max_tokens):
        """``wordpiece.check_item_tokens`` of the items for inputs of ``max_tokens``: the [UNK] share."""
        first = vocab.NUM_RESERVED
        return wordpiece.check_item_tokens(
            self.tokens[first:], self.types[first:], self.unk_id, max_tokens, first
        )

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
    width = catalogue.item_width(model.backbone.max_tokens)
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


class _Items(keras.utils.PyDataset):
    """Every item as a one-item input, shuffled every epoch (seeded): ``[CLS]`` alignment's batches."""

    def __init__(self, catalogue, backbone, batch_size=64, seed=0):
        super().__init__()
        self.catalogue, self.backbone, self.batch_size = catalogue, backbone, int(batch_size)
        self.ids = np.arange(vocab.NUM_RESERVED, vocab.NUM_RESERVED + catalogue.num_items)
        self.width = catalogue.item_width(backbone.max_tokens)
        self.rng = np.random.default_rng(seed)
        self.order = self.rng.permutation(len(self.ids))

    def __len__(self):
        return -(-len(self.ids) // self.batch_size)

    def __getitem__(self, index):
        rows = self.order[index * self.batch_size : (index + 1) * self.batch_size]
        return self.catalogue.pack(self.ids[rows, None], self.backbone, self.width)

    def on_epoch_end(self):
        self.order = self.rng.permutation(len(self.ids))


def align(model, catalogue, epochs=2, learning_rate=5e-4, batch_size=64, seed=0, callbacks=None):
    """``[CLS]`` alignment on the items' text (``RecformerAligner``, trained in place on
    ``model``'s backbone), as ``tfseqrec train`` runs it from all-MiniLM-L6-v2 before
    fine-tuning: no interaction is read. Returns each epoch's loss (none with ``epochs=0``)."""
    if epochs <= 0:
        return []
    aligner = RecformerAligner(model.backbone, temperature=model.temperature)
    aligner.compile(optimizer=keras.optimizers.AdamW(learning_rate, weight_decay=0.0))
    items = _Items(catalogue, model.backbone, batch_size, seed)
    history = aligner.fit(items, epochs=epochs, callbacks=callbacks, verbose=0).history["loss"]
    return [float(v) for v in history]


def ranks(model, catalogue, histories, targets, batch_size=128):
    """The 0-based rank of each target among all items, by ``model``'s item table as it stands
    (``tfseqrec.ranking.rank_targets``: the rest of the history excluded, ties against the target).

    Args:
        histories: vocabulary ids of each case, oldest first; ``targets`` its next items.
    """
    targets = np.asarray(targets, np.int64)
    out = []
    for start in range(0, len(targets), batch_size):
        rows = list(histories[start : start + batch_size])
        vectors = model(catalogue.pack(rows, model.backbone), training=False)
        seen = np.zeros((len(rows), max(len(h) for h in rows)), np.int64)  # padding: never a candidate
        for i, history in enumerate(rows):
            seen[i, : len(history)] = history
        out.append(
            keras.ops.convert_to_numpy(
                ranking.rank_targets(model.scores(vectors), targets[start : start + len(rows)], seen)
            )
        )
    return np.concatenate(out) if out else np.zeros(0, np.int64)


class _Stages:
    """Per epoch of ``finetune``: the row, validation, the best weights (the item table among them),
    the stop by patience or time."""

    def __init__(self, model, catalogue, validation, patience, seconds):
        self.model, self.catalogue, self.validation = model, catalogue, validation
        self.patience, self.seconds, self.start = patience, seconds, time.perf_counter()
        self.rows, self.best, self.best_weights, self.waited = [], -np.inf, None, 0

    def out_of_time(self):
        return self.seconds is not None and time.perf_counter() - self.start > self.seconds

    def end_epoch(self, stage, epoch, loss):
        """Records the epoch; ``True`` when the stage ends here (patience or time)."""
        row = {"stage": stage, "epoch": epoch, "loss": float(loss)}
        if self.validation is not None:
            found = ranks(self.model, self.catalogue, *self.validation)
            row["val_ndcg@10"] = ranking.metrics_from_ranks(found, ks=(10,))["ndcg@10"]
            self.waited += 1
            if row["val_ndcg@10"] > self.best:
                self.best, self.best_weights, self.waited = row["val_ndcg@10"], self.model.get_weights(), 0
        row["seconds"] = time.perf_counter() - self.start
        self.rows.append(row)
        return self.out_of_time() or (self.patience is not None and self.waited >= self.patience)

    def restore(self):
        """The best epoch's weights so far, when validating; the patience starts again."""
        if self.best_weights is not None:
            self.model.set_weights(self.best_weights)
        self.waited = 0


def finetune(
    model,
    catalogue,
    pairs,
    epochs=1,
    stage2_epochs=1,
    learning_rate=5e-5,
    stage2_learning_rate=None,
    validation=None,
    patience=None,
    seconds=None,
):
    """Recformer's two fine-tuning stages on ``pairs`` (a ``Pairs``); returns a row per epoch.

    Stage 1 re-encodes the item table before every epoch (and after the last); stage 2
    keeps the table frozen, at ``stage2_learning_rate`` (default half the first). AdamW
    without weight decay, as ``tfseqrec train``.

    Args:
        validation: ``(histories, targets)``: NDCG@10 over all items after every epoch;
            the best epoch's weights and table are kept, and stage 2 starts from stage 1's best.
        patience: epochs without a better validation NDCG@10 that end a stage.
        seconds: a budget of wall time for both stages; the epoch that passes it is the last.

    Returns:
        ``[{"stage", "epoch", "loss", "seconds", "val_ndcg@10"}]`` (``val_ndcg@10`` with
        ``validation``; ``seconds`` since the start).
    """
    stages = _Stages(model, catalogue, validation, patience, seconds)
    model.compile(optimizer=keras.optimizers.AdamW(learning_rate, weight_decay=0.0))
    model.set_item_embeddings(encode_items(model, catalogue))
    for epoch in range(epochs):
        loss = model.fit(pairs, epochs=1, verbose=0).history["loss"][-1]
        model.set_item_embeddings(encode_items(model, catalogue))
        if stages.end_epoch(1, epoch + 1, loss):
            break
    stages.restore()
    if stage2_epochs > 0 and not stages.out_of_time():
        model.compile(
            optimizer=keras.optimizers.AdamW(stage2_learning_rate or learning_rate / 2, weight_decay=0.0)
        )
        for epoch in range(stage2_epochs):
            loss = model.fit(pairs, epochs=1, verbose=0).history["loss"][-1]
            if stages.end_epoch(2, epoch + 1, loss):
                break
        stages.restore()
    return stages.rows
