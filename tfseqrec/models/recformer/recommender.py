"""The serving face of a Recformer: vocabulary ids in, item text inside."""

import numpy as np
import tensorflow as tf

from tfseqrec import ranking
from tfseqrec.data import text as text_lib
from tfseqrec.data import vocab as vocab_ids
from tfseqrec.progress import progress_bar


def pack_inputs(backbone, item_tokens, item_types, cls_id, max_tokens=None, pad_multiple=None, cache=None):
    """``backbone``'s inputs of histories of tokenized items (``text.pack_histories``).

    With ``backbone.cached_layers`` the inputs also carry ``token_states``, the frozen
    lower layers' states of each token: from ``cache`` when given, else computed here
    for the batch's items (``item_token_states``), which gives the same states.

    Args:
        backbone: a ``RecformerBackbone``.
        item_tokens, item_types: ragged ``[batch, (items), (tokens)]``, oldest item first.
        cls_id: the ``[CLS]`` token id.
        max_tokens: the inputs' token budget (default the backbone's).
        pad_multiple: as ``pack_histories``.
        cache: ``(index, table)``: ragged ``[batch, (items), (tokens)]`` rows of
            ``table`` (``item_token_states`` over the whole catalogue).
    """
    max_tokens = max_tokens or backbone.max_tokens
    length = backbone.max_sequence_length
    if not backbone.cached_layers:
        return text_lib.pack_histories(item_tokens, item_types, cls_id, length, max_tokens, pad_multiple)
    # An item's token past max_tokens - 1 never fits behind [CLS]: cut, the states line up with the tokens.
    item_tokens, item_types = (t[:, -length:, : max_tokens - 1] for t in (item_tokens, item_types))
    if cache is None:
        index, table = item_token_states(
            backbone, item_tokens.merge_dims(0, 1), item_types.merge_dims(0, 1), cls_id
        )
        index = item_tokens.with_values(index)
    else:
        index, table = cache[0][:, -length:, : max_tokens - 1], cache[1]
    packed = text_lib.pack_histories(item_tokens, item_types, cls_id, length, max_tokens, pad_multiple, index)
    packed["token_states"] = tf.gather(table, packed.pop("token_state_ids"))
    return packed


