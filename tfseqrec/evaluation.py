"""Offline evaluation: rank each held-out item among the whole catalogue.

``evaluate`` streams evaluation cases in batches through a model and ranks each
target with ``tfseqrec.ranking``, the rules that validation inside ``fit``, the
export's signatures and the TFX ``RankingEvaluator`` use. A ``SequentialRecommender``
(SASRec, BERT4Rec, HSTU, UniSRec) scores items by dot products of a query vector with
its output table, so its ranks come from ``block_ranking.rank_targets_by_query``: the
catalogue is scored a block at a time and never held whole, whatever its size. Any
other model (Recformer, a stand-in with ``score``) is ranked on its score matrix by
``ranking.rank_targets``, in batches small enough for ``MAX_SCORES_PER_BATCH``. With
``exclude_seen=True`` the user's *whole* history is removed from the candidates, not only
the model's input window; with ``exclude_seen="window"`` only the items of the input
window (the last ``max_sequence_length`` items of the history, those ``evaluate`` passes
the model), as the HSTU paper's reference code filters. Either way the target itself
stays a candidate with its own score when it repeats a seen item. Ties count
against the target, reserved ids are never candidates, a non-finite target score ranks
the target last, and a target outside the vocabulary (``OOV_ID``) is a miss with rank
``num_items``; such cases still count in ``num_users`` and are reported as
``num_unknown_targets``.

Sampled metrics, where the true item competes only with ``N`` sampled negatives as
in the SASRec and BERT4Rec papers, are computed only on request and reported under
``sampled_`` names: they can reverse the order of models (Krichene & Rendle, KDD 2020).
The sampled rank follows the same rules (``ranking.ranks`` over the target and its
negatives). Popularity sampling needs per-item counts of *training* events
(``ItemVocabulary.counts`` of a vocabulary built by ``splits.prepare``).
"""

import os

import numpy as np
import tensorflow as tf

from tfseqrec import beyond_accuracy, block_ranking, ranking
from tfseqrec.checks import check_number
from tfseqrec.data import events, pipeline, vocab
from tfseqrec.models.base import SequentialRecommender
from tfseqrec.progress import progress_bar
from tfseqrec.ranking import DEFAULT_KS, metrics_from_ranks  # noqa: F401 (public names of this module)

# Score matrices of at most this many entries (128 MiB of float32), for models ranked on
# their whole score matrix: with a million items a batch is 32 users.
MAX_SCORES_PER_BATCH = 2**25

# Cases a batch when ``batch_size`` is not given. Ranked block by block, a batch pays a
# fixed cost per block of items (about ten small ops), so more users a batch amortise
# it: ``benchmarks/ranking.py --batch B`` at a million items ranks 1,272-1,326 users/s
# at 256 and 1,409-1,449 at 1,024 (69-71% of the matmul bound), 1,022 at 4,096 (the
# block leaves the cache). Models ranked on their score matrix keep 256 (their forward
# pass, not the ranking, sets the rate) and ``MAX_SCORES_PER_BATCH``.
BLOCK_RANKED_BATCH_SIZE = 1024
SCORE_MATRIX_BATCH_SIZE = 256

# The ``exclude_seen`` value that filters only the items of the model's input window.
WINDOW = "window"


