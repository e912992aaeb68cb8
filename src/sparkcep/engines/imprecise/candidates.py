"""Set-at-a-time helpers: which events a partial match may take next (a band join on
time), the cross conditions of a stage, the NELT of skip-till-next (§3), and the events
that could come between two events of a match (the Θ sets of eq. (2)).

Events are in processing order, so within a segment their times are sorted: the events
whose time lies in a range are a slice, found with one `searchsorted`. An event's points
lie within U_max of its time (the row checks make the interval contain the time and be
at most U_max wide), so a range of points becomes a range of times.
"""

from __future__ import annotations

import numpy as np

from sparkcep.engines.imprecise.events import IntervalEvents, Pattern
from sparkcep.expressions import truth

EMPTY = np.zeros(0, dtype=np.int64)


def band_pairs(seg_l, from_l, to_l, seg_c, ts_c) -> tuple[np.ndarray, np.ndarray]:
    """(i, k) for every left row i and candidate k (sorted by segment, then time) of the
    same segment with from_l[i] <= ts_c[k] < to_l[i]."""
    n_left, n_cand = len(seg_l), len(ts_c)
    if not n_left or not n_cand:
        return EMPTY, EMPTY
    base = int(ts_c.min()) - 1
    top = int(ts_c.max()) + 1
    f = np.clip(from_l, base, top) - base
    t = np.clip(to_l, base, top) - base
    stride = top - base + 1
    n_seg = int(max(seg_l.max(), seg_c.max())) + 1
    if n_seg * stride < 2**62:
        keys = seg_c * stride + (ts_c - base)
        start = np.searchsorted(keys, seg_l * stride + f, "left")
        stop = np.searchsorted(keys, seg_l * stride + t, "left")
    else:  # too many segments for one key: one search per segment
        start = np.zeros(n_left, np.int64)
        stop = np.zeros(n_left, np.int64)
        bounds = np.searchsorted(seg_c, np.arange(n_seg + 1), "left")
        for s in np.unique(seg_l):
            rows = np.flatnonzero(seg_l == s)
            lo, hi = bounds[s], bounds[s + 1]
            part = ts_c[lo:hi] - base
            start[rows] = lo + np.searchsorted(part, f[rows], "left")
            stop[rows] = lo + np.searchsorted(part, t[rows], "left")
    counts = np.maximum(stop - start, 0)
    total = int(counts.sum())
    if not total:
        return EMPTY, EMPTY
    left = np.repeat(np.arange(n_left), counts)
    offsets = np.cumsum(counts) - counts
    cand = start[left] + (np.arange(total) - offsets[left])
    return left, cand


def component_events(events: IntervalEvents, bit: int) -> np.ndarray:
    """The events that can match the component of `bit`, in processing order."""
    return np.flatnonzero(events.mask & bit)


def stage_holds(events: IntervalEvents, pattern: Pattern, j: int, bound, x) -> np.ndarray:
    """Where the conditions checked when component j binds hold, with event `x` for it
    and `bound[i]` for each earlier component i (index arrays of one length)."""
    n = len(x)
    ok = np.ones(n, dtype=bool)
    if not pattern.stages[j] or not n:
        return ok
    cache = {}

    def resolve(node):
        key = (node.var, node.attr)
        if key not in cache:
            i = pattern.variables.index(node.var)
            cache[key] = events.columns[node.attr].take(x if i == j else bound[i])
        return cache[key]

    for expr in pattern.stages[j]:
        ok &= truth(expr, resolve, n)
    return ok


def distinct_from(idx: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Where event x[i] is none of the events of row idx[i] (the id check)."""
    if idx.shape[1] == 0:
        return np.ones(len(x), dtype=bool)
    return (idx != x[:, None]).all(axis=1)


def theta_pairs(events: IntervalEvents, pattern: Pattern, idx, vlb, vub, j: int):
    """(match, event) pairs for the Θ_j sets of eq. (2): events x not in the match that
    can match component j given the match's earlier events and may lie strictly between
    its events j-1 and j (x.upper > vlb_{j-1} and x.lower < vub_j)."""
    cand = component_events(events, pattern.bits[j])
    u = pattern.max_width
    a, k = band_pairs(
        events.seg[idx[:, j - 1]], vlb[:, j - 1] + 1 - u, vub[:, j] + u, events.seg[cand],
        events.ts[cand],
    )  # fmt: skip
    x = cand[k]
    keep = (events.hi[x] > vlb[a, j - 1]) & (events.lo[x] < vub[a, j])
    keep &= distinct_from(idx[a], x)
    a, x = a[keep], x[keep]
    keep = stage_holds(events, pattern, j, [idx[a, i] for i in range(j)], x)
    return a[keep], x[keep]


def nelt_holds(events: IntervalEvents, pattern: Pattern, idx) -> np.ndarray:
    """Skip-till-next's NELT check on complete matches (§3, B.3): event j must start no
    later than the Next Event's Latest Time of event j-1, the earliest end of the events
    that can match component j and start after event j-1 ends. A match that fails it has
    no point match in any possible world."""
    ok = np.ones(len(idx), dtype=bool)
    for j in range(1, pattern.length):
        cand = component_events(events, pattern.bits[j])
        prev, this = idx[:, j - 1], idx[:, j]
        a, k = band_pairs(
            events.seg[prev], events.hi[prev] + 1, events.lo[this], events.seg[cand],
            events.ts[cand],
        )  # fmt: skip
        x = cand[k]
        spoils = (events.lo[x] > events.hi[prev[a]]) & (events.hi[x] < events.lo[this[a]])
        spoils &= distinct_from(idx[a], x)
        a, x = a[spoils], x[spoils]
        spoils = stage_holds(events, pattern, j, [idx[a, i] for i in range(j)], x)
        ok[a[spoils]] = False
    return ok
