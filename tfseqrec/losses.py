"""Next-item losses as ``keras.losses.Loss`` objects.

Each loss scores a batch of ``N`` training positions (hidden states ``[N, d]``) against
candidate items and returns a per-position loss. Padded and unmasked positions never
reach a loss: the model gathers the positions whose ``sample_weight`` is non-zero
first, so they weigh exactly 0.

Items are addressed by **item index** ``0 .. num_items - 1`` (vocabulary id minus
``vocab.NUM_RESERVED``): reserved ids are never candidates.

- ``FullSoftmaxCrossEntropy``: softmax over the whole catalogue (the default; the
  strongest choice in Klenitskiy & Vasilev, RecSys 2023), optionally without the
  other items of the position's sequence; on TensorFlow a block of positions at a
  time, the gradient in the same pass (``softmax_cross_entropy_sum``).
- ``BinaryCrossEntropy``: one positive against ``num_negatives`` uniform negatives per
  position (the SASRec paper).
- ``SampledSoftmaxCrossEntropy``: softmax over the positive and ``num_negatives``
  negatives shared by the batch, drawn uniformly or log-uniformly (ids are in
  popularity order), with logQ correction and accidental hits removed.
- ``GBCE``: generalised BCE with calibrated positive (Petrov & Macdonald, RecSys 2023).

``build(name, ...)`` makes one from the training options (what ``tfseqrec train``
does); ``fixed_normalizer`` is the constant the models divide a batch's summed loss by
by default (``loss_normalizer``).

``loss(y_true, y_pred)`` follows Keras: labels and logits. ``loss.from_embeddings``
samples candidates, builds the logits and applies ``loss`` in one call; the models use
that.

Every loss is written in ``keras.ops`` and ``keras.random``: the same code on the
TensorFlow and JAX backends, without TensorFlow imported on JAX (``dot_rows`` is one
TensorFlow matmul on TensorFlow, as before).

Recformer's losses (text in, no item ids in the model):

- ``ContrastiveLoss``: softmax cross-entropy over ``cosine_logits`` (cosine
  similarity over a temperature), against an item table or in-batch negatives.
- ``MaskedLMLoss``: masked language modelling, the mean over masked tokens.
"""

import math

import keras
import numpy as np
from keras import ops

ON_TENSORFLOW = keras.backend.backend() == "tensorflow"
if ON_TENSORFLOW:
    import tensorflow as tf  # dot_rows' one matmul (only on the TensorFlow backend)


class ItemRows:
    """An output item table read by rows: row ``i`` is ``transform(embeddings[i + offset])``.

    A sampled loss reads a few thousand rows of the table a batch. Read from the
    embedding variable itself (not from a slice of it, whose gradient is a dense
    ``[num_items, d]`` tensor), the table's gradient on the TensorFlow backend stays
    ``tf.IndexedSlices`` of the rows read, so that ``tfseqrec.optimizers.RowSparseAdam``
    updates those rows alone. Every loss takes one where it takes a table; the full softmax reads it whole.

    Args:
        embeddings: the ``[offset + num_items, d]`` embedding variable (or tensor).
        offset: rows before the first item (``vocab.NUM_RESERVED``).
        transform: ``None`` or a row-wise function of ``[..., d]`` rows (HSTU's L2
            normalisation).
    """

    def __init__(self, embeddings, offset=0, transform=None):
        self.embeddings = embeddings
        self.offset = int(offset)
        self.transform = transform

    @property
    def shape(self):
        return (self.embeddings.shape[0] - self.offset, self.embeddings.shape[1])

    @property
    def dtype(self):
        return keras.backend.standardize_dtype(self.embeddings.dtype)

    def rows(self, ids):
        """The rows ``ids`` (item indices, any shape): ``[..., d]``."""
        rows = ops.take(self.embeddings, ops.cast(ids, "int32") + self.offset, axis=0)
        return rows if self.transform is None else self.transform(rows)

    def dense(self):
        """The whole table ``[num_items, d]``."""
        table = ops.convert_to_tensor(self.embeddings)[self.offset :]
        return table if self.transform is None else self.transform(table)


