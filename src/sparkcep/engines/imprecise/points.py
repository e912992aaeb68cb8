"""The point-based framework (§3, B): the baseline the paper's event-based methods beat.

1. Stream expansion: each event becomes one point event per point of its interval (of
   positive probability), emitted in time order once no event still to come can have
   an earlier point (t_emit = now.lower - U_max).
2. Pattern matching: skip-till-any over the point events, whatever the query's
   strategy, with the id check (a point match takes each event once) and, for
   skip-till-next, the NELT: a point of an event that starts after the NELT of the run's
   last event cannot be next in any possible world.
3. Match collapsing: point matches grouped by signature; range [least t_1, greatest
   t_l]; confidence by eq. (1) (skip-till-any: the sum of the point matches'
   probabilities), eq. (3) with the pair quantities memoised (skip-till-next, each other
   event between one pair of components at most), or eq. (4) (an event that could come
   between several pairs: its points are enumerated).

Fig. 1, skip-till-any: the 5 point matches of (a1, b3, c2) — (1,3,4), (2,3,4), (2,3,5),
(2,4,5), (3,4,5) — have 5 x 1/45 = 25/225:

>>> from sparkcep.engines.imprecise.events import IntervalEvents, Pattern
>>> ev = IntervalEvents.from_arrays([1, 3, 3, 4], [5, 5, 5, 8], [1, 4, 2, 4])
>>> pattern = Pattern((1, 2, 4), 4, False, ((), (), ()), ("a", "b", "c"), 4)
>>> method = PointBased(ev, pattern, trace=True)
>>> found = method.run()
>>> sorted(method.point_matches[(0, 2, 1)])
[(1, 3, 4), (2, 3, 4), (2, 3, 5), (2, 4, 5), (3, 4, 5)]
>>> [round(float(c) * 225, 9) for c in found.confidence]
[25.0, 27.0]
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

import numpy as np

from sparkcep.engines.imprecise.algorithm import Algorithm, Found
from sparkcep.engines.imprecise.candidates import band_pairs, component_events, stage_holds
from sparkcep.engines.imprecise.confidence import in_unit_range
from sparkcep.engines.imprecise.events import IntervalEvents, Pattern
from sparkcep.engines.imprecise.runs import components_of, segments


class StreamExpansion:
    """Events (in arrival order) -> point events (t, event, probability) in time
    order, each emitted once t < t_emit = now.lower - U_max."""

    def __init__(self, events: IntervalEvents, start: int, stop: int, max_width: int):
        self.events, self.start, self.stop, self.u = events, start, stop, max_width

    def __iter__(self) -> Iterator[tuple[int, int, float]]:
        ev = self.events
        heap: list[tuple[int, int, float]] = []
        now_lower = None
        last = None
        for e in range(self.start, self.stop):
            for t, p in ev.points(e):
                heapq.heappush(heap, (t, e, p))
            lo = int(ev.lo[e])
            now_lower = lo if now_lower is None else max(now_lower, lo)
            t_emit = now_lower - self.u
            while heap and heap[0][0] < t_emit:
                point = heapq.heappop(heap)
                assert last is None or point[0] >= last, "arrival order broken"
                last = point[0]
                yield point
        while heap:
            yield heapq.heappop(heap)


class PointMatcher:
    """Skip-till-any over the point events of one segment, with the id check, the
    window, the cross conditions and (skip-till-next) the NELT. The runs (partial point
    matches) are numpy arrays, each point event tried on all of them at once."""

    def __init__(self, events: IntervalEvents, pattern: Pattern, start: int, stop: int):
        self.events, self.pattern = events, pattern
        self.start, self.stop = start, stop

    def matches(self, points, hold=lambda cells: None) -> tuple[np.ndarray, np.ndarray]:
        """(events, points) of every point match: two (matches, l) arrays; `hold` is
        told the cells held after each instant (it stops a run beyond its budget)."""
        ev_all, pattern = self.events, self.pattern
        w, length = pattern.window, pattern.length
        ev = np.full((0, length), -1, np.int64)
        pt = np.zeros((0, length), np.int64)
        nelt = np.zeros(0, np.int64)  # NELT of each run's last event, for its next component
        done: list[tuple[np.ndarray, np.ndarray]] = []
        done_cells = 0
        for t, group in itertools.groupby(points, key=lambda point: point[0]):
            if len(ev):  # runs that can still grow
                keep = t - pt[:, 0] < w
                ev, pt, nelt = ev[keep], pt[keep], nelt[keep]
            stage = (ev >= 0).sum(axis=1)
            grown_ev, grown_pt = [], []
            for _, e, _ in group:
                for j in components_of(ev_all, pattern, e):
                    if j == 0:
                        rows_ev = np.full((1, length), -1, np.int64)
                        rows_pt = np.zeros((1, length), np.int64)
                    else:
                        cand = (stage == j) & (ev != e).all(axis=1)
                        if pattern.next:
                            cand &= ev_all.lo[e] <= nelt
                        rows_ev, rows_pt = ev[cand], pt[cand]
                    if not len(rows_ev):
                        continue
                    bound = [rows_ev[:, i] for i in range(j)]
                    ok = stage_holds(ev_all, pattern, j, bound, np.full(len(rows_ev), e))
                    rows_ev, rows_pt = rows_ev[ok], rows_pt[ok]
                    rows_ev[:, j], rows_pt[:, j] = e, t
                    grown_ev.append(rows_ev)
                    grown_pt.append(rows_pt)
            if not grown_ev:
                continue
            new_ev, new_pt = np.concatenate(grown_ev), np.concatenate(grown_pt)
            complete = new_ev[:, -1] >= 0
            done.append((new_ev[complete], new_pt[complete]))
            new_ev, new_pt = new_ev[~complete], new_pt[~complete]
            ev, pt = np.concatenate([ev, new_ev]), np.concatenate([pt, new_pt])
            nelt = np.concatenate([nelt, self._nelt(new_ev, new_pt)])
            done_cells += done[-1][0].size * 2
            hold(done_cells + ev.size * 2)
        if not done:
            return np.zeros((0, length), np.int64), np.zeros((0, length), np.int64)
        return np.concatenate([d[0] for d in done]), np.concatenate([d[1] for d in done])

    def _nelt(self, ev: np.ndarray, pt: np.ndarray) -> np.ndarray:
        """Per run, the NELT of its last event: the least upper bound of the events that
        can match the next component (given the run) and start after that event ends —
        only the ones that end before the run's window closes matter."""
        big = np.iinfo(np.int64).max
        out = np.full(len(ev), big, np.int64)
        if not self.pattern.next or not len(ev):
            return out
        events = self.events
        stage = (ev >= 0).sum(axis=1)
        for j in np.unique(stage).tolist():
            rows = np.flatnonzero(stage == j)
            cand = component_events(events, self.pattern.bits[j])
            last = ev[rows, j - 1]
            r, k = band_pairs(events.seg[last], events.hi[last] + 1,
                              pt[rows, 0] + self.pattern.window, events.seg[cand],
                              events.ts[cand])  # fmt: skip
            x = cand[k]
            prefix = ev[rows[r], :j]
            ok = (events.lo[x] > events.hi[last[r]]) & (prefix != x[:, None]).all(axis=1)
            bound = [prefix[:, i] for i in range(j)]
            ok &= stage_holds(events, self.pattern, j, bound, x)
            np.minimum.at(out, rows[r[ok]], events.hi[x[ok]])
        return out


