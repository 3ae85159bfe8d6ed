"""Beyond-accuracy metrics: what a model recommends, not only where it ranks the target.

``evaluate`` collects each case's top-K list in the same pass that ranks its target
(``block_ranking.rank_and_top_k_in_blocks``: the catalogue is scored once) and feeds it to
``BeyondAccuracy``; the breakdowns of accuracy are cut from the same ranks. The
definitions, for a case ``u`` (a user's test event) whose list ``L_u`` holds the
recommendable items among its top K (the seen items excluded as the ranking excludes
them), with training counts from ``ItemPopularity``:

- ``coverage@K``: the share of the catalogue in at least one list.
- ``arp@K``: average recommended popularity, the mean over cases of the mean training
  count of ``L_u``'s items (RecTools' ``AvgRecPopularity``); ``arp_ratio@K`` divides it
  by the mean training count of the cases' targets (1: as popular as what people did).
- ``novelty@K``: mean self-information of the recommended items, ``-log2(users(i) /
  n_users)``, ``users(i)`` the training users who had item ``i`` (at least 1), ``n_users``
  the training users (RecTools' ``MeanInvUserFreq``).
- ``diversity@K``: intra-list diversity, the mean over the list's pairs of ``1 - cos``
  of the items' vectors (attributes or text); only when the model has them, K >= 2.
- ``serendipity@K``: RecTools' ``Serendipity``: the mean over the list of
  ``max(p(r) - pu(i), 0) * rel(i)``, ``p(r) = (n + 1 - r) / n`` at 1-based rank ``r``,
  ``pu(i) = (n + 1 - poprank(i)) / n`` (``poprank``: 1 for the largest training count,
  counts that tie share a rank; 0 for an item never trained on), ``n`` the catalogue's
  items, ``rel(i)`` 1 for the case's target.
- ``by_history_length`` and ``by_target_popularity``: NDCG, HR and MRR of the cases whose
  history length, or whose target's popularity group, falls in each bucket (``head``: the
  most trained items that hold the first third of the training events, ``torso`` the
  next third, ``tail`` the rest, items never trained on and unknown targets included).

Every mean is over the cases with a non-empty list. NumPy only.
"""

import dataclasses

import numpy as np

from tfseqrec.data import vocab
from tfseqrec.ranking import PAD_COLUMN, metrics_from_ranks

# What ``evaluate(metrics=...)`` and ``tfseqrec evaluate --metrics`` take, beside "accuracy".
METRICS = ("coverage", "popularity", "novelty", "diversity", "serendipity", "by_length", "by_popularity")
# The names of ``METRICS`` cut from the ranks alone (the others read the top-K lists).
BREAKDOWNS = ("by_length", "by_popularity")
# Histories of these lengths and up (to the next edge) form a ``by_history_length`` bucket.
LENGTH_EDGES = (1, 5, 10, 20, 50, 200)
POPULARITY_GROUPS = ("head", "torso", "tail")


@dataclasses.dataclass(frozen=True)
class ItemPopularity:
    """Training counts by item column (``id - NUM_RESERVED``).

    ``events``: training events of each item; ``users``: training users who had it;
    ``num_users``: training users with at least one event.
    """

    events: np.ndarray
    users: np.ndarray
    num_users: int

    @classmethod
    def of(cls, train, num_items):
        """From training ``Sequences`` (vocabulary ids) over a catalogue of ``num_items``.

        >>> from tfseqrec.data.splits import Sequences
        >>> train = Sequences(np.array(["a", "b"]), np.array([3, 3, 4, 3]), np.array([0, 3, 4]))
        >>> p = ItemPopularity.of(train, 3)
        >>> p.events.tolist(), p.users.tolist(), p.num_users
        ([3, 1, 0], [2, 1, 0], 2)
        """
        values = np.asarray(train.values, np.int64)
        columns = values - vocab.NUM_RESERVED
        known = (columns >= 0) & (columns < num_items)
        rows = np.repeat(np.arange(len(train.row_splits) - 1), np.diff(train.row_splits))
        events = np.bincount(columns[known], minlength=num_items)
        pairs = np.unique(np.stack([rows[known], columns[known]], 1), axis=0)
        users = np.bincount(pairs[:, 1], minlength=num_items) if len(pairs) else np.zeros(num_items, int)
        num_users = int((np.diff(train.row_splits) > 0).sum())
        return cls(events.astype(np.int64), users.astype(np.int64), num_users)

    def rank(self):
        """``poprank`` of each item (1: the most trained; ties share; 0: never trained on)."""
        distinct = np.unique(self.events[self.events > 0])[::-1]
        ranks = np.zeros(len(self.events), np.int64)
        trained = self.events > 0
        ranks[trained] = np.searchsorted(-distinct, -self.events[trained]) + 1
        return ranks

    def groups(self):
        """Each item's popularity group: 0 head, 1 torso, 2 tail (see the module docstring)."""
        order = np.argsort(-self.events, kind="stable")
        counts = self.events[order].astype(np.float64)
        before = (np.cumsum(counts) - counts) / max(counts.sum(), 1.0)
        group = np.where(before < 1 / 3, 0, np.where(before < 2 / 3, 1, 2))
        group[counts == 0] = 2
        out = np.empty(len(order), np.int64)
        out[order] = group
        return out


