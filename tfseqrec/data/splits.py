"""From an interaction log to per-user sequences and evaluation splits.

The steps, each reporting what it removed:

    sort_by_time      events in time order per user, stable on ties (file order wins)
    drop_duplicates   exact duplicate events (same user, item and time) kept once
    k_core            drop users and items with too few events, until none remain
    build_sequences   one integer sequence per user, through an ``ItemVocabulary``
    leave_one_out     last item test, second-last validation (or training, with
                      ``validation="none"``), the rest training
    prepare           all of the above; the vocabulary's counts (popularity, id order)
                      come from training events only
    cold_start_split  test cases whose target item never appears in training

Sequences are stored flat (``values`` plus ``row_splits``, as ``tf.RaggedTensor``
stores them) so a million events cost two NumPy arrays, not a million lists.
"""

import dataclasses
import datetime

import numpy as np

from tfseqrec.data import events as events_lib
from tfseqrec.data import vocab as vocab_lib


@dataclasses.dataclass
class Sequences:
    """Per-user integer item sequences, oldest first.

    Attributes:
        users: raw user ids, ``[num_users]``.
        values: all item ids back to back, int64 ``[total]``.
        row_splits: int64 ``[num_users + 1]``; user ``u`` owns
            ``values[row_splits[u]:row_splits[u + 1]]``.
        timestamps: the time of each event in seconds, parallel to ``values``
            (int64 or float64), or ``None`` when the data has no real times (the
            SASRec text format's order is only line order). Every operation below
            carries them along with the ids.
        events: ``{column: int32 slots}`` of the event context, parallel to ``values``
            (``tfseqrec.data.events``), or ``None``; carried along as the times are.
    """

    users: np.ndarray
    values: np.ndarray
    row_splits: np.ndarray
    timestamps: np.ndarray = None
    events: dict = None

    def __len__(self):
        return len(self.users)

    def __getitem__(self, u):
        return self.values[self.row_splits[u] : self.row_splits[u + 1]]

    @property
    def lengths(self):
        return np.diff(self.row_splits)

    @property
    def num_events(self):
        return int(self.row_splits[-1])

    def item_counts(self, size):
        """Occurrences of each id ``0 .. size - 1`` in the sequences: int64 ``[size]``."""
        return np.bincount(self.values, minlength=size)

    def times(self, u):
        """The event times of user ``u`` (``timestamps`` must be set)."""
        return self.timestamps[self.row_splits[u] : self.row_splits[u + 1]]

    def to_list(self):
        return [self[u] for u in range(len(self))]

    @classmethod
    def from_list(cls, users, seqs, timestamps=None, events=None):
        """Sequences of lists of ids (and, when given, lists of their times and
        ``{column: lists of slots}`` of their event context)."""
        lengths = np.asarray([len(s) for s in seqs], np.int64)
        splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = np.concatenate([np.asarray(s, np.int64) for s in seqs]) if seqs else np.zeros(0, np.int64)
        times = None
        if timestamps is not None:
            if [len(t) for t in timestamps] != lengths.tolist():
                raise ValueError("each sequence needs exactly one timestamp per item")
            times = np.concatenate([np.asarray(t) for t in timestamps]) if seqs else np.zeros(0, np.int64)
        flat = None
        if events is not None:
            flat = {}
            for name, column in events.items():
                if [len(e) for e in column] != lengths.tolist():
                    raise ValueError(f"each sequence needs exactly one {name!r} value per item")
                flat[name] = (
                    np.concatenate([np.asarray(e, np.int32) for e in column])
                    if seqs
                    else np.zeros(0, np.int32)
                )
        return cls(np.asarray(users, dtype=object), values.astype(np.int64), splits, times, flat)

    def take(self, users, index, row_splits):
        """``Sequences`` of ``users`` made of the events at flat ``index`` (ids, times and context alike)."""
        times = None if self.timestamps is None else self.timestamps[index]
        events = None if self.events is None else {k: v[index] for k, v in self.events.items()}
        return Sequences(users, self.values[index], np.asarray(row_splits, np.int64), times, events)

    def drop_last(self, n):
        """Each sequence without its last ``n`` items (empty when shorter)."""
        return self.keep_first(np.maximum(self.lengths - n, 0))

    def keep_first(self, lengths):
        """Each sequence ``u`` cut to its first ``lengths[u]`` items."""
        keep = ragged_mask(self.row_splits, lengths)
        return self.take(self.users, keep, np.concatenate([[0], np.cumsum(lengths)]))

    def select(self, rows):
        """The sequences of the given row indices (or boolean mask), in that order."""
        rows = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows, np.int64)
        lengths = self.lengths[rows]
        starts = self.row_splits[rows]
        splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        index = np.repeat(starts - splits[:-1], lengths) + np.arange(splits[-1])
        return self.take(self.users[rows], index, splits)


