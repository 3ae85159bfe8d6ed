"""Ranking rules, written once: exclusion, the rank of a target, top-k, NDCG/HR/MRR gains.

Every path that ranks goes through these functions: validation inside ``fit``
(``SequentialRecommender.test_step`` and the ``tfseqrec.metrics`` Keras metrics),
``tfseqrec.evaluation.evaluate`` (as one graph per batch shape),
``recommend`` of every model, the SavedModel signatures of ``tfseqrec.export`` and the
TFX ``RankingEvaluator`` (through the export's ``rank_targets`` signature). The
whole-matrix rules (``known_targets``, ``exclude_items``, ``ranks``, ``rank_targets``,
``top_k``, the gains) are ``keras.ops``: the same code on every Keras backend (the
validation metrics of a model trained on JAX), and TensorFlow ops on the TensorFlow
backend, so they work eagerly, inside ``tf.function`` and in saved graphs. The block
functions below are TensorFlow's (``tf.while_loop`` over blocks of columns).

Over a large catalogue the ``[batch, num_items]`` score matrix is the cost: it is
written, then read again by each rule. ``rank_targets_in_blocks`` and
``top_k_in_blocks`` apply the same rules (the same ranks, the same top-k, ties
included) to scores that come a block of columns at a time, used while in cache and
never held whole; ``query_blocks`` makes the blocks of a model that scores by a query
vector and an output table (every ``SequentialRecommender``), and
``rank_targets_by_query`` ranks its targets. ``evaluate`` and the exports use them for
those models.

Layout: ``scores`` are ``[batch, num_items]``, column ``j`` for vocabulary id
``j + vocab.NUM_RESERVED``; targets and histories are vocabulary ids. The rules:

- **Candidates** are the ``num_items`` real items. Reserved ids (padding, [MASK],
  OOV) are never candidates: they have no column.
- **Exclusion** (``exclude_items``) gives excluded columns a score of ``-inf``. Ids
  that are reserved or outside the catalogue are ignored, so histories may hold
  padding anywhere.
- **A target that also occurs in the history stays a candidate**: ``rank_targets``
  excludes the rest of the history and keeps the target's own score. (Serving has no
  target and excludes the whole history: ``top_k``.)
- **Rank** (``ranks``): the 0-based number of other candidates scoring at least as
  high as the target. Ties count against the target, so a model that scores every
  item alike ranks the target last, not first.
- **Non-finite scores never help the target.** A target whose own score is NaN or
  +-inf ranks last: ``num_items - 1``. A NaN score of another item counts as at least
  the target's (it is ahead of the target). ``+inf`` is ahead by ordering; ``-inf``
  is the exclusion mark and is behind any finite target score, as ordering says.
- **A target outside the vocabulary** (``OOV_ID``, another reserved id, an id past
  the catalogue; an unknown raw id looks up to ``OOV_ID``) cannot be ranked: it gets
  rank ``num_items``, one past the last candidate, so it is a miss at every K and
  adds ``1 / (num_items + 1)`` to MRR. It still counts as a case; callers report how
  many there were as ``num_unknown_targets``.
- **Gains**: NDCG@K is ``1 / log2(rank + 2)`` when ``rank < K`` else 0 (one relevant
  item, so the ideal DCG is 1); HR@K is ``rank < K`` (Recall@K with one target); MRR
  is ``1 / (rank + 1)``.
- **Top-k** (``top_k``): best first, ties by lower column (``tf.math.top_k``); ``k`` is
  capped at ``num_items``. Only items that can be recommended fill a slot: an
  excluded item (the history) is never returned, nor an item the model cannot score
  (NaN or ``-inf``). When fewer such items remain than ``k``, the last slots are
  padding: column ``PAD_COLUMN`` (-1) and score ``-inf``, never an item's
  (``vocabulary_ids`` makes it ``vocab.PAD_ID``; the exports a raw id ``""`` or -1).

Example:

>>> scores = [[0.5, 0.9, 0.5, float("nan")]]    # ids 3, 4, 5, 6
>>> int(ranks(scores, [3])[0])                  # id 6 (NaN) and id 4 are ahead, id 5 ties
3
>>> int(rank_targets(scores, [4], history=[[4, 6, 0]])[0])  # 6 excluded, 4 is the target
0
>>> int(ranks(scores, [6])[0]), int(ranks(scores, [2])[0])  # NaN target; OOV target
(3, 4)
>>> metrics_from_ranks([0, 3], ks=(1,))
{'ndcg@1': 0.5, 'hr@1': 0.5, 'mrr': 0.625}
"""

