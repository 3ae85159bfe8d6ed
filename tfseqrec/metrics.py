"""Streaming full-catalogue ranking metrics as Keras metrics, on top of ``tfseqrec.ranking``.

Each metric takes the true next item and a score for every item of the catalogue:

    y_true: int ``[batch]`` vocabulary ids (``>= vocab.NUM_RESERVED``)
    y_pred: float ``[batch, num_items]`` scores, column ``j`` for id ``j + NUM_RESERVED``

Ranks and gains are ``tfseqrec.ranking``'s: the rank of the true item is the number of
*other* items scoring at least as high (ties count against it, so a model that scores
everything equally ranks last, not first); a NaN or infinite score of the true item
ranks it last, a NaN score of another item puts that item ahead of it, and a true item
outside the vocabulary is a miss (rank ``num_items``). Items to exclude (already seen,
the true item excepted) must carry ``-inf``: ``ranking.exclude_items(scores, history,
keep=y_true)``. With one relevant item, HR@K equals Recall@K and NDCG@K is
``1 / log2(rank + 2)`` when ``rank < K``.
"""

import keras

from tfseqrec import ranking


def ranks(y_true, y_pred):
    """``ranking.ranks(y_pred, y_true)`` in Keras argument order: int32 ``[batch]``."""
    return ranking.ranks(y_pred, y_true)


class _RankingMetric(keras.metrics.Mean):
    def __init__(self, name, dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(self.from_ranks(ranks(y_true, y_pred)), sample_weight=sample_weight)


@keras.saving.register_keras_serializable(package="tfseqrec")
class NDCG(_RankingMetric):
    """NDCG@K with one relevant item: ``1 / log2(rank + 2)`` if ``rank < K`` else 0.

    Example:

    >>> m = NDCG(k=2)
    >>> m.update_state([3], [[0.1, 0.9, 0.5]])  # true item ranks 2nd of 3
    >>> round(float(m.result()), 4)
    0.0
    >>> m = NDCG(k=3); m.update_state([3], [[0.1, 0.9, 0.5]])
    >>> round(float(m.result()), 4)  # rank 2 -> 1 / log2(4)
    0.5
    """

    def __init__(self, k=10, name=None, dtype=None):
        super().__init__(name=name or f"ndcg_{k}", dtype=dtype)
        self.k = k

    def from_ranks(self, r):
        return ranking.ndcg_gain(r, self.k)

    def get_config(self):
        return {**super().get_config(), "k": self.k}


@keras.saving.register_keras_serializable(package="tfseqrec")
class HitRate(_RankingMetric):
    """HR@K (Recall@K with one relevant item): 1 if ``rank < K`` else 0."""

    def __init__(self, k=10, name=None, dtype=None):
        super().__init__(name=name or f"hr_{k}", dtype=dtype)
        self.k = k

    def from_ranks(self, r):
        return ranking.hit_gain(r, self.k)

    def get_config(self):
        return {**super().get_config(), "k": self.k}


@keras.saving.register_keras_serializable(package="tfseqrec")
class MRR(_RankingMetric):
    """Mean reciprocal rank over the whole catalogue: ``1 / (rank + 1)``."""

    def __init__(self, name="mrr", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def from_ranks(self, r):
        return ranking.reciprocal_rank(r)


def default_metrics(ks=(10,)):
    """NDCG@K and HR@K for each K, plus MRR: the validation metrics used in ``fit``."""
    return [m for k in ks for m in (NDCG(k), HitRate(k))] + [MRR()]
