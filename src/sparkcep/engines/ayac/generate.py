"""Arrivals and match generation (ayac-probabilistic-cep.md §4.1, §4.2, §5.1).

`ArrivalBounds` is the enqueue side: for each event that can bind positive i it computes
u, the upper bound of the score of any path arriving at V_i then —
max(G_{0,i}(W), max_j (max_k u_{j,k}) · G_{j,i}(t − t_{j,0})) over the kept edges j → i
(§5.1's v_new) — and queues it in PAQ_i only when u reaches the threshold.

`MatchGenerator` is §4.2's enhanced approach: for each arrival at the last state (an
observed last positive) it builds the paths backwards, one state at a time, extending a
partial path from (t_b, V_b) to an arrival (t_a, u_a) of PAQ_a only when
s · H_{a,b}(t_b − t_a) · u_a reaches the threshold (early pruning), applying each
non-trivial condition as soon as its variables are decided (bound or inferred missing)
and looking up negated events between the two arrivals in the NAQs (binary search)
before extending further. A path is closed by the edge from V_0, whose time runs from
the window's start (the last event's time − W).

Everything is column-wise: all paths of a batch at a state move together.

Semantics (docs/ayac.md): a variable inferred missing has NULL attributes; a conjunct
holds when it is TRUE, or NULL while it mentions a variable inferred missing. A negated
event kills a path when it lies strictly between the path's observed events around the
negation's place (or, before the first observed one, after the window's start) and its
conditions hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparkcep.budget import CELL_BYTES, Budget
from sparkcep.engines.ayac.automaton import SkipAutomaton
from sparkcep.engines.ayac.queues import ArrivalQueue, NegativeQueue
from sparkcep.expressions import Vec, evaluate
from sparkcep.language import ast
from sparkcep.prep.table import EventTable

SLACK = 1e-9  # bounds are compared with θ(1 − SLACK): rounding never prunes a path


def expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows repeated once per index in [lo, hi), and those indices."""
    counts = np.maximum(hi - lo, 0)
    rows = np.repeat(np.arange(len(lo)), counts)
    if not len(rows):
        return rows, rows
    starts = np.cumsum(counts) - counts
    return rows, lo[rows] + np.arange(len(rows)) - starts[rows]


@dataclass
class Paths:
    """Partial or complete paths: the end event, the bound event of each positive (−1:
    inferred missing, or not yet decided left of the current state) and the score."""

    end: np.ndarray
    bind: np.ndarray  # (n, k) table positions
    score: np.ndarray

    def __len__(self) -> int:
        return len(self.end)

    def take(self, which) -> Paths:
        return Paths(self.end[which], self.bind[which], self.score[which])

    @staticmethod
    def concat(parts: list[Paths], k: int) -> Paths:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Paths(np.zeros(0, np.int64), np.zeros((0, k), np.int64), np.zeros(0))
        return Paths(
            np.concatenate([p.end for p in parts]),
            np.concatenate([p.bind for p in parts]),
            np.concatenate([p.score for p in parts]),
        )


def _gather(col: Vec, idx: np.ndarray) -> Vec:
    """The column's values at table positions `idx`; −1 gives NULL."""
    safe = np.where(idx >= 0, idx, 0)
    null = idx < 0
    if col.null is not None:
        null = null | col.null[safe]
    return Vec(col.values[safe], null)


def path_resolver(
    table: EventTable, pos: dict[str, int], bind: np.ndarray, neg_var=None, neg_idx=None
):
    """Attribute values of paths for `expressions.evaluate`: a positive's from its bound
    event (NULL when inferred missing), the negated `neg_var`'s from `neg_idx`."""
    cache: dict[tuple[str, str], Vec] = {}

    def resolve(node):
        if not isinstance(node, ast.AttrRef):
            raise TypeError(f"not a value of one event: {node!r}")
        key = (node.var, node.attr)
        if key not in cache:
            idx = neg_idx if node.var == neg_var else bind[:, pos[node.var]]
            cache[key] = _gather(table.columns[node.attr], idx)
        return cache[key]

    return resolve


@dataclass
class _Conjunct:
    expr: ast.Expr
    positions: tuple[int, ...]  # the positives it mentions
    first: int  # the smallest of them (decided once the path reaches it)