import collections

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from tfseqrec.data import vocab

DEFAULT_KS = (1, 5, 10, 20)
# The column of a top-k slot that holds no item (fewer recommendable items than k).
PAD_COLUMN = -1


def known_targets(targets, num_items):
    """Whether each target id is a candidate (a real item of the catalogue): bool ``[batch]``."""
    column = ops.reshape(ops.cast(targets, "int32"), [-1]) - vocab.NUM_RESERVED
    return ops.logical_and(column >= 0, column < ops.cast(num_items, "int32"))


def exclude_items(scores, item_ids, keep=None):
    """``scores`` ``[batch, num_items]`` with each row's ``item_ids`` set to ``-inf``.

    Args:
        scores: float ``[batch, num_items]``.
        item_ids: int vocabulary ids per row: a dense ``[batch, length]`` tensor (any
            padding, anywhere) or, on the TensorFlow backend, a ``tf.RaggedTensor``
            ``[batch, (length)]`` (padded with ``PAD_ID`` first). Reserved ids and ids
            past the catalogue are ignored.
        keep: optional int ``[batch]``: one id per row that keeps its score even when
            it is in ``item_ids`` (the target of an evaluation case).

    A scatter, not a one-hot ``[batch, length, num_items]`` tensor, so it costs
    O(batch * length); ids that are not excluded go to a spare column that is dropped
    afterwards, so every shape is static.
    """
    scores = ops.convert_to_tensor(scores)
    if hasattr(item_ids, "to_tensor"):  # a tf.RaggedTensor
        item_ids = item_ids.to_tensor(vocab.PAD_ID)
    ids = ops.cast(item_ids, "int32")
    rows = ops.reshape(
        ops.broadcast_to(ops.arange(ops.shape(ids)[0], dtype="int32")[:, None], ops.shape(ids)), [-1]
    )
    ids = ops.reshape(ids, [-1])
    num_items = ops.shape(scores)[1]
    column = ids - vocab.NUM_RESERVED
    valid = ops.logical_and(column >= 0, column < num_items)
    if keep is not None:
        keep = ops.reshape(ops.cast(keep, "int32"), [-1])
        valid = ops.logical_and(valid, ops.not_equal(ids, ops.take(keep, rows)))
    column = ops.where(valid, column, num_items)
    padded = ops.pad(scores, [[0, 0], [0, 1]])
    minus_inf = ops.full(ops.shape(column), -np.inf, dtype=scores.dtype)
    return ops.scatter_update(padded, ops.stack([rows, column], axis=1), minus_inf)[:, :-1]


def _flat_ids(item_ids):
    """``(rows, ids)``, int32 ``[n]``: each id of dense ``[batch, length]`` or ragged ids, with its row."""
    if isinstance(item_ids, tf.RaggedTensor):
        return tf.cast(item_ids.value_rowids(), tf.int32), tf.cast(item_ids.flat_values, tf.int32)
    ids = tf.cast(item_ids, tf.int32)
    rows = tf.broadcast_to(tf.range(tf.shape(ids)[0])[:, None], tf.shape(ids))
    return tf.reshape(rows, [-1]), tf.reshape(ids, [-1])


def ranks(scores, targets):
    """0-based rank of each target among all candidates: int32 ``[batch]``.

    ``scores`` already carry the exclusions (``-inf``); see the module docstring for
    ties, non-finite scores and unknown targets.
    """
    scores = ops.cast(scores, "float32")
    num_items = ops.shape(scores)[1]
    column = ops.reshape(ops.cast(targets, "int32"), [-1]) - vocab.NUM_RESERVED
    known = known_targets(targets, num_items)
    target_score = ops.take_along_axis(scores, ops.clip(column, 0, num_items - 1)[:, None], axis=1)
    ahead = ops.logical_or(scores >= target_score, ops.isnan(scores))
    # A finite target counts itself once among the scores at least as high.
    rank = ops.sum(ops.cast(ahead, "int32"), axis=1) - 1
    rank = ops.where(ops.isfinite(target_score[:, 0]), rank, num_items - 1)
    return ops.cast(ops.where(known, rank, num_items), "int32")