class BeyondAccuracy:
    """Accumulates the beyond-accuracy metrics of ``metrics`` over batches of top-K lists.

    Args:
        ks: the cut-offs; the lists fed to ``update`` are at least ``max(ks)`` long.
        popularity: ``ItemPopularity`` of the training data.
        metrics: names of ``METRICS``.
        item_vectors: float ``[num_items, d]`` for ``diversity``, or ``None`` (no diversity).
    """

    def __init__(self, ks, popularity, metrics, item_vectors=None):
        unknown = sorted(set(metrics) - set(METRICS))
        if unknown:
            raise ValueError(f"unknown metrics {unknown}; choose from {['accuracy', *METRICS]}")
        self.ks, self.popularity, self.metrics = tuple(sorted(ks)), popularity, set(metrics)
        num_items = len(popularity.events)
        self.vectors = None
        if item_vectors is not None and "diversity" in self.metrics:
            vectors = np.asarray(item_vectors, np.float64)
            if vectors.shape[0] != num_items:
                raise ValueError(f"item_vectors has {vectors.shape[0]} rows for {num_items} items")
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            self.vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        self.seen = {k: np.zeros(num_items, bool) for k in self.ks}
        self.sums = {}
        self.cases = dict.fromkeys(self.ks, 0)
        self.pairs_cases = dict.fromkeys(self.ks, 0)
        self.self_information = -np.log2(np.maximum(popularity.users, 1) / max(popularity.num_users, 1))
        self.unexpected = np.where(
            popularity.events > 0, (num_items + 1 - popularity.rank()) / num_items, 0.0
        )

    @property
    def top(self):
        """The length of the lists ``update`` needs."""
        return max(self.ks)

    def update(self, columns, targets):
        """Adds a batch: ``columns`` int ``[batch, >= top]`` (``PAD_COLUMN`` for an empty
        slot), ``targets`` the cases' vocabulary ids ``[batch]``."""
        columns = np.asarray(columns, np.int64)
        target_columns = np.asarray(targets, np.int64) - vocab.NUM_RESERVED
        n = len(self.popularity.events)
        for k in self.ks:
            top = columns[:, :k]
            valid = top != PAD_COLUMN
            safe = np.where(valid, top, 0)
            self.seen[k][top[valid]] = True
            self.cases[k] += int(valid.any(axis=1).sum())
            rank = np.arange(1, k + 1)[None, :]
            relevant = valid & (top == target_columns[:, None])
            serendipity = np.maximum((n + 1 - rank) / n - self.unexpected[safe], 0.0) * relevant
            for name, per_slot in (
                ("arp", self.popularity.events[safe].astype(np.float64)),
                ("novelty", self.self_information[safe]),
                ("serendipity", serendipity),
            ):
                self._add(name, k, _list_means(per_slot, valid))
            if self.vectors is not None and k >= 2:
                self._add_diversity(k, safe, valid)

    def _add(self, name, k, means):
        self.sums[(name, k)] = self.sums.get((name, k), 0.0) + float(means.sum())

    def _add_diversity(self, k, safe, valid):
        vectors = self.vectors[safe] * valid[..., None]
        similarity = np.einsum("bid,bjd->bij", vectors, vectors)
        length = valid.sum(axis=1)
        pairs = length * (length - 1) / 2
        rows = pairs > 0
        # Every valid pair (i < j): 1 - cos; the sum over the upper triangle.
        upper = np.triu(np.ones((k, k), bool), 1)[None]
        both = valid[:, :, None] & valid[:, None, :] & upper
        distance = np.where(both, 1.0 - similarity, 0.0).sum(axis=(1, 2))
        self._add("diversity", k, distance[rows] / pairs[rows])
        self.pairs_cases[k] += int(rows.sum())

    def result(self, target_popularity):
        """The metrics, as ``{"coverage@K": ..., ...}``; ``target_popularity``: the mean
        training count of the cases' targets (``arp_ratio``'s denominator)."""
        out = {}
        for k in self.ks:
            cases = max(self.cases[k], 1)
            if "coverage" in self.metrics:
                out[f"coverage@{k}"] = float(self.seen[k].mean())
            if "popularity" in self.metrics:
                out[f"arp@{k}"] = self.sums.get(("arp", k), 0.0) / cases
                ratio = out[f"arp@{k}"] / target_popularity if target_popularity > 0 else float("nan")
                out[f"arp_ratio@{k}"] = ratio
            if "novelty" in self.metrics:
                out[f"novelty@{k}"] = self.sums.get(("novelty", k), 0.0) / cases
            if "serendipity" in self.metrics:
                out[f"serendipity@{k}"] = self.sums.get(("serendipity", k), 0.0) / cases
            if self.vectors is not None and k >= 2 and self.pairs_cases[k]:
                out[f"diversity@{k}"] = self.sums[("diversity", k)] / self.pairs_cases[k]
        return out


