"""One partition's events, instant by instant, through one of the three algorithms.

Each instant's events are added to the segment (the ring and, for CBS-Tree, the tree);
then every predicate whose sink symbol arrived is retrieved with CBR from the index the
algorithm uses — the CBS-Tree (DirectMatch while fewer than L events have arrived),
DirectMatch's scan, or ToFel's queues — and a found min-latest occurrence replaces the
predicate's rejected instances. Rules with one predicate share its occurrences
(`RuleSet.predicates`): each is found once and reported for every one of them. A row is
reported when the instant is owned (Spark's time ranges; always, otherwise).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from sparkcep.budget import CELL_BYTES, Budget
from sparkcep.engines.episodes.cbr import CBR
from sparkcep.engines.episodes.rules import RuleSet
from sparkcep.engines.episodes.tofel import ToFel
from sparkcep.engines.episodes.window import (
    DirectMatch,
    Segment,
    SharedAnswers,
    TreeIndex,
    grow_for,
    push,
    start,
)

ALGORITHMS = {
    "episodes": "CBS-Tree over the last L events (DirectMatch while fewer have arrived)",
    "tofel": "ToFel: forward partial matches of each rule, advanced by every event",
    "directmatch": "DirectMatch: scan the raw events of the window",
}
MIN_CAPACITY = 8
MAX_START_CAPACITY = 1024


@dataclass
class Found:
    """A min-latest occurrence of a predicate, one row for each of its `rules`: the ids
    of its events (in vertex order) and its first and last time."""

    rules: tuple[int, ...]
    ids: np.ndarray
    start_time: object
    end_time: object


class _Lows(dict):
    """Predicate window -> the first position within it, computed when first asked."""

    def __init__(self, seg: Segment, tick: int):
        super().__init__()
        self.seg, self.tick = seg, tick

    def __missing__(self, window: int) -> int:
        low = self[window] = self.seg.lower(self.tick - window)
        return low


class Matcher:
    """Min-latest occurrences of a rule set over the segments of a stream."""

    def __init__(self, rules: RuleSet, algorithm: str, budget: Budget | None = None):
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}")
        self.budget = budget or Budget()  # the occurrences a `feed` holds count against it
        self.rules = rules
        self.algorithm = algorithm
        # One CBR per predicate, on its first rule (its rules differ in the consequent only).
        self.cbr = [CBR(rules[members[0]]) for members in rules.predicates]
        self.tofel = ToFel(rules) if algorithm == "tofel" else None

    def feed(
        self, seg: Segment, symbols, ticks, new_instant, times, ids, owned=None
    ) -> list[Found]:
        """Events of one segment in processing order (symbol ids >= 0), with the start
        of each instant marked; returns the occurrences found at owned instants."""
        n = len(symbols)
        if not n:
            return []
        if seg.capacity == 0:
            start(seg, self._start_capacity(), times, ids)
        starts = [*np.flatnonzero(new_instant).tolist(), n]
        found: list[Found] = []
        symbols, ticks = symbols.tolist(), ticks.tolist()
        meter = self.budget.meter()
        for a, b in itertools.pairwise(starts):
            mine = owned is None or bool(owned[b - 1])
            before = len(found)
            self._instant(seg, symbols[a:b], ticks[a], times[a:b], ids[a:b], mine, found)
            for occurrence in found[before:]:  # a row per rule: ids, positions, times, rule
                size = (3 + 2 * len(occurrence.ids)) * CELL_BYTES
                meter.hold_each(size, len(occurrence.rules))
        return found

    def _start_capacity(self) -> int:
        return min(max(self.rules.max_window, MIN_CAPACITY), MAX_START_CAPACITY)

    def _instant(self, seg: Segment, symbols, tick, times, ids, mine, found) -> None:
        first = seg.count
        if self.algorithm == "episodes":
            seg.tree()  # built (or rebuilt after the state was read back) before the pushes
        for s, t, i in zip(symbols, times, ids):
            grow_for(seg, tick, self.rules.max_window)
            push(seg, s, tick, first, t, i)
        lows = _Lows(seg, tick)
        rules = self.rules
        if self.tofel is not None:  # ToFel finds its occurrences forward: no retrieval
            fired = self.tofel.arrive(seg, range(first, seg.count), symbols, lows)
            # A predicate's rules hold the same matches: they fire together.
            if mine:
                for p in sorted({rules.predicate_of[r] for r in fired}):
                    members = rules.predicates[p]
                    found.append(self._found(seg, members, fired[members[0]]))
            return
        arrived = {s: first + i for i, s in enumerate(symbols)}
        triggered = rules.triggered(arrived)
        rt = seg.count - 1
        shared = self._shared(seg) if triggered else None
        for p in triggered:
            members = rules.predicates[p]
            # The predicate's rejected instances are kept under its first rule: a state
            # stored when every rule kept its own reads back the same.
            lead = members[0]
            cbr = self.cbr[p]
            low = lows[cbr.rule.window]
            pos = cbr.match(shared, low, rt, seg.rejected.get(lead, ()), arrived)
            if pos is None:
                continue
            seg.rejected[lead] = tuple(sorted(cbr.rejected(shared, pos)))
            if mine:
                found.append(self._found(seg, members, pos))

    @staticmethod
    def _found(seg: Segment, members: tuple[int, ...], pos) -> Found:
        cap = seg.capacity
        ids = seg.ident[[q % cap for q in pos]]
        start, end = seg.time[min(pos) % cap], seg.time[max(pos) % cap]
        return Found(members, ids, start, end)

    def _shared(self, seg: Segment) -> SharedAnswers:
        """One index for every rule of the instant: the CBS-Tree (DirectMatch while
        fewer than L events have arrived), or DirectMatch."""
        if self.algorithm == "episodes" and seg.count >= seg.capacity:
            return SharedAnswers(TreeIndex(seg))
        return SharedAnswers(DirectMatch(seg))

    def prune(self, seg: Segment, horizon: int) -> bool:
        """Time reached `horizon`: forget what no occurrence ending from then on can
        use. Returns whether the segment still holds anything."""
        if seg.count == 0:
            return False
        last = int(seg.tick[(seg.count - 1) % seg.capacity])
        if last <= horizon - self.rules.max_window:
            return False
        low = seg.lower(horizon - self.rules.max_window)
        seg.rejected = {r: p for r, p in seg.rejected.items() if p and max(p) >= low}
        if self.tofel is not None:
            self.tofel.prune(seg, lambda w: seg.lower(horizon - w))
        return True
