"""Item text to Recformer inputs: "key value" token sequences, newest item first, behind [CLS].

An item is the text of its attributes flattened as ``key value key value ...``
(Recformer, Li et al. KDD 2023). Tokens carry a type: ``CLS_TYPE`` for the leading
``[CLS]``, ``KEY_TYPE`` for attribute names and ``VALUE_TYPE`` for their values.

Tokenization is tensorflow-text's ``BertTokenizer`` (BERT uncased: lower-case,
accents stripped, punctuation split, WordPiece) and runs in the TensorFlow graph, so an
exported model takes raw strings. ``BertTokenizer`` rather than ``FastBertTokenizer``:
its ops (``CaseFoldUTF8``, ``NormalizeUTF8``, ``RegexSplitWithOffsets``,
``WordpieceTokenizeWithOffsets``) are linked into the ``tensorflow/serving`` model
server, while ``FastBertNormalize`` has been missing from some of its releases
(tensorflow/serving#2064).

Example:

>>> tokenizer = ItemTextTokenizer(["[PAD]", "[UNK]", "[CLS]", "title", "brand", "red", "pen", "acme"],
...                               attributes=["title", "brand"], max_attribute_tokens=4)
>>> tokens, types = tokenizer.tokenize([["Red pen", "ACME"]])
>>> tokens.to_list(), types.to_list()
([[3, 5, 6, 4, 7]], [[1, 2, 2, 1, 2]])
"""

import numpy as np
import tensorflow as tf

from tfseqrec.data import readers
from tfseqrec.data.wordpiece import (  # noqa: F401 (defined TF-free)
    CLS_TYPE,
    KEY_TYPE,
    NUM_TOKEN_TYPES,
    VALUE_TYPE,
    item_texts,
)

# Attributes Recformer reads, by dataset (order matters: it is the order in the text).
ATTRIBUTES = {
    "amazon": ("title", "brand", "categories"),
    "movielens": ("title", "genres"),
}


class ItemTextTokenizer:
    """Tokenizes item attributes into ``key value`` tokens with their token types.

    Args:
        vocabulary: WordPiece tokens (a list) or the path of a ``vocab.txt``.
        attributes: the attribute names, in text order; their names are the keys.
        max_attribute_tokens: each attribute's value is cut to this many tokens.
        cls_token, unk_token, pad_token: the special tokens of ``vocabulary``.
        attribute_tokens: per-attribute budgets (``{"title": 24}``) that replace
            ``max_attribute_tokens`` for the attributes they name.
    """

    def __init__(
        self,
        vocabulary,
        attributes,
        max_attribute_tokens=32,
        cls_token="[CLS]",
        unk_token="[UNK]",
        pad_token="[PAD]",
        attribute_tokens=None,
    ):
        import tensorflow_text  # heavy (its ops load with it): only a tokenizer needs it

        if isinstance(vocabulary, str):
            with tf.io.gfile.GFile(vocabulary) as f:
                vocabulary = [line.rstrip("\n") for line in f]
        self.vocabulary = list(vocabulary)
        self.attributes = list(attributes)
        self.max_attribute_tokens = int(max_attribute_tokens)
        unknown = sorted(set(attribute_tokens or {}) - set(self.attributes))
        if unknown:
            raise ValueError(
                f"attribute_tokens names {unknown}, which are not among the attributes {self.attributes}"
            )
        self.budgets = [
            int((attribute_tokens or {}).get(a, self.max_attribute_tokens)) for a in self.attributes
        ]
        for token in (cls_token, unk_token, pad_token):
            if token not in self.vocabulary:
                raise ValueError(f"the vocabulary has no {token!r} token")
        self.cls_id = self.vocabulary.index(cls_token)
        self.unk_id = self.vocabulary.index(unk_token)
        self.pad_id = self.vocabulary.index(pad_token)
        table = tf.lookup.StaticVocabularyTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(self.vocabulary), tf.range(len(self.vocabulary), dtype=tf.int64)
            ),
            num_oov_buckets=1,
        )
        self.tokenizer = tensorflow_text.BertTokenizer(
            table, token_out_type=tf.int64, unknown_token=unk_token, lower_case=True
        )
        keys = self.wordpieces(tf.constant([a.replace("_", " ") for a in self.attributes]))
        self.key_tokens = [np.asarray(k, np.int64) for k in keys.to_list()]

    def wordpieces(self, strings):
        """WordPiece ids ``[n, (tokens)]`` of ``n`` strings."""
        return self.tokenizer.tokenize(strings).merge_dims(-2, -1)

    def tokenize(self, texts):
        """Token ids and types of items, ragged ``[items, (tokens)]``.

        Args:
            texts: string ``[items, len(attributes)]``; an empty value drops its key too.
        """
        texts = tf.convert_to_tensor(texts, tf.string)
        pieces_ids, pieces_types = [], []
        for a in range(len(self.attributes)):
            value = self.wordpieces(texts[:, a])[:, : self.budgets[a]]
            present = value.row_lengths() > 0
            key_tokens = tf.constant(self.key_tokens[a], tf.int64)
            key_lengths = tf.where(present, tf.size(key_tokens, out_type=tf.int64), 0)
            key = tf.RaggedTensor.from_row_lengths(
                tf.tile(key_tokens, [tf.reduce_sum(tf.cast(present, tf.int32))]), key_lengths
            )
            pieces_ids += [key, value]
            pieces_types += [
                tf.ones_like(key, tf.int32) * KEY_TYPE,
                tf.ones_like(value, tf.int32) * VALUE_TYPE,
            ]
        return tf.concat(pieces_ids, axis=1), tf.concat(pieces_types, axis=1)


