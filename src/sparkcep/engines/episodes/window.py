"""The recent events of one partition, and DirectMatch over them.

`Segment` is the state of one partition of the stream: the last L events that can still
take part in an occurrence (a ring: position p is in slot p mod L), each with its symbol,
time in ticks, the position where its instant starts, its time value and its id; the
rejected instances of each predicate (Definition 3); ToFel's partial matches when ToFel runs.
Positions number the partition's relevant events 0, 1, 2, ... in processing order; an
*instant* is a run of events with equal time (and tie-break value), and an edge u -> v
needs u's event at an earlier instant than v's.

L grows (doubles) whenever the oldest event still inside the largest predicate window
would be overwritten, so L is the largest predicate window measured in events.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

import numpy as np

from sparkcep.engines.episodes.tree import NOT_FOUND, REJECTED, CBSTree
from sparkcep.engines.state import state_class

_EMPTY: frozenset[int] = frozenset()
NO_TICK = np.iinfo(np.int64).min  # the time of a slot that holds no event (older than any)


@state_class
@dataclass
class Segment:
    count: int = 0  # events pushed so far = the next position
    capacity: int = 0  # L
    sym: np.ndarray | None = None  # int32 symbol id per slot
    tick: np.ndarray | None = None  # int64 time in ticks
    first: np.ndarray | None = None  # int64 position where the event's instant starts
    time: np.ndarray | None = None  # the time column's value
    ident: np.ndarray | None = None  # the event's id
    latest: int | None = None  # latest time seen in this partition, in ticks
    rejected: dict = field(default_factory=dict)  # predicate's first rule -> rejected positions
    kept: dict = field(default_factory=dict)  # ToFel: rule -> its partial matches, per ideal

    @staticmethod
    def of(symbols, ticks, capacity: int | None = None) -> Segment:
        """A segment holding `symbols` at `ticks` (one instant per distinct tick), for
        examples and tests."""
        seg = Segment()
        ticks = [int(t) for t in ticks]
        start(seg, capacity or max(len(ticks), 1), np.array(ticks), np.arange(len(ticks)))
        for p, (s, t) in enumerate(zip(symbols, ticks)):
            instant = p if p == 0 or ticks[p - 1] != t else int(seg.first[(p - 1) % seg.capacity])
            grow_for(seg, t, 0)
            push(seg, s, t, instant, t, p)
        return seg

    # ---- positions
    @property
    def oldest(self) -> int:
        """The oldest position still held."""
        return max(0, self.count - self.capacity)

    def first_of(self, p: int) -> int:
        """The position where p's instant starts."""
        return int(self.first[p % self.capacity])

    def lower(self, bound: int) -> int:
        """The first position whose time is later than `bound` ticks (count if none)."""
        lo, hi = self.oldest, self.count
        tick, cap = self.tick, self.capacity
        while lo < hi:
            mid = (lo + hi) // 2
            if tick[mid % cap] > bound:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def positions(self, lo: int, hi: int) -> np.ndarray:
        """The slots of positions lo..hi, in order."""
        return np.arange(lo, hi + 1) % self.capacity

    def tree(self) -> CBSTree:
        """The CBS-Tree over the held events (kept beside the state, rebuilt after the
        state was stored and read back)."""
        tree = getattr(self, "_tree", None)
        if tree is None or tree.capacity != self.capacity:
            tree = CBSTree(self.capacity)
            for p in range(self.oldest, self.count):
                tree.insert(p, int(self.sym[p % self.capacity]))
            self._tree = tree
        return tree


def start(seg: Segment, capacity: int, times: np.ndarray, ids: np.ndarray) -> None:
    """Allocate the ring, with the dtypes of the time and id columns."""
    seg.capacity = capacity
    seg.sym = np.full(capacity, -1, dtype=np.int32)
    seg.tick = np.full(capacity, NO_TICK, dtype=np.int64)
    seg.first = np.zeros(capacity, dtype=np.int64)
    seg.time = np.zeros(capacity, dtype=times.dtype)
    seg.ident = (
        np.zeros(capacity, dtype=ids.dtype)
        if ids.dtype != object
        else np.empty(capacity, dtype=object)
    )


def grow_for(seg: Segment, tick: int, window: int) -> None:
    """Double L while the event L positions back is still within `window` of `tick`."""
    p = seg.count
    while p >= seg.capacity and seg.tick[(p - seg.capacity) % seg.capacity] > tick - window:
        resize(seg, 2 * seg.capacity)