@dataclasses.dataclass
class Cases:
    """Evaluation cases: a history and the held-out next item per user."""

    histories: Sequences
    targets: np.ndarray

    def __len__(self):
        return len(self.targets)

    def select(self, rows):
        """The cases of the given row indices (or boolean mask), in that order."""
        rows = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows, np.int64)
        return Cases(self.histories.select(rows), self.targets[rows])

    def sample(self, n, seed=0):
        """A fixed, seeded sample of ``n`` cases (all of them when ``n`` is ``None`` or not smaller).

        The rows keep their order; the same ``n`` and ``seed`` give the same users.

        >>> cases = Cases(Sequences.from_list(["a", "b", "c"], [[3], [4], [5]]), np.array([4, 5, 6]))
        >>> cases.sample(2, seed=0).targets.tolist(), len(cases.sample(None))
        ([5, 6], 3)
        """
        if n is None or n >= len(self):
            return self
        rows = np.sort(np.random.default_rng(seed).choice(len(self), size=n, replace=False))
        return self.select(rows)


@dataclasses.dataclass
class Split:
    """A train / validation / test split of sequences.

    ``train`` holds every user's training items (for users too short to evaluate,
    their whole sequence). ``valid`` and ``test`` are ``Cases``; a test history
    includes the validation item. ``report`` counts what each step did.
    """

    train: Sequences
    valid: Cases
    test: Cases
    report: dict
    # The event context's values (``events.EventVocabulary``) when the sequences carry it.
    event_vocabulary: object = None


@dataclasses.dataclass
class ColdStartSplit:
    """Training sequences without the held-out items, and test cases split by target.

    ``test_cold`` cases predict an item that never occurs in ``train``;
    ``test_warm`` cases predict one that does. ``cold_items`` are the held-out ids.
    """

    train: Sequences
    test_warm: Cases
    test_cold: Cases
    cold_items: np.ndarray
    report: dict


def sort_by_time(interactions):
    """Events grouped by user (users in first-appearance order), in time order.

    Ties in time keep file order (a stable sort), so the SASRec text format, whose
    "timestamps" are line numbers, is left exactly as written.
    """
    _, user_rank = vocab_lib.factorize(interactions.users)  # codes in first-appearance order
    order = np.lexsort((np.arange(len(interactions)), interactions.timestamps, user_rank))
    return interactions.select(order)


def drop_duplicates(interactions):
    """Keeps each exact duplicate event (same user, item and time) once, the first in order.

    ``interactions`` must be sorted by ``sort_by_time``. Only data with real times has
    exact duplicates: in the SASRec text format (and ``*.inter.json``) an event's time
    is its line (or list position), so the same item twice in a row is a repeat, kept
    as written (``build_sequences`` can drop repeats). A log whose every event is
    written twice (a file concatenated with itself, a join) would otherwise train on,
    and be tested with, each item twice.

    Returns:
        ``(interactions, report)``; ``report["removed_duplicates"]`` counts the dropped events.
    """
    times = interactions.timestamps
    same = times[1:] == times[:-1] if interactions.has_time else np.zeros(0, bool)
    if not same.any():
        return interactions, {"removed_duplicates": 0}
    # Sorted by user then time, duplicates lie within a run of equal times: only the
    # (few) events in such runs are compared, by (run, user, item).
    in_run = np.zeros(len(times), bool)
    in_run[1:] |= same
    in_run[:-1] |= same
    where = np.flatnonzero(in_run)
    run = np.cumsum(np.concatenate([[True], ~same]))[where]
    _, users = vocab_lib.factorize(interactions.users[where])
    _, items = vocab_lib.factorize(interactions.items[where])
    order = np.lexsort((where, items, users, run))
    key = np.stack([run, users, items])[:, order]
    repeat = np.zeros(len(times), bool)
    repeat[where[order[1:]]] = np.all(key[:, 1:] == key[:, :-1], axis=0)
    if not repeat.any():
        return interactions, {"removed_duplicates": 0}
    return interactions.select(~repeat), {"removed_duplicates": int(repeat.sum())}


