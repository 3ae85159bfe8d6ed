"""``tf.data`` pipelines that feed the models.

Every pipeline yields ``(x, y, sample_weight)`` as Keras ``fit`` takes it, with
``x = {"item_ids": int32 [batch, length], "padding_mask": int32 [batch, length]}``
(1 for real items; int32 as in keras-hub backbones, and because ``fit`` under a
``tf.distribute`` strategy averages a first batch to learn shapes, which bool
tensors do not survive). When the model reads event times (HSTU's time bias),
``x`` also holds ``timestamps``: int64 seconds ``[batch, length]``, aligned with
``item_ids`` (0 in padded slots), from ``Sequences.timestamps``.
Histories are left-padded with ``vocab.PAD_ID`` so the newest item is always at the
last position, where the next-item prediction and BERT4Rec's inference [MASK] sit.

Windows are cut in NumPy once (``numpy_pipeline``, vectorized over the flat
``Sequences`` arrays, which also serves them without TensorFlow), then served by
``from_tensor_slices``; the random parts (shuffling, Cloze masking) run fresh on
every pass.
"""

import numpy as np
import tensorflow as tf

from tfseqrec.data import vocab
from tfseqrec.data.numpy_pipeline import (
    causal_windows,
    cloze_windows,
    event_times,
    pad_left,
    pad_left_events,
    pad_left_times,
    padding_mask,
    sliding_windows,
)

__all__ = [
    "causal_dataset",
    "cloze_dataset",
    "eval_dataset",
    "event_times",
    "pad_left",
    "pad_left_events",
    "pad_left_times",
    "sliding_windows",
]


def causal_dataset(
    sequences,
    max_sequence_length,
    batch_size,
    shuffle=True,
    seed=None,
    window_stride=None,
    drop_remainder=False,
    bucket_boundaries=None,
    timestamps=False,
    events=(),
):
    """Next-item training data for SASRec and HSTU.

    The windows of ``numpy_pipeline.causal_windows``: each window of
    ``max_sequence_length + 1`` items gives inputs ``w[:-1]`` and targets ``w[1:]``:
    every position predicts the item after it. Targets after a padded input, and
    reserved-id targets, are 0 with ``sample_weight`` 0.

    Args:
        sequences: training ``splits.Sequences``.
        max_sequence_length: model input length ``N``.
        batch_size: batch size.
        shuffle: reshuffle windows every epoch.
        seed: shuffle seed.
        window_stride: ``None`` for the last ``N + 1`` items of each user; an int to
            also train on earlier windows of long histories.
        drop_remainder: drop the last partial batch.
        bucket_boundaries: widths such as ``(50, 100)``: windows are grouped by length
            and each batch is cut to the smallest width that holds its windows, so
            short histories do not pay for ``max_sequence_length`` of padding. The
            model's positions do not depend on the padding, so outputs are unchanged.
        timestamps: add ``x["timestamps"]``, the inputs' times (``event_times``).
        events: event columns to add as ``x["event_<column>"]`` (``tfseqrec.data.events``).
    """
    x, targets, weights = causal_windows(sequences, max_sequence_length, window_stride, timestamps, events)

    def make(rows, width):
        features = {name: value[rows, -width:] for name, value in x.items()}
        return tf.data.Dataset.from_tensor_slices((features, targets[rows, -width:], weights[rows, -width:]))

    return _bucketed(make, x["item_ids"], bucket_boundaries, batch_size, shuffle, seed, drop_remainder)


def cloze_dataset(
    sequences,
    max_sequence_length,
    batch_size,
    shuffle=True,
    seed=None,
    window_stride=None,
    drop_remainder=False,
    bucket_boundaries=None,
    events=(),
):
    """Masked-item training data for BERT4Rec.

    The elements are unmasked ``x`` dicts: the model masks them inside its compiled
    training step (``ClozeTask`` with its ``masking.ClozePreprocessor``, on the
    accelerator when there is one), fresh each step; masking in the input pipeline
    instead is ``ds.map(ClozePreprocessor(...))``.
    ``bucket_boundaries`` and ``events`` work as in ``causal_dataset``.
    """
    x = cloze_windows(sequences, max_sequence_length, window_stride, events)

    def make(rows, width):
        return tf.data.Dataset.from_tensor_slices({name: value[rows, -width:] for name, value in x.items()})

    return _bucketed(make, x["item_ids"], bucket_boundaries, batch_size, shuffle, seed, drop_remainder)