class MatchCollapsing:
    """Point matches of one signature -> its range and confidence."""

    def __init__(self, events: IntervalEvents, pattern: Pattern, start: int, stop: int):
        self.events, self.pattern = events, pattern
        self.start, self.stop = start, stop

    def collapse(self, sig: tuple[int, ...], matches: list[tuple[int, ...]]):
        ev = self.events
        prob = [{t: p for t, p in ev.points(e)} for e in sig]
        if not self.pattern.next:  # eq. (1)
            weights = [float(np.prod([prob[j][t] for j, t in enumerate(m)])) for m in matches]
            return self._result(matches, weights)
        thetas = [self._theta(sig, j) for j in range(1, len(sig))]
        counts: dict[int, int] = {}
        for xs in thetas:
            for x in xs:
                counts[x] = counts.get(x, 0) + 1
        shared = [x for x, c in counts.items() if c > 1]
        if not shared:
            return self._eq3(sig, matches, prob, thetas)
        return self._eq4(sig, matches, prob, thetas, shared)

    def _theta(self, sig, j: int) -> list[int]:
        """The events other than the signature's that can match component j given its
        earlier events (the candidates of Θ_j)."""
        ev = self.events
        cand = component_events(ev, self.pattern.bits[j])
        cand = cand[(cand >= self.start) & (cand < self.stop) & ~np.isin(cand, sig)]
        # only an event that overlaps the span of e_{j-1} and e_j can come between them
        cand = cand[(ev.hi[cand] > ev.lo[sig[j - 1]]) & (ev.lo[cand] < ev.hi[sig[j]])]
        bound = [np.full(len(cand), x) for x in sig[:j]]
        return cand[stage_holds(ev, self.pattern, j, bound, cand)].tolist()

    def _outside(self, x: int, s: int, t: int) -> float:
        """P[x does not lie strictly between s and t]."""
        return sum(p for u, p in self.events.points(x) if not s < u < t)

    def _eq3(self, sig, matches, prob, thetas):
        memo: dict[tuple[int, int, int], float] = {}

        def pair(j: int, s: int, t: int) -> float:  # P[e_{j-1}^s] P[e_j^t] P[Θ_j = ∅]
            if (j, s, t) not in memo:
                none = float(np.prod([self._outside(x, s, t) for x in thetas[j - 1]]))
                memo[(j, s, t)] = prob[j - 1][s] * prob[j][t] * none
            return memo[(j, s, t)]

        weights = []
        for m in matches:
            if len(m) == 1:
                weights.append(prob[0][m[0]])
                continue
            num = float(np.prod([pair(j, m[j - 1], m[j]) for j in range(1, len(m))]))
            den = float(np.prod([prob[j][m[j]] for j in range(1, len(m) - 1)]))
            weights.append(num / den)
        return self._result(matches, weights)

    def _eq4(self, sig, matches, prob, thetas, shared):
        ev = self.events
        options = [ev.points(x) for x in shared]
        weights = [0.0] * len(matches)
        for assignment in itertools.product(*options):
            p_assign = float(np.prod([p for _, p in assignment]))
            at = {x: t for x, (t, _) in zip(shared, assignment)}
            for i, m in enumerate(matches):
                w = float(np.prod([prob[j][t] for j, t in enumerate(m)])) * p_assign
                for j in range(1, len(m)):
                    s, t = m[j - 1], m[j]
                    for x in thetas[j - 1]:
                        if x in at:
                            w *= 0.0 if s < at[x] < t else 1.0
                        else:
                            w *= self._outside(x, s, t)
                weights[i] += w
        return self._result(matches, weights)

    @staticmethod
    def _result(matches, weights):
        positive = [(m, w) for m, w in zip(matches, weights) if w > 0]
        if not positive:
            return None
        conf = sum(w for _, w in positive)
        return min(m[0] for m, _ in positive), max(m[-1] for m, _ in positive), conf