def k_core(interactions, min_user_interactions=5, min_item_interactions=5):
    """Repeatedly drops users and items with too few events until none remain.

    Returns:
        ``(filtered, report)``; ``report`` counts removed events, users and items.
    """
    keep = np.ones(len(interactions), bool)
    users, items = interactions.users, interactions.items
    _, u_codes = vocab_lib.factorize(users)
    _, i_codes = vocab_lib.factorize(items)
    while True:
        u_counts = np.bincount(u_codes[keep], minlength=u_codes.max() + 1)
        i_counts = np.bincount(i_codes[keep], minlength=i_codes.max() + 1)
        bad = keep & (
            (u_counts[u_codes] < min_user_interactions) | (i_counts[i_codes] < min_item_interactions)
        )
        if not bad.any():
            break
        keep &= ~bad
    report = {
        "k_core": [min_user_interactions, min_item_interactions],
        "removed_interactions": int((~keep).sum()),
        "removed_users": int(len(np.unique(u_codes)) - len(np.unique(u_codes[keep]))),
        "removed_items": int(len(np.unique(i_codes)) - len(np.unique(i_codes[keep]))),
    }
    return interactions.select(keep), report


def build_sequences(interactions, vocabulary=None, drop_repeats=False, event_vocabulary=None):
    """One id sequence per user, in the order of ``interactions`` (sort it first).

    Args:
        interactions: ``Interactions`` sorted by ``sort_by_time``.
        vocabulary: an ``ItemVocabulary``; ``None`` builds one from these events.
        drop_repeats: drop an event equal to the user's previous one.
        event_vocabulary: an ``events.EventVocabulary`` that encodes ``interactions.events``
            into the sequences' ``events``; ``None`` leaves the context out.

    Returns:
        ``(sequences, vocabulary, report)``; ``report["oov_interactions"]`` counts events
        whose item the vocabulary does not know (kept as ``OOV_ID``). The sequences
        carry the events' times when ``interactions.has_time``.
    """
    if vocabulary is None:
        vocabulary = vocab_lib.ItemVocabulary.from_items(interactions.items)
    ids = vocabulary.lookup(interactions.items)
    users = interactions.users
    times = interactions.timestamps if interactions.has_time else None
    context = None
    if event_vocabulary is not None:
        if interactions.events is None:
            raise ValueError(f"the model reads event features {event_vocabulary.columns}; the log has none")
        context = event_vocabulary.encode(interactions.events)
    boundary = user_boundaries(users)
    starts = np.flatnonzero(boundary)
    report = {"oov_interactions": int((ids == vocab_lib.OOV_ID).sum()), "removed_repeats": 0}
    if len(vocab_lib.factorize(users[starts])[0]) != len(starts):
        raise ValueError("events of a user are not contiguous: call sort_by_time first")
    if drop_repeats:
        repeat = ~boundary
        repeat[1:] &= ids[1:] == ids[:-1]
        repeat[0] = False
        report["removed_repeats"] = int(repeat.sum())
        ids, users, boundary = ids[~repeat], users[~repeat], boundary[~repeat]
        times = None if times is None else times[~repeat]
        context = None if context is None else {k: v[~repeat] for k, v in context.items()}
        starts = np.flatnonzero(boundary)
    splits = np.append(starts, len(ids)).astype(np.int64)
    return Sequences(users[starts], ids.astype(np.int64), splits, times, context), vocabulary, report


