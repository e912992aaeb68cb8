"""The NFA with skip edges (ayac-probabilistic-cep.md §4, Fig. 1(b)).

States V_0 (initial), V_1 .. V_l (one per positive component: negated components have no
state) and V_{l+1} (final). Besides the precise automaton's edges V_i → V_{i+1}, an edge
V_i → V_j (j > i + 1) *skips* the positives between them, inferred missing; an edge from
V_0 to V_j skips the positives before j. Each edge is labelled with the scoring function
H_{i,j}(t) of what it skips — the missing positives and the negated components standing
between V_i and V_j — and G_{i,j}(T) = max_{t ≤ T} H_{i,j}(t); an edge whose G_{i,j}(W) is
below the threshold is removed (no path through it can reach the threshold).

Edges are indexed here by positives' positions: `edge(a, b)` goes from the state of
positive a (a = −1: V_0) to that of positive b. From V_0 the time t is measured from the
window's start (the last event's time − W, §4.1's arrival time at V_0).

The shoplifting pattern SEQ(A x, !B y, C z) of §2.2, Fig. 1(b):

>>> from sparkcep.plan import analyze
>>> plan = analyze("PATTERN SEQ(A x, !B y, C z) WITHIN 10 MISSING RATE 0.1 THRESHOLD 0.01")
>>> nfa = SkipAutomaton(plan)
>>> for (a, b), edge in sorted(nfa.edges.items()):
...     print(nfa.state(a), "->", nfa.state(b), edge.label, "kept" if edge.kept else "removed")
V0 -> V1 1 kept
V0 -> V2 S^{PN} kept
V1 -> V2 S^{N} kept
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparkcep.engines.ayac.scoring import (
    CELLS,
    Link,
    Negative,
    ScoringFunction,
    segment_function,
)
from sparkcep.plan import Plan
from sparkcep.plan.ayac import AyacSpec

TINY = float(np.nextafter(0.0, 1.0))  # a threshold of 0 still wants a positive score


@dataclass
class Edge:
    """V_a → V_b: its scoring function H, G(W) and whether it survives the threshold."""

    a: int
    b: int
    score: ScoringFunction
    peak: float  # G_{a,b}(W)
    kept: bool
    label: str
    skipped: tuple[str, ...]  # the variables it skips, in pattern order


def default_spec(plan: Plan) -> AyacSpec:
    """A plan without the probabilistic clauses: nothing is ever missed (ε = 0)."""
    from sparkcep.plan.laws import Uniform

    window = float(plan.window) if plan.window is not None else 1.0
    first = plan.positives[0].var
    laws = {c.var: Uniform(0.0, window) for c in plan.components if c.var != first}
    return AyacSpec({c.var: 0.0 for c in plan.components}, laws, 0.0)


class SkipAutomaton:
    """The skip edges of a plan, their scoring functions and which ones the threshold
    removes."""

    def __init__(self, plan: Plan, spec: AyacSpec | None = None, cells: int = CELLS):
        self.plan = plan
        self.spec = spec if spec is not None else (
            plan.spec if isinstance(plan.spec, AyacSpec) else default_spec(plan)
        )  # fmt: skip
        self.window = float(plan.window) if plan.window is not None else 1.0
        self.threshold = max(self.spec.threshold, TINY)
        self.positives = plan.positives
        self.k = len(self.positives)
        self.gaps: list[list] = [[] for _ in range(self.k + 1)]
        for c in plan.components:
            if c.negated:
                self.gaps[c.gap].append(c)
        self.cells = cells
        self.edges: dict[tuple[int, int], Edge] = {}
        for b in range(self.k):
            for a in range(-1, b):
                self.edges[(a, b)] = self._edge(a, b)

    def state(self, pos: int) -> str:
        return f"V{pos + 1}"

    def edge(self, a: int, b: int) -> Edge:
        return self.edges[(a, b)]

    def kept(self, a: int, b: int) -> bool:
        return self.edges[(a, b)].kept

    def _negatives(self, gap: int) -> tuple[Negative, ...]:
        return tuple(Negative(self.spec.rate(c.var), self.spec.laws[c.var]) for c in self.gaps[gap])

    def _law(self, pos: int):
        return self.spec.laws[self.positives[pos].var]

    def _edge(self, a: int, b: int) -> Edge:
        missing = range(a + 1, b)
        rates = tuple(self.spec.rate(self.positives[p].var) for p in missing)
        if a < 0:
            # From V_0: links between consecutive missing positives and to b, each of the
            # later positive's delay; what is left of T runs from the window's start to the
            # first positive, with the leading negations in it.
            links = tuple(Link(self._law(p + 1), self._negatives(p + 1)) for p in range(b))
            residual = self._negatives(0)
        else:
            links = tuple(Link(self._law(p), self._negatives(p)) for p in missing)
            residual = self._negatives(b)
        comps = [
            c
            for c in self.plan.components
            if (c.negated and (a + 1 if a >= 0 else 0) <= c.gap <= b)
            or (not c.negated and a < c.pos < b)
        ]
        label = "".join("N" if c.negated else "P" for c in comps)
        name = f"S^{{{label}}}" if label else "1"
        score = segment_function(
            rates, links, residual, window=self.window, name=name, cells=self.cells
        )
        peak = float(score.bound(np.array([self.window]))[0])
        return Edge(a, b, score, peak, peak >= self.threshold, name, tuple(c.var for c in comps))

    def describe(self) -> list[str]:
        """One line per edge: from, to, what it skips, G(W), kept or removed."""
        lines = []
        for (a, b), e in sorted(self.edges.items(), key=lambda x: (x[0][1], x[0][0])):
            skips = f"skips {', '.join(e.skipped)}" if e.skipped else "skips nothing"
            if e.label == "1":
                skips = "skips nothing"
            fate = "kept" if e.kept else "removed (below THRESHOLD)"
            lines.append(
                f"{self.state(a)} -> {self.state(b)}  {e.label}: {skips}; "
                f"G(W) = {e.peak:.4g}, {fate}"
            )
        return lines