class ArrivalBounds:
    """Upper bounds u for the events of each state, and the PAQs of those that reach the
    threshold (§4.1 enqueue, §5.1 v_new)."""

    def __init__(self, automaton: SkipAutomaton, table: EventTable):
        self.nfa = automaton
        self.table = table
        self.window = round(automaton.window)
        self.floor = automaton.threshold * (1 - SLACK)

    def compute(self, stored: list[np.ndarray], new: np.ndarray):
        """`stored[p]`: u of each table row for positive p (NaN where unknown); `new`:
        the rows of this batch. Returns u per positive (over table rows) and the PAQs."""
        t = self.table
        bounds, queues = [], []
        for p in range(self.nfa.k):
            bit = np.int64(1) << np.int64(self.nfa.positives[p].index)
            rows = np.flatnonzero((t.mask & bit) != 0)
            u = stored[p][rows].copy()
            fresh = new[rows] | np.isnan(u)
            if fresh.any():
                u[fresh] = self._bound(p, rows[fresh], queues)
            full = np.full(len(t), np.nan)
            full[rows] = u
            bounds.append(full)
            queued = rows[u >= self.floor]
            queues.append(
                ArrivalQueue(
                    t.segment[queued], t.order[queued], t.ts[queued], u[u >= self.floor],
                    self.window, index=queued,
                )
            )  # fmt: skip
        return bounds, queues

    def _bound(self, p: int, rows: np.ndarray, queues: list[ArrivalQueue]) -> np.ndarray:
        t = self.table
        lead = self.nfa.edge(-1, p)
        best = np.full(len(rows), lead.peak if lead.kept else 0.0)
        for j in range(p):
            edge = self.nfa.edge(j, p)
            if not edge.kept or not len(queues[j]):
                continue
            top, oldest, found = queues[j].window_max(t.segment[rows], t.order[rows], t.ts[rows])
            if not found.any():
                continue
            gap = (t.ts[rows] - oldest).astype(np.float64)
            via = np.where(found, top * edge.score.bound(np.where(found, gap, 0.0)), 0.0)
            best = np.maximum(best, via)
        return best


