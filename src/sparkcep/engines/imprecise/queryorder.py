"""Query-order evaluation (§4.1, C.1) with sorting for query order (§4.3, C.3), set at a
time: the default `imprecise` algorithm.

The events that can match E_1 come first, then those that can match E_2, and so on: the
order the sorting optimisation presents them in. Instead of one event at a time, each
component's events extend all partial matches at once (a band join on time, numpy):
for a partial match m and an event e that can match E_j,

    e.vlb = max(m_{j-1}.vlb + 1, e.lower)            (the first pass)
    vub updated backwards from e to m_1               (the one-pass second pass, C.1)
    ext(m, e) = e.vlb <= e.upper and e.vlb < m_1.vub + W

with the id check (an event that can match several components is used once per match),
the cross conditions of E_j, and, under skip-till-next, the NELT of m_{j-1}: e must start
no later than the earliest end of the events that can match E_j and start after m_{j-1}
ends. Complete matches then get their exact valid intervals (three passes) and their
confidence.

>>> from sparkcep.engines.imprecise.events import IntervalEvents, Pattern
>>> ev = IntervalEvents.from_arrays([1, 3, 3, 4], [5, 5, 5, 8], [1, 4, 2, 4])
>>> pattern = Pattern((1, 2, 4), 4, False, ((), (), ()), ("a", "b", "c"), 4)
>>> found = QueryOrder(ev, pattern).run()
>>> found.idx.tolist(), [round(float(c) * 225, 9) for c in found.confidence]
([[0, 2, 1], [0, 2, 3]], [25.0, 27.0])
"""

from __future__ import annotations

import numpy as np

from sparkcep.engines.imprecise.algorithm import EventBased
from sparkcep.engines.imprecise.bounds import ValidBounds
from sparkcep.engines.imprecise.candidates import (
    band_pairs,
    component_events,
    distinct_from,
    stage_holds,
)


class QueryOrder(EventBased):
    name = "imprecise"
    words = (
        "event-based, query-order evaluation over events sorted into query order "
        "(valid lower/upper bounds in one pass, set at a time)"
    )
    applies_nelt = True

    def signatures(self) -> np.ndarray:
        ev, pattern = self.events, self.pattern
        first = component_events(ev, pattern.bits[0])
        idx = first[:, None]
        vlb = ev.lo[first]
        vubs = ev.hi[first][:, None]
        for j in range(1, pattern.length):
            if not len(idx):
                break
            idx, vlb, vubs = self._extend(idx, vlb, vubs, j)
        return idx

    def _extend(self, idx, vlb, vubs, j):
        ev, pattern = self.events, self.pattern
        u, w = pattern.max_width, pattern.window
        cand = component_events(ev, pattern.bits[j])
        # e.upper >= vlb + 1 and e.lower < vub_1 + W, as times of the events
        p, k = band_pairs(ev.seg[idx[:, 0]], vlb + 1 - u, vubs[:, 0] + w + u,
                          ev.seg[cand], ev.ts[cand])  # fmt: skip
        e = cand[k]
        keep = distinct_from(idx[p], e)
        p, e = p[keep], e[keep]
        keep = stage_holds(ev, pattern, j, [idx[p, i] for i in range(j)], e)
        p, e = p[keep], e[keep]
        if pattern.next and len(p):
            keep = ev.lo[e] <= self._nelt(idx, p, e, j)
            p, e = p[keep], e[keep]
        new_vlb, new_vubs, ok = ValidBounds.one_pass(vlb[p], vubs[p], ev.lo[e], ev.hi[e], w)
        rows = np.concatenate([idx[p], e[:, None]], axis=1)
        self.hold(rows.size)
        return rows[ok], new_vlb[ok], new_vubs[ok]

    def _nelt(self, idx, p, e, j):
        """Per pair, the NELT of its partial match's last event: the least upper bound of
        the eligible events that start after that event ends (pairs are grouped by p)."""
        ev = self.events
        after = ev.lo[e] > ev.hi[idx[p, j - 1]]
        ends = np.where(after, ev.hi[e], np.iinfo(np.int64).max)
        firsts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
        nelt = np.minimum.reduceat(ends, firsts)
        return np.repeat(nelt, np.diff(np.r_[firsts, len(p)]))
