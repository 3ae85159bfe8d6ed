"""The serving face of a Recformer: vocabulary ids in, item text inside."""

import numpy as np
import tensorflow as tf

from tfseqrec import ranking
from tfseqrec.data import text as text_lib
from tfseqrec.data import vocab as vocab_ids


class RecformerRecommender(tf.Module):
    """A Recformer, its item text table and item vectors, addressed by vocabulary ids.

    It has the interface ``tfseqrec.evaluation.evaluate`` and ``tfseqrec.export`` use
    for the id models: ``score(window)`` takes int ``[batch, length]`` vocabulary ids
    (left-padded, newest last) and returns ``[batch, num_items]`` scores, column ``j``
    being id ``j + NUM_RESERVED``. Histories become text through the tokenized item
    table held here, so the same object serves ids while the model never sees one.

    Args:
        model: a ``Recformer`` whose item table holds the catalogue's vectors.
        item_tokens, item_types: ragged ``[vocabulary.size, (tokens)]`` token ids and
            types of each vocabulary id (``ItemTextTokenizer.tokenize`` of the items;
            reserved ids have empty rows).
        cls_id: the tokenizer's ``[CLS]`` id.
        tokenizer: the ``ItemTextTokenizer`` behind ``item_tokens`` (the export's
            text signatures tokenize with it).
        item_text: the strings ``[vocabulary.size, attributes]`` behind ``item_tokens``
            (the export's warm-up requests use them).
        pad_multiple: pack each batch only as wide as its longest input, rounded up to
            this (``pack_histories``); ``None``: always ``max_tokens`` wide. The
            scores are the same either way (padding is masked); only time differs.
    """

    def __init__(self, model, item_tokens, item_types, cls_id, tokenizer=None, item_text=None, pad_multiple=None):
        super().__init__(name="recformer_recommender")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "tokenizer", tokenizer)
        object.__setattr__(self, "item_text", item_text)
        self.item_tokens = item_tokens
        self.item_types = item_types
        self.cls_id = int(cls_id)
        self.pad_multiple = pad_multiple
        self.num_items = int(model.num_items)
        self.max_sequence_length = int(model.max_sequence_length)
        self._compiled = None

    def pack(self, histories, max_tokens=None):
        """Recformer inputs of ragged id histories ``[batch, (items)]``, oldest first.

        ``max_tokens`` (default: the model's ``max_tokens``) narrows the
        inputs, for example to one item's token budget when encoding items.
        """
        return text_lib.pack_histories(
            tf.gather(self.item_tokens, histories),
            tf.gather(self.item_types, histories),
            self.cls_id,
            self.model.max_sequence_length,
            max_tokens or self.model.max_tokens,
            self.pad_multiple,
        )

    def encode_histories(self, window):
        ids = tf.cast(window, tf.int64)
        histories = tf.ragged.boolean_mask(ids, ids >= vocab_ids.NUM_RESERVED)
        return self.model(self.pack(histories), training=False)

    def score(self, window):
        return tf.cast(self.model.scores(self.encode_histories(window)), tf.float32)

    def compiled_score(self, window):
        if self._compiled is None:
            object.__setattr__(self, "_compiled", tf.function(self.score, reduce_retracing=True))
        return self._compiled(tf.convert_to_tensor(window))

    def recommend(self, histories, k=10, exclude_seen=True, batch_size=256):
        """Top-``k`` next items of id histories (lists of vocabulary ids, oldest first).

        Ranked by ``tfseqrec.ranking.top_k``; ``exclude_seen`` removes the whole history.

        Returns ``(ids, scores)``: int64 vocabulary ids ``[batch, k]`` and float32 scores.
        """
        k = min(int(k), self.num_items)
        ids_out, scores_out = [], []
        for start in range(0, len(histories), batch_size):
            rows = [list(h) for h in histories[start : start + batch_size]]
            width = max([1] + [len(h) for h in rows])
            full = np.array([[0] * (width - len(h)) + h for h in rows], np.int64)
            top = ranking.top_k(self.compiled_score(full), k, exclude=full if exclude_seen else None)
            ids_out.append(top.indices.numpy().astype(np.int64) + vocab_ids.NUM_RESERVED)
            scores_out.append(top.values.numpy())
        return np.concatenate(ids_out), np.concatenate(scores_out)

    def encode_items(self, item_ids, batch_size=256):
        """Vectors of items (vocabulary ids) encoded as one-item sequences: ``[n, hidden_dim]``."""
        item_ids = np.asarray(item_ids, np.int64)
        width = self.item_width()
        fn = tf.function(
            lambda ids: self.model(self.pack(tf.RaggedTensor.from_tensor(ids[:, None]), width), training=False),
            reduce_retracing=True,
        )
        out = [fn(tf.constant(item_ids[i : i + batch_size])).numpy() for i in range(0, len(item_ids), batch_size)]
        return np.concatenate(out) if out else np.zeros((0, self.model.hidden_dim), np.float32)

    def item_width(self):
        """Tokens of the longest item plus ``[CLS]``, at most ``max_tokens``."""
        longest = int(tf.reduce_max(self.item_tokens.row_lengths()))
        return min(longest + 1, self.model.max_tokens)

    def refresh_item_embeddings(self, batch_size=256):
        """Re-encodes every item into the model's item table (Recformer fine-tuning stage 1)."""
        ids = np.arange(vocab_ids.NUM_RESERVED, vocab_ids.NUM_RESERVED + self.num_items)
        self.model.set_item_embeddings(self.encode_items(ids, batch_size))
