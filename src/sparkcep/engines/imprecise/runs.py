"""Event-based evaluation one event at a time, with runs (§4.2-4.3, C.2-C.3): the
any-state method, and the two orders that feed it fewer runs — sorting for query order
and selectivity order.

A run holds one event (or none yet) per component and each held event's valid interval.
The runs of a segment are numpy arrays (`ev` with -1 where a component is not held,
`vlb`, `vub`), and each arriving event is tried on all of them at once:

- type and conditions: the event can match component j (its bit), j is free in the
  run, the event is not in the run (id check), and every condition whose variables are
  all held once the event takes j, and that mentions j, holds (others are deferred);
- time (C.2 step 2): vlb runs forward and vub backward through each block of contiguous
  held components; the event is skipped if some valid interval becomes empty, or the
  latest held event cannot come within W of the earliest (vlb_last < vub_first + W);
- the run is cloned: the new run holds the event, the old one does not (skip-till-any).

Runs are pruned (C.2) once no event still to come can complete them: every event to come
has its points at or after F (the latest time seen minus U_max; or, while events wait
in a buffer, the least lower bound among them), so a run dies when min(vub) + W <= F (its
time to live), or when a held event ends before F while a component before it is free.
"""

from __future__ import annotations

import numpy as np

from sparkcep.budget import CELL_BYTES, Meter
from sparkcep.engines.imprecise.algorithm import EventBased
from sparkcep.engines.imprecise.events import IntervalEvents, Pattern
from sparkcep.expressions import truth
from sparkcep.language import ast

FREE = -1
LOW = np.iinfo(np.int64).min // 4
HIGH = np.iinfo(np.int64).max // 4


class RunSet:
    """The live runs of one segment, and the complete ones found so far."""

    def __init__(self, events: IntervalEvents, pattern: Pattern, in_order: bool, meter: Meter):
        self.events, self.pattern = events, pattern
        self.meter = meter  # the runs and the complete ones count against the budget
        self.done_cells = 0
        self.in_order = in_order  # query order: runs grow from E_1 only
        self.length = pattern.length
        self.conditions = [
            (expr, frozenset(pattern.variables.index(n.var) for n in ast.walk(expr)
                             if isinstance(n, ast.AttrRef)))
            for stage in pattern.stages for expr in stage
        ]  # fmt: skip
        self.done: list[np.ndarray] = []
        self.bounds: dict[tuple, tuple[list, list]] | None = None
        self.reset()

    def reset(self):
        shape = (0, self.length)
        self.ev = np.full(shape, FREE, np.int64)
        self.vlb = np.full(shape, LOW, np.int64)
        self.vub = np.full(shape, HIGH, np.int64)

    def __len__(self) -> int:
        return len(self.ev)

    def feed(self, e: int, components, pending=None) -> None:
        """Try event e on every run, as each of `components` (positions). With
        `pending` (a bool per component: whether an event that may still be fed can
        take it), a new run with a free component that nothing pending can fill is not
        made (selectivity order's out-of-date events: only waiting events can join
        them)."""
        new_ev, new_vlb, new_vub = [], [], []
        for j in components:
            ev = self._candidates(e, j)
            if pending is not None:
                fillable = np.asarray(pending, bool).copy()
                fillable[j] = True
                ev = ev[((ev != FREE) | fillable).all(axis=1)]
                if fillable.all():
                    ev = np.concatenate([ev, np.full((1, self.length), FREE, np.int64)])
                if not len(ev):
                    continue
            elif not self.in_order or j == 0:
                single = np.full((1, self.length), FREE, np.int64)
                ev = np.concatenate([ev, single])
            ev[:, j] = e
            ev = ev[self._conditions_hold(ev, j)]
            vlb, vub, ok = self._bounds(ev)
            new_ev.append(ev[ok])
            new_vlb.append(vlb[ok])
            new_vub.append(vub[ok])
        if not new_ev:
            return
        ev, vlb, vub = np.concatenate(new_ev), np.concatenate(new_vlb), np.concatenate(new_vub)
        complete = (ev != FREE).all(axis=1)
        if complete.any():
            self.done.append(ev[complete])
            self.done_cells += ev[complete].size
            if self.bounds is not None:
                for row, lo, hi in zip(ev[complete], vlb[complete], vub[complete]):
                    self.bounds[tuple(row.tolist())] = (lo.tolist(), hi.tolist())
        keep = ~complete
        self.ev = np.concatenate([self.ev, ev[keep]])
        self.vlb = np.concatenate([self.vlb, vlb[keep]])
        self.vub = np.concatenate([self.vub, vub[keep]])
        self.meter.check(also=(self.done_cells + self.ev.size) * CELL_BYTES)

    def _candidates(self, e: int, j: int) -> np.ndarray:
        ev = self.ev
        ok = (ev[:, j] == FREE) & (ev != e).all(axis=1)
        if self.in_order:  # the run holds exactly E_1 .. E_j-1
            ok &= (ev[:, :j] != FREE).all(axis=1) if j else np.zeros(len(ev), bool)
        return ev[ok].copy()

    def _conditions_hold(self, ev: np.ndarray, j: int) -> np.ndarray:
        ok = np.ones(len(ev), dtype=bool)
        if not len(ev):
            return ok
        held = ev != FREE
        for expr, positions in self.conditions:
            if j not in positions:
                continue
            now = held[:, sorted(positions)].all(axis=1)
            if not now.any():
                continue

            def resolve(node, ev=ev):
                i = self.pattern.variables.index(node.var)
                return self.events.columns[node.attr].take(np.maximum(ev[:, i], 0))

            ok &= truth(expr, resolve, len(ev)) | ~now
        return ok

    def _bounds(self, ev: np.ndarray):
        """Valid intervals through each block of contiguous held components; whether
        every one is non-empty and the held events can fit in the window."""
        lo = np.where(ev != FREE, self.events.lo[np.maximum(ev, 0)], LOW)
        hi = np.where(ev != FREE, self.events.hi[np.maximum(ev, 0)], HIGH)
        held = ev != FREE
        vlb, vub = lo.copy(), hi.copy()
        for k in range(1, self.length):
            chained = held[:, k] & held[:, k - 1]
            vlb[:, k] = np.where(chained, np.maximum(vlb[:, k - 1] + 1, lo[:, k]), vlb[:, k])
        for k in range(self.length - 2, -1, -1):
            chained = held[:, k] & held[:, k + 1]
            vub[:, k] = np.where(chained, np.minimum(vub[:, k + 1] - 1, hi[:, k]), vub[:, k])
        ok = ((vlb <= vub) | ~held).all(axis=1)
        rows = np.arange(len(ev))
        first = np.argmax(held, axis=1)
        last = self.length - 1 - np.argmax(held[:, ::-1], axis=1)
        ok &= vlb[rows, last] < vub[rows, first] + self.pattern.window
        return vlb, vub, ok

    def prune(self, frontier: int, horizons=None) -> None:
        """Drop the runs no event at or after `frontier` can complete; with `horizons`
        (per component, each at most `frontier`: the earliest point of an event still
        to be fed that can take it), a run's frontier is the least horizon of its free
        components."""
        if not len(self.ev):
            return
        held = self.ev != FREE
        ttl = np.where(held, self.vub, HIGH).min(axis=1) + self.pattern.window
        if horizons is not None:
            frontier = np.where(held, HIGH, np.asarray(horizons, np.int64)[None, :]).min(axis=1)
        alive = ttl > frontier
        # a held event that ends before the frontier, with a free component before it
        free_before = np.cumsum(~held, axis=1) > 0
        ends = np.where(held, self.events.hi[np.maximum(self.ev, 0)], HIGH)
        alive &= ~((ends < np.reshape(frontier, (-1, 1))) & free_before & held).any(axis=1)
        self.ev, self.vlb, self.vub = self.ev[alive], self.vlb[alive], self.vub[alive]

    def found(self) -> np.ndarray:
        if not self.done:
            return np.zeros((0, self.length), np.int64)
        return np.concatenate(self.done)


