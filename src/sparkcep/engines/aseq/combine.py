"""Aggregates over sequence matches, reported at each trigger event (docs/aggregation.md).

An AGG query reports one row each time a TRIG event arrives — an event that can bind the
last positive component — with each aggregate over the matches m of its group that have
`m.end <= ts` and `ts - m.start < w`.

Every algorithm reduces the matches to *contributions*: bundles of matches that share a
start time and an end time, with their count and, per aggregate, the sum, the number of
non-null values, the minimum and the maximum of the aggregated attribute. A-Seq's prefix
counters produce one contribution per (start, end) without building a match; the
two-step method (enumerate with nfa, then aggregate) produces one per match. `combine`
turns contributions into the rows of every trigger:

    count(t) = Σ count over end <= t  -  Σ count over start <= t - w

(a match with start <= t - w has ended before t, since end - start < w), and the same
for sums; minimum and maximum sweep the contributions alive at t.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from sparkcep.plan import Plan

NO_WINDOW = np.iinfo(np.int64).max // 4


@dataclass
class Contributions:
    """Bundles of matches: start and end time (ticks), partition, count, and per aggregate
    channel (name) the sum, non-null count, min and max of the aggregated values."""

    segment: np.ndarray
    start: np.ndarray
    end: np.ndarray
    count: np.ndarray
    sums: dict[str, np.ndarray] = field(default_factory=dict)
    nonnull: dict[str, np.ndarray] = field(default_factory=dict)
    mins: dict[str, np.ndarray] = field(default_factory=dict)
    maxs: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.start)

    @staticmethod
    def empty(channels: list[str]) -> Contributions:
        z = np.zeros(0, dtype=np.int64)
        f = np.zeros(0, dtype=np.float64)
        return Contributions(
            z, z, z, z, {c: f for c in channels}, {c: z for c in channels},
            {c: f for c in channels}, {c: f for c in channels},
        )  # fmt: skip

    @staticmethod
    def concat(parts: list[Contributions]) -> Contributions:
        parts = [p for p in parts if len(p)] or parts[:1]
        if len(parts) == 1:
            return parts[0]

        def cat(name):
            return {
                k: _concat([getattr(p, name)[k] for p in parts]) for k in getattr(parts[0], name)
            }

        return Contributions(
            _concat([p.segment for p in parts]),
            _concat([p.start for p in parts]),
            _concat([p.end for p in parts]),
            _concat([p.count for p in parts]),
            cat("sums"),
            cat("nonnull"),
            cat("mins"),
            cat("maxs"),
        )


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    if any(a.dtype == object for a in arrays):
        return np.concatenate([a.astype(object) for a in arrays])
    return np.concatenate(arrays)


def channel(item) -> str:
    """The value channel an aggregate reads: 'var.attr' (count needs none)."""
    return f"{item.var}.{item.attr}"


def channels_of(plan: Plan) -> list[str]:
    out = []
    for item in plan.aggregate.items:
        if item.var is not None and channel(item) not in out:
            out.append(channel(item))
    return out


@dataclass
class Triggers:
    """The events that report a row: position in the table, time, output group."""

    position: np.ndarray
    ts: np.ndarray
    group: np.ndarray


def combine(
    plan: Plan, contributions: Contributions, trig: Triggers, cgroup: np.ndarray
) -> dict[str, np.ndarray]:
    """Each aggregate at each trigger (arrays aligned with `trig`); `cgroup` is the
    output group of each contribution."""
    w = plan.window if plan.window is not None else NO_WINDOW
    n = len(trig.ts)
    c = contributions
    cgroup = np.asarray(cgroup, dtype=np.int64)
    if (not len(cgroup) or cgroup.max() == 0) and (not n or trig.group.max() == 0):
        # One group: times are the keys.
        def key(group, t):
            return np.asarray(t, dtype=np.int64)

        span = 0
    else:
        # Rank all relevant times so that (group, time) packs into one sortable int64.
        times = np.unique(np.concatenate([c.end, c.start, trig.ts, trig.ts - w]))
        span = len(times) + 1

        def key(group, t):
            return group.astype(np.int64) * span + np.searchsorted(times, t)

    by_end = np.argsort(key(cgroup, c.end), kind="stable")
    by_start = np.argsort(key(cgroup, c.start), kind="stable")
    end_keys = key(cgroup, c.end)[by_end]
    start_keys = key(cgroup, c.start)[by_start]
    upto_end = np.searchsorted(end_keys, key(trig.group, trig.ts), side="right")
    group_lo_end = np.searchsorted(end_keys, _group_floor(trig.group, span), side="left")
    upto_start = np.searchsorted(start_keys, key(trig.group, trig.ts - w), side="right")
    group_lo_start = np.searchsorted(start_keys, _group_floor(trig.group, span), side="left")

    def window_total(values: np.ndarray) -> np.ndarray:
        """Σ values over contributions of the trigger's group alive at its time."""
        if not len(values):
            return np.zeros(n, dtype=values.dtype if values.dtype != object else object)
        if values.dtype.kind == "f":
            return _exact_float_total(values, window_total)
        ce = _cumsum0(values[by_end])
        cs = _cumsum0(values[by_start])
        return (ce[upto_end] - ce[group_lo_end]) - (cs[upto_start] - cs[group_lo_start])

    out: dict[str, np.ndarray] = {}
    count = window_total(c.count)
    for item in plan.aggregate.items:
        if item.func == "count":
            out[item.name] = count
            continue
        ch = channel(item)
        if item.func in ("sum", "avg"):
            total = window_total(c.sums[ch])
            nn = window_total(c.nonnull[ch])
            if item.func == "sum":
                out[item.name] = _with_nulls(total, nn == 0)
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    avg = total.astype(np.float64) / np.where(nn == 0, 1, nn).astype(np.float64)
                out[item.name] = _with_nulls(avg, nn == 0)
        else:
            values = c.mins[ch] if item.func == "min" else c.maxs[ch]
            out[item.name] = _sweep_extreme(item.func, cgroup, c.start, c.end, values, trig, w)
    return out


