"""Item vocabulary: raw item ids <-> integer ids, with the reserved ids.

The reserved ids are defined here and nowhere else. Every integer item tensor in
tfseqrec uses this layout:

    0  PAD_ID   left padding of short histories; never a candidate, never a label
    1  MASK_ID  the Cloze [MASK] token of BERT4Rec
    2  OOV_ID   a raw id that the vocabulary does not know
    3.. items   ``NUM_RESERVED + i`` is the ``i``-th vocabulary entry

Items are stored most frequent first (ties by raw id), so id order is popularity
order: the popularity baseline is ``ids[:k]``, and log-uniform candidate samplers,
which assume a Zipfian id order, draw sensible negatives. The counts must be of
*training* events: ``splits.prepare`` and the TFX ``SequenceBuilder`` count each
user's training items only, so held-out validation and test targets never raise an
item's popularity (items seen only there get count 0, after all others).

On disk a vocabulary is a plain UTF-8 text file with one ``raw_id<TAB>count`` line
per item, line ``i`` holding id ``NUM_RESERVED + i``. TensorFlow reads it in the
graph with ``tf.lookup.TextFileInitializer`` (see ``lookup_table``), which is how
exported SavedModels carry it as an asset.
"""

import collections
import os

import numpy as np
import pyarrow

PAD_ID = 0
MASK_ID = 1
OOV_ID = 2
NUM_RESERVED = 3
RESERVED_TOKENS = ("[PAD]", "[MASK]", "[OOV]")

VOCAB_FILENAME = "item_vocab.tsv"