# ``validation`` of ``leave_one_out``: the second-to-last item validates, or is trained on.
VALIDATION = ("last", "none")


def train_lengths(lengths, min_length=3, validation="last"):
    """Training items of sequences of ``lengths`` under ``leave_one_out``.

    >>> train_lengths([5, 3, 2]).tolist()  # the last two items of an evaluable sequence are held out
    [3, 1, 2]
    >>> train_lengths([5, 3, 2], validation="none").tolist()  # only the last
    [4, 2, 2]
    """
    if validation not in VALIDATION:
        raise ValueError(f"validation must be one of {list(VALIDATION)}, got {validation!r}")
    lengths = np.asarray(lengths)
    held_out = 2 if validation == "last" else 1
    return np.where(lengths >= min_length, lengths - held_out, lengths)


def leave_one_out(sequences, min_length=3, validation="last"):
    """The standard SASRec / BERT4Rec protocol.

    Users with at least ``min_length`` items: last item test, second-last validation,
    the rest training. Shorter users contribute their whole sequence to training and
    no evaluation case (counted in ``report["train_only_users"]``).

    ``validation="none"``: no validation cases; the second-to-last item is a training
    item like the others (the HSTU paper's protocol). The test cases are the same.
    """
    evaluable = sequences.lengths >= min_length
    train = sequences.keep_first(train_lengths(sequences.lengths, min_length, validation))
    ev = sequences.select(evaluable)
    last = ev.row_splits[1:] - 1
    valid = Cases(ev.drop_last(2), ev.values[last - 1])
    if validation == "none":
        valid = valid.select(np.zeros(len(valid), bool))
    test = Cases(ev.drop_last(1), ev.values[last])
    report = {
        "train_users": len(train),
        "train_interactions": train.num_events,
        "valid_cases": len(valid),
        "test_cases": len(test),
        "train_only_users": int((~evaluable).sum()),
    }
    return Split(train, valid, test, report)


# How ``prepare`` splits: each user's last items, or the log at points in time.
SPLITS = ("leave_one_out", "temporal")
# The targets of a temporal split's test (and validation) period: every event of it, or a user's first.
TARGETS = ("all", "first")


