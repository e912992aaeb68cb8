"""How a job's events are spread over workers, and which worker reports what.

A keyed job is partitioned by its key: every partition of the stream is whole on one
worker. An unkeyed job with a window is cut into time ranges [t0 + r·L, t0 + (r+1)·L)
of at least the window's length; each range also receives the events up to `before`
ticks before it and `after` ticks after it, and *owns* only its own events: a program
reports a match (or a row) only when the event that anchors it is owned (the first event
of a match for nfa, the trigger of an AGG row). So nothing is lost or reported twice.
Without a key or a window, one worker takes everything.

The Spark runner applies a layout with column expressions; `assign_ranges` is the same
rule in numpy, for the local runner's tests and anyone checking a layout.

>>> lay = choose_layout((), before=3, after=3, min_tick=0, max_tick=99, events=100, parts=4)
>>> lay.ranged, lay.range_len, lay.n_ranges
(True, 25, 4)
>>> rows, ranges = assign_ranges(lay, np.array([24, 25, 60]))
>>> list(zip(rows.tolist(), ranges.tolist()))
[(0, 0), (0, 1), (1, 0), (1, 1), (2, 2)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RANGE = "__range"  # the column naming an event's time range (it leads the segment columns)
EVENTS_PER_RANGE = 200_000  # unkeyed jobs: aim for ranges of about this many events


@dataclass(frozen=True)
class Layout:
    key: tuple[str, ...]  # partition by these columns; empty: ranges or one worker
    ranged: bool
    t0: int = 0
    range_len: int = 0
    n_ranges: int = 1
    before: int = 0  # a range also receives the events this many ticks before it
    after: int = 0  # ... and after it
    parts: int = 1  # workers (Spark partitions)
    text: str = ""


def choose_layout(
    key: tuple[str, ...],
    *,
    before: int | None,
    after: int | None,
    min_tick: int | None,
    max_tick: int | None,
    events: int,
    parts: int,
) -> Layout:
    """The layout of a job: by `key`; else time ranges, when the program's reach
    (`before`/`after`: None = unbounded) is shorter than the input's span; else one."""
    if key:
        text = f"partitioned by {', '.join(key)} into {parts} Spark partitions"
        return Layout(key, False, parts=parts, text=text)
    if before is None or after is None or min_tick is None or max_tick is None:
        return Layout((), False, text="no key and no window: one partition")
    span = max_tick - min_tick + 1
    reach = max(before, after)
    # Ranges need a window shorter than the span to help, and their bounds
    # (t0 + range x length ± reach) must stay within int64.
    if reach >= span or span + 2 * reach >= 2**62:
        return Layout(
            (), False, text="no key, and the window spans the input's time: one partition"
        )
    n_ranges = max(parts, math.ceil(events / EVENTS_PER_RANGE))
    range_len = max(reach, 1, math.ceil(span / n_ranges))
    n_ranges = math.ceil(span / range_len)
    text = (
        f"no key: {n_ranges} time ranges of {range_len} ticks, overlapping by the window "
        f"({before} before, {after} after)"
    )
    return Layout(
        (), True, min_tick, range_len, n_ranges, before, after, min(parts, n_ranges), text
    )


def assign_ranges(layout: Layout, ticks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each event's copies: (event index, range), for every range
    [lo, lo + L) with lo - before < t < lo + L + after (ranges 0 .. n-1)."""
    own = (ticks - layout.t0) // layout.range_len
    rows, ranges = [], []
    for delta in (-1, 0, 1):  # a reach is at most one range long
        r = own + delta
        lo = layout.t0 + r * layout.range_len
        keep = (
            (r >= 0)
            & (r < layout.n_ranges)
            & (ticks > lo - layout.before)
            & (ticks < lo + layout.range_len + layout.after)
        )
        rows.append(np.flatnonzero(keep))
        ranges.append(r[keep])
    rows_, ranges_ = np.concatenate(rows), np.concatenate(ranges)
    order = np.lexsort((ranges_, rows_))
    return rows_[order], ranges_[order]


def owned(layout: Layout, ticks: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """Whether each copy is in its own range (it may anchor a match or a row)."""
    return (ticks - layout.t0) // layout.range_len == ranges