def _list_means(per_slot, valid):
    """Each non-empty list's mean of ``per_slot`` ``[batch, k]`` over its valid slots: ``[lists]``."""
    length = valid.sum(axis=1)
    rows = length > 0
    return np.where(valid, per_slot, 0.0).sum(axis=1)[rows] / length[rows]


def target_popularity(popularity, targets):
    """The mean training count of ``targets`` (vocabulary ids; an unknown target counts 0)."""
    columns = np.asarray(targets, np.int64) - vocab.NUM_RESERVED
    known = (columns >= 0) & (columns < len(popularity.events))
    counts = np.where(known, popularity.events[np.where(known, columns, 0)], 0)
    return float(counts.mean()) if len(counts) else 0.0


def by_history_length(ranks, lengths, ks):
    """``{bucket: {"cases": n, "ndcg@K", "hr@K", "mrr"}}`` over ``LENGTH_EDGES`` buckets
    ("1-4", ..., "200+"); an empty bucket is left out.

    >>> by_history_length([0, 9], [3, 60], ks=(10,))["50-199"]["hr@10"]
    1.0
    """
    ranks, lengths = np.asarray(ranks), np.asarray(lengths)
    out = {}
    for low, high in zip(LENGTH_EDGES, (*LENGTH_EDGES[1:], None)):
        rows = (lengths >= low) & (True if high is None else lengths < high)
        if rows.any():
            label = f"{low}+" if high is None else f"{low}-{high - 1}"
            out[label] = {"cases": int(rows.sum()), **metrics_from_ranks(ranks[rows], ks)}
    return out


def by_target_popularity(ranks, targets, popularity, ks):
    """``{"head" | "torso" | "tail": {"cases": n, "ndcg@K", "hr@K", "mrr"}}`` by the target's
    popularity group (``ItemPopularity.groups``); an empty group is left out."""
    columns = np.asarray(targets, np.int64) - vocab.NUM_RESERVED
    groups = popularity.groups()
    known = (columns >= 0) & (columns < len(groups))
    group = np.where(known, groups[np.where(known, columns, 0)], 2)
    ranks = np.asarray(ranks)
    return {
        name: {"cases": int((group == g).sum()), **metrics_from_ranks(ranks[group == g], ks)}
        for g, name in enumerate(POPULARITY_GROUPS)
        if (group == g).any()
    }