class PointBased(Algorithm):
    name = "imprecise-points"
    words = (
        "point-based: stream expansion, skip-till-any over point events with the id check "
        "and NELT, match collapsing (the paper's baseline)"
    )

    def __init__(self, events: IntervalEvents, pattern: Pattern, trace: bool = False, budget=None):
        super().__init__(events, pattern, budget)
        self.trace = trace
        self.point_matches: dict[tuple[int, ...], list[tuple[int, ...]]] = {}

    def run(self) -> Found:
        ev, pattern = self.events, self.pattern
        parts = []
        for start, stop in segments(ev):
            points = StreamExpansion(ev, start, stop, pattern.max_width)
            evs, pts = PointMatcher(ev, pattern, start, stop).matches(points, self.hold)
            if not len(evs):
                continue
            if self.trace:
                for sig, ts in zip(map(tuple, evs.tolist()), map(tuple, pts.tolist())):
                    self.point_matches.setdefault(sig, []).append(ts)
            if pattern.next:
                parts.append(self._collapse_next(evs, pts, start, stop))
            else:
                parts.append(self._collapse_any(evs, pts))
        parts = [p for p in parts if len(p)]
        if not parts:
            return Found.none(pattern.length)
        found = Found(*[np.concatenate([getattr(p, f) for p in parts])
                        for f in ("idx", "start", "end", "confidence")])  # fmt: skip
        found.confidence = in_unit_range(ev, pattern, found.idx, found.confidence)
        return found

    def _collapse_any(self, evs: np.ndarray, pts: np.ndarray) -> Found:
        """Eq. (1): per signature, the sum of its point matches' probabilities."""
        order = np.lexsort(evs.T[::-1])  # stable: point matches keep their order
        evs, pts = evs[order], pts[order]
        change = np.r_[True, (evs[1:] != evs[:-1]).any(axis=1)]
        group = np.cumsum(change) - 1
        sigs = evs[change]
        weight = np.ones(len(evs))
        for j in range(evs.shape[1]):
            weight *= self.events.prob(evs[:, j], pts[:, j])
        conf = np.bincount(group, weights=weight, minlength=len(sigs))
        start = np.full(len(sigs), np.iinfo(np.int64).max)
        end = np.full(len(sigs), np.iinfo(np.int64).min)
        np.minimum.at(start, group, pts[:, 0])
        np.maximum.at(end, group, pts[:, -1])
        return Found(sigs, start, end, conf)

    def _collapse_next(self, evs: np.ndarray, pts: np.ndarray, start: int, stop: int) -> Found:
        """Eq. (3) or (4), signature by signature."""
        collapsing = MatchCollapsing(self.events, self.pattern, start, stop)
        groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for sig, ts in zip(map(tuple, evs.tolist()), map(tuple, pts.tolist())):
            groups.setdefault(sig, []).append(ts)
        rows = []
        for sig in sorted(groups):
            result = collapsing.collapse(sig, groups[sig])
            if result is not None:
                rows.append((sig, *result))
        if not rows:
            return Found.none(self.pattern.length)
        return Found(
            np.array([r[0] for r in rows], np.int64),
            np.array([r[1] for r in rows], np.int64),
            np.array([r[2] for r in rows], np.int64),
            np.array([r[3] for r in rows], np.float64),
        )