def temporal_split(sequences, test_start, valid_start=None, targets="all", validation="last"):
    """A global temporal split (RecTools' ``TimeRangeSplitter``, one fold).

    Events from ``test_start`` on are the test period: each user with events both
    before and in it gives test cases whose history is every event before
    ``test_start`` and whose targets are the user's test-period events (``"all"``,
    one case each, the same history) or the first of them (``"first"``). Training
    sees nothing from the test period.

    With ``valid_start`` (before ``test_start``), the events in ``[valid_start,
    test_start)`` are the validation period, cases made the same way from the events
    before ``valid_start``, and training holds only those. Without it, each user's last
    event before ``test_start`` validates as in ``leave_one_out`` (``validation="none"``:
    it is trained on, and there is no validation case).

    Args:
        sequences: ``Sequences`` with ``timestamps`` (seconds), each in time order.
        test_start, valid_start: seconds since the epoch.
        targets: ``"all"`` or ``"first"``.
        validation: ``"last"`` or ``"none"``, without ``valid_start``.

    Returns:
        ``Split``; its report counts the users and items new in each period (no event
        before it), the users of a period without history (no case: nothing to recommend
        from), and the events of each period.

    >>> seqs = Sequences.from_list(["a", "b"], [[3, 4, 5, 6], [7, 8]], [[1, 2, 3, 9], [8, 9]])
    >>> split = temporal_split(seqs, test_start=9)
    >>> split.test.targets.tolist(), split.test.histories.to_list()
    ([6, 8], [array([3, 4, 5]), array([7])])
    >>> split.train.to_list(), split.valid.targets.tolist()
    ([array([3, 4]), array([7])], [5])
    """
    if sequences.timestamps is None:
        raise ValueError(
            "the temporal split needs event times, and the data has none (the SASRec text format, "
            "or a CSV without a time column)"
        )
    if targets not in TARGETS:
        raise ValueError(f"targets must be one of {list(TARGETS)}, got {targets!r}")
    times = sequences.timestamps
    first, last = times.min(), times.max()
    for name, value in (("test_start", test_start), ("valid_start", valid_start)):
        if value is not None and not first < value <= last:
            raise ValueError(
                f"{name} {_when(value)} leaves a period empty: the events run from {_when(first)} "
                f"to {_when(last)}"
            )
    if valid_start is not None and valid_start >= test_start:
        raise ValueError(f"valid_start {_when(valid_start)} must come before test_start {_when(test_start)}")
    row = np.repeat(np.arange(len(sequences)), sequences.lengths)
    before_test = np.bincount(row[times < test_start], minlength=len(sequences))
    train_end = test_start if valid_start is None else valid_start
    before_train_end = np.bincount(row[times < train_end], minlength=len(sequences))
    test, test_counts = _period_cases(sequences, before_test, test_start, None, targets)
    report = {"split": "temporal", "test_start": test_start, "test_events": int((times >= test_start).sum())}
    report.update({f"test_{k}": v for k, v in test_counts.items()})
    if valid_start is None:
        held = before_test
        if validation == "last":
            held = np.where(before_test >= 2, before_test - 1, before_test)
        train = sequences.keep_first(held)
        evaluable = (before_test >= 2) & (validation == "last")
        ev = sequences.select(evaluable)
        cut = before_test[evaluable]
        valid = Cases(ev.keep_first(cut - 1), ev.values[ev.row_splits[:-1] + cut - 1])
    else:
        train = sequences.keep_first(before_train_end)
        in_valid = np.bincount(row[(times >= valid_start) & (times < test_start)], minlength=len(sequences))
        valid_sequences = sequences.keep_first(before_train_end + in_valid)
        valid, valid_counts = _period_cases(valid_sequences, before_train_end, valid_start, None, targets)
        report.update(valid_start=valid_start, valid_events=int(in_valid.sum()))
        report.update({f"valid_{k}": v for k, v in valid_counts.items()})
    trained_items = set(np.unique(train.values).tolist())
    if valid_start is not None:
        in_valid_period = (times >= valid_start) & (times < test_start)
        report["valid_new_items"] = len(
            set(np.unique(sequences.values[in_valid_period]).tolist()) - trained_items
        )
    report.update(
        train_users=int((train.lengths > 0).sum()),
        train_interactions=train.num_events,
        valid_cases=len(valid),
        test_cases=len(test),
        # New in the test period: not in training nor (with one) in the validation period.
        test_new_items=len(
            set(np.unique(sequences.values[times >= test_start]).tolist())
            - set(np.unique(sequences.values[times < test_start]).tolist())
        ),
        train_only_users=int((before_test == sequences.lengths).sum()),
    )
    return Split(train, valid, test, report)


def _period_cases(sequences, before, start, end, targets):
    """``(Cases, counts)`` of a period beginning at ``start``: each user's events before it
    (``before[u]`` of them) the history of each of its events in the period (all, or the first)."""
    lengths = sequences.lengths
    in_period = lengths - before
    has_both = (before > 0) & (in_period > 0)
    counts = {
        "users": int((in_period > 0).sum()),
        "users_without_history": int(((in_period > 0) & (before == 0)).sum()),
    }
    users = np.flatnonzero(has_both)
    per_user = np.ones(len(users), np.int64) if targets == "first" else in_period[users]
    rows = np.repeat(users, per_user)
    offsets = np.arange(per_user.sum()) - np.repeat(np.cumsum(per_user) - per_user, per_user)
    flat = sequences.row_splits[rows] + before[rows] + offsets
    histories = sequences.select(rows)
    histories = histories.keep_first(before[rows])
    return Cases(histories, sequences.values[flat]), counts


def _when(seconds):
    """``seconds`` as an ISO 8601 UTC time (and the number), for messages."""
    try:
        stamp = datetime.datetime.fromtimestamp(float(seconds), datetime.timezone.utc)
        return f"{stamp.strftime('%Y-%m-%dT%H:%M:%SZ')} ({seconds:g} s)"
    except (OverflowError, OSError, ValueError):
        return f"{seconds:g} s"


