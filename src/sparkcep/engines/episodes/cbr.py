"""CBS-Tree Retrieval (Algorithm 1) and the rejected event instances (Definition 3).

When an event that can map to a sink of a rule arrives at instant rt, the latest
occurrence ending there is retrieved vertex by vertex in reverse topological order: a
sink maps to the latest instance of its event up to rt, any other vertex to the latest
instance before the earliest instant of its direct successors' instances, always at or
after lt (the first position within the predicate window: t_e − t_s < ω). If an instance
is missing, or the latest one is a rejected instance of the rule's previous min-latest
occurrence, there is no new min-latest occurrence, and the retrieval stops at once.

The index answering "latest instance of e in [lt, rt]" is the CBS-Tree, DirectMatch's
scan, or ToFel's queues: `CBR` works with any of them.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Protocol

from sparkcep.engines.episodes.rules import Rule
from sparkcep.engines.episodes.tree import NOT_FOUND


class Index(Protocol):
    def first_of(self, p: int) -> int: ...

    def latest(self, e: int, lt: int, rt: int, rejected: Container[int] = ...) -> int: ...

    def exists(self, e: int, lo: int, hi: int) -> bool: ...


class CBR:
    """Min-latest occurrences of one rule (Algorithm 1, with Definition 3).

    The traffic rule of Figure 2 — W and X, then Y, within 10 minutes — over the stream
    of Figure 3 (X 8:00, W 8:02, X 8:03, Y 8:05, Y 8:07; times in minutes after 8:00):

    >>> from sparkcep.engines.episodes.window import DirectMatch, Segment
    >>> from sparkcep.engines.episodes.rules import RuleSet
    >>> from sparkcep.plan import analyze
    >>> rule = RuleSet([analyze('''EPISODE (W w, X x, Y y; w -> y, x -> y) WITHIN 10
    ...                            PREDICT Z WITHIN 15''')], ["traffic"])[0]
    >>> W, X, Y = rule.symbols
    >>> seg = Segment.of([X, W, X, Y, Y], [0, 2, 3, 5, 7])
    >>> cbr, index = CBR(rule), DirectMatch(seg)

    At 8:05 (position 3) the latest occurrence is O2 = ⟨(W, 8:02), (X, 8:03), (Y, 8:05)⟩,
    positions 1, 2, 3; it is minimal, and its rejected instances are (W, 8:02) — the
    start — and (Y, 8:05), as no W comes between them:

    >>> lt = seg.lower(5 - 10)
    >>> found = cbr.match(index, lt, 3, frozenset())
    >>> found, sorted(cbr.rejected(index, found))
    ([1, 2, 3], [1, 3])

    At 8:07 the latest occurrence is O3 = ⟨(W, 8:02), (X, 8:03), (Y, 8:07)⟩: it holds the
    rejected (W, 8:02), so it is not minimal (it encloses O2) and nothing is reported:

    >>> cbr.match(index, seg.lower(7 - 10), 4, frozenset({1, 3})) is None
    True
    """

    def __init__(self, rule: Rule):
        self.rule = rule

    def match(
        self, index: Index, lt: int, rt: int, rejected: Container[int], arrived=None
    ) -> list[int] | None:
        """The positions of the latest occurrence ending at instant rt (whose last
        position is rt), or None when there is no new min-latest occurrence there.
        `arrived` maps the symbols of the instant's events to their last position: a sink
        of one of them maps to that event (line 1), without a search."""
        rule = self.rule
        pos = [NOT_FOUND] * len(rule.symbols)
        for v in rule.retrieval:
            succ = rule.succ[v]
            if succ:
                bound = index.first_of(min(pos[w] for w in succ)) - 1
            elif arrived is not None and rule.symbols[v] in arrived:
                pos[v] = arrived[rule.symbols[v]]  # a new event is never rejected
                continue
            else:
                bound = rt
            if bound < lt:
                return None
            t = index.latest(rule.symbols[v], lt, bound, rejected)
            if t < 0:  # not found, or rejected: either way the retrieval stops
                return None
            pos[v] = t
        return pos

    def rejected(self, index: Index, pos: list[int]) -> frozenset[int]:
        """The rejected event instances of a min-latest occurrence (Definition 3):
        (a) the instances at its start instant; (b) for a rejected v_i and each direct
        successor v_j, v_j's instance if no instance of v_i's event lies after v_i's and
        before v_j's instant."""
        rule = self.rule
        firsts = [index.first_of(p) for p in pos]
        start = min(firsts)
        rejected = [f == start for f in firsts]
        for v in rule.topological:
            if not rejected[v]:
                continue
            for w in rule.succ[v]:
                if not rejected[w] and not index.exists(rule.symbols[v], pos[v] + 1, firsts[w] - 1):
                    rejected[w] = True
        return frozenset(p for p, r in zip(pos, rejected) if r)