def segments(events: IntervalEvents):
    """(start, stop) of each segment's events."""
    n = len(events)
    if not n:
        return []
    cuts = np.flatnonzero(np.r_[True, events.seg[1:] != events.seg[:-1], True])
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))


def components_of(events: IntervalEvents, pattern: Pattern, e: int) -> list[int]:
    m = int(events.mask[e])
    return [j for j, bit in enumerate(pattern.bits) if m & bit]


class AnyState(EventBased):
    """The any-state method (§4.2, C.2): events in arrival order, a run started by any
    component, run pruning.

    Fig. 3(d): a1, c2, b3 arrive; c2 starts (-, -, c2) and extends (a1, -, -); b3 then
    completes (a1, b3, c2) with b3.vlb = 3, b3.vub = 4, c2.vlb = 4, a1.vub = 3:

    >>> from sparkcep.engines.imprecise.events import IntervalEvents, Pattern
    >>> ev = IntervalEvents.from_arrays([1, 3, 3], [5, 5, 5], [1, 4, 2])
    >>> pattern = Pattern((1, 2, 4), 4, False, ((), (), ()), ("a", "b", "c"), 4)
    >>> method = AnyState(ev, pattern, trace=True)
    >>> method.signatures().tolist(), method.last_bounds[(0, 2, 1)]
    ([[0, 2, 1]], ([1, 3, 4], [3, 4, 5]))
    """

    name = "imprecise-anystate"
    words = "event-based, any-state evaluation in arrival order with run pruning"

    def __init__(self, events: IntervalEvents, pattern: Pattern, trace: bool = False, budget=None):
        super().__init__(events, pattern, budget)
        self.trace = trace
        self.last_bounds: dict = {}

    def _runs(self, in_order: bool) -> RunSet:
        runs = RunSet(self.events, self.pattern, in_order, self.meter)
        if self.trace:
            runs.bounds = self.last_bounds
        return runs

    def signatures(self) -> np.ndarray:
        ev, u = self.events, self.pattern.max_width
        runs = self._runs(in_order=False)
        for start, stop in segments(ev):
            runs.reset()
            for e in range(start, stop):
                runs.prune(int(ev.ts[e]) - u)
                runs.feed(e, components_of(ev, self.pattern, e))
        return runs.found()