def rank_targets(scores, targets, history=None):
    """Ranks of ``targets`` after excluding each row's ``history``, the target kept.

    Args:
        scores: float ``[batch, num_items]``, the model's scores (no exclusions yet).
        targets: int vocabulary ids ``[batch]``.
        history: ``None`` (nothing excluded) or the ids to exclude, dense or ragged as
            in ``exclude_items``; a history item equal to the target stays a candidate.

    Returns:
        int32 ``[batch]``.
    """
    if history is not None:
        scores = exclude_items(scores, history, keep=targets)
    return ranks(scores, targets)


# Items scored at once by the block functions below: a block of ``[batch, CHUNK_ITEMS]``
# scores is used while it is still in the CPU's cache.
CHUNK_ITEMS = 4096
# Scores a served batch (an export's request, ``recommend``) holds at once: 64 MiB of float32.
BLOCK_ENTRIES = 2**24


def block_width(batch):
    """Columns a block of ``batch`` rows gets: ``BLOCK_ENTRIES`` scores, at least ``CHUNK_ITEMS`` columns
    (one block for a single history over a catalogue of up to 16 million items)."""
    return tf.maximum(CHUNK_ITEMS, BLOCK_ENTRIES // tf.maximum(batch, 1))


def query_blocks(query, table, bias=None):
    """``(block_scores, target_scores)`` of the scores ``query @ table^T + bias``, for the
    block functions: a model's ``scores_from_hidden`` arithmetic (a matmul in the table's
    dtype, plus the bias, cast to float32) over columns ``[start, stop)``.

    ``target_scores(columns)`` scores each row's own columns (``[batch]`` or
    ``[batch, k]``; the same shape back) by the same arithmetic, a dot product per cell.
    """
    table = tf.convert_to_tensor(table)
    query = tf.cast(query, table.dtype)

    def finish(scores, columns_bias):
        return tf.cast(scores if bias is None else scores + columns_bias, tf.float32)

    def block_scores(start, stop):
        scores = tf.matmul(query, table[start:stop], transpose_b=True)
        return finish(scores, None if bias is None else bias[start:stop])

    def target_scores(columns):
        scores = tf.einsum("bd,b...d->b...", query, tf.gather(table, columns))
        return finish(scores, None if bias is None else tf.gather(bias, columns))

    return block_scores, target_scores


def rank_targets_by_query(query, table, targets, history=None, bias=None, chunk_items=CHUNK_ITEMS):
    """``rank_targets`` of the scores ``query @ table^T + bias``, never holding them all.

    The scores ``scores_from_hidden`` computes (``query_blocks``), ranked by
    ``rank_targets_in_blocks``: memory is ``[batch, chunk_items]`` whatever the
    catalogue, and the scores never travel to main memory and back (the whole-matrix
    path reads them about ten times; ``benchmarks/scale.py`` measures it).

    Args:
        query: float ``[batch, d]``.
        table: float ``[num_items, d]``, row ``j`` for vocabulary id ``j + NUM_RESERVED``.
        targets: int vocabulary ids ``[batch]``.
        history: ``None`` or the ids to exclude, dense or ragged as in ``exclude_items``;
            a history item equal to the target stays a candidate.
        bias: ``None`` or float ``[num_items]``.
        chunk_items: items scored at once.

    Returns:
        int32 ``[batch]``.
    """
    block_scores, target_scores = query_blocks(query, table, bias)
    return rank_targets_in_blocks(
        block_scores, target_scores, tf.shape(table)[0], targets, history, chunk_items
    )


def rank_targets_in_blocks(
    block_scores, target_scores, num_items, targets, history=None, chunk_items=CHUNK_ITEMS
):
    """``rank_targets`` of scores that come a block of columns at a time.

    How: count, over every item, the scores below the target's (``s < t``, false for a
    NaN, which so counts as ahead, as in ``ranks``), less those of the target's own
    column and of every distinct history item, read from the same blocks (so that the
    two counts agree to the last bit); the rank is the number of the other candidates
    less that count.

    Args:
        block_scores: ``(start, stop) -> float32 [batch, stop - start]``, the scores of
            columns ``start`` to ``stop``.
        target_scores: ``(columns [batch]) -> float32 [batch]``, each row's score at
            its column as the blocks compute it (the column of a target outside the
            vocabulary is clipped into range; its score is not used).
        num_items: int scalar.
        targets, history: as ``rank_targets``.
        chunk_items: columns per block.

    Returns:
        int32 ``[batch]``.
    """
    num_items = tf.cast(num_items, tf.int32)
    targets = tf.reshape(tf.cast(targets, tf.int32), [-1])
    batch = tf.shape(targets)[0]
    known = known_targets(targets, num_items)
    target_column = tf.clip_by_value(targets - vocab.NUM_RESERVED, 0, num_items - 1)
    target_score = target_scores(target_column)
    rows = tf.boolean_mask(tf.range(batch), known)
    columns = tf.boolean_mask(target_column, known)
    if history is not None:
        history_rows, history_columns = _history_cells(history, num_items)
        rows, columns = tf.concat([rows, history_rows], 0), tf.concat([columns, history_columns], 0)
    rows, columns = _sorted_cells(rows, columns, batch, unique=True)
    chunk = tf.cast(chunk_items, tf.int32)
    num_chunks = (num_items + chunk - 1) // chunk
    bounds = tf.searchsorted(columns, tf.range(num_chunks + 1) * chunk, side="left")

    def count_block(i, below):
        start = i * chunk
        is_below = block_scores(start, tf.minimum(start + chunk, num_items)) < target_score[:, None]
        cell_rows = rows[bounds[i] : bounds[i + 1]]
        cells = tf.stack([cell_rows, columns[bounds[i] : bounds[i + 1]] - start], axis=1)
        cells_below = tf.math.unsorted_segment_sum(
            tf.cast(tf.gather_nd(is_below, cells), tf.int32), cell_rows, batch
        )
        return i + 1, below + count_true(is_below) - cells_below

    _, below = tf.while_loop(
        lambda i, _: i < num_chunks, count_block, (tf.constant(0), tf.zeros([batch], tf.int32))
    )
    # The candidates other than the target, less those scoring below it.
    rank = num_items - tf.math.unsorted_segment_sum(tf.ones_like(rows), rows, batch) - below
    rank = tf.where(tf.math.is_finite(target_score), rank, num_items - 1)
    return tf.where(known, rank, num_items)


# Columns summed in uint8 before the int32 sum (at most 128 ones: no overflow).
COUNT_GROUP = 128


def count_true(flags):
    """The number of true entries in each row of a bool ``[batch, width]``: int32 ``[batch]``.

    Where ``width`` is a multiple of ``COUNT_GROUP`` the flags are cast to one byte and
    summed in groups of 128 before the int32 sum: a block's counts then move a quarter
    of the bytes of an int32 cast, the memory traffic that sets the cost of ranking a
    block (at 1,024 x 4,096 the count takes 0.31 s against 0.44 s a million items,
    beside the matmul's 0.22 s; ``benchmarks/ranking.py``). Other widths (a catalogue's
    last block) sum an int32 cast.
    """
    shape = tf.shape(flags)

    def grouped():
        groups = tf.reshape(tf.cast(flags, tf.uint8), [shape[0], -1, COUNT_GROUP])
        return tf.reduce_sum(tf.cast(tf.reduce_sum(groups, axis=2), tf.int32), axis=1)

    def plain():
        return tf.reduce_sum(tf.cast(flags, tf.int32), axis=1)

    return tf.cond(tf.equal(shape[1] % COUNT_GROUP, 0), grouped, plain)


def top_k_in_blocks(block_scores, num_items, batch, k, exclude=None, chunk_items=CHUNK_ITEMS):
    """``top_k`` of scores that come a block of columns at a time: the same values and
    columns, ties included, holding ``[batch, chunk_items + k]`` scores at most.

    The best ``k`` so far are merged with each block in column order (``tf.math.top_k``
    keeps the lower column of a tie, and earlier blocks hold the lower columns); a
    block is at least ``k`` columns wide, so the first block fills all ``k`` slots.

    Args:
        block_scores: ``(start, stop) -> float32 [batch, stop - start]``.
        num_items: int scalar; batch: int scalar, the rows.
        k: int scalar; capped at ``[0, num_items]``.
        exclude: ``None`` or ids never to return (dense or ragged, as ``exclude_items``).
        chunk_items: columns per block (at least ``k``).

    Slots with no recommendable item left hold ``PAD_COLUMN`` and ``-inf``, as ``top_k``'s.
    """
    num_items = tf.cast(num_items, tf.int32)
    k = tf.clip_by_value(tf.cast(k, tf.int32), 0, num_items)
    chunk = tf.maximum(tf.cast(chunk_items, tf.int32), k)
    rows = columns = tf.zeros([0], tf.int32)
    if exclude is not None:
        rows, columns = _sorted_cells(*_history_cells(exclude, num_items), batch, unique=False)
    num_chunks = (num_items + chunk - 1) // chunk
    bounds = tf.searchsorted(columns, tf.range(num_chunks + 1) * chunk, side="left")

    def block(i):
        start = i * chunk
        scores = block_scores(start, tf.minimum(start + chunk, num_items))
        scores = tf.where(tf.math.is_nan(scores), tf.constant(-np.inf, tf.float32), scores)
        cells = tf.stack(
            [rows[bounds[i] : bounds[i + 1]], columns[bounds[i] : bounds[i + 1]] - start], axis=1
        )
        minus_inf = tf.fill(tf.shape(cells)[:1], tf.constant(-np.inf, tf.float32))
        return tf.tensor_scatter_nd_update(scores, cells, minus_inf), start

    def merge(i, values, best):
        scores, start = block(i)
        merged = tf.math.top_k(tf.concat([values, scores], axis=1), k)
        candidates = tf.concat(
            [best, tf.broadcast_to(tf.range(start, start + tf.shape(scores)[1]), tf.shape(scores))], axis=1
        )
        return i + 1, merged.values, tf.gather(candidates, merged.indices, batch_dims=1)

    first, _ = block(0)
    values, best = tf.math.top_k(first, k)
    shape = values.shape  # [batch, k], k static when the caller's k is
    any_width = tf.TensorShape([None, None])  # inside the loop k is a tensor
    _, values, best = tf.while_loop(
        lambda i, *_: i < num_chunks,
        merge,
        (tf.constant(1), values, best),
        shape_invariants=(tf.TensorShape([]), any_width, any_width),
    )
    return _mark_padding(tf.ensure_shape(values, shape), tf.ensure_shape(best, shape))


def _mark_padding(values, columns):
    """``(values, columns)`` with ``PAD_COLUMN`` where a slot holds no recommendable item
    (its score is ``-inf``: excluded, or the model scored NaN or ``-inf``)."""
    padding = ops.equal(values, -np.inf)
    return values, ops.where(padding, ops.cast(PAD_COLUMN, columns.dtype), columns)


def vocabulary_ids(columns):
    """Vocabulary ids (int64) of top-k ``columns``: ``column + NUM_RESERVED``, and
    ``vocab.PAD_ID`` (0, never an item) for a ``PAD_COLUMN`` slot. NumPy in, NumPy out."""
    columns = np.asarray(columns, np.int64)
    return np.where(columns == PAD_COLUMN, vocab.PAD_ID, columns + vocab.NUM_RESERVED)


def drop_padding(ids, scores):
    """NumPy ``(ids, scores)`` ``[batch, k]`` less the trailing slots that are padding
    (``vocab.PAD_ID``) in every row: at most the items that can be recommended."""
    ids, scores = np.asarray(ids), np.asarray(scores)
    width = int((ids != vocab.PAD_ID).sum(axis=1).max(initial=0))
    return ids[:, :width], scores[:, :width]


def _history_cells(history, num_items):
    """``(rows, columns)`` int32 of the ids in ``history`` that are items of the catalogue."""
    rows, ids = _flat_ids(history)
    columns = ids - vocab.NUM_RESERVED
    valid = (columns >= 0) & (columns < num_items)
    return tf.boolean_mask(rows, valid), tf.boolean_mask(columns, valid)


def _sorted_cells(rows, columns, batch, unique):
    """The cells sorted by column (then row), each once when ``unique``."""
    width = tf.cast(batch, tf.int64)
    keys = tf.cast(columns, tf.int64) * width + tf.cast(rows, tf.int64)
    keys = tf.sort(tf.unique(keys).y if unique else keys)
    return tf.cast(keys % width, tf.int32), tf.cast(keys // width, tf.int32)


def top_k(scores, k, exclude=None):
    """The ``k`` best columns of each row: ``(values, columns)``, float32 and int32 ``[batch, k]``.

    Args:
        scores: float ``[batch, num_items]``.
        k: int scalar; capped at ``[0, num_items]``.
        exclude: ``None`` or ids never to return (dense or ragged, as ``exclude_items``).

    Columns are ``id - NUM_RESERVED``; a slot with no recommendable item left (the
    row's excluded items and those the model scored NaN or ``-inf`` are never
    returned) holds ``PAD_COLUMN`` and ``-inf``, after every item.
    """
    scores = ops.cast(scores, "float32")
    if exclude is not None:
        scores = exclude_items(scores, exclude)
    scores = ops.where(ops.isnan(scores), -np.inf, scores)
    num_items = ops.shape(scores)[1]
    if isinstance(k, int) and isinstance(num_items, int):
        k = min(max(k, 0), num_items)  # a static k (JAX needs one)
    else:
        k = ops.clip(ops.cast(k, "int32"), 0, num_items)
    values, indices = ops.top_k(scores, k)
    return TopK(*_mark_padding(values, indices))


# What ``top_k`` returns: ``(values, indices)``, by position or by name (as ``tf.math.top_k``).
TopK = collections.namedtuple("TopK", ["values", "indices"])


# --- gains ---------------------------------------------------------------------------


def ndcg_gain(ranks, k, dtype="float32"):
    """NDCG@K of each case with one relevant item: ``1 / log2(rank + 2)`` if ``rank < K`` else 0."""
    r = ops.cast(ranks, dtype)
    gain = ops.log(ops.convert_to_tensor(2.0, dtype)) / ops.log(r + 2.0)
    return ops.where(r < k, gain, ops.zeros_like(gain))


def hit_gain(ranks, k, dtype="float32"):
    """HR@K (Recall@K with one relevant item) of each case: 1 if ``rank < K`` else 0."""
    return ops.cast(ops.cast(ranks, dtype) < k, dtype)


def reciprocal_rank(ranks, dtype="float32"):
    """``1 / (rank + 1)`` of each case (its mean is MRR)."""
    return 1.0 / (ops.cast(ranks, dtype) + 1.0)


# The means of ``metrics_from_ranks``: float64, except on JAX, which computes in 32 bits
# unless its x64 mode is on.
MEAN_DTYPE = "float32" if keras.backend.backend() == "jax" else "float64"


def metrics_from_ranks(ranks, ks=DEFAULT_KS, prefix=""):
    """Mean NDCG@K, HR@K and MRR of 0-based ranks, as Python floats (float64 means).

    Returns:
        ``{f"{prefix}ndcg@{k}", f"{prefix}hr@{k}" for k in ks} | {f"{prefix}mrr"}``.
    """
    r = ops.convert_to_tensor(np.asarray(ranks, np.int32).reshape(-1))
    out = {}
    for k in ks:
        out[f"{prefix}ndcg@{k}"] = float(ops.mean(ndcg_gain(r, k, MEAN_DTYPE)))
        out[f"{prefix}hr@{k}"] = float(ops.mean(hit_gain(r, k, MEAN_DTYPE)))
    out[f"{prefix}mrr"] = float(ops.mean(reciprocal_rank(r, MEAN_DTYPE)))
    return out
