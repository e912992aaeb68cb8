"""The earliest and maximal matches of the simplest event set patterns, for every window
at once.

When no variable is `v+`, no condition relates variables (the key aside), and no event
satisfies the properties of two variables, a window has at most one earliest and
maximal match from its first event h, found greedily: every variable of B1 takes its
first event from h on (h itself for the variable whose properties it satisfies), and
every variable of B_{s+1} its first event after the last instant of B_s. Greedy is
earliest for every variable at once (each variable's first possible event, under the
smallest floor the sets before it allow), so no other match precedes it (Pareto), and
with single events there is nothing to extend (maximal). This is the chain the
necessary conditions compute (`prep.match_windows.WindowConditions`), read as a match;
`SesMatcher` gives the same for these patterns, one window at a time.

>>> import numpy as np
>>> from sparkcep.plan import analyze
>>> from sparkcep.prep.table import EventTable
>>> plan = analyze("PATTERN SEQ({A a, B b}, {C c}) WITHIN 10 SELECT EARLIEST MAXIMAL")
>>> table = EventTable(np.array([1, 2, 3, 4, 5]), np.arange(5), np.zeros(5, np.int64),
...                    np.array([0b010, 0b001, 0b010, 0b100, 0b100]))   # B A B C C
>>> chain = EarliestChain(plan, table)
>>> first, positions = chain.matches(np.array([0, 1, 2]), np.array([5, 5, 5]))
>>> first.tolist(), {v: p.tolist() for v, p in positions.items()}
([0, 1], {'a': [1, 1], 'b': [0, 2], 'c': [3, 3]})
"""

from __future__ import annotations

import numpy as np

from sparkcep.engines.ses.matcher import pattern_sets
from sparkcep.plan import Plan
from sparkcep.prep.table import EventTable


class EarliestChain:
    """Greedy earliest and maximal matches of a plain-variable pattern, all windows at once.

    `key` (an int per event, -1 for null) keeps a match within its first event's
    partition when the windows are not partitioned."""

    def __init__(self, plan: Plan, table: EventTable, key: np.ndarray | None = None):
        self.sets = pattern_sets(plan)
        self.bit = {c.var: c.bit for c in plan.positives}
        self.table = table
        self.key = key
        n = len(table)
        self.n = n
        order = table.order
        starts = np.r_[0, np.flatnonzero(order[1:] != order[:-1]) + 1] if n else np.zeros(0)
        ends = np.r_[starts[1:], n].astype(np.int64)
        self.later = np.r_[np.repeat(ends, ends - starts.astype(np.int64)), n]
        self.next_of = {}
        for var, bit in self.bit.items():
            pos = np.flatnonzero(table.mask & bit)
            if key is None:
                self.next_of[var] = np.r_[pos, n]
            else:
                composite = np.sort(key[pos] * (n + 1) + pos)
                self.next_of[var] = np.r_[composite, np.iinfo(np.int64).max]

    @staticmethod
    def applies(plan: Plan, select: str) -> bool:
        """Earliest and maximal matches of plain variables with no condition between them."""
        return select != "all" and not plan.conditions and not any(c.kleene for c in plan.positives)

    def disjoint(self) -> bool:
        """No event satisfies the properties of two variables."""
        bits = np.int64(sum(self.bit.values()))
        own = self.table.mask & bits
        return not np.any(own & (own - 1))

    def _next(self, var: str, start: np.ndarray, heads: np.ndarray) -> np.ndarray:
        """Each head's first candidate of `var` at or after `start` (n: none)."""
        start = np.minimum(start, self.n)
        found = self.next_of[var]
        if self.key is None:
            return found[np.searchsorted(found, start)]
        span = self.n + 1
        key = self.key[heads]
        hit = found[np.searchsorted(found, key * span + start)]
        same = (hit // span == key) & (key >= 0)
        return np.where(same, hit % span, self.n)

    def matches(self, heads: np.ndarray, ends: np.ndarray):
        """(first event, positions per variable) of each head's match; heads without one
        are left out."""
        heads = np.asarray(heads, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        first_bits = sum(self.bit[v] for v in self.sets[0])
        ok = (self.table.mask[heads] & first_bits) != 0
        positions: dict[str, np.ndarray] = {}
        start = heads
        for members in self.sets:
            top = np.full(len(heads), -1, dtype=np.int64)
            for var in members:
                pos = self._next(var, start, heads)
                ok &= pos < ends
                positions[var] = pos
                top = np.maximum(top, np.where(pos < ends, pos, self.n))
            start = self.later[np.minimum(top, self.n)]
        keep = np.flatnonzero(ok)
        return heads[keep], {v: p[keep] for v, p in positions.items()}
