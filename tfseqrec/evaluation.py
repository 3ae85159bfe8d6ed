"""Offline evaluation: rank each held-out item among the whole catalogue.

``evaluate`` streams evaluation cases in batches through a model's ``score``,
removes already-seen items (the *whole* history, not only the model's input
window) when asked, and ranks the true item with ties counted against it. Reserved
ids are never candidates (models score real items only).

Sampled metrics, where the true item competes only with ``N`` sampled negatives as
in the SASRec and BERT4Rec papers, are computed only on request and reported under
``sampled_`` names: they can reverse the order of models (Krichene & Rendle, KDD 2020).
"""

import numpy as np

from tfseqrec.data import pipeline, vocab

DEFAULT_KS = (1, 5, 10, 20)


def metrics_from_ranks(ranks, ks=DEFAULT_KS, prefix=""):
    """NDCG@K, HR@K and MRR of 0-based ranks (one relevant item per case)."""
    ranks = np.asarray(ranks, np.float64)
    out = {}
    for k in ks:
        hit = ranks < k
        out[f"{prefix}ndcg@{k}"] = float(np.mean(np.where(hit, 1.0 / np.log2(ranks + 2.0), 0.0)))
        out[f"{prefix}hr@{k}"] = float(np.mean(hit))
    out[f"{prefix}mrr"] = float(np.mean(1.0 / (ranks + 1.0)))
    return out


def evaluate(
    model,
    cases,
    ks=DEFAULT_KS,
    exclude_seen=True,
    batch_size=256,
    sampled=None,
    item_counts=None,
    seed=0,
    progress=None,
):
    """Full-catalogue ranking metrics of ``model`` on ``cases``.

    Args:
        model: a ``SequentialRecommender`` (anything with ``compiled_score`` or
            ``score`` and ``max_sequence_length``).
        cases: ``splits.Cases``.
        ks: cut-offs for NDCG@K and HR@K.
        exclude_seen: score every item of a user's history ``-inf`` first.
        batch_size: cases scored at once.
        sampled: ``None``, or ``{"num_negatives": 100, "sampler": "uniform" or
            "popularity"}`` to add ``sampled_*`` metrics; negatives exclude the
            history and the target.
        item_counts: per-item interaction counts (``ItemVocabulary.counts``), needed
            for the popularity sampler.
        seed: negative sampling seed.
        progress: tqdm bar over batches; ``None`` shows one on a terminal.

    Returns:
        ``{"ndcg@K", "hr@K", ..., "mrr", "num_users", "exclude_seen"}`` plus the
        sampled metrics and their settings when asked.
    """
    histories, targets = cases.histories, np.asarray(cases.targets, np.int64)
    n = len(targets)
    if n == 0:
        raise ValueError("no evaluation cases")
    rng = np.random.default_rng(seed)
    score = getattr(model, "compiled_score", None) or model.score
    ranks = np.empty(n, np.int64)
    sampled_ranks = np.empty(n, np.int64) if sampled else None
    if sampled and sampled.get("sampler", "uniform") == "popularity" and item_counts is None:
        raise ValueError("the popularity sampler needs item_counts")
    starts = range(0, n, batch_size)
    bar = _bar(len(starts), progress)
    for start in starts:
        rows = np.arange(start, min(start + batch_size, n))
        batch = histories.select(rows)
        window = pipeline.pad_left(batch, model.max_sequence_length)
        scores = np.array(score(window), dtype=np.float32)
        index = targets[rows] - vocab.NUM_RESERVED
        true_scores = scores[np.arange(len(rows)), index]
        if exclude_seen:
            seen_rows = np.repeat(np.arange(len(rows)), batch.lengths)
            seen = batch.values - vocab.NUM_RESERVED
            ok = seen >= 0
            scores[seen_rows[ok], seen[ok]] = -np.inf
            scores[np.arange(len(rows)), index] = true_scores  # the target may recur in history
        ranks[rows] = (scores >= true_scores[:, None]).sum(axis=1) - 1
        if sampled:
            negatives = _sample_negatives(batch, index, scores.shape[1], sampled, item_counts, rng)
            neg_scores = np.take_along_axis(scores, negatives, axis=1)
            sampled_ranks[rows] = (neg_scores >= true_scores[:, None]).sum(axis=1)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    out = metrics_from_ranks(ranks, ks)
    out.update(num_users=int(n), exclude_seen=bool(exclude_seen))
    if sampled:
        out.update(metrics_from_ranks(sampled_ranks, ks, prefix="sampled_"))
        out["sampled"] = {"num_negatives": int(sampled["num_negatives"]), "sampler": sampled.get("sampler", "uniform")}
    return out


def _sample_negatives(batch, target_index, num_items, sampled, item_counts, rng):
    """``[rows, N]`` item indices, none in the row's history or equal to its target."""
    k = int(sampled["num_negatives"])
    sampler = sampled.get("sampler", "uniform")
    if sampler not in ("uniform", "popularity"):
        raise ValueError(f"sampler must be 'uniform' or 'popularity', got {sampler!r}")
    p = None
    if sampler == "popularity":
        p = np.asarray(item_counts, np.float64)[:num_items]
        p = p / p.sum()
    out = np.empty((len(target_index), k), np.int64)
    for r in range(len(target_index)):
        banned = np.append(batch[r] - vocab.NUM_RESERVED, target_index[r])
        allowed = np.ones(num_items, bool)
        allowed[banned[banned >= 0]] = False
        candidates = np.flatnonzero(allowed)
        if len(candidates) < k:
            raise ValueError(f"only {len(candidates)} unseen items left for {k} negatives")
        weights = None if p is None else p[candidates] / p[candidates].sum()
        out[r] = rng.choice(candidates, size=k, replace=False, p=weights)
    return out


def _bar(total, progress):
    if progress is False:
        return None
    try:
        import tqdm
    except ImportError:
        return None
    return tqdm.tqdm(total=total, desc="evaluate", unit="batch", disable=None if progress is None else False)
