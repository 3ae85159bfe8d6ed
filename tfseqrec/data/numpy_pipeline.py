"""NumPy training windows and batches: the data of ``pipeline``, without TensorFlow.

The windows are cut here, in NumPy (vectorized over the flat ``Sequences`` arrays),
for both feeds: ``pipeline``'s ``tf.data`` datasets serve these arrays, and
``causal_batches`` / ``cloze_batches`` serve the same arrays as a
``keras.utils.PyDataset``, for a backend (JAX, PyTorch) where TensorFlow is absent.
Batches are reshuffled every epoch; BERT4Rec's Cloze masking is not applied here but
drawn fresh inside the model's training step (``ClozeTask``), on every backend, so
both feeds give the same windows and the same masking. Length buckets are
``pipeline``'s alone.

Example:

>>> from tfseqrec.data import splits
>>> seqs = splits.Sequences.from_list([0, 1], [[3, 4, 5], [6, 7]])
>>> batches = causal_batches(seqs, max_sequence_length=3, batch_size=2, shuffle=False)
>>> x, y, sample_weight = batches[0]
>>> x["item_ids"].tolist(), y.tolist()
([[0, 3, 4], [0, 0, 6]], [[0, 4, 5], [0, 0, 7]])
"""

import keras
import numpy as np

from tfseqrec.data import events as events_lib
from tfseqrec.data import vocab


def pad_left(sequences, length, drop_last=0):
    """The last ``length`` items of each sequence, left-padded: int32 ``[n, length]``.

    Args:
        sequences: ``splits.Sequences``.
        length: output width.
        drop_last: ignore each sequence's last ``drop_last`` items first.
    """
    return _gather_windows(sequences.values, *_newest_bounds(sequences, length, drop_last), length)


def pad_left_times(sequences, length):
    """The times of ``pad_left(sequences, length)``'s items: int64 seconds ``[n, length]``, 0 where padded."""
    return _gather_windows(event_times(sequences), *_newest_bounds(sequences, length), length, np.int64)


def pad_left_events(sequences, length, columns):
    """The event context of ``pad_left(sequences, length)``'s items:
    ``{"event_<column>": int32 [n, length]}``, 0 where padded."""
    starts, ends = _newest_bounds(sequences, length)
    return _event_windows(sequences, columns, starts, ends, length)


def _event_windows(sequences, columns, starts, ends, width):
    """``{"event_<column>": int32 [windows, width]}`` of the windows ``starts:ends``."""
    if not columns:
        return {}
    if sequences.events is None or any(c not in sequences.events for c in columns):
        have = [] if sequences.events is None else list(sequences.events)
        raise ValueError(
            f"the model reads event features {list(columns)}, but these sequences carry {have} "
            "(read the log with event_columns=..., or --event-features)"
        )
    return {
        events_lib.input_name(c): _gather_windows(sequences.events[c], starts, ends, width) for c in columns
    }


def _newest_bounds(sequences, length, drop_last=0):
    """``(starts, ends)`` of each sequence's newest ``length`` items, its last ``drop_last`` ignored."""
    ends = sequences.row_splits[1:] - drop_last
    return np.maximum(sequences.row_splits[:-1], ends - length), ends


def event_times(sequences):
    """``sequences.timestamps`` as int64 seconds (rounded down); ``ValueError`` when there are none."""
    if sequences.timestamps is None:
        raise ValueError(
            "the model reads event times, but these sequences have none (the data file has no "
            "timestamps: the SASRec text format, or a CSV without a time column)"
        )
    return np.floor(sequences.timestamps).astype(np.int64)


def sliding_windows(sequences, width, stride=None, min_length=1):
    """Windows of up to ``width`` items over each sequence, left-padded.

    With ``stride=None`` a sequence gives one window, its last ``width`` items. With
    a stride, windows end at ``n, n - stride, n - 2 * stride, ...`` while they hold at
    least ``min_length`` items, so the early part of long histories is trained on too
    (the newest window always comes first for a user).

    Returns:
        int32 ``[num_windows, width]`` and the int64 row index of each window.
    """
    starts, ends, rows = _window_bounds(sequences, width, stride, min_length)
    return _gather_windows(sequences.values, starts, ends, width), rows