class SortedQueryOrder(AnyState):
    """Sorting for query order (§4.3, C.3) feeding query-order evaluation one event at a
    time: an event that can match E_j (j > 1) waits in E_j's buffer until no event still
    to come can overlap it (its upper bound is before F) and no waiting event of an
    earlier component could precede it; then runs grow from E_1 in pattern order only.
    An event that can match several components waits once per component (one copy
    each), which keeps the order exact when components are not exclusive.
    """

    name = "imprecise-sorted"
    words = "event-based, query-order evaluation of events sorted into query order, one at a time"

    def signatures(self) -> np.ndarray:
        ev, u = self.events, self.pattern.max_width
        runs = self._runs(in_order=True)
        for start, stop in segments(ev):
            runs.reset()
            waiting: list[tuple[int, int]] = []  # (component, event)
            for e in range(start, stop):
                frontier = int(ev.ts[e]) - u
                comps = components_of(ev, self.pattern, e)
                waiting += [(j, e) for j in comps if j > 0]
                waiting = self._release(runs, waiting, frontier)
                runs.prune(self._horizon(waiting, frontier))
                if 0 in comps:
                    runs.feed(e, [0])
            for j, e in sorted(waiting):
                runs.feed(e, [j])
        return runs.found()

    def _release(self, runs: RunSet, waiting, frontier: int):
        ev = self.events
        safe = [(j, e) for j, e in waiting if ev.hi[e] < frontier]
        if not safe:
            return waiting
        unsafe = [(j, e) for j, e in waiting if ev.hi[e] >= frontier]
        out = []
        for j, e in sorted(safe):
            if any(i < j and ev.lo[x] < ev.hi[e] for i, x in unsafe):
                out.append((j, e))  # an earlier component's event may still precede it
            else:
                runs.feed(e, [j])
        return unsafe + out

    def _horizon(self, waiting, frontier: int) -> int:
        if not waiting:
            return frontier
        return min(frontier, min(int(self.events.lo[e]) for _, e in waiting))


class SelectivityOrder(AnyState):
    """Selectivity order (§4.3): each component's events wait in its buffer; once every
    buffer holds one, all are released to the any-state method, the most selective
    component's (fewest events so far) first. A waiting event that no longer fits a
    window with any event to come is released at once, but only to complete runs with
    the other waiting events: a run it would start or extend that still needs a
    component no waiting event can take is not made (events to come are out of its
    window); when no run lives it is dropped. A run is pruned by the horizon of its own
    free components (the earliest waiting event that can take one of them), so events
    waiting for another component do not keep it alive."""

    name = "imprecise-selectivity"
    words = "event-based, any-state evaluation fed in selectivity order (per-component buffers)"

    def signatures(self) -> np.ndarray:
        ev, pattern = self.events, self.pattern
        u, w = pattern.max_width, pattern.window
        runs = self._runs(in_order=False)
        length = pattern.length
        hi, lo = ev.hi.tolist(), ev.lo.tolist()
        for start, stop in segments(ev):
            runs.reset()
            buffers: list[list[int]] = [[] for _ in range(length)]
            # per buffer, the least upper and lower bound of its events (None: empty)
            least_hi: list = [None] * length
            least_lo: list = [None] * length
            seen = np.zeros(length, np.int64)
            for e in range(start, stop):
                frontier = int(ev.ts[e]) - u
                for j in components_of(ev, pattern, e):
                    buffers[j].append(e)
                    seen[j] += 1
                    least_hi[j] = hi[e] if least_hi[j] is None else min(least_hi[j], hi[e])
                    least_lo[j] = lo[e] if least_lo[j] is None else min(least_lo[j], lo[e])
                if all(buffers):
                    self._flush(runs, buffers, seen)
                    least_hi, least_lo = [None] * length, [None] * length
                else:
                    pending = [bool(b) for b in buffers]  # before the old ones leave
                    for j in range(length):
                        if least_hi[j] is None or least_hi[j] + w > frontier:
                            continue  # no event of the buffer is out of date
                        old = [x for x in buffers[j] if hi[x] + w <= frontier]
                        buffers[j] = [x for x in buffers[j] if hi[x] + w > frontier]
                        least_hi[j] = min((hi[x] for x in buffers[j]), default=None)
                        least_lo[j] = min((lo[x] for x in buffers[j]), default=None)
                        for x in old if len(runs) else ():
                            runs.feed(x, [j], pending)
                horizons = [frontier if b is None else min(frontier, b) for b in least_lo]
                runs.prune(frontier, horizons)
            self._flush(runs, buffers, seen)
        return runs.found()

    @staticmethod
    def _flush(runs: RunSet, buffers, seen):
        for j in np.argsort(seen, kind="stable").tolist():
            for x in buffers[j]:
                runs.feed(x, [j])
            buffers[j] = []
