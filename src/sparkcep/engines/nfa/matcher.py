"""The `nfa` matcher: the SASE pattern engine (imprecise-timestamps.md §2.1; semantics in docs/semantics.md).

SEQ with negation anywhere, Kleene closure, cross conditions, a window and the three
selection strategies, over an `EventTable` of one or more partitions.

The engine runs the automaton for all runs at once, column-wise: a *frontier* holds every
partial match that has bound components P1..Pi (as arrays of event positions), and
binding Pi+1 turns it into the next frontier with numpy:

- skip-till-any-match pairs each run with every candidate in its window,
- skip-till-next-match gives each run its first eligible candidate,
- strict contiguity gives each run the event right after its last one.

A Kleene component loops (take an element, or proceed), with its elements kept as a
linked list of nodes (SASE's shared match buffer) and its aggregates as running columns.
Negations are checked by looking for a forbidding event between the neighbouring
bound events. Runs are independent of each other, so they are processed in chunks,
depth first: the start events in chunks, each binding split so that it builds at most
CHUNK_ROWS partial matches, and each chunk carried to its complete matches before the
next. What is held at once (the complete matches found so far, the chunks on the way,
the Kleene element nodes) is counted against a memory budget; `max_matches` stops the
search as soon as that many matches are found.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from sparkcep.budget import CELL_BYTES, Budget, TooManyMatches, budget_message
from sparkcep.engines.arrays import lexsort
from sparkcep.engines.arrays import ranges as _ranges
from sparkcep.expressions import Vec, evaluate, truth
from sparkcep.language import ast
from sparkcep.plan import AGGREGATES, Condition, NegationCheck, Plan, PlanComponent
from sparkcep.prep.table import EventTable

START_CHUNK = 20_000  # start events per pass; runs never interact, so chunks are exact
CHUNK_ROWS = 200_000  # partial matches one binding builds at once (more: split the runs)
KEEP_ROWS = 20_000  # complete matches turned into output at once
NODE_BYTES = 16  # a Kleene element node: its position and its parent
ROW_BYTES = CELL_BYTES  # an int64 cell of a match, with its copies on the way out
LIST_BYTES = 300  # a Kleene list: its numpy array, then its Python list of ids
ELEMENT_BYTES = 48  # an element of a Kleene list, as position, id and Python int
VALUE_BYTES = 64  # a RETURN value, as a Python object and its pandas cell


@dataclass
class Frontier:
    """Partial matches, one per row; positions index the EventTable."""

    first: np.ndarray
    last: np.ndarray
    bound: dict[str, np.ndarray] = field(default_factory=dict)  # singleton var -> position
    kfirst: dict[str, np.ndarray] = field(default_factory=dict)  # Kleene var -> first elem
    klast: dict[str, np.ndarray] = field(default_factory=dict)
    kcount: dict[str, np.ndarray] = field(default_factory=dict)
    knode: dict[str, np.ndarray] = field(default_factory=dict)  # tail node of the elements
    acc: dict[tuple[str, str, str], Vec] = field(default_factory=dict)  # (var, func, attr)

    def __len__(self) -> int:
        return len(self.first)

    def take(self, rows: np.ndarray) -> Frontier:
        def sub(d):
            return {k: v[rows] for k, v in d.items()}

        return Frontier(
            self.first[rows],
            self.last[rows],
            sub(self.bound),
            sub(self.kfirst),
            sub(self.klast),
            sub(self.kcount),
            sub(self.knode),
            {k: v.take(rows) for k, v in self.acc.items()},
        )

    @staticmethod
    def concat(parts: list[Frontier]) -> Frontier:
        if len(parts) == 1:
            return parts[0]

        def cat(name):
            return {
                k: np.concatenate([getattr(p, name)[k] for p in parts])
                for k in getattr(parts[0], name)
            }

        acc = {}
        for k in parts[0].acc:
            values = np.concatenate([p.acc[k].values for p in parts])
            nulls = np.concatenate([p.acc[k].nulls() for p in parts])
            acc[k] = Vec(values, nulls)
        return Frontier(
            np.concatenate([p.first for p in parts]),
            np.concatenate([p.last for p in parts]),
            cat("bound"),
            cat("kfirst"),
            cat("klast"),
            cat("kcount"),
            cat("knode"),
            acc,
        )


@dataclass
class Matches:
    """Complete matches: event positions per positive variable (Kleene: lists)."""

    first: np.ndarray
    last: np.ndarray
    segment: np.ndarray
    positions: dict[
        str, np.ndarray
    ]  # singleton var -> positions; Kleene var -> object array of position arrays
    values: dict[str, list]  # RETURN column -> values

    def __len__(self) -> int:
        return len(self.first)


def _window_bounds(ts, seg_starts, seg_ends, w) -> tuple[np.ndarray, np.ndarray]:
    """Per event, the first position at or after ts + w and the first after ts - w, in
    its segment (or beyond it: callers clip).

    Times are made increasing across segments (each shifted after the previous one), so
    one searchsorted serves every segment. When the shifted times could overflow int64
    (times near ±2^62), they are replaced by their ranks among every time and bound,
    which order the same way.
    """
    lengths = seg_ends - seg_starts
    seg_min = ts[seg_starts]
    spans = (ts[seg_ends - 1] - seg_min).astype(np.float64) + 1
    if spans.sum() + w < 2.0**62:
        widths = ts[seg_ends - 1] - seg_min + 1
        base = np.concatenate(([0], np.cumsum(widths)[:-1]))
        adj = ts - np.repeat(seg_min - base, lengths)
        return (
            np.searchsorted(adj, adj + w, side="left"),
            np.searchsorted(adj, adj - w, side="right"),
        )
    seg = np.repeat(np.arange(len(seg_starts)), lengths)
    values = np.unique(np.concatenate([ts, ts + w, ts - w]))  # |ts| < 2^62, w <= 2^62
    span = len(values) + 1
    key = seg * span + np.searchsorted(values, ts)
    return (
        np.searchsorted(key, seg * span + np.searchsorted(values, ts + w), side="left"),
        np.searchsorted(key, seg * span + np.searchsorted(values, ts - w), side="right"),
    )


class PatternMatcher:
    """Finds the matches of one plan in one EventTable (all its partitions at once)."""

    def __init__(
        self,
        plan: Plan,
        table: EventTable,
        budget: Budget | None = None,
    ):
        self.plan = plan
        self.t = table
        budget = budget or Budget()
        self.max_matches = budget.max_matches
        self.budget = budget.memory
        self.found = 0  # complete matches kept so far
        self.held_bytes = 0  # what the kept matches will take, as output rows
        self.alive_rows = 0  # partial matches in the chunks on the way
        self.positives = plan.positives
        self.strategy = plan.strategy
        n = len(table)
        self.n = n
        self._index_positions(table)
        self.cand = {
            c.index: np.flatnonzero(table.mask & c.bit).astype(np.int64) for c in plan.components
        }
        self.partial_matches = 0  # partial matches built (the two-step method's objects)
        self.peak_frontier = 0
        self.node_pos: list[np.ndarray] = []
        self.node_parent: list[np.ndarray] = []
        self.node_count = 0
        self._nodes_cache: tuple[np.ndarray, np.ndarray] | None = None
        # Running accumulators per Kleene variable and attribute (avg = sum / non-nulls),
        # each kept once however many aggregates read it.
        self.accumulators: dict[str, dict[str, list[str]]] = {}
        for need in running_aggregates(plan):
            if not plan.component(need.var).kleene or need.func in ("count", "first", "last"):
                continue
            funcs = self.accumulators.setdefault(need.var, {}).setdefault(need.attr, [])
            for func in ("sum", "nn") if need.func == "avg" else (need.func,):
                if func not in funcs:
                    funcs.append(func)

    # ---- precomputed per-event bounds ------------------------------------------------
    def _index_positions(self, t: EventTable):
        n = self.n
        seg = t.segment
        if n == 0:
            z = np.zeros(0, dtype=np.int64)
            self.seg_end = self.grp_start = self.grp_end = self.win_end = self.win_start = z
            return
        seg_starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
        seg_ends = np.r_[seg_starts[1:], n]
        lengths = seg_ends - seg_starts
        self.seg_end = np.repeat(seg_ends, lengths)
        seg_start = np.repeat(seg_starts, lengths)
        grp_change = np.r_[True, (t.order[1:] != t.order[:-1]) | (seg[1:] != seg[:-1])]
        grp_starts = np.flatnonzero(grp_change)
        grp_ends = np.r_[grp_starts[1:], n]
        glen = grp_ends - grp_starts
        self.grp_start = np.repeat(grp_starts, glen)
        self.grp_end = np.repeat(grp_ends, glen)
        w = self.plan.window
        if w is None:
            self.win_end = self.seg_end
            self.win_start = seg_start
            return
        self.win_end, self.win_start = _window_bounds(t.ts, seg_starts, seg_ends, w)
        self.win_end = np.minimum(self.win_end, self.seg_end)
        self.win_start = np.maximum(self.win_start, seg_start)

    # ---- Kleene element nodes ----------------------------------------------------------
    def _new_nodes(self, pos: np.ndarray, parent: np.ndarray) -> np.ndarray:
        ids = np.arange(self.node_count, self.node_count + len(pos), dtype=np.int64)
        self.node_pos.append(pos)
        self.node_parent.append(parent)
        self.node_count += len(pos)
        self._nodes_cache = None
        return ids

    def _nodes(self) -> tuple[np.ndarray, np.ndarray]:
        if self._nodes_cache is None:
            if self.node_pos:
                self._nodes_cache = (
                    np.concatenate(self.node_pos),
                    np.concatenate(self.node_parent),
                )
            else:
                self._nodes_cache = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        return self._nodes_cache

    def _elements(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Walk element lists: (row index, element position, depth from the last)."""
        node_pos, node_parent = self._nodes()
        rows_out, pos_out, depth_out = [], [], []
        rows = np.arange(len(nodes))
        cur = nodes
        depth = 0
        while len(rows):
            rows_out.append(rows)
            pos_out.append(node_pos[cur])
            depth_out.append(np.full(len(rows), depth))
            cur = node_parent[cur]
            keep = cur >= 0
            rows, cur = rows[keep], cur[keep]
            depth += 1
        if not rows_out:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        return np.concatenate(rows_out), np.concatenate(pos_out), np.concatenate(depth_out)

    # ---- expression environment ---------------------------------------------------------
    def _resolver(self, F: Frontier, rows, current: PlanComponent | None, cpos, element_pos):
        """Values of attributes and aggregates for the rows being evaluated.

        `rows` index F; `current` is the component being bound with candidate positions
        `cpos`; `element_pos` gives, for Kleene variables checked for every element,
        the element each evaluated row stands for.
        """
        cols = self.t.columns

        def position(var: str) -> np.ndarray:
            if current is not None and var == current.var:
                return cpos
            if var in element_pos:
                return element_pos[var]
            if var in F.bound:
                return F.bound[var][rows]
            raise KeyError(var)

        def resolve(node: ast.Expr) -> Vec:
            if isinstance(node, ast.AttrRef):
                return cols[node.attr].take(position(node.var))
            assert isinstance(node, ast.Call)
            arg = node.args[0]
            var = arg.var  # type: ignore[union-attr]
            attr = getattr(arg, "attr", None)
            if node.name == "prev":
                return cols[attr].take(F.klast[var][rows])
            comp = self.plan.component(var)
            if not comp.kleene:
                if node.name == "count":
                    return Vec(np.ones(len(rows), dtype=np.int64))
                value = cols[attr].take(position(var))
                if node.name == "avg":
                    return Vec(value.values.astype(np.float64), value.null)
                return value
            if node.name == "count":
                return Vec(F.kcount[var][rows])
            if node.name == "first":
                return cols[attr].take(F.kfirst[var][rows])
            if node.name == "last":
                return cols[attr].take(F.klast[var][rows])
            if node.name == "avg":
                total = F.acc[(var, "sum", attr)].take(rows)
                count = F.acc[(var, "nn", attr)].take(rows).values
                with np.errstate(invalid="ignore", divide="ignore"):
                    avg = total.values / np.maximum(count, 1)
                return Vec(avg.astype(np.float64), count == 0)
            return F.acc[(var, node.name, attr)].take(rows)

        return resolve

    def _check(self, conds, F: Frontier, rows, current, cpos) -> np.ndarray:
        """Which (row, candidate) pairs satisfy every condition in `conds`."""
        ok = np.ones(len(rows), dtype=bool)
        for cond in conds:
            idx = np.flatnonzero(ok)
            if not len(idx):
                break
            r = rows[idx]
            c = None if cpos is None else cpos[idx]
            ok[idx] = self._holds(cond.expr, cond.forall, F, r, current, c)
        return ok

    def _holds(self, expr, forall, F, rows, current, cpos) -> np.ndarray:
        if not forall:
            return truth(expr, self._resolver(F, rows, current, cpos, {}), len(rows))
        # Conditions on earlier Kleene elements hold for every element (every combination).
        pair = np.arange(len(rows))
        element_pos: dict[str, np.ndarray] = {}
        for var in sorted(forall):
            idx, pos, _ = self._elements(F.knode[var][rows[pair]])
            pair = pair[idx]
            element_pos = {k: v[idx] for k, v in element_pos.items()}
            element_pos[var] = pos
        c = None if cpos is None else cpos[pair]
        ok = truth(expr, self._resolver(F, rows[pair], current, c, element_pos), len(pair))
        bad = np.bincount(pair[~ok], minlength=len(rows)) > 0
        return ~bad

    # ---- binding a component -----------------------------------------------------------
    def _conditions(self, comp: PlanComponent, role: str) -> list[Condition]:
        out = []
        for c in self.plan.conditions:
            if c.stage != comp.pos:
                continue
            if (
                (role == "single" and c.kind == "bind")
                or (role == "first" and c.kind == "element" and not c.has_prev)
                or (role == "next" and c.kind == "element")
            ):
                out.append(c)
        return out

    def _start(self, comp: PlanComponent, starts: np.ndarray) -> Frontier:
        role = "first" if comp.kleene else "single"
        F = Frontier(starts, starts)
        rows = np.arange(len(starts))
        good = self._check(self._conditions(comp, role), F, rows, comp, starts)
        return self._bound(F, rows[good], comp, starts[good], role)

    def _bind(self, F: Frontier, comp: PlanComponent, role: str) -> Frontier:
        """Extend every run with the component's next event(s), as the strategy says."""
        cands = self.cand[comp.index]
        conds = self._conditions(comp, role)
        last = F.last
        if self.strategy == "STRICT_CONTIGUITY":
            nxt = last + 1
            ok = (nxt < self.seg_end[last]) & (self.grp_end[last] == nxt)
            ok &= nxt < self.win_end[F.first]
            ok[ok] &= (self.t.mask[nxt[ok]] & comp.bit) != 0
            rows = np.flatnonzero(ok)
            cpos = nxt[rows]
            good = self._check(conds, F, rows, comp, cpos)
            return self._bound(F, rows[good], comp, cpos[good], role)
        lo = np.searchsorted(cands, self.grp_end[last])
        hi = np.searchsorted(cands, self.win_end[F.first])
        if self.strategy == "SKIP_TILL_ANY_MATCH":
            rows, k = _ranges(lo, hi)  # callers give at most CHUNK_ROWS pairs (_bind_chunks)
            cpos = cands[k]
            good = self._check(conds, F, rows, comp, cpos)
            return self._bound(F, rows[good], comp, cpos[good], role)
        # SKIP_TILL_NEXT_MATCH: the first eligible candidate of each run.
        active = np.flatnonzero(lo < hi)
        k = lo[active]
        if not conds:
            return self._bound(F, active, comp, cands[k], role)
        found_rows, found_pos = [], []
        while len(active):
            cpos = cands[k]
            good = self._check(conds, F, active, comp, cpos)
            found_rows.append(active[good])
            found_pos.append(cpos[good])
            active, k = active[~good], k[~good] + 1
            alive = k < hi[active]
            active, k = active[alive], k[alive]
        rows = np.concatenate(found_rows) if found_rows else np.zeros(0, np.int64)
        cpos = np.concatenate(found_pos) if found_pos else np.zeros(0, np.int64)
        return self._bound(F, rows, comp, cpos, role)

    def _bind_chunks(self, F: Frontier, comp: PlanComponent, role: str) -> Iterator[Frontier]:
        """`_bind` of F's runs in slices that each build at most CHUNK_ROWS pairs of a run
        and a candidate (a single run may build more: one per event of its window)."""
        if self.strategy != "SKIP_TILL_ANY_MATCH" or len(F) <= 1:
            yield self._bind(F, comp, role)
            return
        cands = self.cand[comp.index]
        lo = np.searchsorted(cands, self.grp_end[F.last])
        hi = np.searchsorted(cands, self.win_end[F.first])
        for start, stop in _slices(hi - lo):
            yield self._bind(
                F if stop - start == len(F) else F.take(np.arange(start, stop)), comp, role
            )

    def _bound(self, F: Frontier, rows, comp: PlanComponent, cpos, role: str) -> Frontier:
        """The runs `rows` of F, each extended with the event at `cpos` as `comp`."""
        self.partial_matches += len(rows)
        self.peak_frontier = max(self.peak_frontier, len(rows))
        G = F.take(rows)
        G.last = cpos
        var = comp.var
        if not comp.kleene:
            G.bound[var] = cpos
            return G
        cols = self.t.columns
        if role == "first":
            G.kfirst[var] = cpos
            G.kcount[var] = np.ones(len(cpos), dtype=np.int64)
            G.knode[var] = self._new_nodes(cpos, np.full(len(cpos), -1, dtype=np.int64))
        else:
            G.kcount[var] = G.kcount[var] + 1
            G.knode[var] = self._new_nodes(cpos, G.knode[var])
        G.klast[var] = cpos
        for attr, funcs in self.accumulators.get(var, {}).items():
            x = cols[attr].take(cpos)
            xnull = x.nulls()
            for func in funcs:
                key = (var, func, attr)
                if role == "first" or key not in G.acc:
                    if func == "nn":
                        G.acc[key] = Vec((~xnull).astype(np.int64))
                    else:
                        G.acc[key] = Vec(np.where(xnull, 0, x.values), xnull)
                    continue
                old = G.acc[key]
                onull = old.nulls()
                if func == "nn":
                    G.acc[key] = Vec(old.values + (~xnull))
                    continue
                if func == "sum":
                    new = old.values + np.where(xnull, 0, x.values)
                elif func == "min":
                    new = np.where(
                        onull,
                        x.values,
                        np.where(xnull, old.values, np.minimum(old.values, x.values)),
                    )
                else:
                    new = np.where(
                        onull,
                        x.values,
                        np.where(xnull, old.values, np.maximum(old.values, x.values)),
                    )
                G.acc[key] = Vec(new, onull & xnull)
        return G

    # ---- negation ----------------------------------------------------------------------
    def _last_of(self, F: Frontier, comp: PlanComponent) -> np.ndarray:
        return F.klast[comp.var] if comp.kleene else F.bound[comp.var]

    def _first_of(self, F: Frontier, comp: PlanComponent) -> np.ndarray:
        return F.kfirst[comp.var] if comp.kleene else F.bound[comp.var]

    def _negate(self, F: Frontier, neg: NegationCheck) -> Frontier:
        """Drop the runs that have a forbidding event in the negation's gap."""
        if not len(F):
            return F
        k = len(self.positives)
        g = neg.gap
        if g == 0:
            lo_pos, hi_pos = self.win_start[F.last], self.grp_start[F.first]
        elif g == k:
            lo_pos, hi_pos = self.grp_end[F.last], self.win_end[F.first]
        else:
            before = self._last_of(F, self.positives[g - 1])
            after = self._first_of(F, self.positives[g])
            lo_pos, hi_pos = self.grp_end[before], self.grp_start[after]
        cands = self.cand[neg.component.index]
        lo = np.searchsorted(cands, lo_pos)
        hi = np.searchsorted(cands, hi_pos)
        if not neg.conditions:
            return F.take(np.flatnonzero(hi <= lo))
        killed = np.zeros(len(F), dtype=bool)
        for start, stop in _slices(hi - lo):  # at most CHUNK_ROWS (run, event) pairs at once
            rows, k_ = _ranges(lo[start:stop], hi[start:stop])
            rows += start
            npos = cands[k_]
            hit = np.ones(len(rows), dtype=bool)
            for expr in neg.conditions:
                idx = np.flatnonzero(hit)
                hit[idx] = self._holds(expr, frozenset(), F, rows[idx], neg.component, npos[idx])
            killed[rows[hit]] = True
        return F.take(np.flatnonzero(~killed))

    # ---- driver ------------------------------------------------------------------------
    def run(
        self,
        *,
        starts: np.ndarray | None = None,
        ends: np.ndarray | None = None,
        released: tuple[int | None, int | None] | None = None,
    ) -> Matches:
        """All matches, in output order.

        `starts` (bool per event) limits which events may start a run; `ends` (bool per
        event) which may end one (incremental use: the new events); `released` =
        (after, upto) keeps instead, for a pattern with a negation at the end, the
        matches whose window closes in (after, upto] (None = unbounded).
        """
        return self._in_order([self._keep(F) for F in self._emitted(starts, ends, released)])

    def count(
        self,
        *,
        starts: np.ndarray | None = None,
        ends: np.ndarray | None = None,
        released: tuple[int | None, int | None] | None = None,
    ) -> int:
        """How many matches `run` gives with the same arguments, without building them:
        nothing is kept, so only the partial matches on the way count against the
        memory budget."""
        for F in self._emitted(starts, ends, released):
            self.found += len(F)
        return self.found

    def chunks(
        self,
        *,
        starts: np.ndarray | None = None,
        ends: np.ndarray | None = None,
        released: tuple[int | None, int | None] | None = None,
    ) -> Iterator[Matches]:
        """The matches `run` gives with the same arguments, chunk by chunk and not in
        output order, none kept: for a caller that reduces them as they come (only the
        partial matches on the way count against the memory budget)."""
        for F in self._emitted(starts, ends, released):
            self.found += len(F)
            yield self._materialize(F)

    def _emitted(self, starts, ends, released) -> Iterator[Frontier]:
        """The complete matches `run` reports, chunk by chunk (at most `max_matches` in
        all: the caller adds each chunk to `found` before asking for the next)."""
        first = self.positives[0]
        start_pos = self.cand[first.index]
        if starts is not None:
            start_pos = start_pos[starts[start_pos]]
        for lo in range(0, len(start_pos), START_CHUNK):
            for F in self._run_chunk(start_pos[lo : lo + START_CHUNK]):
                F = self._emission(F, ends, released)
                if self.max_matches is not None:
                    F = F.take(np.arange(min(len(F), self.max_matches - self.found)))
                if len(F):
                    yield F
                if self.max_matches is not None and self.found >= self.max_matches:
                    return

    def _keep(self, F: Frontier) -> Matches:
        """F's matches as kept for the output, counted against the budget (in slices, so
        that a stop comes before a slice's lists are built beyond it)."""
        parts = []
        for lo in range(0, len(F), KEEP_ROWS):
            m = self._materialize(F.take(np.arange(lo, min(lo + KEEP_ROWS, len(F)))))
            self.found += len(m)
            self.held_bytes += self._output_bytes(m)
            self._check_budget()
            parts.append(m)
        return _concat(parts)

    def _output_bytes(self, m: Matches) -> int:
        """What `m` will take as output rows: its int64 columns, its Kleene lists (each
        a numpy array, then a Python list of ids) and its RETURN values."""
        n = len(m)
        size = n * ROW_BYTES * (3 + len(m.positions)) + n * VALUE_BYTES * len(m.values)
        for comp in self.positives:
            if comp.kleene:
                elements = sum(len(p) for p in m.positions[comp.var])
                size += n * LIST_BYTES + elements * ELEMENT_BYTES
        return size

    def _in_use(self) -> int:
        width = 2 + len(self.positives) * 4 + len(self.accumulators) * 2
        return self.held_bytes + self.node_count * NODE_BYTES + self.alive_rows * width * ROW_BYTES

    def _check_budget(self) -> None:
        if self._in_use() > self.budget:
            raise TooManyMatches(budget_message(self.found, self.budget))

    def _run_chunk(self, start_pos: np.ndarray) -> Iterator[Frontier]:
        """The complete matches of the runs that start at `start_pos`, in chunks."""
        middle: dict[int, list[NegationCheck]] = {}
        for neg in self.plan.negations:
            if neg.stage is not None:
                middle.setdefault(neg.stage, []).append(neg)
        first = self.positives[0]
        F = self._start(first, start_pos)
        yield from self._extend(iter([F]), 0, middle)

    def _extend(self, chunks, i: int, middle) -> Iterator[Frontier]:
        """Carry each chunk of runs that bound positives[:i] (positives[i] too, as its
        first event, once bound) to complete matches, depth first."""
        comp = self.positives[i]
        for F in chunks:
            for neg in middle.get(i, []):
                F = self._negate(F, neg)
            if not len(F):
                continue
            for G in self._kleene(F, comp) if comp.kleene else (F,):
                if i + 1 == len(self.positives):
                    for neg in self.plan.negations:
                        if neg.stage is None:
                            G = self._negate(G, neg)
                    if len(G):
                        yield G
                    continue
                nxt = self.positives[i + 1]
                role = "first" if nxt.kleene else "single"
                yield from self._extend(
                    self._held(G, self._bind_chunks(G, nxt, role)), i + 1, middle
                )

    def _held(self, F: Frontier, chunks: Iterator[Frontier]) -> Iterator[Frontier]:
        """`chunks`, while F (the runs they come from) is held: counted as alive."""
        self.alive_rows += len(F)
        self._check_budget()
        try:
            yield from chunks
        finally:
            self.alive_rows -= len(F)

    def _kleene(self, F: Frontier, comp: PlanComponent) -> Iterator[Frontier]:
        """Every element list of a Kleene component, chunk by chunk and depth first (a
        stack of the bindings in progress, one per element taken), through its closure
        conditions."""
        closure = [c for c in self.plan.conditions if c.kind == "closure" and c.stage == comp.pos]
        stack = [iter([F])]
        while stack:
            G = next(stack[-1], None)
            if G is None:
                stack.pop()
                continue
            if not len(G):
                continue
            if closure:
                ok = self._check(closure, G, np.arange(len(G)), None, None)
                yield G.take(np.flatnonzero(ok))
            else:
                yield G
            stack.append(self._held(G, self._bind_chunks(G, comp, "next")))

    def _emission(self, F: Frontier, ends, released) -> Frontier:
        if not len(F):
            return F
        keep = np.ones(len(F), dtype=bool)
        if ends is not None and not (self.plan.has_trailing_negation and released is not None):
            keep &= ends[F.last]
        if self.plan.has_trailing_negation and released is not None:
            deadline = self.t.ts[F.first] + self.plan.window
            after, upto = released
            if after is not None:
                keep &= deadline > after
            if upto is not None:
                keep &= deadline <= upto
        return F.take(np.flatnonzero(keep)) if not keep.all() else F

    # ---- output ------------------------------------------------------------------------
    def _materialize(self, F: Frontier) -> Matches:
        """F's matches: positions (lists for Kleene variables) and RETURN values."""
        positions: dict[str, np.ndarray] = {}
        for comp in self.positives:
            if comp.kleene:
                positions[comp.var] = np.empty(len(F), dtype=object)
                positions[comp.var][:] = self._lists(F.knode[comp.var])
            else:
                positions[comp.var] = F.bound[comp.var]
        values = {r.name: self._return_values(r, F) for r in self.plan.returns}
        return Matches(F.first, F.last, self.t.segment[F.first], positions, values)

    def _in_order(self, parts: list[Matches]) -> Matches:
        """The kept matches, in output order."""
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return Matches(
                z, z, z, {c.var: z for c in self.positives}, {r.name: [] for r in self.plan.returns}
            )
        m = _concat(parts)
        order = self._output_order(m)
        return Matches(
            m.first[order],
            m.last[order],
            m.segment[order],
            {k: v[order] for k, v in m.positions.items()},
            {k: [v[i] for i in order] for k, v in m.values.items()},
        )

    def _lists(self, nodes: np.ndarray) -> list[np.ndarray]:
        rows, pos, depth = self._elements(nodes)
        order = np.lexsort((-depth, rows))
        rows, pos = rows[order], pos[order]
        bounds = np.searchsorted(rows, np.arange(len(nodes) + 1))
        return [pos[bounds[i] : bounds[i + 1]] for i in range(len(nodes))]

    def _output_order(self, m: Matches) -> np.ndarray:
        """Partition, end, start, then the singleton positions in pattern order.

        Runners sort the final rows by ids (docs/semantics.md); this order only makes
        the engine's own output deterministic.
        """
        keys = [m.positions[c.var] for c in reversed(self.positives) if not c.kleene]
        keys += [m.first, m.last, m.segment]
        return lexsort(keys)

    def _return_values(self, column, F: Frontier) -> list:
        n = len(F)
        rows = np.arange(n)
        if not column.is_list:
            return self._value(column.expr, F, rows, {}).to_list()
        var = next(
            node.var
            for node in ast.walk(column.expr)
            if isinstance(node, ast.AttrRef)
            and self.plan.component(node.var).kleene
            and not _inside_aggregate(column.expr, node)
        )
        idx, pos, depth = self._elements(F.knode[var])
        order = np.lexsort((-depth, idx))
        idx, pos = idx[order], pos[order]
        vals = self._value(column.expr, F, idx, {var: pos}).to_list()
        bounds = np.searchsorted(idx, np.arange(n + 1))
        return [vals[bounds[i] : bounds[i + 1]] for i in range(n)]

    def _value(self, expr, F, rows, element_pos) -> Vec:
        return evaluate(expr, self._resolver(F, rows, None, None, element_pos), len(rows))


