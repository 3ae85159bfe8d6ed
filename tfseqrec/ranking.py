"""Ranking rules, written once: exclusion, the rank of a target, top-k, NDCG/HR/MRR gains.

Every path that ranks goes through these functions: validation inside ``fit``
(``SequentialRecommender.test_step`` and the ``tfseqrec.metrics`` Keras metrics),
``tfseqrec.evaluation.evaluate`` (as one graph per batch shape),
``recommend`` of every model, the SavedModel signatures of ``tfseqrec.export`` and the
TFX ``RankingEvaluator`` (through the export's ``rank_targets`` signature). The
whole-matrix rules (``known_targets``, ``exclude_items``, ``ranks``, ``rank_targets``,
``top_k``, the gains) are ``keras.ops``: the same code on every Keras backend (the
validation metrics of a model trained on JAX), and TensorFlow ops on the TensorFlow
backend, so they work eagerly, inside ``tf.function`` and in saved graphs. This module
imports no TensorFlow.

Over a large catalogue the ``[batch, num_items]`` score matrix is the cost: the same
rules applied a block of columns at a time (TensorFlow's ``tf.while_loop``, for
``evaluate``, the exports and ``recommend`` on the TensorFlow backend) live in
``tfseqrec.block_ranking``.

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


def mark_padding(values, columns):
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
    return TopK(*mark_padding(values, indices))


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
