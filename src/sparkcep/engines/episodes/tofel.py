"""ToFel (Topological Forward Retrieval), the paper's baseline (its reference [4]).

ToFel filters the stream forward, one queue per vertex of each rule: an arriving
instance of a vertex's event is kept only if every direct predecessor has a kept
instance at an earlier instant within the rule's predicate window ("an event instance
for a vertex can be kept if there are some event instances kept for all its direct
predecessors", §4). When a kept instance of a sink arrives, the latest occurrence is
retrieved from the queues (each vertex's latest kept instance before its successors)
and checked against the rejected instances, as CBR does. The queues belong to each
rule, so ToFel's memory grows with the number of rules; the CBS-Tree's does not.

Reference [4] is not among the shared papers: this is a reconstruction from what the
CBS-Tree paper says of it (docs/episodes.md). It finds exactly the min-latest
occurrences: every instance of a latest occurrence is kept (its predecessors' instances
lie within the window before it), so the latest kept instances are the latest ones.

>>> from sparkcep.engines.episodes.window import Segment
>>> from sparkcep.engines.episodes.rules import RuleSet
>>> from sparkcep.plan import analyze
>>> rules = RuleSet([analyze("EPISODE (A a, B b, C c; a -> b, b -> c) WITHIN 5"
...                          " PREDICT D WITHIN 5")], ["abc"])
>>> A, B, C = rules[0].symbols
>>> tofel, seg = ToFel(rules), Segment.of([], [], capacity=8)
>>> for p, e in enumerate([B, A, C, B, C]):  # a B before any A is not kept
...     _ = tofel.arrive(seg, [p], [e], p, {5: 0})
>>> seg.kept[0]
[[1], [3], [4]]
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Container

from sparkcep.engines.episodes.rules import RuleSet
from sparkcep.engines.episodes.tree import NOT_FOUND, REJECTED
from sparkcep.engines.episodes.window import Segment

_EMPTY: frozenset[int] = frozenset()


class ToFel:
    """The per-rule queues of kept instances, kept in each segment's `kept`."""

    def __init__(self, rules: RuleSet):
        self.rules = rules

    def arrive(
        self, seg: Segment, positions, symbols, first: int, lows: dict[int, int]
    ) -> list[int]:
        """The events of one instant (starting at position `first`) arrive; `lows`
        maps each predicate window to its first position within it. Returns the rules
        for which a sink instance was kept (their occurrences may end here)."""
        rules = self.rules
        keep: list[tuple[list[int], int]] = []
        triggered: set[int] = set()
        for p, s in zip(positions, symbols):
            for r, v in rules.by_vertex.get(s, ()):
                rule = rules[r]
                queues = seg.kept.get(r)
                if queues is None:
                    queues = seg.kept[r] = [[] for _ in rule.symbols]
                low = lows[rule.window]
                if all(_earlier(queues[u], low, first) for u in rule.pred[v]):
                    keep.append((queues[v], p))
                    if not rule.succ[v]:
                        triggered.add(r)
        for queue, p in keep:  # after the checks: an instant's events do not precede each other
            queue.append(p)
        return sorted(triggered)

    def index(self, seg: Segment, r: int) -> ToFelIndex:
        return ToFelIndex(seg, self.rules[r].symbols, seg.kept[r])

    def entries(self, seg: Segment) -> int:
        """Instances held in the queues (ToFel's memory)."""
        return sum(len(q) for queues in seg.kept.values() for q in queues)

    def prune(self, seg: Segment, low_of) -> None:
        """Drop kept instances that fell out of their rule's window."""
        for r, queues in list(seg.kept.items()):
            low = low_of(self.rules[r].window)
            for q in queues:
                del q[: bisect_left(q, low)]
            if not any(queues):
                del seg.kept[r]


def _earlier(queue: list[int], low: int, first: int) -> bool:
    """A kept instance within the window (position >= low) before the instant `first`;
    drops the instances that fell out of the window."""
    if queue and queue[0] < low:
        del queue[: bisect_left(queue, low)]
    return bool(queue) and queue[0] < first


class ToFelIndex:
    """Latest kept instances of one rule's vertices (the `Index` CBR retrieves from)."""

    def __init__(self, seg: Segment, symbols: tuple[int, ...], queues: list[list[int]]):
        self.seg = seg
        self.vertex = {s: v for v, s in enumerate(symbols)}
        self.queues = queues

    def first_of(self, p: int) -> int:
        return self.seg.first_of(p)

    def latest(self, e: int, lt: int, rt: int, rejected: Container[int] = _EMPTY) -> int:
        queue = self.queues[self.vertex[e]]
        i = bisect_right(queue, rt) - 1
        if i < 0 or queue[i] < lt:
            return NOT_FOUND
        return REJECTED if queue[i] in rejected else queue[i]

    def exists(self, e: int, lo: int, hi: int) -> bool:
        return lo <= hi and self.latest(e, lo, hi) >= 0