def resize(seg: Segment, capacity: int) -> None:
    old_slots = seg.positions(seg.oldest, seg.count - 1) if seg.count else np.zeros(0, int)
    new_slots = np.arange(seg.oldest, seg.count) % capacity
    for name in ("sym", "tick", "first", "time", "ident"):
        old = getattr(seg, name)
        fill = {"sym": -1, "tick": NO_TICK}.get(name)
        new = (
            np.zeros_like(old, shape=capacity)
            if fill is None
            else np.full(capacity, fill, old.dtype)
        )
        new[new_slots] = old[old_slots]
        setattr(seg, name, new)
    seg.capacity = capacity


def push(seg: Segment, symbol: int, tick: int, first: int, time, ident) -> int:
    """Add the newest event; returns its position."""
    p = seg.count
    slot = p % seg.capacity
    seg.sym[slot] = symbol
    seg.tick[slot] = tick
    seg.first[slot] = first
    seg.time[slot] = time
    seg.ident[slot] = ident
    seg.count = p + 1
    tree = getattr(seg, "_tree", None)
    if tree is not None and tree.capacity == seg.capacity:
        tree.insert(p, symbol)
    return p


class DirectMatch:
    """Latest instances found by scanning the raw events of the window, newest first
    (DirectMatch of the paper's reference [4]; the CBS-Tree uses it while fewer than L
    events have arrived).

    The paper's stream (A,1) (B,2) (A,3) (C,4) (D,5) (C,6) (B,7) (D,8), times as ticks:

    >>> A, B, C, D = range(4)
    >>> seg = Segment.of([A, B, A, C, D, C, B, D], range(1, 9))
    >>> index = DirectMatch(seg)
    >>> index.latest(B, 1, 7)  # Example 1: B within times [2, 8] is (B, 7), position 6
    6
    >>> index.latest(B, 1, 7, rejected={6}) == REJECTED
    True
    """

    def __init__(self, seg: Segment):
        self.seg = seg

    def first_of(self, p: int) -> int:
        return self.seg.first_of(p)

    def latest(self, e: int, lt: int, rt: int, rejected: Container[int] = _EMPTY) -> int:
        seg = self.seg
        lt = max(lt, seg.oldest)
        if lt > rt:
            return NOT_FOUND
        cap = seg.capacity
        a, b = lt % cap, rt % cap
        if a <= b:
            hits = np.flatnonzero(seg.sym[a : b + 1] == e)
            p = lt + int(hits[-1]) if len(hits) else NOT_FOUND
        else:
            hits = np.flatnonzero(seg.sym[: b + 1] == e)
            if len(hits):
                p = rt - b + int(hits[-1])
            else:
                hits = np.flatnonzero(seg.sym[a:] == e)
                p = lt + int(hits[-1]) if len(hits) else NOT_FOUND
        if p >= 0 and p in rejected:
            return REJECTED
        return p

    def exists(self, e: int, lo: int, hi: int) -> bool:
        return self.latest(e, lo, hi) >= 0


class TreeIndex:
    """Latest instances from the segment's CBS-Tree (FindLatestEventOccurrence)."""

    def __init__(self, seg: Segment):
        self.seg = seg
        self.tree = seg.tree()

    def first_of(self, p: int) -> int:
        return self.seg.first_of(p)

    def latest(self, e: int, lt: int, rt: int, rejected: Container[int] = _EMPTY) -> int:
        return self.tree.find(e, lt, rt, rejected)

    def exists(self, e: int, lo: int, hi: int) -> bool:
        return lo <= hi and self.tree.find(e, lo, hi) >= 0


class SharedAnswers:
    """The latest instances asked at one instant, found once for all the rules: the
    latest instance of e up to rt comes from the index (the CBS-Tree, or DirectMatch's
    scan) the first time a rule asks, and each rule's window and rejected instances are
    checked on it — the latest instance in [lt, rt] is that one when it is at or after
    lt, and there is none otherwise. This is how one index serves every rule of a
    partition; the answers are those of FindLatestEventOccurrence.
    """

    def __init__(self, index):
        self.index = index
        self.first_of = index.first_of
        self.answers: dict[tuple[int, int], int] = {}

    def _upto(self, e: int, rt: int) -> int:
        key = (e, rt)
        p = self.answers.get(key)
        if p is None:
            p = self.answers[key] = self.index.latest(e, 0, rt)
        return p

    def latest(self, e: int, lt: int, rt: int, rejected: Container[int] = _EMPTY) -> int:
        if lt > rt:
            return NOT_FOUND
        p = self._upto(e, rt)
        if p < lt:
            return NOT_FOUND
        return REJECTED if p in rejected else p

    def exists(self, e: int, lo: int, hi: int) -> bool:
        return lo <= hi and self._upto(e, hi) >= lo
