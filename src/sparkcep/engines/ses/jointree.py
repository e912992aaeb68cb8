"""A(P, W) by a join tree, as ZStream evaluates patterns (match-windows.md §6): every
match (Definition 2) that starts at the window's first event.

The tree is left-deep: a leaf per variable holds its events in the window (for `v+`,
every sequence of them in time order that fits the conditions on v alone: the Kleene
closure node), a conjunction node joins the variables of one set in any order (events
distinct), and a sequence node joins the sets in order (every event of the left before
every event of the right). Each node checks the conditions it completes. Leaves hold
only the events whose key equals the first event's (ZStream's hash join on the
equality predicates). The root keeps the matches that contain the window's first event.

>>> import numpy as np
>>> from sparkcep.plan import analyze
>>> from sparkcep.prep.table import EventTable
>>> plan = analyze("PATTERN SEQ({a, b}, {c}) WHERE a.v < b.v WITHIN 10")
>>> table = EventTable(np.arange(4), np.arange(4), np.zeros(4, np.int64),
...                    np.array([0b011, 0b011, 0b011, 0b100]))
>>> tree = JoinTreeMatcher(plan, table, {"v": [1, 2, 3, 0]})
>>> [sorted(m.items()) for m in tree.matches(0, 4)]
[[('a', [0]), ('b', [1]), ('c', [3])], [('a', [0]), ('b', [2]), ('c', [3])]]
"""

from __future__ import annotations

import numpy as np

import sparkcep.engines.ses.matcher as _limits
from sparkcep.engines.ses.conditions import Binding, Conditions
from sparkcep.engines.ses.matcher import TooManyBindings, pattern_sets
from sparkcep.plan import Plan
from sparkcep.prep.table import EventTable


class JoinTreeMatcher:
    """`matches(h, end)`: every match of the window [h, end) that starts at h."""

    def __init__(
        self,
        plan: Plan,
        table: EventTable,
        columns: dict[str, list],
        *,
        key: np.ndarray | None = None,
    ):
        self.sets = pattern_sets(plan)
        self.kleene = {c.var for c in plan.positives if c.kleene}
        self.bit = {c.var: c.bit for c in plan.positives}
        self.conditions = Conditions(plan, columns)
        self.order = table.order
        self.key = key
        self.cands = {v: np.flatnonzero(table.mask & b) for v, b in self.bit.items()}
        self.steps = 0

    def matches(self, h: int, end: int, limit: int | None = None) -> list[Binding]:
        """`limit`: at most that many (the tree builds them all first)."""
        self.steps = 0
        if self.key is not None and self.key[h] < 0:
            return []
        node = None
        for members in self.sets:
            part = self._leaf(members[0], h, end)
            for var in members[1:]:
                part = self._join(part, self._leaf(var, h, end), sequence=False)
            node = part if node is None else self._join(node, part, sequence=True)
        out = [
            binding
            for binding, events, _, _ in node
            if h in events and self.conditions.holds_final(binding)
        ]
        return out if limit is None else out[:limit]

    def _positions(self, var: str, h: int, end: int) -> np.ndarray:
        """The events of var in the window [h, end) whose key equals h's, in order."""
        cands = self.cands[var]
        pos = cands[np.searchsorted(cands, h) : np.searchsorted(cands, end)]
        if self.key is not None:
            pos = pos[self.key[pos] == self.key[h]]
        return pos

    def _leaf(self, var: str, h: int, end: int) -> list[tuple]:
        pos = self._positions(var, h, end).tolist()
        if var not in self.kleene:
            return [
                ({var: [p]}, frozenset((p,)), self.order[p], self.order[p])
                for p in pos
                if self.conditions.fits(var, {var: [p]}, {var})
            ]
        out: list[tuple] = []
        for i in range(len(pos)):
            self._closure(var, pos, i, out)
        return out

    def _closure(self, var: str, pos: list[int], first: int, out: list) -> None:
        """Every sequence of `pos` in time order that starts at pos[first] and fits the
        conditions on var alone (an element that does not fit stays in every longer
        sequence). An explicit stack: one frame per element after the first."""
        seq = [pos[first]]
        binding = {var: seq}
        if not self._visit(var, binding, out):
            return
        stack = [first + 1]  # per frame: the next position of pos to try
        while stack:
            j = stack[-1]
            while j < len(pos) and self.order[pos[j]] <= self.order[seq[-1]]:
                j += 1
            if j >= len(pos):
                stack.pop()
                if stack:
                    seq.pop()
                continue
            stack[-1] = j + 1
            seq.append(pos[j])
            if self._visit(var, binding, out):
                stack.append(j + 1)
            else:
                seq.pop()

    def _visit(self, var: str, binding: Binding, out: list) -> bool:
        self._count()
        if not self.conditions.fits(var, binding, {var}):
            return False
        seq = binding[var]
        out.append(({var: list(seq)}, frozenset(seq), self.order[seq[0]], self.order[seq[-1]]))
        return True

    def _join(self, left: list[tuple], right: list[tuple], *, sequence: bool) -> list[tuple]:
        if not left or not right:
            return []
        lvars = set(left[0][0])
        rvars = set(right[0][0])
        both = lvars | rvars
        conds = [
            c
            for c in self.conditions.conjuncts
            if not c.final and c.variables <= both and not c.variables <= lvars
            and not c.variables <= rvars
        ]  # fmt: skip
        out = []
        for lb, le, llo, lhi in left:
            for rb, re, rlo, rhi in right:
                self._count()
                if sequence and not lhi < rlo:
                    continue
                if le & re:
                    continue
                merged = {**lb, **rb}
                if all(self.conditions._all_combinations(c, merged, None) for c in conds):
                    out.append((merged, le | re, min(llo, rlo), max(lhi, rhi)))
        return out

    def _count(self) -> None:
        self.steps += 1
        if self.steps > _limits.STEP_LIMIT:
            raise TooManyBindings(
                f"more than {_limits.STEP_LIMIT:,} partial matches in one match window of the join "
                "tree: narrow the window or the conditions"
            )