def _window_bounds(sequences, width, stride, min_length):
    """``(starts, ends, rows)`` of the windows of ``sliding_windows`` over the flat arrays."""
    lengths = sequences.lengths
    if stride is None:
        rows = np.flatnonzero(lengths >= min_length)
        ends = sequences.row_splits[1:][rows]
    else:
        if stride < 1:
            raise ValueError(f"stride must be positive, got {stride}")
        # Windows per row: ends n, n-stride, ... >= min_length.
        counts = np.where(lengths >= min_length, (lengths - min_length) // stride + 1, 0)
        rows = np.repeat(np.arange(len(lengths)), counts)
        k = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        ends = sequences.row_splits[1:][rows] - k * stride
    starts = np.maximum(sequences.row_splits[:-1][rows], ends - width)
    return starts, ends, rows


def targets_outside_windows(sequences, width, stride=None, min_length=1, first_is_target=True):
    """``(outside, total)``: training targets of ``sequences`` that no window of ``sliding_windows``
    trains on, and all of them.

    Each item of a sequence is a target, but with ``first_is_target=False`` (next-item
    training, where a sequence's first item has nothing before it to predict it from, nor has
    a window's first item) neither a sequence's nor a window's first item is. With
    ``stride=None`` a long history keeps only its newest ``width`` items, so its earlier
    items are never trained on; a stride up to ``width`` covers them all.

    >>> from tfseqrec.data import splits
    >>> seqs = splits.Sequences.from_list([0, 1], [[3, 4, 5, 6, 7], [8, 9]])
    >>> targets_outside_windows(seqs, 3, first_is_target=False)  # 4 and 5 are cut off
    (2, 5)
    >>> targets_outside_windows(seqs, 3, stride=2, first_is_target=False)
    (0, 5)
    """
    starts, ends, _ = _window_bounds(sequences, width, stride, min_length)
    skip = 0 if first_is_target else 1
    # Covered positions of the flat values: +1 where a window's targets start, -1 where they end.
    change = np.zeros(len(sequences.values) + 1, np.int64)
    np.add.at(change, starts + skip, 1)
    np.add.at(change, np.maximum(ends, starts + skip), -1)
    covered = int((np.cumsum(change)[:-1] > 0).sum())
    total = int(np.maximum(sequences.lengths - skip, 0).sum())
    return total - covered, total


def padding_mask(ids):
    """1 where ``ids`` holds an item, 0 where padded: int32, the shape of ``ids``."""
    return (ids != vocab.PAD_ID).astype(np.int32)


def _gather_windows(values, starts, ends, width, dtype=np.int32):
    lengths = np.clip(ends - starts, 0, width)
    offsets = np.arange(width)[None, :] - (width - lengths)[:, None]
    index = starts[:, None] + offsets
    valid = offsets >= 0
    out = np.where(valid, values[np.where(valid, index, 0)] if len(values) else 0, vocab.PAD_ID)
    return out.astype(dtype)


def causal_windows(sequences, max_sequence_length, window_stride=None, timestamps=False, events=()):
    """Next-item training windows: ``(x, y, sample_weight)`` NumPy arrays, one row a window.

    Each window of ``max_sequence_length + 1`` items gives inputs ``w[:-1]`` and
    targets ``w[1:]``: every position predicts the item after it. Targets after a
    padded input, and reserved-id targets, are 0 with ``sample_weight`` 0.

    Args:
        sequences: training ``splits.Sequences``.
        max_sequence_length: model input length ``N``.
        window_stride: ``None`` for the last ``N + 1`` items of each user; an int to
            also train on earlier windows of long histories (``sliding_windows``).
        timestamps: add ``x["timestamps"]``, the inputs' times (``event_times``).
        events: event columns to add as ``x["event_<column>"]``, the inputs' context.

    Returns:
        ``x = {"item_ids", "padding_mask"[, "timestamps", "event_<column>" ...]}``,
        ``y`` int32 and ``sample_weight`` float32, each ``[num_windows, N]``.
    """
    width = max_sequence_length + 1
    starts, ends, _ = _window_bounds(sequences, width, window_stride, min_length=2)
    windows = _gather_windows(sequences.values, starts, ends, width)
    inputs, targets = windows[:, :-1], windows[:, 1:]
    # A target counts only after a real input: the first item has no history to
    # predict it from (as in the SASRec sampler).
    targets = np.where(inputs != vocab.PAD_ID, targets, vocab.PAD_ID).astype(np.int32)
    weights = (targets >= vocab.NUM_RESERVED).astype(np.float32)
    x = {"item_ids": inputs, "padding_mask": padding_mask(inputs)}
    if timestamps:
        x["timestamps"] = _gather_windows(event_times(sequences), starts, ends, width, np.int64)[:, :-1]
    x.update({k: v[:, :-1] for k, v in _event_windows(sequences, events, starts, ends, width).items()})
    return x, targets, weights


def cloze_windows(sequences, max_sequence_length, window_stride=None, events=()):
    """BERT4Rec's training windows, unmasked: ``{"item_ids", "padding_mask"}`` int32 ``[num_windows, N]``
    (and ``"event_<column>"`` of each of ``events``).

    The model masks them inside its training step (``ClozeTask``).
    """
    starts, ends, _ = _window_bounds(sequences, max_sequence_length, window_stride, 1)
    windows = _gather_windows(sequences.values, starts, ends, max_sequence_length)
    x = {"item_ids": windows, "padding_mask": padding_mask(windows)}
    x.update(_event_windows(sequences, events, starts, ends, max_sequence_length))
    return x


class Batches(keras.utils.PyDataset):
    """Batches of a structure of NumPy arrays (rows aligned), for ``fit`` on any backend.

    Args:
        data: an array, a dict or tuple of arrays (``(x, y, sample_weight)``), all with
            the same number of rows.
        batch_size: rows a batch.
        shuffle: serve the rows in a new random order every epoch.
        seed: the order's seed.
        drop_remainder: drop the last partial batch.
    """

    def __init__(self, data, batch_size, shuffle=True, seed=None, drop_remainder=False, **kwargs):
        super().__init__(**kwargs)
        self.data = data
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.drop_remainder = drop_remainder
        self.num_rows = len(keras.tree.flatten(data)[0])
        self._rng = np.random.default_rng(seed)
        self._order = self._rng.permutation(self.num_rows) if shuffle else np.arange(self.num_rows)

    def __len__(self):
        if self.drop_remainder:
            return self.num_rows // self.batch_size
        return -(-self.num_rows // self.batch_size)

    def __getitem__(self, index):
        rows = self._order[index * self.batch_size : (index + 1) * self.batch_size]
        return keras.tree.map_structure(lambda array: array[rows], self.data)

    def on_epoch_end(self):
        if self.shuffle:
            self._order = self._rng.permutation(self.num_rows)


def causal_batches(
    sequences,
    max_sequence_length,
    batch_size,
    shuffle=True,
    seed=None,
    window_stride=None,
    drop_remainder=False,
    timestamps=False,
    events=(),
):
    """``pipeline.causal_dataset``'s batches as a ``Batches`` (no TensorFlow): SASRec, HSTU."""
    data = causal_windows(sequences, max_sequence_length, window_stride, timestamps, events)
    return Batches(data, batch_size, shuffle=shuffle, seed=seed, drop_remainder=drop_remainder)


def cloze_batches(
    sequences,
    max_sequence_length,
    batch_size,
    shuffle=True,
    seed=None,
    window_stride=None,
    drop_remainder=False,
    events=(),
):
    """``pipeline.cloze_dataset``'s batches as a ``Batches`` (no TensorFlow): BERT4Rec masks them in its step."""
    data = cloze_windows(sequences, max_sequence_length, window_stride, events)
    return Batches(data, batch_size, shuffle=shuffle, seed=seed, drop_remainder=drop_remainder)