def cold_start_split(sequences, cold_item_fraction=0.1, seed=0, min_length=2):
    """Holds items out of training entirely, to test recommending unseen items.

    A random ``cold_item_fraction`` of items (seeded) is removed from every training
    sequence. Each user with at least ``min_length`` items gives one test case, the
    last item given the rest of the history (cold items stay in histories: a text
    model can read them, an id model sees ids it never trained). A case whose target
    is a cold item lands in ``test_cold``, else in ``test_warm``.
    """
    rng = np.random.default_rng(seed)
    item_ids = np.unique(sequences.values[sequences.values >= vocab_lib.NUM_RESERVED])
    n_cold = int(round(cold_item_fraction * len(item_ids)))
    cold_items = (
        np.sort(rng.choice(item_ids, size=n_cold, replace=False)) if n_cold else np.zeros(0, np.int64)
    )
    lengths = sequences.lengths
    evaluable = lengths >= min_length
    kept = np.where(evaluable, lengths - 1, lengths)
    in_train = ragged_mask(sequences.row_splits, kept)
    is_cold = np.isin(sequences.values, cold_items)
    keep = in_train & ~is_cold
    row_of = np.repeat(np.arange(len(sequences)), lengths)
    kept_lengths = np.bincount(row_of[keep], minlength=len(sequences))
    train = sequences.take(sequences.users, keep, np.concatenate([[0], np.cumsum(kept_lengths)]))
    ev = sequences.select(evaluable)
    targets = ev.values[ev.row_splits[1:] - 1]
    histories = ev.drop_last(1)
    cold_case = np.isin(targets, cold_items)
    report = {
        "cold_items": int(n_cold),
        "removed_interactions": int((in_train & is_cold).sum()),
        "test_warm_cases": int((~cold_case).sum()),
        "test_cold_cases": int(cold_case.sum()),
        "train_only_users": int((~evaluable).sum()),
    }
    return ColdStartSplit(
        train,
        Cases(histories.select(~cold_case), targets[~cold_case]),
        Cases(histories.select(cold_case), targets[cold_case]),
        cold_items,
        report,
    )


def training_vocabulary(vocabulary, train):
    """``vocabulary``'s items re-counted on the ``train`` sequences (its ids) and re-ordered.

    Items that occur only in held-out events keep their place in the vocabulary (a
    target must have an id to be ranked) with count 0, after every trained item.
    """
    counts = train.item_counts(vocabulary.size)[vocab_lib.NUM_RESERVED : vocabulary.size]
    return vocab_lib.ItemVocabulary.from_counts(dict(zip(vocabulary.items, counts.tolist())))


