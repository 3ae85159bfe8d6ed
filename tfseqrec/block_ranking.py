"""Ranking a block of columns at a time: ``tfseqrec.ranking``'s rules, on the TensorFlow side.

Over a large catalogue the ``[batch, num_items]`` score matrix is the cost: it is
written, then read again by each rule. ``rank_targets_in_blocks`` and
``top_k_in_blocks`` apply the same rules (the same ranks, the same top-k, ties
included) to scores that come a block of columns at a time, used while in cache and
never held whole; ``query_blocks`` makes the blocks of a model that scores by a query
vector and an output table (every ``SequentialRecommender``), and
``rank_targets_by_query`` ranks its targets. ``evaluate`` and the exports use them for
those models.

They are TensorFlow ops (a ``tf.while_loop`` over blocks whose width the batch sets,
ragged histories), used eagerly, in ``tf.function`` graphs and in SavedModels; the
whole-matrix rules they agree with are ``tfseqrec.ranking``'s (``keras.ops``, every
backend), which they call where they share a step.
"""

import collections

import numpy as np
import tensorflow as tf

from tfseqrec.data import vocab
from tfseqrec.ranking import PAD_COLUMN, TopK, known_targets, mark_padding

# Items scored at once by the block functions below: a block of ``[batch, CHUNK_ITEMS]``
# scores is used while it is still in the CPU's cache.
CHUNK_ITEMS = 4096
# Scores a served batch (an export's request, ``recommend``) holds at once: 16 MiB of float32.
# Larger blocks fall out of the CPU's cache, and writing every user's top items slows (the bulk record).
BLOCK_ENTRIES = 2**22


def block_width(batch):
    """Columns a block of ``batch`` rows gets: ``BLOCK_ENTRIES`` scores, at least ``CHUNK_ITEMS`` columns
    (one block for a single history over a catalogue of up to 4 million items)."""
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


def rank_and_top_k_by_query(query, table, targets, history, bias, k, chunk_items=CHUNK_ITEMS):
    """``(ranks, top_k)`` of the scores ``query @ table^T + bias`` in one pass over the
    catalogue: ``rank_targets_by_query``'s ranks and ``top_k_in_blocks``'s best ``k``
    (``TopK``) with ``history`` excluded (``rank_and_top_k_in_blocks``)."""
    block_scores, target_scores = query_blocks(query, table, bias)
    ranks, (values, columns) = rank_and_top_k_in_blocks(
        block_scores, target_scores, tf.shape(table)[0], targets, history, k, chunk_items
    )
    return ranks, TopK(values, columns)


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
    return rank_and_top_k_in_blocks(
        block_scores, target_scores, num_items, targets, history, chunk_items=chunk_items
    )[0]


def rank_and_top_k_in_blocks(
    block_scores, target_scores, num_items, targets, history=None, k=None, chunk_items=CHUNK_ITEMS
):
    """``(ranks, top_k)``: ``rank_targets_in_blocks`` and, when ``k`` is given,
    ``top_k_in_blocks`` of the same scores with ``history`` excluded, in one pass over
    the blocks (each block is scored once); ``top_k`` is ``None`` without ``k``.

    ``evaluate`` ranks its targets and collects what it would recommend (for its
    beyond-accuracy metrics) this way, without scoring the catalogue twice.
    """
    num_items = tf.cast(num_items, tf.int32)
    targets = tf.reshape(tf.cast(targets, tf.int32), [-1])
    batch = tf.shape(targets)[0]
    chunk = tf.cast(chunk_items, tf.int32)
    if k is not None:
        k = tf.clip_by_value(tf.cast(k, tf.int32), 0, num_items)
        chunk = tf.maximum(chunk, k)
    passes = [_rank_pass(target_scores, num_items, targets, history, batch, chunk)]
    if k is not None:
        passes.append(_top_k_pass(num_items, batch, k, history, chunk))
    results = _scan_blocks(block_scores, num_items, chunk, passes)
    return results[0], (results[1] if k is not None else None)


