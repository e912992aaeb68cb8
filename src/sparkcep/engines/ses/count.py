"""How many matches a match window holds, counted before any is enumerated.

SELECT ALL over `v+` is exponential by definition: a window with 60 candidates of `p+`
at distinct instants has more than 2^60 matches, and enumerating them (about 9 µs a
match in Python) never ends. `MatchCounter` counts the matches of Definition 2 that
start at a window's first event h — the number `SesMatcher(select="all").matches` and
`JoinTreeMatcher.matches` return — by dynamic programming over the window's events,
with Python integers (exact, however large), and the events they bind in all (the
cells of their rows), so a program can stop at once when they cannot fit.

It applies when the pattern has no condition between events (`Conditions.conjuncts`
empty: no relationship, prev() or aggregate; the properties of each variable are the
component bitmask). A match is then any assignment of window events to variables —
each plain variable one event, each `v+` one or more at distinct instants, no event
twice, h used, every event of set B_s at an instant before every event of B_{s+1} —
and these are counted instant by instant. The state is (s, bound): the set being
filled and which of its variables have an event; the events of one instant all go to
one set (sets are in sequence by instant), at most one to each variable of it. For an
instant, `_ways` gives, for each subset S of a set's variables, the number of ways to
give each variable of S a distinct event of the instant (h must be given). The cost is
O(instants × states × subsets) per window — a few µs an event for patterns of a few
variables — whatever the number of matches.

>>> import numpy as np
>>> from sparkcep.plan import analyze
>>> from sparkcep.prep.table import EventTable
>>> plan = analyze("PATTERN SEQ({A c, B+ p}, {C b}) WITHIN 100 SELECT ALL")
>>> mask = np.array([0b001] + [0b010] * 60 + [0b100])            # c, 60 p's, b
>>> table = EventTable(np.arange(62), np.arange(62), np.zeros(62, np.int64), mask)
>>> n, cells = MatchCounter(plan, table).count(0, 62)
>>> n == 2**60 - 1, cells == n * 2 + 60 * 2**59                    # c, b + the p's
(True, True)
"""

from __future__ import annotations

import numpy as np

from sparkcep.engines.ses.conditions import Conditions
from sparkcep.engines.ses.matcher import pattern_sets
from sparkcep.plan import Plan
from sparkcep.prep.table import EventTable

# A window is counted when its bound (`MatchCounter.log2_bounds`) exceeds this many
# matches: below it, enumerating them all takes a tenth of a second at most, and the
# memory budget is checked match by match as before.
COUNT_FROM = 10_000


