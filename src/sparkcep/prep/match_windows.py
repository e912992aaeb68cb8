"""Match windows (match-windows.md §4–§5): the pre-processing in front of any matcher.

Instead of feeding every event to a matcher at once, events are buffered in a *match
window* W (Definition 3): every event within τ of W's first event. The matcher A
(Definition 4) is called lazily, once the window is complete, and only for the matches
that start at W[1]. Three prunings make that cheap (`--prune none|f|fp|fpc`):

- **f, filtering** (Theorem 1): an event that satisfies the properties of no variable
  is in no match, so it never enters a window (`filter_events`);
- **p, partitioning** (Definition 6): the attributes X on which equalities tie every
  variable split the windows by value (`partition_attributes`); each partition is
  matched alone and the equalities on X need no check;
- **c, necessary match conditions** (Theorem 2): |W| ≥ m (4), W[1] can bind a variable
  of B1 (5), and the summary statistics (Definition 5) are all positive (Theorem 3,
  conditions 6 and 7): `WindowConditions` computes them for every window at once, as
  the bit vectors of §5.

`SummaryStatistics` and `MatchWindowScan` are the paper's incremental form (the
counters updated as events enter and leave one window, and Algorithm 1, event by event)
with its two slips corrected; they are the reference the vectorised form is tested
against. Nothing here knows a matcher: engines pass the pieces they need.

The running example (Chemo, Fig. 1, patient 1, P1 = (⟨{c, p+}, {b}⟩, Θ, 15 d)): the
window of e1 holds e1 (c), e2 (b), e3 (p), e9 (p), e11 (b); its statistics are
S = (1, 2, 1), all positive, so A is called for it (Example 11, Fig. 5):

>>> stats = SummaryStatistics([[0, 1], [2]])        # variables c, p | b as bits 0, 1, 2
>>> for e in (0b001, 0b100, 0b010, 0b010, 0b100):   # ē of e1, e2, e3, e9, e11
...     stats.enqueue(e)
>>> stats.counts, stats.passes()
([1, 2, 1], True)
>>> stats.dequeue(); stats.counts, bin(stats.sbar)  # e1 leaves: c is 0, so b is reset
([0, 2, 0], '0b101')
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

# ---- Theorem 1: filtering -----------------------------------------------------------------


def filter_events(mask: np.ndarray) -> np.ndarray:
    """Theorem 1: the events that satisfy the properties of some variable (ē ≠ 0).

    >>> filter_events(np.array([0b100, 0, 0b011])).tolist()
    [True, False, True]
    """
    return np.asarray(mask) != 0


# ---- Definition 6: partitioning -------------------------------------------------------------


def partition_attributes(
    variables: Sequence[str], equalities: Iterable[tuple[str, str, str]]
) -> tuple[str, ...]:
    """Definition 6: the attributes X on which the closure of the equalities
    `(attr, v_i, v_j)` (v_i.attr = v_j.attr) ties every variable, in the order first
    written. The closure is the equivalence closure (union-find per attribute): the
    paper's Θ⁺_eq, read as Example 12 does (notes §3.5).

    >>> eqs = [("PID", "c", "p"), ("PID", "p", "b"), ("V", "c", "p")]
    >>> partition_attributes(["c", "p", "b"], eqs)
    ('PID',)
    """
    variables = list(variables)
    by_attr: dict[str, list[tuple[str, str]]] = {}
    for attr, x, y in equalities:
        by_attr.setdefault(attr, []).append((x, y))
    out = []
    for attr, edges in by_attr.items():
        parent = {v: v for v in variables}

        def find(v: str, parent=parent) -> str:
            while parent[v] != v:
                parent[v] = parent[parent[v]]
                v = parent[v]
            return v

        for x, y in edges:
            if x in parent and y in parent:
                parent[find(x)] = find(y)
        if len({find(v) for v in variables}) == 1 and len(variables) > 1:
            out.append(attr)
    return tuple(out)


# ---- Definition 3: match windows -------------------------------------------------------------


def window_ends(ts: np.ndarray, segment: np.ndarray, window: int | None) -> np.ndarray:
    """Definition 3, for every event at once: the end (exclusive position) of the match
    window W_i = ⟨e | 0 ≤ e.T − e_i.T < window⟩ of each event of a table sorted by
    (segment, time). `window` is exclusive, in ticks (WITHIN w INCLUSIVE is w + 1);
    None: the rest of the segment.

    >>> window_ends(np.array([3, 4, 5, 18, 19]), np.zeros(5, np.int64), 16).tolist()
    [4, 5, 5, 5, 5]
    """
    n = len(ts)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    seg_change = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
    seg_ends = np.repeat(np.r_[seg_change[1:], n], np.diff(np.r_[seg_change, n]))
    if window is None:
        return seg_ends.astype(np.int64)
    if len(seg_change) == 1:  # one segment: a search does it
        return np.searchsorted(ts, ts + window, side="left").astype(np.int64)
    # Merge the targets ts + window (kind 0) with the events (kind 1): a target's rank
    # among the events is the first event at or after it, in its segment.
    seg_all = np.concatenate([segment, segment])
    ts_all = np.concatenate([ts, ts + window])
    kind = np.concatenate([np.ones(n, np.int8), np.zeros(n, np.int8)])
    order = np.lexsort((kind, ts_all, seg_all))
    events_before = np.cumsum(kind[order] == 1) - (kind[order] == 1)
    ends = np.empty(n, dtype=np.int64)
    targets = order >= n
    ends[order[targets] - n] = events_before[targets]
    return np.minimum(ends, seg_ends)


# ---- Theorem 2 and 3: the necessary match conditions, every window at once -----------------


@dataclass(frozen=True)
class WindowConditions:
    """Theorem 2 for the window of every head at once, with the statistics of §5 as bit
    vectors: ē is an event's mask (bit j: it satisfies the properties of v_j), b̄_s the
    bits of the set before B_s, and s̄(W) has bit j set iff the count of v_j over W is
    zero (Definition 5, counted as the incremental rule counts: v ∈ B_s counts an event
    of W that comes after events of W counted for every variable of B_{s−1}).

    A window is a *candidate* when |W| ≥ m (4), ē(W[1]) has a bit of B1 (5) and
    s̄(W) = 0 (Theorem 3: conditions 6 and 7). Computed without the incremental
    counters' staleness, the test is never weaker than Algorithm 1's: every candidate
    here is one there, and every window with a match is a candidate.

    `sets` lists the variables' bits per set, in order.

    >>> cond = WindowConditions([[0, 1], [2]])  # Chemo P1: {c, p+}, {b}
    >>> mask = np.array([0b001, 0b100, 0b010, 0b010, 0b100])  # patient 1: e1 e2 e3 e9 e11
    >>> order = np.arange(5)
    >>> sbar = cond.sbar(mask, order, np.array([0, 1]), np.array([5, 5]))
    >>> [bin(s) for s in sbar]   # W from e1: all counts positive; from e2: c is missing
    ['0b0', '0b101']
    >>> cond.candidates(mask, order, np.array([0, 1]), np.array([5, 5])).tolist()
    [True, False]
    """

    sets: Sequence[Sequence[int]]

    @property
    def m(self) -> int:
        return sum(len(s) for s in self.sets)

    @property
    def first_bits(self) -> int:
        return int(sum(1 << j for j in self.sets[0]))

    def bbar(self) -> list[int]:
        """b̄_s: the bits of the variables of B_{s−1} (0 for B1), Example 13."""
        out = [0]
        for prev in self.sets[:-1]:
            out.append(int(sum(1 << j for j in prev)))
        return out

    def sbar(
        self, mask: np.ndarray, order: np.ndarray, heads: np.ndarray, ends: np.ndarray
    ) -> np.ndarray:
        """s̄ of the window [head, end) of each head: bit j set iff cnt_j = 0."""
        n = len(mask)
        heads = np.asarray(heads, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        # For each position, the first position of a later instant (n: none).
        starts = np.r_[0, np.flatnonzero(order[1:] != order[:-1]) + 1] if n else np.zeros(0)
        group_ends = np.r_[starts[1:], n].astype(np.int64)
        group_end = np.r_[np.repeat(group_ends, group_ends - starts.astype(np.int64)), n]
        sbar = np.zeros(len(heads), dtype=np.int64)
        start = heads
        for members in self.sets:
            reach = np.full(len(heads), -1, dtype=np.int64)
            for j in members:
                pos = np.r_[np.flatnonzero(mask & (1 << j)), n]  # n: none left
                first = pos[np.searchsorted(pos, np.minimum(start, n))]
                zero = first >= ends
                sbar |= zero.astype(np.int64) << j
                reach = np.maximum(reach, np.where(zero, n, first))
            start = group_end[np.minimum(reach, n)]  # counted from the next instant on
        return sbar

    def candidates(
        self, mask: np.ndarray, order: np.ndarray, heads: np.ndarray, ends: np.ndarray
    ) -> np.ndarray:
        """Conditions (4), (5) and Theorem 3's s̄ = 0 for each head's window."""
        heads = np.asarray(heads, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        ok = (ends - heads) >= self.m
        ok &= (mask[heads] & self.first_bits) != 0
        idx = np.flatnonzero(ok)
        if len(idx):
            ok[idx] = self.sbar(mask, order, heads[idx], ends[idx]) == 0
        return ok


# ---- §4.3 and §5: the incremental summary statistics ------------------------------------------


class SummaryStatistics:
    """Definition 5 kept up to date as events enter and leave one window (§4.3), with the
    bit vectors of §5: ē (an event's variables), s̄ (bit j set iff cnt_j = 0) and b̄_s.

    Enqueue: v ∈ B_s counts the event when no counter of B_{s−1} is zero
    (s̄ AND b̄_s = 0). Dequeue: the counters the event was counted for go down; when
    one of B_s reaches zero, the counters of every later set are reset. The paper
    decrements every counter whose properties the leaving event satisfies; an event that
    was never counted (or was reset) would then drive a counter below what it counts,
    and can hide a later match (docs/ses.md, "the paper's slips"). Here each buffered
    event keeps the bits it was counted for, and a reset clears them
    (`literal_dequeue=True` gives the paper's rule, to show the slip).

    Fig. 5 (patient 1 of Chemo; c, p in B1 and b in B2):

    >>> s = SummaryStatistics([[0, 1], [2]])
    >>> rows = []
    >>> for e in (0b001, 0b100, 0b010, 0b010, 0b100):
    ...     s.enqueue(e)
    ...     rows.append(tuple(s.counts))
    >>> rows
    [(1, 0, 0), (1, 0, 0), (1, 1, 0), (1, 2, 0), (1, 2, 1)]
    """

    def __init__(self, sets: Sequence[Sequence[int]], *, literal_dequeue: bool = False):
        self.sets = [list(s) for s in sets]
        self.m = sum(len(s) for s in self.sets)
        self.set_of = {j: i for i, members in enumerate(self.sets) for j in members}
        self.later = [  # bits of the variables of every set after B_s
            int(sum(1 << j for t in self.sets[i + 1 :] for j in t)) for i in range(len(self.sets))
        ]
        self.bbar = WindowConditions(self.sets).bbar()
        self.counts = [0] * self.m
        self.sbar = (1 << self.m) - 1
        self.literal_dequeue = literal_dequeue
        self.window: deque[list[int]] = deque()  # per event: [ē, counted bits]

    def enqueue(self, ebar: int) -> None:
        counted = 0
        for j in _bits(ebar):
            if self.sbar & self.bbar[self.set_of[j]] == 0:
                counted |= 1 << j
        for j in _bits(counted):
            self.counts[j] += 1
            self.sbar &= ~(1 << j)
        self.window.append([ebar, counted])

    def dequeue(self) -> None:
        ebar, counted = self.window.popleft()
        reset = 0
        for j in _bits(ebar if self.literal_dequeue else counted):
            self.counts[j] -= 1
            if self.counts[j] == 0:
                self.sbar |= 1 << j
                reset |= self.later[self.set_of[j]]
        if reset:
            for j in _bits(reset):
                self.counts[j] = 0
            self.sbar |= reset
            for item in self.window:
                item[1] &= ~reset

    def passes(self) -> bool:
        """Theorem 3: every counter is positive (Algorithm 1, line 10). With the
        corrected dequeue, s̄ = 0 says the same."""
        return all(c > 0 for c in self.counts)

    def __len__(self) -> int:
        return len(self.window)


def _bits(x: int):
    while x:
        low = x & -x
        yield low.bit_length() - 1
        x ^= low


# ---- Algorithm 1 -------------------------------------------------------------------------------


@dataclass
class ScanEvent:
    """An event as Algorithm 1 reads it: partition key, time, ē and what A needs."""

    key: object
    ts: int
    ebar: int
    payload: object = None


@dataclass
class _Entry:
    window: deque = field(default_factory=deque)
    stats: SummaryStatistics | None = None


class MatchWindowScan:
    """Algorithm 1 (Match(P, E, A)), event by event: the reference form of the strategy.

    For each event in time order: drop it unless it satisfies some variable (filtering),
    find its partition's window, and while the event lies more than τ after the
    window's first event, call A on the window if the necessary conditions hold, then
    dequeue the first event; then enqueue the event. At the end each partition's window
    is *flushed*. The paper's flush loops only while the conditions hold and so stops at
    the first window that fails them: on Chemo it loses 3 of the 11 matches (the
    patient-2 window begins with e4, a B). The flush here, as the definitions require,
    tests every remaining head (`literal_flush=True` gives the paper's loop).

    `matcher(window)` gets the buffered events (a list of ScanEvent, W[1] first) and
    returns the matches that start at W[1]; `calls` counts the calls. `tau` is
    inclusive (Definition 3), in ticks.
    """

    def __init__(
        self,
        sets: Sequence[Sequence[int]],
        tau: int,
        matcher: Callable[[list[ScanEvent]], list],
        *,
        conditions: bool = True,
        literal_flush: bool = False,
        literal_dequeue: bool = False,
    ):
        self.sets = [list(s) for s in sets]
        self.m = sum(len(s) for s in self.sets)
        self.first_bits = int(sum(1 << j for j in self.sets[0]))
        self.tau = tau
        self.matcher = matcher
        self.conditions = conditions
        self.literal_flush = literal_flush
        self.literal_dequeue = literal_dequeue
        self.calls = 0
        self.tested: list[tuple[object, object]] = []  # (key, W[1].payload) of each call

    def _candidate(self, entry: _Entry) -> bool:
        if not self.conditions:
            return True
        head = entry.window[0]
        return (
            len(entry.window) >= self.m
            and head.ebar & self.first_bits != 0
            and entry.stats is not None
            and entry.stats.passes()
        )

    def _call(self, key, entry: _Entry, out: list) -> None:
        self.calls += 1
        self.tested.append((key, entry.window[0].payload))
        out.extend(self.matcher(list(entry.window)))

    def _dequeue(self, entry: _Entry) -> None:
        entry.window.popleft()
        entry.stats.dequeue()

    def run(self, events: Iterable[ScanEvent]) -> list:
        table: dict[object, _Entry] = {}
        out: list = []
        for e in events:
            if e.ebar == 0:  # line 4: filtering (Theorem 1)
                continue
            entry = table.get(e.key)
            if entry is None:  # lines 6-7
                entry = table[e.key] = _Entry(
                    deque(), SummaryStatistics(self.sets, literal_dequeue=self.literal_dequeue)
                )
            while entry.window and e.ts - entry.window[0].ts > self.tau:  # line 9
                if self._candidate(entry):  # line 10: conditions 4, 5, Theorem 3
                    self._call(e.key, entry, out)
                self._dequeue(entry)  # lines 12-13
            entry.window.append(e)  # lines 14-15
            entry.stats.enqueue(e.ebar)
        for key, entry in table.items():  # lines 16-20: the flush
            if self.literal_flush:
                while len(entry.window) >= self.m and self._candidate(entry):
                    self._call(key, entry, out)
                    self._dequeue(entry)
                continue
            while entry.window:
                if self._candidate(entry):
                    self._call(key, entry, out)
                self._dequeue(entry)
        return out