def evaluate(
    model,
    cases,
    ks=DEFAULT_KS,
    exclude_seen=True,
    batch_size=None,
    sampled=None,
    item_counts=None,
    seed=0,
    progress=None,
    metrics=None,
    popularity=None,
    item_vectors=None,
    lists=None,
):
    """Full-catalogue ranking metrics of ``model`` on ``cases``, and what it recommends.

    Args:
        model: a ``SequentialRecommender``, or anything with ``compiled_score`` or
            ``score``, ``max_sequence_length`` and ``uses_timestamps`` (the
            ``tfseqrec.models.protocol.SequentialModel`` contract).
        cases: ``splits.Cases``.
        ks: cut-offs for NDCG@K and HR@K.
        exclude_seen: ``True`` removes every item of a user's history from the
            candidates, ``"window"`` only the items of the model's input window (the
            last ``max_sequence_length`` of the history; BERT4Rec reads one fewer
            beside its [MASK]), ``False`` none; the target is never removed.
        batch_size: cases scored at once, at most; ``None``:
            ``BLOCK_RANKED_BATCH_SIZE`` (1,024) for a ``SequentialRecommender``,
            ``SCORE_MATRIX_BATCH_SIZE`` (256) for a model ranked on its score matrix,
            and for the latter fewer where that many rows would exceed
            ``MAX_SCORES_PER_BATCH`` entries (a large catalogue).
        sampled: ``None``, or ``{"num_negatives": 100, "sampler": "uniform" or
            "popularity"}`` to add ``sampled_*`` metrics; negatives exclude the
            history and the target.
        item_counts: per-item training interaction counts (``ItemVocabulary.counts``),
            needed for the popularity sampler.
        seed: negative sampling seed.
        progress: tqdm bar over batches; ``None`` shows one on a terminal.
        metrics: ``None`` (accuracy only), ``"all"`` or names of
            ``beyond_accuracy.METRICS`` (and ``"accuracy"``, always computed): the
            beyond-accuracy metrics at each K, from the top-K lists that the ranking pass
            collects (the seen items excluded as ``exclude_seen`` says).
        popularity: ``beyond_accuracy.ItemPopularity`` of the training data, needed by
            any of ``metrics``.
        item_vectors: float ``[num_items, d]`` for ``diversity`` (``item_vectors(model)``);
            ``None``: no diversity.
        lists: ``None``, or ``lists(rows, columns)`` called with each batch's case indices
            and its top-``max(ks)`` columns (``PAD_COLUMN`` where no item is left), needs
            ``metrics``: what a report shows of the lists, from the same pass.

    Returns:
        ``{"ndcg@K", "hr@K", ..., "mrr", "num_users", "num_unknown_targets",
        "exclude_seen"}`` (``True``, ``False`` or ``"window"``) plus the sampled metrics
        and their settings when asked, plus the beyond-accuracy metrics asked for
        (``beyond_accuracy``'s keys).
    """
    _check_options(exclude_seen, batch_size, sampled, item_counts)
    if isinstance(model, Exported) and (exclude_seen is not True or sampled):
        raise ValueError("an export is evaluated with exclude_seen=True and without sampled metrics")
    scorer = _scorer(model)
    batch_size = _batch_size(batch_size, scorer, model)
    targets = np.asarray(cases.targets, np.int64)
    n = len(targets)
    if n == 0:
        raise ValueError("no evaluation cases")
    chosen = _chosen_metrics(metrics, popularity)
    beyond = None
    if lists is not None and not chosen:
        raise ValueError("lists needs metrics: the lists are those the beyond-accuracy metrics collect")
    of_lists = chosen - set(beyond_accuracy.BREAKDOWNS)
    if of_lists or lists is not None:
        beyond = beyond_accuracy.BeyondAccuracy(ks, popularity, of_lists, item_vectors)
    rng = np.random.default_rng(seed)
    ranks, unknown = np.empty(n, np.int64), 0
    sampled_ranks = np.empty(n, np.int64) if sampled else None
    starts = range(0, n, batch_size)
    bar = progress_bar(len(starts), progress)
    for start in starts:
        rows = np.arange(start, min(start + batch_size, n))
        batch = cases.histories.select(rows)
        inputs = model_inputs(model, batch)
        ranks[rows], known, columns, top = scorer.rank(
            inputs, tf.constant(targets[rows]), seen_items(exclude_seen, batch, inputs), beyond and beyond.top
        )
        if beyond:
            beyond.update(top, targets[rows])
            if lists is not None:
                lists(rows, top)
        unknown += int((~known).sum())
        if sampled:
            sampled_ranks[rows] = _sampled_ranks(
                columns, batch, targets[rows], known, sampled, item_counts, scorer.num_items, rng
            )
        bar.update(1)
    bar.close()
    out = metrics_from_ranks(ranks, ks)
    out.update(
        num_users=int(n),
        num_unknown_targets=unknown,
        exclude_seen=WINDOW if isinstance(exclude_seen, str) else bool(exclude_seen),
    )
    if sampled:
        out.update(metrics_from_ranks(sampled_ranks, ks, prefix="sampled_"))
        out["sampled"] = {
            "num_negatives": int(sampled["num_negatives"]),
            "sampler": sampled.get("sampler", "uniform"),
        }
    if beyond:
        out.update(beyond.result(beyond_accuracy.target_popularity(popularity, targets)))
    if "by_length" in chosen:
        lengths = np.diff(cases.histories.row_splits)
        out["by_history_length"] = beyond_accuracy.by_history_length(ranks, lengths, ks)
    if "by_popularity" in chosen:
        out["by_target_popularity"] = beyond_accuracy.by_target_popularity(ranks, targets, popularity, ks)
    return out