def prepare(
    interactions,
    min_user_interactions=0,
    min_item_interactions=0,
    vocabulary=None,
    validation="last",
    split="leave_one_out",
    test_start=None,
    valid_start=None,
    targets="all",
    event_vocabulary=None,
):
    """Interactions to a ``Split``: sort, duplicates, k-core, vocabulary, split.

    ``validation``: ``"last"`` (each user's second-to-last item a validation case) or
    ``"none"`` (no validation cases: that item is a training item; ``leave_one_out``).
    ``split``: ``"leave_one_out"`` (the default) or ``"temporal"`` (``temporal_split`` at
    ``test_start`` and ``valid_start``, seconds, with ``targets``).

    Exact duplicate events (same user, item and time) are kept once
    (``drop_duplicates``, counted in ``report["removed_duplicates"]``).

    A new vocabulary (``vocabulary=None``) holds every item of ``interactions``, but
    its counts, hence its popularity id order, come from the *training* events only
    (``training_vocabulary``): validation and test targets never count. A given
    ``vocabulary`` (a trained model's) is used as it is.

    When ``interactions`` carry event columns (``read_interactions(event_columns=...)``),
    the sequences carry their slots and ``split.event_vocabulary`` their values: the
    values of the training events only, as the item counts (a value first seen later is
    ``UNKNOWN_SLOT``), unless ``event_vocabulary`` (a trained model's) is given.

    Returns:
        ``(split, vocabulary, report)``; ``report`` merges every step's counts, so
        each removed row is accounted for.
    """
    report = {"input_interactions": len(interactions)}
    events, duplicates = drop_duplicates(sort_by_time(interactions))
    report.update(duplicates)
    if min_user_interactions > 1 or min_item_interactions > 1:
        events, core = k_core(events, min_user_interactions, min_item_interactions)
        report.update(core)
        if not len(events):
            raise ValueError(
                f"the k-core filter (users >= {min_user_interactions}, items >= {min_item_interactions} "
                f"interactions) removed all {report['input_interactions']} interactions; lower the thresholds"
            )
    given = vocabulary is not None
    if not given:
        # Any id order will do for the first split: its counts are redone on the training
        # events below, which sets the order (sorting a million raw ids twice costs seconds).
        vocabulary = vocab_lib.ItemVocabulary(vocab_lib.factorize(events.items)[0])
    if split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
    if split == "temporal" and test_start is None:
        raise ValueError("the temporal split needs test_start (--test-start: ISO 8601 or epoch seconds)")
    if split != "temporal" and (test_start is not None or valid_start is not None):
        raise ValueError("test_start and valid_start are for split='temporal' (--split temporal)")

    def cut(sequences):
        if split == "temporal":
            return temporal_split(sequences, test_start, valid_start, targets, validation)
        return leave_one_out(sequences, validation=validation)

    result, sequences, vocabulary, event_vocabulary, seq_report = _split_counted(
        events, vocabulary, given, event_vocabulary, cut
    )
    split = result
    split.event_vocabulary = event_vocabulary
    if event_vocabulary is not None:
        report["event_features"] = {name: len(values) for name, values in event_vocabulary.values.items()}
    report.update(seq_report)
    report.update(split.report)
    lengths = sequences.lengths
    report.update(
        num_users=len(sequences),
        num_items=vocabulary.num_items,
        num_interactions=sequences.num_events,
        sequence_length={
            "mean": round(float(lengths.mean()), 2),
            "median": float(np.median(lengths)),
            "min": int(lengths.min()),
            "max": int(lengths.max()),
        },
    )
    return split, vocabulary, report


def _split_counted(events, vocabulary, given, event_vocabulary, cut):
    """``cut`` of the sequences of ``events``, with a new vocabulary's counts (unless ``given``)
    and a new event vocabulary's values (unless one is given) taken from the training events:
    ``(split, sequences, vocabulary, event_vocabulary, report)``."""
    new_context = events.events is not None and event_vocabulary is None
    if new_context:
        event_vocabulary = events_lib.EventVocabulary.from_values(events.events)
    sequences, vocabulary, report = build_sequences(events, vocabulary, event_vocabulary=event_vocabulary)
    result = cut(sequences)
    if not given or new_context:
        # Counts, and with them the id order, come from training events only: the
        # held-out targets must not make their items look more popular.
        if not given:
            vocabulary = training_vocabulary(vocabulary, result.train)
        if new_context:  # a context value the model never trains with is unknown to it
            event_vocabulary = event_vocabulary.restricted(result.train.events)[0]
        sequences, vocabulary, report = build_sequences(events, vocabulary, event_vocabulary=event_vocabulary)
        result = cut(sequences)
    return result, sequences, vocabulary, event_vocabulary, report


def user_boundaries(users):
    """Boolean mask over a log's events, true at each event that starts a run of one user's events."""
    users = np.asarray(users)
    boundary = np.ones(len(users), bool)
    boundary[1:] = users[1:] != users[:-1]
    return boundary


def ragged_mask(row_splits, keep_lengths):
    """Boolean mask over flat values keeping the first ``keep_lengths[u]`` of each row."""
    lengths = np.diff(row_splits)
    position = np.arange(row_splits[-1]) - np.repeat(row_splits[:-1], lengths)
    return position < np.repeat(keep_lengths, lengths)