def item_token_states(backbone, tokens, types, cls_id):
    """What ``backbone``'s cached lower layers make of items, each read alone.

    Args:
        backbone: a ``RecformerBackbone`` with ``cached_layers``.
        tokens, types: ragged ``[items, (tokens)]`` (at most ``max_tokens - 1`` each).
        cls_id: the ``[CLS]`` token id.

    Returns:
        ``(index, table)``: ragged ``[items, (tokens)]`` int64 rows of ``table``, and
        ``table`` ``[1 + tokens, hidden_dim]``: row 0 the state of a lone ``[CLS]``,
        then every token's state in its one-item input (``[CLS]`` and the item).
    """
    items = tf.RaggedTensor.from_row_lengths(tokens, tf.ones_like(tokens.row_lengths()))
    item_types = items.with_values(types)
    one_item = text_lib.pack_histories(items, item_types, cls_id, 1, backbone.max_tokens, pad_multiple=1)
    states = backbone.item_states(one_item)[:, 1:]
    rows = tf.RaggedTensor.from_tensor(states, lengths=tokens.row_lengths()).flat_values
    lone_cls = {
        "token_ids": tf.constant([[cls_id]], tf.int64),
        "token_type_ids": tf.constant([[text_lib.CLS_TYPE]]),
        "item_position_ids": tf.zeros([1, 1], tf.int32),
        "padding_mask": tf.ones([1, 1], tf.bool),
    }
    table = tf.concat([tf.cast(backbone.item_states(lone_cls)[0], rows.dtype), rows], axis=0)
    index = tokens.with_values(tf.range(1, 1 + tf.size(tokens.values, out_type=tf.int64)))
    return index, table


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

    With a backbone's ``cached_layers``, ``cache_item_states`` runs the frozen lower
    layers over the catalogue once and keeps every item token's state (``table``:
    ``1 + tokens`` rows of ``hidden_dim`` floats); without the cache the states of a
    batch's items are computed as it is packed, the same numbers.
    """

    uses_timestamps = False  # item text only (tfseqrec.models.protocol.SequentialModel)

    def __init__(
        self, model, item_tokens, item_types, cls_id, tokenizer=None, item_text=None, pad_multiple=None
    ):
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
        object.__setattr__(self, "state_cache", None)  # (index, table); never saved

    def cache_item_states(self, batch_size=256, progress=None):
        """Runs the frozen lower layers over every item once and keeps their token states.

        A no-op for a backbone without ``cached_layers``. Returns ``self``. ``progress``:
        a bar over the item batches (``None``: on a terminal).
        """
        backbone = self.model.backbone
        if not backbone.cached_layers:
            return self
        limit = backbone.max_tokens - 1
        tokens, types = self.item_tokens[:, :limit], self.item_types[:, :limit]
        # Batch by batch (bounded memory); each batch's table repeats the lone [CLS] row 0.
        fn = tf.function(
            lambda t, y: item_token_states(backbone, t, y, self.cls_id)[1], reduce_retracing=True
        )
        tables = _batched(
            lambda i: fn(tokens[i : i + batch_size], types[i : i + batch_size]),
            int(tokens.nrows()),
            batch_size,
            progress,
            "cache item states",
        )
        table = tf.concat([tables[0][:1]] + [t[1:] for t in tables], axis=0)
        index = tokens.with_values(tf.range(1, 1 + tf.size(tokens.values, out_type=tf.int64)))
        object.__setattr__(self, "state_cache", (index, table))
        object.__setattr__(self, "_compiled", None)
        return self

    def uncached(self):
        """This recommender without the state cache (what an export traces: no table in the graph)."""
        return RecformerRecommender(
            self.model,
            self.item_tokens,
            self.item_types,
            self.cls_id,
            self.tokenizer,
            self.item_text,
            self.pad_multiple,
        )

    def pack(self, histories, max_tokens=None):
        """Recformer inputs of ragged id histories ``[batch, (items)]``, oldest first.

        ``max_tokens`` (default: the model's ``max_tokens``) narrows the
        inputs, for example to one item's token budget when encoding items.
        """
        cache = None
        if self.state_cache is not None:
            cache = (tf.gather(self.state_cache[0], histories), self.state_cache[1])
        return pack_inputs(
            self.model.backbone,
            tf.gather(self.item_tokens, histories),
            tf.gather(self.item_types, histories),
            self.cls_id,
            max_tokens,
            self.pad_multiple,
            cache,
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

        Returns ``(ids, scores)``: int64 vocabulary ids ``[batch, n]`` and float32 scores,
        ``n <= k``: only items that can be recommended (as ``SequentialRecommender.recommend``).
        """
        k = min(int(k), self.num_items)
        ids_out, scores_out = [], []
        for start in range(0, len(histories), batch_size):
            rows = [list(h) for h in histories[start : start + batch_size]]
            width = max([1] + [len(h) for h in rows])
            full = np.array([[0] * (width - len(h)) + h for h in rows], np.int64)
            top = ranking.top_k(self.compiled_score(full), k, exclude=full if exclude_seen else None)
            ids_out.append(ranking.vocabulary_ids(top.indices.numpy()))
            scores_out.append(top.values.numpy())
        return ranking.drop_padding(np.concatenate(ids_out), np.concatenate(scores_out))

    def encode_items(self, item_ids, batch_size=256, progress=None):
        """Vectors of items (vocabulary ids) encoded as one-item sequences: ``[n, hidden_dim]``.

        Streamed ``batch_size`` items at a time (bounded memory), with a progress bar
        (``progress=None``: on a terminal).
        """
        item_ids = np.asarray(item_ids, np.int64)
        width = self.item_width()
        fn = tf.function(
            lambda ids: self.model(
                self.pack(tf.RaggedTensor.from_tensor(ids[:, None]), width), training=False
            ),
            reduce_retracing=True,
        )
        out = _batched(
            lambda i: fn(tf.constant(item_ids[i : i + batch_size])).numpy(),
            len(item_ids),
            batch_size,
            progress,
            "encode items",
        )
        return np.concatenate(out) if out else np.zeros((0, self.model.hidden_dim), np.float32)

    def item_width(self):
        """Tokens of the longest item plus ``[CLS]``, at most ``max_tokens``."""
        longest = int(tf.reduce_max(self.item_tokens.row_lengths()))
        return min(longest + 1, self.model.max_tokens)

    def refresh_item_embeddings(self, batch_size=256):
        """Re-encodes every item into the model's item table (Recformer fine-tuning stage 1)."""
        ids = np.arange(vocab_ids.NUM_RESERVED, vocab_ids.NUM_RESERVED + self.num_items)
        self.model.set_item_embeddings(self.encode_items(ids, batch_size))


def _batched(fn, n, batch_size, progress, desc):
    """``[fn(start) for start in range(0, n, batch_size)]`` under a progress bar."""
    bar = progress_bar(-(-n // batch_size), progress, desc)
    out = []
    for start in range(0, n, batch_size):
        out.append(fn(start))
        bar.update(1)
    bar.close()
    return out