def _chosen_metrics(metrics, popularity):
    """The beyond-accuracy names of ``evaluate``'s ``metrics`` (a set; empty for accuracy only)."""
    if metrics is None:
        return set()
    if isinstance(metrics, str):
        metrics = beyond_accuracy.METRICS if metrics == "all" else metrics.split(",")
    names = {name.strip() for name in metrics if name.strip()} - {"accuracy"}
    unknown = sorted(names - set(beyond_accuracy.METRICS))
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {['accuracy', *beyond_accuracy.METRICS]}")
    if names and popularity is None:
        raise ValueError(f"the metrics {sorted(names)} need popularity (beyond_accuracy.ItemPopularity)")
    return names


def beyond_accuracy_inputs(model, vocabulary, train):
    """``evaluate``'s ``popularity`` (of the ``train`` sequences) and ``item_vectors`` for ``model``."""
    num_items = getattr(model, "num_items", vocabulary.num_items)
    return {
        "popularity": beyond_accuracy.ItemPopularity.of(train, num_items),
        "item_vectors": item_vectors(model),
    }


def item_vectors(model):
    """The items' vectors that ``diversity`` compares, ``[num_items, d]``, or ``None``: UniSRec's
    frozen text vectors, or an id model's attributes (each categorical or multi-valued
    attribute one-hot over its values, an item's values weighing 1 per attribute; numeric
    attributes are left out)."""
    backbone = getattr(model, "backbone", model)
    text = getattr(backbone, "text_embedding", None)
    if text is not None:
        return np.asarray(text.embeddings)[vocab.NUM_RESERVED :]
    features = getattr(backbone, "feature_embedding", None)
    if features is None:
        return None
    parts = []
    for spec, slots in zip(features.features.values(), features.slots):
        if spec["kind"] == "numeric":
            continue
        values = np.asarray(slots)[vocab.NUM_RESERVED :]
        onehot = np.zeros((len(values), spec["values"]), np.float32)
        rows = np.repeat(np.arange(len(values)), values.shape[1])
        onehot[rows, values.reshape(-1)] = 1.0
        onehot[:, 0] = 0.0  # the padding of a multi-valued field is no value
        onehot /= np.maximum(onehot.sum(axis=1, keepdims=True), 1.0)
        parts.append(onehot)
    return np.concatenate(parts, axis=1) if parts else None


def model_inputs(model, histories):
    """The input window of ``histories`` (``Sequences``) for ``model``: ids, and the events' times
    and context when it reads them (a ``max_sequence_length`` of ``None``: each whole history)."""
    length = model.max_sequence_length or max(1, int(np.diff(histories.row_splits).max(initial=1)))
    window = pipeline.pad_left(histories, length)
    columns = list(getattr(model, "event_features", None) or ())
    if not model.uses_timestamps and not columns:
        return window
    inputs = {"item_ids": window, **pipeline.pad_left_events(histories, length, columns)}
    if model.uses_timestamps:
        inputs["timestamps"] = pipeline.pad_left_times(histories, length)
    return inputs


def seen_items(exclude_seen, histories, inputs):
    """The ids removed from a batch's candidates (``evaluate``'s ``exclude_seen``), or ``None``.

    ``True``: each whole history (``Sequences``), ragged. ``"window"``: the ids of the
    model's ``inputs`` (``model_inputs``), whose padding ``ranking`` ignores.
    """
    if isinstance(exclude_seen, str):  # WINDOW, the one string evaluate accepts
        return inputs["item_ids"] if isinstance(inputs, dict) else inputs
    if exclude_seen:
        return tf.RaggedTensor.from_row_splits(histories.values, histories.row_splits)
    return None


# The ranking functions run as one graph per batch shape: eager, their passes over
# the scores cost twice as much (measured at a million items).
_rank_targets = tf.function(ranking.rank_targets, reduce_retracing=True)
_rank_targets_by_query = tf.function(block_ranking.rank_targets_by_query, reduce_retracing=True)
_rank_and_top_k_by_query = tf.function(block_ranking.rank_and_top_k_by_query, reduce_retracing=True)
_top_k = tf.function(ranking.top_k, reduce_retracing=True)


def _scorer(model):
    """How ``evaluate`` ranks a batch: from query vectors and the output table when the
    model scores by them (``SequentialRecommender``: the catalogue scored block by block,
    memory bounded), by an export's signatures (``Exported``), else from the model's whole
    score matrix."""
    if isinstance(model, Exported):
        return model
    return _FactoredScores(model) if isinstance(model, SequentialRecommender) else _FullScores(model)


