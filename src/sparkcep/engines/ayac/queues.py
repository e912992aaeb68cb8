"""Probabilistic and negative arrival queues (ayac-probabilistic-cep.md §4.1, §4.2, §5).

A *PAQ* holds, for one automaton state (one positive component), the arrivals (t, u):
the events that can bind the component and u, an upper bound on the score of every path
reaching the state at t; arrivals whose bound is below the threshold are never queued.
A *NAQ* holds the arrival times of the events of one negated component.

Both are column-wise here: a queue is the time-ordered arrivals of every partition
(segment) of a batch, and each operation answers many queries at once.

- `ArrivalQueue.window_max` gives, for each query event, max_k u_{j,k} over the
  arrivals within the window before it and the oldest such arrival t_{j,0} (§5.1's
  v_new). The maximum is O(1) per query and amortised O(1) per arrival: time is cut into
  blocks of W ticks, each arrival keeps the maximum of its block up to it (prefix) and
  from it on (suffix), and a window (t − W, t) spans at most two blocks, so its maximum is
  max(suffix in the earlier block, prefix in the later one) — the sliding-window maximum
  of van Herk and Gil & Werman, which is what a deque gives one arrival at a time.
- `NegativeQueue.any_between` finds negated events between two arrivals by binary search.

>>> import numpy as np
>>> q = ArrivalQueue(seg=np.zeros(4, int), order=np.arange(4), t=np.array([1, 4, 9, 12]),
...                  u=np.array([0.2, 0.9, 0.5, 0.3]), window=10)
>>> best, oldest, found = q.window_max(np.array([0, 0]), np.array([3, 9]), np.array([12, 20]))
>>> best.tolist(), oldest.tolist(), found.tolist()   # (2, 12): 0.9 at 4;  (10, 20): 0.3 at 12
([0.9, 0.3], [4, 12], [True, True])
"""

from __future__ import annotations

import numpy as np


def search_in_ranges(
    values: np.ndarray, lo: np.ndarray, hi: np.ndarray, target: np.ndarray, *, right: bool
) -> np.ndarray:
    """For each query, the first index i in [lo, hi) with values[i] > target (right) or
    values[i] >= target (not right), or hi; `values` is sorted within each range.
    A binary search run for all queries at once."""
    lo = lo.astype(np.int64).copy()
    hi = hi.astype(np.int64).copy()
    if not len(values):
        return lo
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        probe = values[np.minimum(mid, len(values) - 1)]
        go_right = (probe <= target) if right else (probe < target)
        go_right &= active
        lo = np.where(go_right, mid + 1, lo)
        hi = np.where(active & ~go_right, mid, hi)


def block_maxima(u: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Within each run of equal (nondecreasing) `group`, the maximum of u up to each
    entry (prefix) and from it on (suffix), exactly: one running maximum over the whole
    array of integer keys (group, rank of u), which restarts at each group.

    >>> p, s = block_maxima(np.array([0.3, 0.1, 0.5, 0.2, 0.4]), np.array([0, 0, 0, 1, 1]))
    >>> p.tolist(), s.tolist()
    ([0.3, 0.3, 0.5, 0.2, 0.4], [0.5, 0.5, 0.5, 0.4, 0.4])
    """
    n = len(u)
    if not n:
        return u.copy(), u.copy()
    order = np.argsort(u, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    by_rank = u[order]
    key = group * n + rank
    prefix = by_rank[np.maximum.accumulate(key) - group * n]
    back = (group[-1] - group[::-1]) * n + rank[::-1]
    suffix = by_rank[(np.maximum.accumulate(back) - (group[-1] - group[::-1]) * n)][::-1]
    return prefix, suffix


class _Queue:
    """Arrivals of several segments, sorted by (segment, order); `order` is a precedence
    rank increasing over the whole batch (segments are contiguous)."""

    def __init__(self, seg, order, t):
        self.seg = np.asarray(seg, dtype=np.int64)
        self.order = np.asarray(order, dtype=np.int64)
        self.t = np.asarray(t, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.t)

    def segment_bounds(self, seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.searchsorted(self.seg, seg, side="left"),
            np.searchsorted(self.seg, seg, side="right"),
        )

    def between(self, seg, after_order, before_order) -> tuple[np.ndarray, np.ndarray]:
        """[lo, hi): arrivals with after_order < order < before_order, in `seg`."""
        seg_lo, seg_hi = self.segment_bounds(seg)
        lo = np.clip(np.searchsorted(self.order, after_order, side="right"), seg_lo, seg_hi)
        hi = np.clip(np.searchsorted(self.order, before_order, side="left"), seg_lo, seg_hi)
        return lo, np.maximum(lo, hi)

    def since(self, seg, after_t, before_order) -> tuple[np.ndarray, np.ndarray]:
        """[lo, hi): arrivals with t > after_t and order < before_order, in `seg`."""
        seg_lo, seg_hi = self.segment_bounds(seg)
        hi = np.clip(np.searchsorted(self.order, before_order, side="left"), seg_lo, seg_hi)
        lo = search_in_ranges(self.t, seg_lo, hi, np.asarray(after_t), right=True)
        return lo, np.maximum(lo, hi)


class ArrivalQueue(_Queue):
    """A PAQ: arrivals (t, u) of one state, with window maxima of u.

    `window` is W in ticks: a query at (seg, order, t) sees the arrivals of its segment
    with t' > t − W that precede it.
    """

    def __init__(self, seg, order, t, u, window: int, index=None):
        super().__init__(seg, order, t)
        self.u = np.asarray(u, dtype=np.float64)
        self.window = int(window)
        self.index = np.asarray(index if index is not None else np.arange(len(self.t)))
        n = len(self.t)
        self.block = np.floor_divide(self.t, max(self.window, 1))
        group = np.zeros(n, dtype=np.int64)
        if n > 1:
            group[1:] = np.cumsum(
                (self.seg[1:] != self.seg[:-1]) | (self.block[1:] != self.block[:-1])
            )
        self.group = group
        self.prefix, self.suffix = block_maxima(self.u, group)
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if n else np.zeros(0, int)
        self.group_start = starts[group] if n else group

    def window_max(self, seg, order, t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each query: the largest u among the arrivals in its window, the time of
        the oldest of them, and whether there is any."""
        lo, hi = self.since(np.asarray(seg), np.asarray(t) - self.window, np.asarray(order))
        found = lo < hi
        best = np.zeros(len(lo))
        oldest = np.zeros(len(lo), dtype=np.int64)
        if not found.any() or not len(self):
            return best, oldest, found
        first = np.where(found, lo, 0)
        last = np.where(found, hi - 1, 0)
        one_block = self.group[first] == self.group[last]
        from_start = self.group_start[first] == first
        single = np.where(from_start, self.prefix[last], self.suffix[first])
        two = np.maximum(self.suffix[first], self.prefix[last])
        best = np.where(found, np.where(one_block, single, two), 0.0)
        oldest = np.where(found, self.t[first], 0)
        return best, oldest, found


class NegativeQueue(_Queue):
    """A NAQ: the arrivals of one negated component (times only, no bounds)."""

    def __init__(self, seg, order, t, index=None):
        super().__init__(seg, order, t)
        self.index = np.asarray(index if index is not None else np.arange(len(self.t)))

    def any_between(self, seg, after_order, before_order) -> np.ndarray:
        lo, hi = self.between(seg, after_order, before_order)
        return hi > lo
