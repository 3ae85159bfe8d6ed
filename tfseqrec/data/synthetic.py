"""Seeded synthetic interaction logs, for measuring how costs grow with the data.

Real logs at the sizes production users have (10^6-10^7 items, 10^8 events) cannot be
shipped; this generator writes logs with their shape instead:

- **Item popularity is Zipf**: item ``r`` (by popularity rank) is drawn with
  probability proportional to ``1 / (r + 1) ** zipf_exponent``; raw ids are a seeded
  permutation of the ranks, so an id says nothing about popularity.
- **Sequence lengths are log-normal** (most users short, a long tail), at least
  ``min_length`` each, scaled so that they add up to ``num_events`` exactly.
- **There is something to learn**: with probability ``follow_prob`` an event is the
  successor of the user's previous item on a fixed, seeded cycle through the catalogue
  (a "next episode" pattern), otherwise a fresh popularity draw. A sequential model
  should beat popularity on such data; a model that does not is broken.
- **Timestamps** are integer seconds: each user starts at a uniform time within
  ``span_days`` and waits an exponential gap (mean ``mean_gap_seconds``) between events.

Everything is vectorised NumPy (10^7 events in seconds) and a function of ``seed``.

Example:

>>> log = generate(num_events=1_000, num_items=200, num_users=50, seed=0)
>>> len(log), log.num_users, bool(log.has_time)
(1000, 50, True)
"""

import dataclasses
import gzip
import os

import numpy as np

from tfseqrec.checks import check_number
from tfseqrec.data import readers


@dataclasses.dataclass(frozen=True)
class SyntheticLog:
    """A generated log: parallel integer arrays, events in time order.

    Attributes:
        users: int64 user ids ``[n]``.
        items: int64 item ids ``[n]``, in ``[0, num_items)``.
        timestamps: int64 seconds ``[n]``.
    """

    users: np.ndarray
    items: np.ndarray
    timestamps: np.ndarray

    def __len__(self):
        return len(self.users)

    @property
    def num_users(self):
        return len(np.unique(self.users))

    @property
    def num_items(self):
        """Items that occur (the tail of a large catalogue may never be drawn)."""
        return len(np.unique(self.items))

    @property
    def has_time(self):
        return True

    def to_interactions(self, path=""):
        """The log as ``readers.Interactions`` (raw ids as strings, as a reader returns them)."""
        return readers.Interactions(
            users=self.users.astype(str).astype(object),
            items=self.items.astype(str).astype(object),
            timestamps=self.timestamps,
            has_time=True,
            path=path,
            format="csv",
        )


def generate(
    num_events,
    num_items,
    num_users=None,
    seed=0,
    zipf_exponent=1.0,
    follow_prob=0.5,
    min_length=5,
    length_sigma=1.0,
    span_days=365,
    mean_gap_seconds=3600,
):
    """A synthetic interaction log (see the module docstring for its shape).

    Args:
        num_events: events in the log (exactly).
        num_items: catalogue size; popular items are drawn often, the tail rarely
            (not every item need occur).
        num_users: users; default ``num_events // 50``.
        seed: the whole log is a function of it.
        zipf_exponent: popularity skew (1.0 is the classic Zipf law; 0 is uniform).
        follow_prob: share of events that continue the previous item's cycle.
        min_length: fewest events of a user (5 keeps every user through a 5-core).
        length_sigma: log-normal spread of the lengths.
        span_days: users start within this many days.
        mean_gap_seconds: mean time between a user's events.

    Returns:
        ``SyntheticLog``, events in time order.
    """
    num_users = num_events // 50 if num_users is None else num_users
    for name, value in dict(
        num_events=num_events, num_items=num_items, num_users=num_users, min_length=min_length
    ).items():
        check_number(name, value, minimum=1, integer=True)
    check_number("follow_prob", follow_prob, minimum=0, maximum=1)
    if num_users * min_length > num_events:
        raise ValueError(
            f"{num_users} users of at least {min_length} events need {num_users * min_length} events; "
            f"got num_events={num_events}"
        )
    rng = np.random.default_rng(seed)
    lengths = _lengths(rng, num_events, num_users, min_length, length_sigma)
    user_of = np.repeat(np.arange(num_users, dtype=np.int64), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    first = np.zeros(num_events, bool)
    first[starts] = True

    # Popularity draws at the start of every run of "follow" events; inside a run the
    # item walks one step along a fixed cycle through the catalogue per event.
    cycle = rng.permutation(num_items)
    position_in_cycle = np.empty(num_items, np.int64)
    position_in_cycle[cycle] = np.arange(num_items)
    fresh = first | (rng.random(num_events) >= follow_prob)
    draws = _zipf_ranks(rng, int(fresh.sum()), num_items, zipf_exponent)
    items_by_rank = rng.permutation(num_items)
    fresh_items = np.zeros(num_events, np.int64)
    fresh_items[fresh] = items_by_rank[draws]
    index = np.arange(num_events)
    run_start = np.maximum.accumulate(np.where(fresh, index, 0))
    steps = index - run_start
    items = cycle[(position_in_cycle[fresh_items[run_start]] + steps) % num_items]

    start_time = rng.integers(0, span_days * 86_400, size=num_users)
    gaps = np.maximum(1, rng.exponential(mean_gap_seconds, size=num_events)).astype(np.int64)
    gaps[first] = 0
    times = start_time[user_of] + _segment_cumsum(gaps, starts)
    order = np.argsort(times, kind="stable")
    return SyntheticLog(user_of[order], items[order].astype(np.int64), times[order].astype(np.int64))


def write_csv(log, path, chunk_events=1_000_000):
    """Writes ``user_id,item_id,timestamp`` CSV (``.gz`` compressed by name), in chunks."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(b"user_id,item_id,timestamp\n")
        for start in range(0, len(log), chunk_events):
            block = np.stack(
                [a[start : start + chunk_events] for a in (log.users, log.items, log.timestamps)], 1
            )
            f.write(_csv_block(block))
    return path


def _csv_block(block):
    lines = [",".join(map(str, row)) for row in block.tolist()]
    return ("\n".join(lines) + "\n").encode() if lines else b""


def _lengths(rng, num_events, num_users, min_length, sigma):
    """``num_users`` log-normal lengths, each ``>= min_length``, summing to ``num_events``."""
    extra = num_events - num_users * min_length
    weights = rng.lognormal(0.0, sigma, size=num_users)
    share = extra * weights / weights.sum()
    lengths = np.floor(share).astype(np.int64)
    # Largest remainders get the events the floor dropped, so the total is exact.
    short = extra - int(lengths.sum())
    lengths[np.argsort(share - lengths, kind="stable")[::-1][:short]] += 1
    return lengths + min_length


def _zipf_ranks(rng, n, num_items, exponent):
    """``n`` popularity ranks in ``[0, num_items)`` with ``P(r) ~ 1 / (r + 1) ** exponent``."""
    cdf = np.cumsum(1.0 / np.arange(1, num_items + 1, dtype=np.float64) ** exponent)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), num_items - 1)


def _segment_cumsum(values, starts):
    """Cumulative sums that restart at each index in ``starts``."""
    total = np.cumsum(values)
    before = np.concatenate([[0], total[:-1]])[starts]
    lengths = np.diff(np.append(starts, len(values)))
    return total - np.repeat(before, lengths)