def _group_floor(group: np.ndarray, span: int) -> np.ndarray:
    """The smallest key of each group (with one group: below every time)."""
    if span == 0:
        return np.full(len(group), np.iinfo(np.int64).min, dtype=np.int64)
    return group.astype(np.int64) * span


def _cumsum0(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "iu" and np.abs(values.astype(np.float64)).sum() >= 2**62:
        values = values.astype(object)  # exact sums beyond 64 bits
    if values.dtype == object:
        out = np.empty(len(values) + 1, dtype=object)
        out[0] = 0
        out[1:] = np.cumsum(values)
        return out
    return np.concatenate(([0], np.cumsum(values)))


def _exact_float_total(values: np.ndarray, window_total) -> np.ndarray:
    """`window_total` of floats, correctly rounded: a window total is a difference of
    running sums over the whole partition, and in floating point the values before the
    window would leak into it (1e16 + 1.0 - 1e16 = 0.0). Every finite float is an
    integer times a power of two, so the running sums are taken over exact integers and
    each total is rounded once. Infinities are counted apart (inf - inf is nan)."""
    finite = np.isfinite(values)
    mantissa, exponent = np.frexp(np.where(finite, values, 0.0))
    ints = (mantissa * 2.0**53).astype(np.int64)  # exact: a double has 53 bits
    exps = exponent.astype(np.int64) - 53
    nonzero = ints != 0
    low = int(exps[nonzero].min()) if nonzero.any() else 0
    exps = np.where(nonzero, exps, low)
    scaled = np.empty(len(values), dtype=object)
    scaled[:] = [int(m) << int(e - low) for m, e in zip(ints.tolist(), exps.tolist())]
    totals = window_total(scaled)
    out = np.array([_to_float(t, low) for t in totals.tolist()], dtype=np.float64)
    if not finite.all():
        pos = window_total((values == np.inf).astype(np.int64)) > 0
        neg = window_total((values == -np.inf).astype(np.int64)) > 0
        out = np.where(pos, np.inf, out)
        out = np.where(neg, -np.inf, out)
        out = np.where(pos & neg, np.nan, out)
    return out


def _to_float(total: int, low: int) -> float:
    """total × 2**low, correctly rounded (Python's int / int is)."""
    try:
        return total / (1 << -low) if low < 0 else float(total << low)
    except OverflowError:
        return math.copysign(math.inf, total)


def _with_nulls(values: np.ndarray, null: np.ndarray) -> np.ndarray:
    out = values.astype(object)
    out[null] = None
    return out


def _sweep_extreme(func, cgroup, start, end, values, trig: Triggers, w) -> np.ndarray:
    """min/max over the contributions alive at each trigger: end <= t < start + w."""
    sign = 1.0 if func == "min" else -1.0
    finite = np.isfinite(values.astype(np.float64))
    order_c = np.flatnonzero(finite)
    result = np.full(len(trig.ts), None, dtype=object)
    if not len(order_c):
        return result
    events = sorted(
        [(int(cgroup[i]), int(end[i]), 0, i) for i in order_c]
        + [(int(trig.group[j]), int(trig.ts[j]), 1, j) for j in range(len(trig.ts))]
    )
    heap: list[tuple[float, int]] = []
    current = None
    for group, t, kind, i in events:
        if group != current:
            heap, current = [], group
        if kind == 0:
            heapq.heappush(heap, (sign * float(values[i]), int(start[i]) + w))
        else:
            while heap and heap[0][1] <= t:
                heapq.heappop(heap)
            if heap:
                result[i] = sign * heap[0][0]
    return result