def dot_rows(hidden, rows):
    """``hidden [..., d] @ rows [n, d]^T``: ``[..., n]``, the scores of items by their rows.

    On TensorFlow one matmul with its transpose flag, as the block-at-a-time ranking
    (``tfseqrec.block_ranking``) computes its blocks: the same kernel, so a whole score
    matrix and its blocks agree to the last bit (a transpose first does not).
    """
    if ON_TENSORFLOW:
        return tf.matmul(hidden, rows, transpose_b=True)
    return ops.matmul(hidden, ops.transpose(rows))


def _rows(table, ids):
    """Rows ``ids`` of a table: a tensor or ``ItemRows``."""
    return table.rows(ids) if isinstance(table, ItemRows) else ops.take(table, ids, axis=0)


def _dense(table):
    return table.dense() if isinstance(table, ItemRows) else table


class _CandidateLoss(keras.losses.Loss):
    """Shared sampling and logit building."""

    def __init__(self, num_negatives=None, seed=None, name=None, reduction="sum_over_batch_size", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)
        self.num_negatives = num_negatives
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    # Losses whose negatives avoid the user's history set this (see `history`).
    exclude_history = False

    def from_embeddings(
        self, hidden, positives, item_table, item_bias=None, sample_weight=None, history=None
    ):
        """Loss of ``hidden`` ``[N, d]`` predicting item indices ``positives`` ``[N]``.

        Args:
            hidden: float ``[N, d]``.
            positives: int ``[N]`` item indices.
            item_table: float ``[num_items, d]`` item embeddings (tied output weights),
                or ``ItemRows``.
            item_bias: optional float ``[num_items]`` output bias.
            sample_weight: optional float ``[N]``; reduced as Keras does (weighted sum
                over ``N``).
            history: optional ``(rows, seen)``: int ``[N]`` the sequence of each
                position and bool ``[num_sequences, num_items]`` the items of each
                sequence. Losses with ``exclude_history`` draw no negative from it.
        """
        raise NotImplementedError

    def _uniform_negatives(self, shape, num_items, history=None):
        """Uniform item indices ``shape = (N, k)``; with ``history``, outside each row's.

        Outside the history, negative ``j`` of position ``n`` is the ``r``-th item its
        sequence has not seen, ``r`` uniform below their number: every unseen item alike,
        in one draw (no loop of redraws, which the JAX backend cannot run with a seed
        generator inside). A history that covers the whole catalogue leaves nothing
        unseen: that row draws from the whole catalogue.
        """
        if history is None or not self.exclude_history:
            return keras.random.randint(shape, 0, num_items, dtype="int32", seed=self.seed_generator)
        rows, seen = history
        rows = ops.cast(rows, "int32")
        unseen = ops.cast(ops.logical_not(ops.cast(seen, "bool")), "int32")  # [sequences, num_items]
        counts = ops.sum(unseen, axis=1)
        available = ops.take(counts, rows)[:, None]
        before = ops.take(ops.cumsum(counts) - counts, rows)[:, None]  # unseen items of earlier rows
        pool = ops.where(available > 0, available, num_items)
        u = keras.random.uniform(shape, seed=self.seed_generator)
        r = ops.minimum(ops.cast(ops.floor(u * ops.cast(pool, "float32")), "int32"), pool - 1)
        # The (before + r + 1)-th unseen cell of the flattened bitmap, by a binary search
        # of its running count.
        cell = ops.searchsorted(ops.cumsum(ops.reshape(unseen, [-1])), ops.reshape(before + r + 1, [-1]))
        picked = ops.reshape(ops.cast(cell, "int32"), ops.shape(r)) - rows[:, None] * num_items
        return ops.where(available > 0, picked, r)

    @staticmethod
    def _logits(hidden, table, bias, ids):
        """Dot products with the rows ``ids`` (any shape) of ``table``."""
        emb = _rows(table, ids)
        if len(ids.shape) == 1:  # shared candidates [C]
            logits = dot_rows(hidden, emb)
        else:  # per-position candidates [N, C]
            logits = ops.einsum("nd,ncd->nc", hidden, emb)
        if bias is not None:
            logits += ops.take(bias, ids, axis=0)
        return logits

    def get_config(self):
        config = super().get_config()
        config.update({"num_negatives": self.num_negatives, "seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="tfseqrec")
class FullSoftmaxCrossEntropy(_CandidateLoss):
    """Softmax cross-entropy over every item of the catalogue.

    Call arguments:
        y_true: int ``[N]`` item indices.
        y_pred: float ``[N, num_items]`` logits.

    Example:

    >>> loss = FullSoftmaxCrossEntropy()
    >>> round(float(loss([0], [[0.0, 0.0]])), 4)  # log 2
    0.6931
    """

    def __init__(self, exclude_history=False, name="full_softmax_cross_entropy", **kwargs):
        kwargs.pop("num_negatives", None)
        super().__init__(num_negatives=None, name=name, **kwargs)
        self.exclude_history = exclude_history

    def call(self, y_true, y_pred):
        y_pred = ops.cast(y_pred, "float32")
        return ops.sparse_categorical_crossentropy(ops.cast(y_true, "int32"), y_pred, from_logits=True)

    def from_embeddings(
        self, hidden, positives, item_table, item_bias=None, sample_weight=None, history=None
    ):
        history = history if self.exclude_history else None
        if ON_TENSORFLOW and self.reduction in _SUMMED_REDUCTIONS:
            # A block of positions at a time, the gradient in the same pass (below).
            n = ops.shape(positives)[0]
            weight = ops.ones([n], "float32") if sample_weight is None else sample_weight
            total = softmax_cross_entropy_sum(
                hidden, _dense(item_table), positives, weight, item_bias, history
            )
            if self.reduction == "sum":
                loss = total
            elif self.reduction == "mean_with_sample_weight" and sample_weight is not None:
                loss = ops.divide_no_nan(total, ops.sum(ops.cast(weight, "float32")))
            else:
                loss = ops.divide_no_nan(total, ops.cast(n, "float32"))
            # As Keras reduces a loss: its share of the replicas' sum.
            loss /= tf.distribute.get_strategy().num_replicas_in_sync
            return ops.cast(loss, self.dtype)
        logits = dot_rows(hidden, _dense(item_table))
        if item_bias is not None:
            logits += item_bias
        if history is not None:
            # The other items of the position's sequence leave the softmax: the model is
            # not pushed to score them low, as ranking with seen items filtered never
            # asks it to (the reference's 3,000 negatives drawn outside the sequence).
            rows, seen = history
            columns = ops.arange(ops.shape(logits)[1], dtype="int32")[None, :]
            others = ops.logical_and(
                ops.take(ops.cast(seen, "bool"), ops.cast(rows, "int32"), axis=0),
                ops.not_equal(columns, ops.cast(positives, "int32")[:, None]),
            )
            logits = ops.where(others, ops.cast(-1e9, logits.dtype), logits)
        return self(positives, logits, sample_weight=sample_weight)

    def get_config(self):
        return {**super().get_config(), "exclude_history": self.exclude_history}


# The reductions ``softmax_cross_entropy_sum`` serves; "none" (a loss per position) takes
# the logits path.
_SUMMED_REDUCTIONS = ("sum", "sum_over_batch_size", "mean", "mean_with_sample_weight")

# The logits of one block of positions: about 3 MiB of float32, so that the softmax's
# passes over them run in the CPU's cache rather than in memory.
_BLOCK_LOGITS = 3 << 18


def softmax_cross_entropy_sum(hidden, table, positives, weight, bias=None, history=None, block=None):
    """``sum_n weight[n] * CE_n``: the full softmax cross-entropy of ``hidden @ table.T + bias``.

    The same loss as ``FullSoftmaxCrossEntropy.call`` over those logits (with ``history``,
    each position's sequence items other than its positive left out), computed a block of
    ``block`` positions at a time, its gradient in the same pass (TensorFlow only). The
    ``[N, num_items]`` logits are never whole in memory: each block's stay in the CPU's
    cache from the matmul to the gradient, where TensorFlow's fused
    ``sparse_softmax_cross_entropy_with_logits`` over the whole matrix reads and writes
    it in memory several times. On ML-1M, SASRec's and HSTU's epochs run about 1.4x as
    fast as with that op (``benchmarks/README.md``, "The full softmax a block of
    positions at a time").

    The gradient is ``softmax - one_hot`` for the logits, so the backward pass only
    scales what the forward pass computed by the incoming scalar gradient. The forward
    pass computes it whether or not a gradient is asked for: on validation batches (a
    position a user) that is little.

    Args:
        hidden: float ``[N, d]``.
        table: float ``[num_items, d]``.
        positives: int ``[N]`` item indices.
        weight: float ``[N]``: each position's weight (0 drops it).
        bias: optional float ``[num_items]``.
        history: optional ``(rows, seen)`` as ``FullSoftmaxCrossEntropy.from_embeddings``.
        block: positions a block; default about 786,000 logits (3 MiB) a block.

    Returns:
        float32 scalar.
    """
    num_items = table.shape[0] or tf.shape(table)[0]
    if block is None:
        block = 256 if table.shape[0] is None else max(32, _BLOCK_LOGITS // max(num_items, 1) // 8 * 8)
    dtypes = (hidden.dtype, table.dtype, None if bias is None else bias.dtype)

    @tf.custom_gradient
    def summed(hidden, table, *bias):
        total, grads = _blockwise_softmax(
            tf.cast(hidden, tf.float32),
            tf.cast(table, tf.float32),
            tf.cast(bias[0], tf.float32) if bias else None,
            tf.cast(positives, tf.int32),
            tf.cast(weight, tf.float32),
            history,
            block,
        )

        def grad(upstream):
            return tuple(tf.cast(upstream * g, dtype) for g, dtype in zip(grads, dtypes) if dtype is not None)

        return total, grad

    args = (tf.convert_to_tensor(hidden), tf.convert_to_tensor(table))
    return summed(*args, *(() if bias is None else (tf.convert_to_tensor(bias),)))


def _blockwise_softmax(hidden, table, bias, positives, weight, history, block):
    """``softmax_cross_entropy_sum``'s loop: ``(total, (d_hidden, d_table, d_bias))``."""
    num_items = table.shape[0] or tf.shape(table)[0]
    n, dim = tf.shape(positives)[0], hidden.shape[-1]
    blocks = (n + block - 1) // block
    pad = blocks * block - n
    positives, weight = tf.pad(positives, [[0, pad]]), tf.pad(weight, [[0, pad]])  # padding weighs 0
    hidden = tf.pad(hidden, [[0, pad], [0, 0]])
    if history is not None:
        rows, seen = tf.pad(tf.cast(history[0], tf.int32), [[0, pad]]), tf.cast(history[1], tf.bool)

    def body(i, total, d_table, d_bias, d_hidden, kept_positive):
        start = i * block
        h = tf.slice(hidden, [start, 0], [block, dim])
        blocked = None if history is None else tf.gather(seen, tf.slice(rows, [start], [block]))
        loss, table_part, bias_part, hidden_part, share = _softmax_block(
            h, tf.slice(positives, [start], [block]), tf.slice(weight, [start], [block]), table, bias, blocked
        )
        return (
            i + 1,
            total + loss,
            d_table + table_part,
            d_bias + bias_part,
            d_hidden.write(i, hidden_part),
            kept_positive.write(i, share),
        )

    arrays = [
        tf.TensorArray(tf.float32, size=blocks, element_shape=shape) for shape in ([block, dim], [block])
    ]
    zeros = (tf.constant(0), tf.constant(0.0), tf.zeros_like(table), tf.zeros([num_items], tf.float32))
    _, total, d_table, d_bias, d_hidden, kept_positive = tf.while_loop(
        lambda i, *_: i < blocks, body, (*zeros, *arrays)
    )
    # The positive's column: its softmax share (where it came back), less its weight.
    correction = weight - kept_positive.concat()
    d_hidden = d_hidden.concat() - correction[:, None] * tf.gather(table, positives)
    d_table -= tf.math.unsorted_segment_sum(correction[:, None] * hidden, positives, num_items)
    d_bias -= tf.math.unsorted_segment_sum(correction, positives, num_items)
    return total, (d_hidden[:n], d_table, d_bias)


def _softmax_block(h, target, w, table, bias, seen):
    """One block of positions: ``(sum of w * CE, d_table, d_bias, d_hidden, positive's share)``.

    The gradients leave out the positive's ``- w`` (added once for all blocks after);
    ``seen``: bool ``[block, num_items]``, the items each position's sequence leaves out,
    or ``None``.
    """
    logits = dot_rows(h, table)
    if bias is not None:
        logits += bias
    positive = tf.gather(logits, target, axis=1, batch_dims=1)
    share = tf.zeros_like(w)
    if seen is None:
        top = tf.reduce_max(logits, axis=1)
    else:
        # The sequence's items leave the softmax, its positive among them; the positive
        # comes back as one more term of each row's sum.
        logits = tf.where(seen, tf.constant(-1e9, logits.dtype), logits)
        top = tf.maximum(tf.reduce_max(logits, axis=1), positive)
    exp = tf.exp(logits - top[:, None])
    total_exp = tf.reduce_sum(exp, axis=1)
    if seen is not None:
        positive_exp = tf.where(tf.gather(seen, target, axis=1, batch_dims=1), tf.exp(positive - top), 0.0)
        total_exp += positive_exp
        share = w * positive_exp / total_exp
    loss = tf.reduce_sum(w * (top + tf.math.log(total_exp) - positive))
    grad = exp * (w / total_exp)[:, None]  # d loss / d logits, but for the positive's - w
    bias_part = tf.reduce_sum(grad, axis=0) if bias is not None else tf.zeros_like(grad[0])
    return loss, tf.matmul(grad, h, transpose_a=True), bias_part, tf.matmul(grad, table), share


@keras.saving.register_keras_serializable(package="tfseqrec")
class BinaryCrossEntropy(_CandidateLoss):
    """Binary cross-entropy of the positive against uniform random negatives.

    The SASRec paper's loss with ``num_negatives=1``. Negatives are drawn per position
    uniformly over the catalogue; with ``exclude_history`` (the paper's sampler, the
    default) none is an item of the user's sequence; a draw that hits the positive is
    dropped.

    Args:
        num_negatives: uniform negatives per position (1 in the paper).
        exclude_history: draw no negative from the user's sequence.

    Call arguments:
        y_true: ignored (the positive is column 0 of ``y_pred``); pass zeros.
        y_pred: float ``[N, 1 + num_negatives]`` logits, positive first.
    """

    def __init__(self, num_negatives=1, exclude_history=True, name="binary_cross_entropy", **kwargs):
        super().__init__(num_negatives=num_negatives, name=name, **kwargs)
        self.exclude_history = exclude_history

    def call(self, y_true, y_pred):
        return _bce(ops.cast(y_pred, "float32"), positive_weight=1.0)

    def from_embeddings(
        self, hidden, positives, item_table, item_bias=None, sample_weight=None, history=None
    ):
        positives = ops.cast(positives, "int32")
        n = ops.shape(positives)[0]
        num_items = item_table.shape[0] or ops.shape(_dense(item_table))[0]
        negatives = self._uniform_negatives((n, self.num_negatives), num_items, history)
        ids = ops.concatenate([positives[:, None], negatives], axis=1)
        logits = self._logits(hidden, item_table, item_bias, ids)
        logits = _drop_accidental_hits(logits, positives, negatives)
        return self(ops.zeros_like(positives), logits, sample_weight=sample_weight)

    def get_config(self):
        return {**super().get_config(), "exclude_history": self.exclude_history}


@keras.saving.register_keras_serializable(package="tfseqrec")
class GBCE(_CandidateLoss):
    """Generalised binary cross-entropy (gSASRec).

    Negative sampling makes BCE models overconfident; gBCE raises the positive's
    probability to the power ``beta = alpha * (t * (1 - 1/alpha) + 1/alpha)`` with
    ``alpha = num_negatives / (num_items - 1)``, so ``t = 1`` recovers the full-softmax
    calibration and ``t = 0`` plain BCE.

    Args:
        num_negatives: uniform negatives per position.
        t: calibration parameter in [0, 1].
        exclude_history: draw no negative from the user's sequence.

    Reference:
        Petrov & Macdonald, "gSASRec: Reducing Overconfidence in Sequential
        Recommendation Trained with Negative Sampling", RecSys 2023.
    """

    def __init__(self, num_negatives=256, t=0.75, exclude_history=False, name="gbce", **kwargs):
        super().__init__(num_negatives=num_negatives, name=name, **kwargs)
        self.exclude_history = exclude_history
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"t must be in [0, 1], got {t}")
        self.t = t
        self.num_items = None

    def beta(self, num_items):
        alpha = self.num_negatives / (num_items - 1)
        return alpha * (self.t * (1 - 1 / alpha) + 1 / alpha)

    def call(self, y_true, y_pred):
        if self.num_items is None:
            raise ValueError("GBCE needs num_items: call from_embeddings, or set loss.num_items")
        return _bce(ops.cast(y_pred, "float32"), positive_weight=self.beta(self.num_items))

    def from_embeddings(
        self, hidden, positives, item_table, item_bias=None, sample_weight=None, history=None
    ):
        self.num_items = int(item_table.shape[0])
        positives = ops.cast(positives, "int32")
        n = ops.shape(positives)[0]
        negatives = self._uniform_negatives((n, self.num_negatives), self.num_items, history)
        ids = ops.concatenate([positives[:, None], negatives], axis=1)
        logits = _drop_accidental_hits(self._logits(hidden, item_table, item_bias, ids), positives, negatives)
        return self(ops.zeros_like(positives), logits, sample_weight=sample_weight)

    def get_config(self):
        config = super().get_config()
        config.update({"t": self.t, "exclude_history": self.exclude_history})
        return config


@keras.saving.register_keras_serializable(package="tfseqrec")
class SampledSoftmaxCrossEntropy(_CandidateLoss):
    """Softmax over the positive and sampled negatives, with logQ.

    Args:
        num_negatives: negatives drawn per batch (shared by its positions), or per
            position with ``per_position``.
        sampler: ``"uniform"``, or ``"log_uniform"`` (Zipfian over ids, which are in
            popularity order, so popular items are drawn more).
        logq_correction: subtract the log sampling probability from each logit, which
            makes the sampled softmax an unbiased estimate of the full one.
        per_position: draw each position's own negatives, as HSTU's reference code
            does (a ``[positions, num_negatives, d]`` gather per batch); shared
            negatives cost one ``[num_negatives, d]`` gather, but each item is then a
            negative far less often (on ML-1M, HSTU learned much more per epoch with
            negatives per position; benchmarks/README.md, "HSTU: its parts").

    Call arguments:
        y_true: ignored (the positive is column 0 of ``y_pred``); pass zeros.
        y_pred: float ``[N, 1 + num_negatives]`` corrected logits, positive first.

    Reference:
        Yi et al., "Sampling-Bias-Corrected Neural Modeling for Large Corpus Item
        Recommendations", RecSys 2019.
    """

    def __init__(
        self,
        num_negatives=256,
        sampler="log_uniform",
        logq_correction=True,
        per_position=False,
        name="sampled_softmax",
        **kwargs,
    ):
        super().__init__(num_negatives=num_negatives, name=name, **kwargs)
        if sampler not in ("uniform", "log_uniform"):
            raise ValueError(f"sampler must be 'uniform' or 'log_uniform', got {sampler!r}")
        self.sampler = sampler
        self.logq_correction = logq_correction
        self.per_position = per_position

    def call(self, y_true, y_pred):
        y_pred = ops.cast(y_pred, "float32")
        positive = ops.zeros(ops.shape(y_pred)[:1], "int32")  # column 0
        return ops.sparse_categorical_crossentropy(positive, y_pred, from_logits=True)

    def sample(self, num_items, rows=None):
        """``(negatives, log_q_of(ids))``: negatives ``[K]`` (or ``[rows, K]``) and their log-probability."""
        shape = (self.num_negatives,) if rows is None else (rows, self.num_negatives)
        if self.sampler == "uniform":
            negatives = self._uniform_negatives(shape, num_items)

            def log_q(ids):
                return ops.full(ops.shape(ids), -math.log(num_items), dtype="float32")

        else:
            # Log-uniform (Zipfian) over [0, num_items): P(i) = log((i+2)/(i+1)) / log(n+1),
            # drawn by inverting the CDF of a uniform draw.
            u = keras.random.uniform(shape, seed=self.seed_generator)
            negatives = ops.cast(ops.floor(ops.exp(u * math.log(num_items + 1.0))) - 1.0, "int32")
            negatives = ops.clip(negatives, 0, num_items - 1)

            def log_q(ids):
                ids = ops.cast(ids, "float32")
                return ops.log(ops.log((ids + 2.0) / (ids + 1.0)) / math.log(num_items + 1.0))

        return negatives, log_q

    def from_embeddings(
        self, hidden, positives, item_table, item_bias=None, sample_weight=None, history=None
    ):
        num_items = int(item_table.shape[0])
        positives = ops.cast(positives, "int32")
        negatives, log_q = self.sample(num_items, ops.shape(hidden)[0] if self.per_position else None)
        pos_logits = ops.sum(hidden * _rows(item_table, positives), axis=-1, keepdims=True)
        if item_bias is not None:
            pos_logits += ops.take(item_bias, positives, axis=0)[:, None]
        neg_logits = self._logits(hidden, item_table, item_bias, negatives)
        per_row = negatives if self.per_position else negatives[None, :]
        if self.logq_correction:
            pos_logits -= log_q(positives)[:, None]
            neg_logits -= log_q(per_row)
        hits = ops.equal(positives[:, None], per_row)
        neg_logits = ops.where(hits, ops.cast(-1e9, neg_logits.dtype), neg_logits)
        return self(
            ops.zeros_like(positives),
            ops.concatenate([pos_logits, neg_logits], axis=1),
            sample_weight=sample_weight,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sampler": self.sampler,
                "logq_correction": self.logq_correction,
                "per_position": self.per_position,
            }
        )
        return config


def cosine_logits(queries, candidates, temperature):
    """``cos(query, candidate) / temperature``, ``[N, d] x [C, d] -> [N, C]`` (Recformer's scores).

    Example:

    >>> q = keras.ops.convert_to_tensor([[1.0, 0.0]])
    >>> c = keras.ops.convert_to_tensor([[2.0, 0.0], [0.0, 3.0]])
    >>> [round(float(v), 4) for v in cosine_logits(q, c, 0.5)[0]]
    [2.0, 0.0]
    """
    q = keras.ops.normalize(queries, axis=-1)
    c = keras.ops.normalize(keras.ops.cast(candidates, q.dtype), axis=-1)
    return keras.ops.matmul(q, keras.ops.transpose(c)) / temperature


@keras.saving.register_keras_serializable(package="tfseqrec")
class ContrastiveLoss(keras.losses.Loss):
    """Softmax cross-entropy of each query against candidate vectors (Recformer).

    Call arguments:
        y_true: int ``[N]``: the column of each row's positive.
        y_pred: float ``[N, C]`` logits (``cosine_logits``).

    ``in_batch(queries, positives, temperature)``: the positive of query ``i`` is
    ``positives[i]``, the batch's other rows are its negatives.

    Example:

    >>> loss = ContrastiveLoss()
    >>> round(float(loss([0], [[0.0, 0.0]])), 4)  # log 2
    0.6931
    """

    def __init__(self, name="contrastive", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        y_pred = keras.ops.cast(y_pred, "float32")
        return keras.losses.sparse_categorical_crossentropy(
            keras.ops.cast(y_true, "int32"), y_pred, from_logits=True
        )

    def in_batch(self, queries, positives, temperature):
        logits = cosine_logits(queries, positives, temperature)
        return self(keras.ops.arange(keras.ops.shape(logits)[0]), logits)


@keras.saving.register_keras_serializable(package="tfseqrec")
class MaskedLMLoss(keras.losses.Loss):
    """Cross-entropy of the original tokens at masked positions, averaged over them.

    Call arguments:
        y_true: int ``[batch, length]`` original token ids.
        y_pred: float ``[batch, length, vocabulary_size]`` logits.
        sample_weight: float ``[batch, length]``: 1 where a token was masked, else 0
            (``ClozeMasking``'s third output); the loss is the weighted mean.
    """

    def __init__(self, name="masked_lm", **kwargs):
        kwargs.setdefault("reduction", "mean_with_sample_weight")
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        y_pred = keras.ops.cast(y_pred, "float32")
        return keras.losses.sparse_categorical_crossentropy(
            keras.ops.cast(y_true, "int32"), y_pred, from_logits=True
        )


LOSSES = {
    "softmax": FullSoftmaxCrossEntropy,
    "bce": BinaryCrossEntropy,
    "sampled_softmax": SampledSoftmaxCrossEntropy,
    "gbce": GBCE,
}


def get(identifier):
    """A loss from a name in ``LOSSES``, a config dict, or a loss object.

    A name (or ``None``, the full softmax) gives the loss ``build`` makes of it with no
    other option: ``SASRec(loss="softmax")`` trains as ``SASRec()`` and ``tfseqrec train``.
    """
    if identifier is None:
        return build("softmax")
    if isinstance(identifier, _CandidateLoss):
        return identifier
    if isinstance(identifier, str):
        return build(identifier)
    return keras.saving.deserialize_keras_object(identifier)


def build(name, seed=None, num_negatives=None, per_position=None, sampler=None, exclude_history=None):
    """The next-item loss called ``name`` with the training options that apply to it.

    ``None`` leaves an option at the loss's own default, except ``exclude_history``:
    the full softmax leaves the sequence's other items out unless it is ``False``
    (best on ML-1M validation). An option given to a loss it does not apply to is a
    ``ValueError`` naming both, as is an unknown name. ``seed`` seeds the samplers.

    >>> build("sampled_softmax", seed=0, num_negatives=128, per_position=True).per_position
    True
    >>> build("softmax", num_negatives=128)
    Traceback (most recent call last):
        ...
    ValueError: num_negatives applies to the sampled losses, not 'softmax'
    """
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; expected one of {sorted(LOSSES)}")
    kwargs = {"exclude_history": True} if name == "softmax" else {"seed": seed}
    if num_negatives is not None:
        if name == "softmax":
            raise ValueError("num_negatives applies to the sampled losses, not 'softmax'")
        kwargs["num_negatives"] = num_negatives
    if per_position is not None:
        if name != "sampled_softmax":
            raise ValueError(f"negatives_per_position applies to the sampled_softmax loss, not {name!r}")
        kwargs["per_position"] = per_position
    if sampler is not None:
        if name != "sampled_softmax":
            raise ValueError(f"sampler applies to the sampled_softmax loss, not {name!r}")
        kwargs["sampler"] = sampler
    if exclude_history is not None:
        if name not in ("softmax", "bce", "gbce"):
            raise ValueError(
                f"negatives_exclude_history applies to the softmax, bce and gbce losses, not {name!r}"
            )
        kwargs["exclude_history"] = exclude_history
    return LOSSES[name](**kwargs)


def fixed_normalizer(targets_per_window, batch_size):
    """The fixed loss normaliser: mean training targets a window times the batch size.

    The models divide each batch's summed loss by it (``loss_normalizer``), so every
    training position weighs the same whatever batch, and so whatever length bucket,
    it falls in, and the loss stays on the scale of a per-position mean. With fewer
    windows than ``batch_size``, one batch holds them all. ``None`` without windows.

    >>> fixed_normalizer([1, 2, 3], batch_size=128)
    6.0
    >>> fixed_normalizer([1, 2, 3], batch_size=2)
    4.0
    """
    count = len(targets_per_window)
    if not count:
        return None
    return float(np.mean(targets_per_window) * min(batch_size, count))


def _bce(logits, positive_weight):
    """``-w log s(pos) - sum log(1 - s(neg))`` with the positive in column 0."""
    pos = logits[:, 0]
    neg = logits[:, 1:]
    pos_loss = positive_weight * ops.softplus(-pos)
    neg_loss = ops.sum(ops.softplus(neg), axis=1)  # a dropped hit (-1e9) adds 0
    return pos_loss + neg_loss


def _drop_accidental_hits(logits, positives, negatives):
    hits = ops.equal(negatives, positives[:, None])
    neg = ops.where(hits, ops.cast(-1e9, logits.dtype), logits[:, 1:])
    return ops.concatenate([logits[:, :1], neg], axis=1)