class Exported:
    """A SavedModel version written by ``tfseqrec export``, ranked by its own signatures
    (``rank_targets``, and ``recommend_top_k`` for the lists), as TF Serving would rank it:
    ``evaluate(Exported(path), cases)`` measures what is in production beside a candidate.

    The export windows each history itself and excludes all of it (``exclude_seen=True``
    only); its catalogue is its vocabulary (``assets/item_vocab.tsv``), whose ids the cases
    must be in. An export that reads event times takes the cases' times; one that reads
    event context (``event_features``, the columns of its ``event_<column>`` inputs) takes
    the cases' event values, decoded to the raw values it is asked with by
    ``event_vocabulary``: the vocabulary of the slots the cases carry (``Split.event_vocabulary``).

    Args:
        export_dir: the version's directory.
        event_vocabulary: ``events.EventVocabulary`` of the cases' event slots, for an export
            that reads event context (settable later, once the data is read with
            ``event_features``).
    """

    bounded = True
    max_sequence_length = None  # the whole history: the export takes its own window

    def __init__(self, export_dir, event_vocabulary=None):
        self.export_dir = os.fspath(export_dir)
        try:  # registers the tensorflow-text ops of the text models' exports, as the model server links them
            import tensorflow_text  # noqa: F401
        except ImportError:
            pass
        loaded = tf.saved_model.load(self.export_dir)
        self.rank_fn, self.top_fn = loaded.signatures["rank_targets"], loaded.signatures["recommend_top_k"]
        names = sorted(self.rank_fn.structured_input_signature[1])
        self.uses_timestamps = "timestamps" in names
        self.event_features = [n[len(events.PREFIX) :] for n in names if n.startswith(events.PREFIX)]
        other = (
            set(names)
            - {"history", "target", "timestamps"}
            - {events.input_name(c) for c in self.event_features}
        )
        if other:
            raise ValueError(
                f"{self.export_dir}'s rank_targets also takes {sorted(other)}: not an export of tfseqrec"
            )
        self.event_vocabulary = event_vocabulary
        self.vocabulary = vocab.ItemVocabulary.load(os.path.join(self.export_dir, "assets", "item_vocab.tsv"))
        self.num_items = self.vocabulary.num_items
        self._raw = np.asarray(
            [""] * vocab.NUM_RESERVED + self.vocabulary.items, dtype=object
        )  # reserved: ""
        self._loaded = loaded  # the signatures' resources live as long as it does

    def rank(self, inputs, targets, seen, top=None):
        """As the other scorers' ``rank``; ``seen`` is each whole history (``evaluate`` allows no
        other ``exclude_seen`` for an export, the export's own rule)."""
        side = self._side(inputs)
        ids = inputs["item_ids"] if isinstance(inputs, dict) else inputs
        history = tf.constant(self._raw[np.asarray(ids)].astype(str))
        target_ids = np.asarray(targets)
        valid = (target_ids >= 0) & (target_ids < len(self._raw))
        target = tf.constant(np.where(valid, self._raw[np.where(valid, target_ids, 0)], "").astype(str))
        out = self.rank_fn(history=history, target=target, **side)
        best = None
        if top:
            k = tf.fill([len(target_ids)], tf.constant(int(top), tf.int32))
            items = self.top_fn(history=history, k=k, **side)["item_ids"].numpy().astype(str)
            ids = self.vocabulary.lookup(items.reshape(-1)).reshape(items.shape)
            best = np.where(items == "", ranking.PAD_COLUMN, ids - vocab.NUM_RESERVED)
        return out["rank"].numpy(), out["known"].numpy(), None, best

    def _side(self, inputs):
        """The inputs the export takes beside the history: times, and event values as raw text."""
        side = {}
        if self.uses_timestamps:
            side["timestamps"] = tf.constant(inputs["timestamps"], tf.int64)
        if self.event_features:
            if self.event_vocabulary is None:
                raise ValueError(
                    f"{self.export_dir} reads event context {self.event_features}: give Exported the "
                    "event_vocabulary of the cases' slots"
                )
            slots = {c: inputs[events.input_name(c)] for c in self.event_features}
            for column, raw in self.event_vocabulary.decode(slots).items():
                side[events.input_name(column)] = tf.constant(raw.astype(str))
        return side


