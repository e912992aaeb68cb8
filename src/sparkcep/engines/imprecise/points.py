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
>>> method = PointBased(ev, pattern)
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
from sparkcep.engines.imprecise.candidates import component_events, stage_holds
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
    window, the cross conditions and (skip-till-next) the NELT."""

    def __init__(self, events: IntervalEvents, pattern: Pattern, start: int, stop: int):
        self.events, self.pattern = events, pattern
        self.start, self.stop = start, stop
        self._holds: dict[tuple, bool] = {}
        self._nelt: dict[tuple, int] = {}

    def matches(self, points) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(events, points) of every point match."""
        pattern, w, length = self.pattern, self.pattern.window, self.pattern.length
        runs: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        out = []
        for t, group in itertools.groupby(points, key=lambda point: point[0]):
            runs = [r for r in runs if t - r[1][0] < w]  # runs that can still grow
            grown = []
            for _, e, _ in group:
                comps = components_of(self.events, pattern, e)
                if 0 in comps and self._holds_at(0, (), e):
                    grown.append(((e,), (t,)))
                for evs, ts in runs:
                    j = len(evs)
                    if j not in comps or e in evs or not self._holds_at(j, evs, e):
                        continue
                    if pattern.next and self.events.lo[e] > self._nelt_of(evs):
                        continue
                    grown.append(((*evs, e), (*ts, t)))
            for run in grown:
                if len(run[0]) == length:
                    out.append(run)
                else:
                    runs.append(run)
        return out

    def _holds_at(self, j: int, evs: tuple, e: int) -> bool:
        key = (evs, e)
        if key not in self._holds:
            bound = [np.array([x]) for x in evs]
            self._holds[key] = bool(
                stage_holds(self.events, self.pattern, j, bound, np.array([e]))[0]
            )
        return self._holds[key]

    def _nelt_of(self, evs: tuple) -> int:
        """NELT of the run's last event: the least upper bound of the events that can
        match the next component (given the run) and start after it ends."""
        if evs not in self._nelt:
            ev, j = self.events, len(evs)
            cand = component_events(ev, self.pattern.bits[j])
            cand = cand[(cand >= self.start) & (cand < self.stop)]
            cand = cand[(ev.lo[cand] > ev.hi[evs[-1]]) & ~np.isin(cand, evs)]
            bound = [np.full(len(cand), x) for x in evs]
            cand = cand[stage_holds(ev, self.pattern, j, bound, cand)]
            self._nelt[evs] = int(ev.hi[cand].min()) if len(cand) else np.iinfo(np.int64).max
        return self._nelt[evs]


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

    def __init__(self, events: IntervalEvents, pattern: Pattern):
        super().__init__(events, pattern)
        self.point_matches: dict[tuple[int, ...], list[tuple[int, ...]]] = {}

    def run(self) -> Found:
        ev, pattern = self.events, self.pattern
        rows = []
        for start, stop in segments(ev):
            points = StreamExpansion(ev, start, stop, pattern.max_width)
            found = PointMatcher(ev, pattern, start, stop).matches(points)
            groups: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
            for evs, ts in found:
                groups.setdefault(evs, []).append(ts)
            self.point_matches.update(groups)
            collapsing = MatchCollapsing(ev, pattern, start, stop)
            for sig in sorted(groups):
                result = collapsing.collapse(sig, groups[sig])
                if result is not None:
                    rows.append((sig, *result))
        if not rows:
            return Found.none(pattern.length)
        return Found(
            np.array([r[0] for r in rows], np.int64),
            np.array([r[1] for r in rows], np.int64),
            np.array([r[2] for r in rows], np.int64),
            np.array([r[3] for r in rows], np.float64),
        )