def eval_dataset(
    cases, max_sequence_length, batch_size, history=True, bucket_boundaries=None, timestamps=False, events=()
):
    """Evaluation data: ``(x, target)`` with the last ``N`` history items as input.

    ``x`` holds ``item_ids`` and ``padding_mask`` (the model's window) and, with
    ``history=True``, ``history``: the *whole* history, int32 ``[batch, longest]``
    right-padded with ``PAD_ID`` per batch. Validation inside ``fit``
    (``SequentialRecommender.test_step``) excludes it from the candidates, the target
    excepted, as ``evaluation.evaluate`` does; without it only the window is excluded.

    With ``bucket_boundaries`` (widths such as ``(50, 100)``) the cases are grouped by
    history length and each group's windows are cut to the smallest width that holds
    the history and one more slot (BERT4Rec's [MASK]); scores do not depend on the
    padding, so the metrics are the same, in less time. The cases then come grouped,
    not in their original order. ``timestamps`` adds the window's times, ``events`` its context.
    """
    inputs = pad_left(cases.histories, max_sequence_length)
    times = pad_left_times(cases.histories, max_sequence_length) if timestamps else None
    context = pad_left_events(cases.histories, max_sequence_length, events)
    targets = cases.targets.astype(np.int32)
    seen = cases.histories

    def make(rows, width):
        x = {"item_ids": inputs[rows, -width:], "padding_mask": padding_mask(inputs[rows, -width:])}
        if times is not None:
            x["timestamps"] = times[rows, -width:]
        x.update({name: value[rows, -width:] for name, value in context.items()})
        if history:
            starts, sizes = seen.row_splits[:-1][rows], seen.lengths[rows]
            splits = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            index = np.repeat(starts - splits[:-1], sizes) + np.arange(splits[-1])
            x["history"] = tf.RaggedTensor.from_row_splits(seen.values[index].astype(np.int32), splits)
        ds = tf.data.Dataset.from_tensor_slices((x, targets[rows])).batch(batch_size)
        if history:
            ds = ds.map(lambda x, y: ({**x, "history": x["history"].to_tensor(vocab.PAD_ID)}, y))
        return ds

    if not bucket_boundaries:
        return make(np.arange(len(targets)), max_sequence_length).prefetch(tf.data.AUTOTUNE)
    edges = _bucket_edges(bucket_boundaries, max_sequence_length)
    lengths = np.minimum(seen.lengths, max_sequence_length)
    bucket = np.minimum(np.searchsorted(edges, lengths + 1), len(edges) - 1)
    parts = [make(np.flatnonzero(bucket == i), edge) for i, edge in enumerate(edges) if np.any(bucket == i)]
    ds = parts[0] if parts else make(np.arange(0), max_sequence_length)
    for part in parts[1:]:
        ds = ds.concatenate(part)
    return ds.prefetch(tf.data.AUTOTUNE)


def _bucket_edges(boundaries, width):
    """The sorted bucket widths: ``boundaries`` inside ``(0, width)``, then ``width``."""
    return sorted({int(b) for b in boundaries if 0 < b < width} | {width})


def _bucketed(make, padded, boundaries, batch_size, shuffle, seed, drop_remainder):
    """Batches of ``make(rows, width)`` datasets, one per length bucket, interleaved."""
    width = padded.shape[1]
    if not boundaries:
        rows = np.arange(len(padded))
        return _finish(make(rows, width), len(rows), batch_size, shuffle, seed, drop_remainder)
    edges = _bucket_edges(boundaries, width)
    lengths = (padded != vocab.PAD_ID).sum(axis=1)
    bucket = np.searchsorted(edges, lengths)  # smallest edge >= length
    parts, sizes = [], []
    for i, edge in enumerate(edges):
        rows = np.flatnonzero(bucket == i)
        if len(rows):
            parts.append(
                _finish(make(rows, edge), len(rows), batch_size, shuffle, seed, drop_remainder, False)
            )
            sizes.append(len(rows))
    if len(parts) == 1:
        ds = parts[0]
    else:
        # Batches of all buckets in random order, each bucket drawn in proportion to its size.
        ds = tf.data.Dataset.sample_from_datasets(
            parts, weights=[n / sum(sizes) for n in sizes], seed=seed, stop_on_empty_dataset=False
        )
        # Every bucket's batches are drawn exactly once: the epoch length is known, so
        # progress bars show it and Keras does not warn that the data "ran out".
        batches = sum(n // batch_size if drop_remainder else -(-n // batch_size) for n in sizes)
        ds = ds.apply(tf.data.experimental.assert_cardinality(batches))
    return ds.prefetch(tf.data.AUTOTUNE)


def _finish(ds, size, batch_size, shuffle, seed, drop_remainder, prefetch=True):
    if shuffle:
        ds = ds.shuffle(size, seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    return ds.prefetch(tf.data.AUTOTUNE) if prefetch else ds