class _FullScores:
    """Ranks of ``ranking.rank_targets`` on ``model.score``'s ``[batch, num_items]`` scores."""

    bounded = False  # memory grows with batch x catalogue: evaluate caps the batch

    def __init__(self, model):
        self.score = getattr(model, "compiled_score", None) or model.score

    def rank(self, inputs, targets, seen, top=None):
        """``(ranks [batch], known [batch], columns, top_columns)``: ``columns(index [batch, k])``
        gives those scores; ``top_columns`` the ``top`` best columns with ``seen`` excluded
        (``PAD_COLUMN`` where none is left), or ``None`` without ``top``."""
        scores = tf.cast(self.score(inputs), tf.float32)
        self.num_items = scores.shape[1]
        known = ranking.known_targets(targets, self.num_items).numpy()
        best = None if not top else _top_k(scores, top, seen).indices.numpy()
        return (
            _rank_targets(scores, targets, seen).numpy(),
            known,
            lambda index: np.take_along_axis(scores.numpy(), index, axis=1),
            best,
        )


class _FactoredScores:
    """Ranks of ``block_ranking.rank_targets_by_query`` on ``model.query`` and ``model.output_table()``."""

    bounded = True

    def __init__(self, model):
        self.table, self.bias = model.output_table()  # once per evaluation: HSTU normalises it here
        self.query = model.compiled_query
        self.num_items = int(self.table.shape[0])

    def rank(self, inputs, targets, seen, top=None):
        query = tf.cast(self.query(inputs), self.table.dtype)
        known = ranking.known_targets(targets, self.num_items).numpy()
        if not top:
            ranks = _rank_targets_by_query(query, self.table, targets, seen, self.bias).numpy()
            return ranks, known, lambda index: self.columns(query, index), None
        ranks, best = _rank_and_top_k_by_query(query, self.table, targets, seen, self.bias, top)
        return ranks.numpy(), known, lambda index: self.columns(query, index), best.indices.numpy()

    def columns(self, query, index):
        """Scores ``[batch, k]`` of the items at ``index`` (columns), by the model's arithmetic."""
        _, column_scores = block_ranking.query_blocks(query, self.table, self.bias)
        return column_scores(tf.convert_to_tensor(index)).numpy()


def score_batch_size(batch_size, num_items):
    """``batch_size``, lowered so that a batch's scores hold at most ``MAX_SCORES_PER_BATCH`` entries.

    >>> score_batch_size(256, 3_416), score_batch_size(256, 1_000_000), score_batch_size(256, 10**9)
    (256, 33, 1)
    """
    return max(1, min(int(batch_size), MAX_SCORES_PER_BATCH // max(int(num_items), 1)))


def _batch_size(batch_size, scorer, model):
    """Cases a batch: ``batch_size`` (checked by ``evaluate``), or the scorer's default;
    capped for a score matrix."""
    if batch_size is None:
        batch_size = BLOCK_RANKED_BATCH_SIZE if scorer.bounded else SCORE_MATRIX_BATCH_SIZE
    return batch_size if scorer.bounded else score_batch_size(batch_size, getattr(model, "num_items", 1))


def _check_options(exclude_seen, batch_size, sampled, item_counts):
    if exclude_seen != WINDOW if isinstance(exclude_seen, str) else exclude_seen not in (True, False):
        raise ValueError(f"exclude_seen must be True, False or {WINDOW!r}, got {exclude_seen!r}")
    if batch_size is not None:
        check_number("batch_size", batch_size, minimum=1, integer=True)
    if sampled:
        check_number("sampled num_negatives", sampled.get("num_negatives"), minimum=1, integer=True)
        if sampled.get("sampler", "uniform") == "popularity" and item_counts is None:
            raise ValueError("the popularity sampler needs item_counts")


def _sampled_ranks(columns, batch, targets, known, sampled, item_counts, num_items, rng):
    """The rank of each target (column 0) among its sampled negatives, by the same rule.

    ``columns(index [batch, k])`` gives the scores of those columns."""
    index = targets - vocab.NUM_RESERVED
    negatives = _sample_negatives(batch, index, num_items, sampled, item_counts, rng)
    pool = columns(np.concatenate([np.clip(index, 0, num_items - 1)[:, None], negatives], 1))
    return ranking.ranks(pool, np.where(known, vocab.NUM_RESERVED, vocab.OOV_ID)).numpy()


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
        allowed[banned[(banned >= 0) & (banned < num_items)]] = False
        candidates = np.flatnonzero(allowed)
        if len(candidates) < k:
            raise ValueError(f"only {len(candidates)} unseen items left for {k} negatives")
        mass = 0.0 if p is None else p[candidates].sum()
        weights = p[candidates] / mass if mass > 0 else None  # no training counts left: uniform
        out[r] = rng.choice(candidates, size=k, replace=False, p=weights)
    return out