class MatchCounter:
    """`count(h, end)`: (matches, events bound in all) of the window [h, end) from h."""

    def __init__(self, plan: Plan, table: EventTable, key: np.ndarray | None = None):
        sets = pattern_sets(plan)
        variables = [v for s in sets for v in s]
        kleene = {c.var for c in plan.positives if c.kleene}
        comp_bit = {c.var: c.bit for c in plan.positives}
        self.variables = variables
        self.kleene = kleene
        self.key = key
        self.order = table.order
        self.comp_bits = [comp_bit[v] for v in variables]
        # Variables as bits of their own (bit i: variables[i]), set by set.
        self.set_bits = []
        self.plain_bits = 0
        i = 0
        for members in sets:
            bits = 0
            for v in members:
                bits |= 1 << i
                if v not in kleene:
                    self.plain_bits |= 1 << i
                i += 1
            self.set_bits.append(bits)
        self.mask = table.mask
        self.per_var = [np.flatnonzero(table.mask & b) for b in self.comp_bits]
        self._cands: np.ndarray | None = None  # built for the first window counted

    def _candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """The events some variable can bind, and each one's variables as bits."""
        if self._cands is None:
            self._cands = np.unique(np.concatenate(self.per_var))
            mask = self.mask[self._cands]
            vbits = np.zeros(len(self._cands), dtype=np.int64)
            for i, b in enumerate(self.comp_bits):
                vbits |= ((mask & b) != 0).astype(np.int64) << i
            self._vbits = vbits
        return self._cands, self._vbits

    @staticmethod
    def applies(plan: Plan, select: str) -> bool:
        """Every match (SELECT ALL) of a pattern with no condition between events."""
        return select == "all" and not Conditions(plan, {}).conjuncts

    # ---- a cheap bound for every window at once
    def log2_bounds(self, heads: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """log2 of an upper bound of each window's matches (ignoring order and
        distinctness): the product of each plain variable's candidates and, for each
        `v+`, 2^candidates; -inf where a variable has none. Candidates outside h's key
        are left out (the key as given)."""
        total = np.zeros(len(heads))
        for i, pos in enumerate(self.per_var):
            n = self._in_range(pos, heads, ends).astype(float)
            with np.errstate(divide="ignore"):
                total += n if self.variables[i] in self.kleene else np.log2(n)
            total[n == 0] = -np.inf
        return total

    def _in_range(self, pos: np.ndarray, heads: np.ndarray, ends: np.ndarray) -> np.ndarray:
        if self.key is None:
            return np.searchsorted(pos, ends) - np.searchsorted(pos, heads)
        # candidates sorted by (key, position): a window's are one run of them
        width = len(self.order) + 1
        code = np.sort(self.key[pos] * width + pos)
        base = self.key[heads] * width
        return np.searchsorted(code, base + ends) - np.searchsorted(code, base + heads)

    # ---- the exact count of one window
    def count(self, h: int, end: int) -> tuple[int, int]:
        """(the number of matches from h in [h, end), the events they bind in all)."""
        if self.key is not None and self.key[h] < 0:
            return 0, 0
        cands, all_vbits = self._candidates()
        lo, hi = np.searchsorted(cands, [h, end])
        pos = cands[lo:hi]
        vbits = all_vbits[lo:hi]
        if self.key is not None:
            same = self.key[pos] == self.key[h]
            pos, vbits = pos[same], vbits[same]
        if not len(pos) or pos[0] != h:
            return 0, 0
        order = self.order[pos]
        cuts = np.flatnonzero(np.diff(order)) + 1
        starts = [0, *cuts.tolist()]
        stops = [*cuts.tolist(), len(pos)]
        vb = vbits.tolist()
        n_sets = len(self.set_bits)
        plain = self.plain_bits
        states: dict[tuple[int, int], list[int]] = {(0, 0): [1, 0]}
        for g, (a, b) in enumerate(zip(starts, stops)):
            group = vb[a:b]
            forced = g == 0  # h is the first event of the first instant
            ways: dict[int, dict[int, int]] = {}
            new: dict[tuple[int, int], list[int]] = {}
            for (s, bound), (n, c) in states.items():
                if not forced:
                    _add(new, (s, bound), n, c)
                targets = [(s, bound)]
                if bound == self.set_bits[s] and s + 1 < n_sets:
                    targets.append((s + 1, 0))
                for t, have in targets:
                    if t not in ways:
                        ways[t] = _ways(group, self.set_bits[t], forced)
                    for m, w in ways[t].items():
                        if m & have & plain:
                            continue
                        _add(new, (t, have | m), n * w, (c + n * m.bit_count()) * w)
            states = new
            if not states:
                return 0, 0
        last = states.get((n_sets - 1, self.set_bits[-1]))
        return (last[0], last[1]) if last else (0, 0)

    def closure(self, h: int, end: int, var: str) -> int:
        """The sequences of `var`'s candidates in [h, end) at increasing instants: the
        Kleene closure node a join tree builds for `var` (no condition on var)."""
        pos = self.per_var[self.variables.index(var)]
        pos = pos[np.searchsorted(pos, h) : np.searchsorted(pos, end)]
        if self.key is not None:
            pos = pos[self.key[pos] == self.key[h]]
        if not len(pos):
            return 0
        _, per_instant = np.unique(self.order[pos], return_counts=True)
        total = 1
        for k in per_instant.tolist():
            total *= k + 1
        return total - 1


def _add(states: dict, state: tuple[int, int], n: int, c: int) -> None:
    if n == 0:
        return
    got = states.get(state)
    if got is None:
        states[state] = [n, c]
    else:
        got[0] += n
        got[1] += c


def _ways(group: list[int], allowed: int, forced: bool) -> dict[int, int]:
    """For each non-empty subset S of `allowed` (variable bits): the ways to give every
    variable of S its own event of `group` (each event's variable bits) that it can
    bind; with `forced`, the group's first event (h) must be given."""
    f = {0: 1}
    for i, bits in enumerate(group):
        bits &= allowed
        must = forced and i == 0
        if not bits:
            if must:
                return {}
            continue
        nxt = {} if must else dict(f)
        for m, w in f.items():
            free = bits & ~m
            while free:
                b = free & -free
                free ^= b
                nxt[m | b] = nxt.get(m | b, 0) + w
        f = nxt
    f.pop(0, None)
    return f