class MatchGenerator:
    """Backward match generation with early pruning (§4.2) for one plan over a table."""

    def __init__(
        self, automaton: SkipAutomaton, table: EventTable, queues, negatives, budget: Budget
    ):
        self.meter = budget.meter()  # the paths held count against the budget
        self.nfa = automaton
        self.plan = automaton.plan
        self.table = table
        self.queues: list[ArrivalQueue] = queues
        self.negatives: dict[int, NegativeQueue] = negatives  # component index -> NAQ
        self.k = automaton.k
        self.window = round(automaton.window)
        self.theta = automaton.threshold
        self.floor = self.theta * (1 - SLACK)
        pos = {c.var: c.pos for c in self.plan.positives}
        self.pos = pos
        self.conjuncts = [self._conjunct(c.expr, pos) for c in self.plan.conditions]
        self.negations = []
        for neg in self.plan.negations:
            conds = [self._conjunct(e, pos) for e in neg.conditions]
            first = min((c.first for c in conds), default=self.k)
            self.negations.append((neg.component, conds, first))

    @staticmethod
    def _conjunct(expr: ast.Expr, pos: dict[str, int]) -> _Conjunct:
        names = {n.var for n in ast.walk(expr) if isinstance(n, ast.AttrRef | ast.VarRef)}
        positions = tuple(sorted(pos[v] for v in names if v in pos))
        return _Conjunct(expr, positions, positions[0] if positions else 10**9)

    # ---- driver
    def run(self, ends: np.ndarray) -> Paths:
        k = self.k
        bind = np.full((len(ends), k), -1, dtype=np.int64)
        bind[:, k - 1] = ends
        frontier: list[list[Paths]] = [[] for _ in range(k)]
        frontier[k - 1].append(Paths(ends.astype(np.int64), bind, np.ones(len(ends))))
        done = []
        path_bytes = (k + 2) * CELL_BYTES  # its end, bound events and score
        for b in range(k - 1, -1, -1):
            paths = Paths.concat(frontier[b], k)
            if not len(paths):
                continue
            done.append(self._close(paths, b))
            self.meter.hold(len(done[-1]) * path_bytes, matches=len(done[-1]))
            for a in range(b - 1, -1, -1):
                if self.nfa.kept(a, b):
                    frontier[a].append(self._extend(paths, a, b))
                    self.meter.hold(len(frontier[a][-1]) * path_bytes)
        return Paths.concat(done, k)

    # ---- steps
    def _extend(self, paths: Paths, a: int, b: int) -> Paths:
        t = self.table
        queue = self.queues[a]
        if not len(queue):
            return Paths.concat([], self.k)
        right = paths.bind[:, b]
        t_last = t.ts[paths.end]
        lo, hi = queue.since(t.segment[right], t_last - self.window, t.order[right])
        rows, cand = expand(lo, hi)
        if not len(rows):
            return Paths.concat([], self.k)
        gap = (t.ts[right[rows]] - queue.t[cand]).astype(np.float64)
        score = paths.score[rows] * self.nfa.edge(a, b).score(gap)
        keep = score * queue.u[cand] >= self.floor
        rows, cand, score = rows[keep], cand[keep], score[keep]
        bind = paths.bind[rows].copy()
        bind[:, a] = queue.index[cand]
        out = Paths(paths.end[rows], bind, score)
        for c in self.conjuncts:
            if len(out) and a <= c.first < b:
                out = out.take(self._holds(c, out.bind))
        for comp, conds, first in self.negations:
            if len(out) and a < comp.gap <= b and first >= a:
                out = out.take(~self._forbidden(out, comp, conds, out.bind[:, a], b))
        return out

    def _close(self, paths: Paths, b: int) -> Paths:
        """Paths whose first observed positive is b: the edge from V_0 closes them."""
        edge = self.nfa.edge(-1, b)
        if not edge.kept:
            return Paths.concat([], self.k)
        t = self.table
        lead = (t.ts[paths.bind[:, b]] - (t.ts[paths.end] - self.window)).astype(np.float64)
        out = Paths(paths.end, paths.bind, paths.score * edge.score(lead))
        out = out.take(out.score >= self.theta)
        for c in self.conjuncts:
            if len(out) and c.first < b:
                out = out.take(self._holds(c, out.bind))
        for comp, conds, first in self.negations:
            if not len(out):
                break
            if comp.gap <= b:
                no_left = np.full(len(out), -1, dtype=np.int64)
                out = out.take(~self._forbidden(out, comp, conds, no_left, b))
                continue
            left_pos = self._left_anchor(out.bind, comp.gap)
            late = first < left_pos  # conditions not decided at its extension: now
            if late.any():
                left = out.bind[np.arange(len(out)), left_pos]
                right_pos = self._right_anchor(out.bind, comp.gap)
                bad = np.zeros(len(out), dtype=bool)
                sub = out.take(late)
                bad[late] = self._forbidden_at(
                    sub, comp, conds, left[late], out.bind[np.arange(len(out)), right_pos][late]
                )
                out = out.take(~bad)
        return out

    # ---- conditions and negations
    def _resolver(self, bind: np.ndarray, neg_var: str | None = None, neg_idx=None):
        return path_resolver(self.table, self.pos, bind, neg_var, neg_idx)

    def _holds(self, c: _Conjunct, bind: np.ndarray, resolve=None) -> np.ndarray:
        """TRUE, or NULL while mentioning a variable inferred missing."""
        n = len(bind)
        value = evaluate(c.expr, resolve or self._resolver(bind), n)
        missing = np.zeros(n, dtype=bool)
        for p in c.positions:
            missing |= bind[:, p] < 0
        return value.truth() | (value.nulls() & missing)

    def _forbidden(self, paths, comp, conds, left, b) -> np.ndarray:
        right = paths.bind[:, b]
        return self._forbidden_at(paths, comp, conds, left, right)

    def _forbidden_at(self, paths, comp, conds, left, right) -> np.ndarray:
        """Whether an event of the negated `comp` lies between `left` and `right` (table
        positions; left −1: after the window's start) with its conditions holding."""
        t = self.table
        queue = self.negatives[comp.index]
        if not len(queue):
            return np.zeros(len(paths), dtype=bool)
        seg = t.segment[right]
        anchored = left >= 0
        lo = np.zeros(len(paths), dtype=np.int64)
        hi = np.zeros(len(paths), dtype=np.int64)
        if anchored.any():
            lo[anchored], hi[anchored] = queue.between(
                seg[anchored], t.order[left[anchored]], t.order[right[anchored]]
            )
        start = ~anchored
        if start.any():
            since = t.ts[paths.end[start]] - self.window
            lo[start], hi[start] = queue.since(seg[start], since, t.order[right[start]])
        if not conds:
            return hi > lo
        rows, cand = expand(lo, hi)
        if not len(rows):
            return np.zeros(len(paths), dtype=bool)
        bind = paths.bind[rows]
        resolve = self._resolver(bind, comp.var, queue.index[cand])
        ok = np.ones(len(rows), dtype=bool)
        for c in conds:
            ok &= self._holds(c, bind, resolve)
        return np.bincount(rows[ok], minlength=len(paths)) > 0

    @staticmethod
    def _left_anchor(bind: np.ndarray, gap: int) -> np.ndarray:
        """The observed positive nearest before the gap (−1: none)."""
        out = np.full(len(bind), -1, dtype=np.int64)
        for p in range(gap):
            out = np.where(bind[:, p] >= 0, p, out)
        return out

    @staticmethod
    def _right_anchor(bind: np.ndarray, gap: int) -> np.ndarray:
        out = np.full(len(bind), bind.shape[1] - 1, dtype=np.int64)
        for p in range(bind.shape[1] - 1, gap - 1, -1):
            out = np.where(bind[:, p] >= 0, p, out)
        return out