class ItemVocabulary:
    """Maps raw string item ids to integer ids and back.

    Args:
        items: raw item ids, in id order (the first gets id ``NUM_RESERVED``).
        counts: optional interaction count of each item, same order.

    Example:

    >>> vocab = ItemVocabulary.from_items(["b", "a", "b", "c", "b", "a"])
    >>> vocab.items
    ['b', 'a', 'c']
    >>> vocab.lookup(["a", "zzz"]).tolist()
    [4, 2]
    >>> vocab.to_raw([3, 5])
    ['b', 'c']
    """

    def __init__(self, items, counts=None):
        items = [str(item) for item in items]
        for item in items:
            if not item or "\t" in item or "\n" in item or "\r" in item:
                raise ValueError(
                    f"item id {item!r} cannot be stored in a vocabulary: raw ids must be "
                    "non-empty and hold no tab or newline"
                )
        self.items = items
        self.counts = np.zeros(len(items), np.int64) if counts is None else np.asarray(counts, np.int64)
        if len(self.counts) != len(items):
            raise ValueError(f"{len(items)} items but {len(self.counts)} counts")
        self._index = {item: NUM_RESERVED + i for i, item in enumerate(items)}
        if len(self._index) != len(items):
            dupes = [item for item, n in collections.Counter(items).items() if n > 1]
            raise ValueError(f"duplicate item ids in vocabulary: {dupes[:5]}")

    @classmethod
    def from_items(cls, raw_items):
        """Builds a vocabulary from a stream of raw ids, most frequent first."""
        uniques, codes = factorize(raw_items)
        return cls.from_counts(
            dict(zip(uniques.tolist(), np.bincount(codes, minlength=len(uniques)).tolist()))
        )

    @classmethod
    def from_counts(cls, counts):
        """Builds a vocabulary from ``{raw_id: count}``: most frequent first, ties by id."""
        ordered = sorted(
            ((str(item), int(n)) for item, n in counts.items()), key=lambda kv: (-kv[1], natural_key(kv[0]))
        )
        return cls([item for item, _ in ordered], [count for _, count in ordered])

    def with_items(self, raw_ids):
        """``(vocabulary, added)``: this vocabulary grown by the raw ids of ``raw_ids`` it lacks.

        Known items keep their ids; the new ones follow in natural order of their raw
        ids, with count 0 (they have no training events).

        >>> grown, added = ItemVocabulary(["b", "a"], [3, 1]).with_items(["a", "10", "9"])
        >>> grown.items, grown.counts.tolist(), added
        (['b', 'a', '9', '10'], [3, 1, 0, 0], ['9', '10'])
        """
        added = sorted({str(raw) for raw in raw_ids if raw not in self}, key=natural_key)
        if not added:
            return self, []
        counts = np.concatenate([self.counts, np.zeros(len(added), np.int64)])
        return ItemVocabulary(self.items + added, counts), added

    @property
    def num_items(self):
        """Number of real items (reserved ids excluded)."""
        return len(self.items)

    @property
    def size(self):
        """Number of ids including the reserved ones: the embedding table's rows."""
        return NUM_RESERVED + len(self.items)

    def __len__(self):
        return len(self.items)

    def __contains__(self, raw_id):
        return str(raw_id) in self._index

    def popularity(self):
        """float32 ``[num_items]``: each item's share of the training interactions.

        The answer to a history with no known item (the export, ``recommend``).

        >>> ItemVocabulary(["a", "b"], [3, 1]).popularity().tolist()
        [0.75, 0.25]
        """
        counts = self.counts.astype(np.float64)
        return (counts / max(counts.sum(), 1.0)).astype(np.float32)

    def lookup(self, raw_ids):
        """Raw ids to int64 ids; unknown ids become ``OOV_ID``."""
        uniques, codes = factorize(raw_ids)
        index = self._index
        ids = np.fromiter(
            (index.get(u, OOV_ID) for u in uniques.tolist()), dtype=np.int64, count=len(uniques)
        )
        return ids[codes]

    def to_raw(self, ids):
        """Int ids to raw ids; reserved ids map to their ``[PAD]``-style token."""
        out = []
        for i in np.asarray(ids).reshape(-1).tolist():
            if 0 <= i < NUM_RESERVED:
                out.append(RESERVED_TOKENS[i])
            elif NUM_RESERVED <= i < self.size:
                out.append(self.items[i - NUM_RESERVED])
            else:
                raise ValueError(f"id {i} is outside the vocabulary (size {self.size})")
        return out

    def save(self, path):
        """Writes the vocabulary; ``path`` may be a directory (uses ``VOCAB_FILENAME``)."""
        path = _resolve(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # Written under a hidden name and renamed when whole: a full disk leaves the
        # previous file, never half of a new one.
        partial = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.partial")
        try:
            with open(partial, "w", encoding="utf-8", newline="\n") as f:
                f.write(self.serialize())
            os.replace(partial, path)
        finally:
            if os.path.exists(partial):
                os.remove(partial)
        return path

    def serialize(self):
        """The file ``save`` writes: one ``raw_id<TAB>count`` line per item, in id order."""
        return "".join(f"{item}\t{count}\n" for item, count in zip(self.items, self.counts.tolist()))

    @classmethod
    def load(cls, path):
        """Reads a vocabulary written by ``save``; errors name the file and line."""
        path = _resolve(path)
        items, counts = [], []
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 2 or not parts[0] or not parts[1].isdigit():
                    raise ValueError(f"{path}:{line_no}: expected 'raw_id<TAB>count', got {line!r}")
                if int(parts[1]) >= 2**63:
                    raise ValueError(f"{path}:{line_no}: count {parts[1]} is beyond int64")
                items.append(parts[0])
                counts.append(int(parts[1]))
        if not items:
            raise ValueError(f"{path}: the vocabulary file is empty")
        return cls(items, counts)

    def lookup_table(self, path=None):
        """A ``tf.lookup.StaticHashTable`` from raw id (tf.string) to id (int64).

        Built from the saved text file so a SavedModel tracks it as an asset.
        Unknown ids map to ``OOV_ID``.
        """
        import tensorflow as tf  # heavy: reading data and vocabularies does not import TF

        if path is None:
            raise ValueError("lookup_table needs the path of the saved vocabulary file")
        initializer = tf.lookup.TextFileInitializer(
            _resolve(path),
            key_dtype=tf.string,
            key_index=0,
            value_dtype=tf.int64,
            value_index=tf.lookup.TextFileIndex.LINE_NUMBER,
            delimiter="\t",
            value_index_offset=NUM_RESERVED,
        )
        return tf.lookup.StaticHashTable(initializer, default_value=OOV_ID)

    def __eq__(self, other):
        return (
            isinstance(other, ItemVocabulary)
            and self.items == other.items
            and np.array_equal(self.counts, other.counts)
        )

    def __repr__(self):
        return f"ItemVocabulary(num_items={self.num_items})"


def factorize(raw_ids):
    """``(uniques, codes)`` of raw ids: ``uniques[codes]`` equals ``raw_ids`` as strings.

    ``uniques`` (an object array of ``str``) is in order of first appearance, ``codes``
    int64. Arrow's hash table does it in linear time: ``np.unique`` on an object array
    sorts Python strings, ~30x slower on a 10^6-event log, and this runs on every
    event of every log the library reads.

    >>> uniques, codes = factorize(["b", "a", "b", 7])
    >>> uniques.tolist(), codes.tolist()
    (['b', 'a', '7'], [0, 1, 0, 2])
    """
    values = (
        raw_ids
        if isinstance(raw_ids, np.ndarray) and raw_ids.dtype == object
        else np.asarray(raw_ids, object)
    )
    values = values.reshape(-1)
    try:
        encoded = pyarrow.array(values, type=pyarrow.string()).dictionary_encode()
    except (pyarrow.ArrowTypeError, pyarrow.ArrowInvalid):  # not all str: ints, numpy strings, ...
        encoded = pyarrow.array([str(v) for v in values.tolist()], type=pyarrow.string()).dictionary_encode()
    if encoded.null_count:
        raise ValueError("raw ids must not be None")
    uniques = encoded.dictionary.to_numpy(zero_copy_only=False).astype(object)
    return uniques, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _resolve(path):
    path = os.fspath(path)
    return os.path.join(path, VOCAB_FILENAME) if os.path.isdir(path) else path


def natural_key(raw_id):
    """Sort key of raw ids: "2" before "10" for numeric ids; strings after numbers, alphabetically."""
    return (0, int(raw_id), "") if raw_id.isdigit() else (1, 0, raw_id)