def default_attributes(item_text_path, raw_text=None):
    """The attributes a model reads of an item-text file that names none.

    The known set (``ATTRIBUTES``) the file's items carry most of: Amazon's
    title, brand, categories for the LC-Rec ``*.item.json``; MovieLens title and
    genres for ``movies.dat``, ``u.item`` and the ``*.item.json`` that
    ``tfseqrec data item-text`` writes of them. ``raw_text``: the file as read, if
    it is at hand.
    """
    if raw_text is None:
        raw_text = readers.read_item_text(item_text_path)
    names = set()
    for attrs in list(raw_text.values())[:1000]:
        names |= {k for k, v in attrs.items() if v}
    # Ties (only a title, say) go to the first set, Amazon's.
    best = max(ATTRIBUTES, key=lambda kind: len(names & set(ATTRIBUTES[kind])))
    return list(ATTRIBUTES[best])


def drop_common_values(texts, share):
    """Item texts without the comma-separated values that at least ``share`` of the items carry.

    Amazon category paths start with the domain's own name ("Industrial & Scientific,
    Lab, ..."): a token every item spends its budget on and no item is told apart by.

    Args:
        texts: strings ``[items, attributes]`` (NumPy object array); empty rows (the
            reserved ids) are not counted.
        share: the least share of items for a value to be dropped (0.9: nine items in ten).

    Returns:
        ``(texts, dropped)``: a new array, and ``{attribute index: [values dropped]}``.

    Example:

    >>> texts = np.array([["Lab,Pipettes"], ["Lab,Flasks"], ["Lab"], [""]], dtype=object)
    >>> out, dropped = drop_common_values(texts, 0.9)
    >>> out[:, 0].tolist(), dropped
    (['Pipettes', 'Flasks', '', ''], {0: ['Lab']})
    """
    out = texts.copy()
    present = np.array([any(str(v) for v in row) for row in texts])
    dropped = {}
    for a in range(texts.shape[1]):
        parts = [[p.strip() for p in str(v).split(",") if p.strip()] for v in texts[:, a]]
        counts = {}
        for row in np.flatnonzero(present):
            for p in set(parts[row]):
                counts[p] = counts.get(p, 0) + 1
        common = sorted(p for p, n in counts.items() if n >= share * max(present.sum(), 1))
        if common:
            dropped[a] = common
            out[:, a] = [",".join(p for p in row if p not in common) for row in parts]
    return out, dropped


def pack_histories(
    item_tokens, item_types, cls_id, max_sequence_length, max_tokens, pad_multiple=None, token_index=None
):
    """Recformer inputs of histories of tokenized items.

    Args:
        item_tokens: int64 ragged ``[batch, (items), (tokens)]``, oldest item first.
        item_types: the token types, same structure.
        cls_id: the ``[CLS]`` token id.
        max_sequence_length: the newest ``max_sequence_length`` items are kept.
        max_tokens: the most tokens of an input, ``[CLS]`` included; tokens past it (of
            the oldest items kept) are cut.
        pad_multiple: ``None``: every input is ``max_tokens`` wide; else the batch is
            as wide as its longest input rounded up to a multiple of this (at most
            ``max_tokens``): short histories cost no padding (the windowed attention
            works in blocks of half its window, the natural multiple).
        token_index: optional int ragged ``[batch, (items), (tokens)]`` like
            ``item_tokens``: each token's row in a table of token states (a
            Recformer's cached lower layers, ``RecformerBackbone.cached_layers``).

    Returns:
        dict of ``[batch, width]`` tensors: ``token_ids`` (int64; 0 pads),
        ``token_type_ids`` and ``item_position_ids`` (int32; ``[CLS]`` is item position 0,
        the newest item 1, the one before it 2, ...) and ``padding_mask`` (bool); with
        ``token_index``, also ``token_state_ids`` (int64; 0 for ``[CLS]`` and padding).
    """
    newest_first_tokens = tf.reverse(item_tokens, axis=[1])[:, :max_sequence_length]
    newest_first_types = tf.reverse(item_types, axis=[1])[:, :max_sequence_length]
    batch = newest_first_tokens.nrows()
    item_index = tf.ragged.range(newest_first_tokens.row_lengths()) + 1  # [batch, (items)]
    token_item = tf.gather(item_index.flat_values, newest_first_tokens.values.value_rowids())
    positions = newest_first_tokens.with_values(
        newest_first_tokens.values.with_flat_values(tf.cast(token_item, tf.int32))
    )
    cls = tf.ones([batch, 1], tf.int64)
    shape = [None, max_tokens]
    if pad_multiple:
        longest = 1 + tf.reduce_max(tf.concat([newest_first_tokens.merge_dims(1, 2).row_lengths(), [0]], 0))
        width = tf.minimum(tf.constant(max_tokens, tf.int64), -(-longest // pad_multiple) * pad_multiple)
        shape = tf.stack([tf.cast(batch, tf.int64), width])

    def flat(ragged, first):
        merged = ragged.merge_dims(1, 2)
        return tf.concat([tf.cast(first, merged.dtype), merged], axis=1).to_tensor(
            default_value=tf.zeros([], merged.dtype), shape=shape
        )

    token_ids = flat(newest_first_tokens, cls * cls_id)
    packed = {
        "token_ids": token_ids,
        "token_type_ids": flat(newest_first_types, cls * CLS_TYPE),
        "item_position_ids": flat(positions, cls * 0),
        "padding_mask": flat(tf.ones_like(newest_first_types, tf.bool), tf.cast(cls, tf.bool)),
    }
    if token_index is not None:
        newest_first_index = tf.reverse(token_index, axis=[1])[:, :max_sequence_length]
        packed["token_state_ids"] = flat(tf.cast(newest_first_index, tf.int64), cls * 0)
    return packed