def _rank_pass(target_scores, num_items, targets, history, batch, chunk):
    """The block pass of ``rank_targets_in_blocks`` (see ``_scan_blocks``)."""
    known = known_targets(targets, num_items)
    target_column = tf.clip_by_value(targets - vocab.NUM_RESERVED, 0, num_items - 1)
    target_score = target_scores(target_column)
    rows = tf.boolean_mask(tf.range(batch), known)
    columns = tf.boolean_mask(target_column, known)
    if history is not None:
        history_rows, history_columns = _history_cells(history, num_items)
        rows, columns = tf.concat([rows, history_rows], 0), tf.concat([columns, history_columns], 0)
    rows, columns = _sorted_cells(rows, columns, batch, unique=True)
    bounds = _block_bounds(columns, num_items, chunk)

    def step(i, start, scores, below):
        is_below = scores < target_score[:, None]
        cell_rows = rows[bounds[i] : bounds[i + 1]]
        cells = tf.stack([cell_rows, columns[bounds[i] : bounds[i + 1]] - start], axis=1)
        cells_below = tf.math.unsorted_segment_sum(
            tf.cast(tf.gather_nd(is_below, cells), tf.int32), cell_rows, batch
        )
        return below + count_true(is_below) - cells_below

    def finish(below):
        # The candidates other than the target, less those scoring below it.
        rank = num_items - tf.math.unsorted_segment_sum(tf.ones_like(rows), rows, batch) - below
        rank = tf.where(tf.math.is_finite(target_score), rank, num_items - 1)
        return tf.where(known, rank, num_items)

    return _Pass(tf.zeros([batch], tf.int32), step, tf.TensorShape([None]), finish)


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

    The best ``k`` so far (at first ``k`` empty slots scoring ``-inf``) are merged with
    each block in column order (``tf.math.top_k`` keeps the lower column of a tie, and
    earlier blocks hold the lower columns); a slot still at ``-inf`` at the end is
    padding, whichever column it held.

    Args:
        block_scores: ``(start, stop) -> float32 [batch, stop - start]``.
        num_items: int scalar; batch: int scalar, the rows.
        k: int scalar; capped at ``[0, num_items]``.
        exclude: ``None`` or ids never to return (dense or ragged, as ``exclude_items``).
        chunk_items: columns per block.

    Slots with no recommendable item left hold ``PAD_COLUMN`` and ``-inf``, as ``top_k``'s.
    """
    num_items = tf.cast(num_items, tf.int32)
    k = tf.clip_by_value(tf.cast(k, tf.int32), 0, num_items)
    chunk = tf.maximum(tf.cast(chunk_items, tf.int32), k)
    return _scan_blocks(block_scores, num_items, chunk, [_top_k_pass(num_items, batch, k, exclude, chunk)])[0]


def _top_k_pass(num_items, batch, k, exclude, chunk):
    """The block pass of ``top_k_in_blocks`` (see ``_scan_blocks``)."""
    rows = columns = tf.zeros([0], tf.int32)
    if exclude is not None:
        rows, columns = _sorted_cells(*_history_cells(exclude, num_items), batch, unique=False)
    bounds = _block_bounds(columns, num_items, chunk)

    def step(i, start, scores, state):
        values, best = state
        scores = tf.where(tf.math.is_nan(scores), tf.constant(-np.inf, tf.float32), scores)
        cells = tf.stack(
            [rows[bounds[i] : bounds[i + 1]], columns[bounds[i] : bounds[i + 1]] - start], axis=1
        )
        minus_inf = tf.fill(tf.shape(cells)[:1], tf.constant(-np.inf, tf.float32))
        scores = tf.tensor_scatter_nd_update(scores, cells, minus_inf)
        # The block's own best first, then those merged with the best so far: the block is not
        # copied into a concatenation. The best so far come first, so a tie keeps the lower column.
        block = tf.math.top_k(scores, tf.minimum(k, tf.shape(scores)[1]))
        merged = tf.math.top_k(tf.concat([values, block.values], axis=1), k)
        candidates = tf.concat([best, block.indices + start], axis=1)
        return merged.values, tf.gather(candidates, merged.indices, batch_dims=1)

    init = (
        tf.fill([batch, k], tf.constant(-np.inf, tf.float32)),
        tf.fill([batch, k], tf.constant(PAD_COLUMN, tf.int32)),
    )
    shape = init[0].shape  # [batch, k], k static when the caller's k is (the graph's shape inference)
    any_width = tf.TensorShape([None, None])

    def finish(state):
        return mark_padding(*(tf.ensure_shape(x, shape) for x in state))

    return _Pass(init, step, (any_width, any_width), finish)


# One computation over the blocks of ``_scan_blocks``: its loop state at first, how a block
# updates it (``step(i, start, scores, state)``), the state's shape invariant, and the result
# of the last state (``finish``).
_Pass = collections.namedtuple("_Pass", ["init", "step", "invariant", "finish"])


def _scan_blocks(block_scores, num_items, chunk, passes):
    """Each pass's result, its steps run on every block of ``chunk`` columns, scored once."""
    num_chunks = (num_items + chunk - 1) // chunk

    def body(i, states):
        start = i * chunk
        scores = block_scores(start, tf.minimum(start + chunk, num_items))
        return i + 1, tuple(p.step(i, start, scores, s) for p, s in zip(passes, states))

    _, states = tf.while_loop(
        lambda i, _: i < num_chunks,
        body,
        (tf.constant(0), tuple(p.init for p in passes)),
        shape_invariants=(tf.TensorShape([]), tuple(p.invariant for p in passes)),
    )
    return [p.finish(s) for p, s in zip(passes, states)]


def _block_bounds(columns, num_items, chunk):
    """Where each block's cells start in ``columns`` (sorted): int32 ``[num_chunks + 1]``."""
    num_chunks = (num_items + chunk - 1) // chunk
    return tf.searchsorted(columns, tf.range(num_chunks + 1) * chunk, side="left")


def _flat_ids(item_ids):
    """``(rows, ids)``, int32 ``[n]``: each id of dense ``[batch, length]`` or ragged ids, with its row."""
    if isinstance(item_ids, tf.RaggedTensor):
        return tf.cast(item_ids.value_rowids(), tf.int32), tf.cast(item_ids.flat_values, tf.int32)
    ids = tf.cast(item_ids, tf.int32)
    rows = tf.broadcast_to(tf.range(tf.shape(ids)[0])[:, None], tf.shape(ids))
    return tf.reshape(rows, [-1]), tf.reshape(ids, [-1])


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