def _inside_aggregate(expr: ast.Expr, target: ast.Expr) -> bool:
    for node in ast.walk(expr):
        if (
            isinstance(node, ast.Call)
            and node.name in AGGREGATES
            and any(sub is target for sub in ast.walk(node))
        ):
            return True
    return False


def _slices(counts: np.ndarray) -> Iterator[tuple[int, int]]:
    """Consecutive (start, stop) ranges of rows whose counts add up to at most CHUNK_ROWS
    (a row of more counts alone), covering every row.

    >>> list(_slices(np.array([2, 0, 5])))  # CHUNK_ROWS is far larger
    [(0, 3)]
    """
    ends = np.cumsum(np.maximum(counts, 0))
    start = 0
    while start < len(counts):
        before = ends[start - 1] if start else 0
        stop = max(int(np.searchsorted(ends, before + CHUNK_ROWS, side="right")), start + 1)
        yield start, stop
        start = stop


def _concat(parts: list[Matches]) -> Matches:
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    return Matches(
        np.concatenate([p.first for p in parts]),
        np.concatenate([p.last for p in parts]),
        np.concatenate([p.segment for p in parts]),
        {k: np.concatenate([p.positions[k] for p in parts]) for k in first.positions},
        {k: [v for p in parts for v in p.values[k]] for k in first.values},
    )


def find_matches(plan: Plan, table: EventTable, **kwargs) -> Matches:
    """Every match of `plan` in `table` (all partitions), in output order (within
    `budget`, a keyword: the default one when not given)."""
    budget = kwargs.pop("budget", None)
    return PatternMatcher(plan, table, budget).run(**kwargs)


@dataclass(frozen=True)
class AggregateNeed:
    """A running aggregate the matcher carries for a Kleene variable."""

    var: str
    func: str
    attr: str | None


def running_aggregates(plan: Plan) -> tuple[AggregateNeed, ...]:
    """The aggregates of Kleene variables that conditions and RETURN read."""
    exprs = [c.expr for c in plan.conditions]
    exprs += [e for n in plan.negations for e in n.conditions]
    exprs += [r.expr for r in plan.returns]
    needs: list[AggregateNeed] = []
    for expr in exprs:
        for node in ast.walk(expr):
            if isinstance(node, ast.Call) and node.name in AGGREGATES:
                arg = node.args[0]
                attr = arg.attr if isinstance(arg, ast.AttrRef) else None
                need = AggregateNeed(arg.var, node.name, attr)  # type: ignore[union-attr]
                if need not in needs:
                    needs.append(need)
    return tuple(needs)
