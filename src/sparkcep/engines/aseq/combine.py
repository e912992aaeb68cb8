"""Aggregates over sequence matches, reported at each trigger event (docs/aggregation.md).

An AGG query reports one row each time a TRIG event arrives — an event that can bind the
last positive component — with each aggregate over the matches m of its group that have
`m.end <= ts` and `ts - m.start < w`.

Every algorithm reduces the matches to *contributions*: bundles of matches that share a
start time and an end time, with their count and, per aggregate, the sum, the number of
non-null values, the minimum and the maximum of the aggregated attribute. A-Seq's prefix
counters give one-sided bundles (the matches ending at a group, and those from a START
row: see `Contributions`; an exact float sum as a few of them), plus MIN/MAX records; the
two-step method (enumerate with nfa, then aggregate) gives one per match. `combine`
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

from sparkcep.engines.state import state_class
from sparkcep.plan import Plan

NO_WINDOW = np.iinfo(np.int64).max // 4  # the window of a query without WITHIN (ticks)
LONG_AGO = np.iinfo(np.int64).min // 4  # the end time of matches counted in earlier batches
NEVER = np.iinfo(np.int64).max // 2  # a time no trigger reaches (one-sided bundles)


def window_of(plan: Plan) -> int:
    """The plan's window in ticks (NO_WINDOW when it has none)."""
    return plan.window if plan.window is not None else NO_WINDOW


@dataclass(frozen=True)
class Channel:
    """The values an aggregate reads: the attribute `attr` of the event bound to `var`."""

    var: str
    attr: str


def channel(item) -> Channel:
    """The value channel an aggregate reads (count needs none)."""
    return Channel(item.var, item.attr)


def channels_of(plan: Plan) -> list[Channel]:
    out = []
    for item in plan.aggregate.items:
        if item.var is not None and channel(item) not in out:
            out.append(channel(item))
    return out


@state_class
@dataclass
class Moments:
    """What a bundle of matches holds of one channel: the sum and the number of non-null
    values (for SUM and AVG), the minimum and the maximum (nulls leave them at +inf and
    -inf). The four arrays have one shape: one entry per bundle.

    >>> m = Moments.of_values(np.array([3, 5]), np.array([False, True]))
    >>> m.sums.tolist(), m.nonnull.tolist(), m.mins.tolist(), m.maxs.tolist()
    ([3, 0], [1, 0], [3.0, inf], [3.0, -inf])
    >>> twice = m.scaled(np.array([2, 0]))  # the first bundle's match taken twice
    >>> twice.sums.tolist(), twice.nonnull.tolist(), twice.mins.tolist()
    ([6, 0], [2, 0], [3.0, inf])
    """

    sums: np.ndarray
    nonnull: np.ndarray
    mins: np.ndarray
    maxs: np.ndarray

    @staticmethod
    def zeros(shape, sum_dtype=np.float64, count_dtype=np.int64) -> Moments:
        """Bundles of no match."""
        return Moments(
            np.zeros(shape, dtype=sum_dtype),
            np.zeros(shape, dtype=count_dtype),
            np.full(shape, np.inf),
            np.full(shape, -np.inf),
        )

    @staticmethod
    def empty() -> Moments:
        return Moments.zeros(0)

    @staticmethod
    def of_values(values: np.ndarray, null: np.ndarray) -> Moments:
        """One match per entry, with its value (`null`: it has none)."""
        floats = values.astype(np.float64)
        return Moments(
            np.where(null, 0, values),
            (~null).astype(np.int64),
            np.where(null, np.inf, floats),
            np.where(null, -np.inf, floats),
        )

    @staticmethod
    def concat(parts: list[Moments]) -> Moments:
        return Moments(
            concat_arrays([p.sums for p in parts]),
            concat_arrays([p.nonnull for p in parts]),
            concat_arrays([p.mins for p in parts]),
            concat_arrays([p.maxs for p in parts]),
        )

    def take(self, index) -> Moments:
        return Moments(self.sums[index], self.nonnull[index], self.mins[index], self.maxs[index])

    def copy(self) -> Moments:
        return Moments(self.sums.copy(), self.nonnull.copy(), self.mins.copy(), self.maxs.copy())

    def put(self, index, other: Moments) -> None:
        """Overwrite the bundles at `index` with `other`'s."""
        self.sums[index] = other.sums
        self.nonnull[index] = other.nonnull
        self.mins[index] = other.mins
        self.maxs[index] = other.maxs

    def scaled(self, count: np.ndarray) -> Moments:
        """Each bundle's matches, each taken `count` times (count >= 0)."""
        some = count > 0
        return Moments(
            self.sums * count,
            self.nonnull * count,
            np.where(some, self.mins, np.inf),
            np.where(some, self.maxs, -np.inf),
        )

    def plus(self, other: Moments) -> Moments:
        """The bundles of both, entry by entry."""
        return Moments(
            self.sums + other.sums,
            self.nonnull + other.nonnull,
            np.minimum(self.mins, other.mins),
            np.maximum(self.maxs, other.maxs),
        )

    def cleared(self, where: np.ndarray) -> Moments:
        """Bundles of no match where `where` holds, the others unchanged."""
        return Moments(
            np.where(where, 0, self.sums),
            np.where(where, 0, self.nonnull),
            np.where(where, np.inf, self.mins),
            np.where(where, -np.inf, self.maxs),
        )

    def bundled(self, inverse: np.ndarray, n: int) -> Moments:
        """Entries with equal `inverse` (in 0..n-1) bundled into one."""
        return Moments(
            sum_by(inverse, self.sums, n),
            sum_by(inverse, self.nonnull, n),
            min_by(inverse, self.mins, n),
            max_by(inverse, self.maxs, n),
        )

    def widened(self) -> Moments:
        """Integer counts and sums as Python integers (exact beyond 64 bits)."""
        sums = self.sums.astype(object) if self.sums.dtype.kind in "iu" else self.sums
        return Moments(sums, self.nonnull.astype(object), self.mins, self.maxs)


@dataclass
class Contributions:
    """Bundles of matches: start and end time (ticks), partition, count, and the moments
    of each aggregate channel.

    COUNT, SUM and AVG need only two sums (see `combine`): of the matches by end time and
    by start time. A bundle may therefore be one-sided: start NEVER (its matches count
    from their end on, and never expire here) or end NEVER (its matches are taken off
    when their start leaves the window); MIN and MAX need two-sided bundles."""

    segment: np.ndarray
    start: np.ndarray
    end: np.ndarray
    count: np.ndarray
    moments: dict[Channel, Moments] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.start)

    def matches(self) -> int:
        """How many matches the bundles hold (a one-sided pair of bundles counts once)."""
        return int(np.sum(self.count[self.end != NEVER]))

    @staticmethod
    def empty(channels: list[Channel]) -> Contributions:
        none = np.zeros(0, dtype=np.int64)
        return Contributions(none, none, none, none, {c: Moments.empty() for c in channels})

    @staticmethod
    def concat(parts: list[Contributions], keep_empty: bool = False) -> Contributions:
        """The bundles of all parts (`keep_empty`: every part's, even an empty one's,
        so that their arrays' types are merged too)."""
        if not keep_empty:
            parts = [p for p in parts if len(p)] or parts[:1]
        if len(parts) == 1:
            return parts[0]
        return Contributions(
            concat_arrays([p.segment for p in parts]),
            concat_arrays([p.start for p in parts]),
            concat_arrays([p.end for p in parts]),
            concat_arrays([p.count for p in parts]),
            {ch: Moments.concat([p.moments[ch] for p in parts]) for ch in parts[0].moments},
        )


def concat_arrays(arrays: list[np.ndarray]) -> np.ndarray:
    """np.concatenate, exact when some arrays hold Python integers (dtype object)."""
    if any(a.dtype == object for a in arrays):
        return np.concatenate([a.astype(object) for a in arrays])
    return np.concatenate(arrays)


def sum_by(inverse: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Per i in 0..n-1, the sum of values[inverse == i]."""
    if values.dtype == object:
        out = np.zeros(n, dtype=object)
        for i, v in zip(inverse, values):
            out[i] += v
        return out
    out = np.zeros(n, dtype=values.dtype)
    np.add.at(out, inverse, values)
    return out


def min_by(inverse: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, np.inf)
    np.minimum.at(out, inverse, values.astype(np.float64))
    return out


def max_by(inverse: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, -np.inf)
    np.maximum.at(out, inverse, values.astype(np.float64))
    return out


@dataclass
class Triggers:
    """The events that report a row: position in the table, time, output group."""

    position: np.ndarray
    ts: np.ndarray
    group: np.ndarray


def combine(
    plan: Plan, contributions: Contributions, trig: Triggers, cgroup: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each aggregate at each trigger (arrays aligned with `trig`), and the number of
    matches of the trigger's group that end at its time (EMIT ON MATCH reports the
    triggers where it is not 0); `cgroup` is the output group of each contribution."""
    w = window_of(plan)
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

    end_keys = key(cgroup, c.end)
    by_end = np.argsort(end_keys, kind="stable")
    end_keys = end_keys[by_end]
    start_keys = key(cgroup, c.start)
    by_start = np.argsort(start_keys, kind="stable")
    start_keys = start_keys[by_start]
    trig_keys = key(trig.group, trig.ts)
    upto_end = np.searchsorted(end_keys, trig_keys, side="right")
    before_end = np.searchsorted(end_keys, trig_keys, side="left")
    del trig_keys
    floor = _group_floor(trig.group, span)
    group_lo_end = np.searchsorted(end_keys, floor, side="left")
    group_lo_start = np.searchsorted(start_keys, floor, side="left")
    upto_start = np.searchsorted(start_keys, key(trig.group, trig.ts - w), side="right")
    del floor, end_keys, start_keys  # the places above are what the totals need

    def window_total(values: np.ndarray) -> np.ndarray:
        """Σ values over contributions of the trigger's group alive at its time."""
        if not len(values):
            return np.zeros(n, dtype=values.dtype if values.dtype != object else object)
        if values.dtype.kind == "f":
            return _exact_float_total(values, window_total)
        ce = _cumsum0(values[by_end])
        total = ce[upto_end] - ce[group_lo_end]
        del ce
        cs = _cumsum0(values[by_start])
        return total - (cs[upto_start] - cs[group_lo_start])

    out: dict[str, np.ndarray] = {}
    count = window_total(c.count)
    ended = np.zeros(n, dtype=np.int64)
    if len(c.count):  # the matches that end at the trigger's time
        by_end_count = _cumsum0(c.count[by_end])
        ended = by_end_count[upto_end] - by_end_count[before_end]
        del by_end_count
    for item in plan.aggregate.items:
        if item.func == "count":
            out[item.name] = count
            continue
        moments = c.moments[channel(item)]
        if item.func in ("sum", "avg"):
            total = window_total(moments.sums)
            nonnull = window_total(moments.nonnull)
            if item.func == "sum":
                out[item.name] = _with_nulls(total, nonnull == 0)
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    divisor = np.where(nonnull == 0, 1, nonnull).astype(np.float64)
                    avg = total.astype(np.float64) / divisor
                out[item.name] = _with_nulls(avg, nonnull == 0)
        else:
            values = moments.mins if item.func == "min" else moments.maxs
            out[item.name] = _sweep_extreme(item.func, cgroup, c.start, c.end, values, trig, w)
    return out, ended


def _group_floor(group: np.ndarray, span: int) -> np.ndarray:
    """The smallest key of each group (with one group: below every time)."""
    if span == 0:
        return np.full(len(group), np.iinfo(np.int64).min, dtype=np.int64)
    return group.astype(np.int64) * span


def _cumsum0(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "iu" and _magnitude(values) >= 2**62:
        values = values.astype(object)  # exact sums beyond 64 bits
    if values.dtype == object:
        out = np.empty(len(values) + 1, dtype=object)
        out[0] = 0
        out[1:] = np.cumsum(values)
        return out
    return np.concatenate(([0], np.cumsum(values)))


def _magnitude(values: np.ndarray, chunk: int = 1 << 16) -> float:
    """Σ |values| as a float, a chunk at a time (no float copy of a long array)."""
    return sum(
        float(np.abs(values[i : i + chunk].astype(np.float64)).sum())
        for i in range(0, len(values), chunk)
    )


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


class ExactSums:
    """Exact sums of finite floats at n places. Every finite float is an integer times a
    power of two, so a sum is an integer in units of 2**low: here in 32-bit limbs of an
    int64 array (place x limb), the amounts added with numpy, the carries moved up from
    time to time. `terms` gives each sum back as a few floats whose exact total it is
    (the first is the sum rounded), for `combine`, which adds floats exactly.

    >>> sums = ExactSums(2)
    >>> sums.add_at(np.array([0, 0, 0, 1]), np.array([1e16, 1.0, -1e16, 0.1]))
    >>> sums.terms(sums.places())
    (array([0, 1]), array([1. , 0.1]))
    >>> sums.add_at(np.array([1, 1]), np.array([2.0**-60, -0.1]))
    >>> sums.terms(np.array([1]))[1].tolist() == [2.0**-60]  # 0.1 - 0.1, exactly
    True
    """

    LIMB = 32
    PART = 16  # a mantissa is added in 16-bit parts: each amount below 2**48 in its limb
    MOST_ADDS = 1 << 14  # adds to one place between carries: 2**14 x 2**48 < 2**63

    def __init__(self, n: int):
        self.limbs = np.zeros((n, 0), dtype=np.int64)
        self.low: int | None = None  # a multiple of LIMB
        self.adds = np.zeros(n, dtype=np.int32)  # per place, since its last carry

    def add_at(self, place: np.ndarray, values: np.ndarray) -> None:
        some = values != 0
        if not some.any():
            return
        place, values = place[some], values[some]
        mantissa, exponent = np.frexp(values)
        ints = (mantissa * 2.0**53).astype(np.int64)  # exact: a double has 53 bits
        exps = exponent.astype(np.int64) - 53
        self._fit(int(exps.min()), int(exps.max()))
        shift = exps - self.low
        limb, offset = shift // self.LIMB, shift % self.LIMB
        sign, magnitude = np.sign(ints), np.abs(ints)
        width = self.limbs.shape[1]
        flat = self.limbs.reshape(-1)  # a view: the adds land in the limbs
        for i in range(4):  # 4 x 16 bits hold the 53 of a mantissa
            part = (magnitude >> (self.PART * i)) & 0xFFFF
            bit = offset + self.PART * i
            where = place * width + limb + bit // self.LIMB
            np.add.at(flat, where, sign * (part << (bit % self.LIMB)))
        np.add.at(self.adds, place, 4)
        if self.adds[place].max() >= self.MOST_ADDS:
            self._carry(np.unique(place))

    def _fit(self, low: int, high: int) -> None:
        """Limbs for amounts from 2**low to 2**(high + 53), and room for carries."""
        low = low - low % self.LIMB
        n, width = self.limbs.shape
        if self.low is None:
            self.low = low
        elif low < self.low:  # finer units: limbs below the present ones
            below = (self.low - low) // self.LIMB
            self.limbs = np.hstack([np.zeros((n, below), np.int64), self.limbs])
            self.low, width = low, width + below
        need = (high + 53 + 2 * self.LIMB - self.low) // self.LIMB + 1
        if need > width:  # the top limb takes the carries, with room to spare
            self.limbs = np.hstack([self.limbs, np.zeros((n, need - width), np.int64)])

    def _carry(self, places: np.ndarray) -> None:
        """Each limb of `places` below 2**32, its excess carried to the next one up."""
        sub = self.limbs[places]
        for k in range(sub.shape[1] - 1):
            carry = sub[:, k] >> self.LIMB
            sub[:, k] -= carry << self.LIMB
            sub[:, k + 1] += carry
        self.limbs[places] = sub
        self.adds[places] = 0
        if len(sub) and np.abs(sub[:, -1]).max() >= 1 << 40:  # keep the top limb small
            self.limbs = np.hstack([self.limbs, np.zeros((len(self.limbs), 1), np.int64)])
            self._carry(places)

    def places(self) -> np.ndarray:
        """The places with a sum."""
        return np.flatnonzero((self.limbs != 0).any(axis=1))

    def terms(self, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(places, floats): for each place of `at` with a sum, the floats that add up to
        it exactly (the first is the sum rounded; more follow where it lost bits)."""
        places, terms = [], []
        low = self.low or 0
        for place, total in self._totals(at):
            while total:
                f = _to_float(total, low)
                places.append(place)
                terms.append(f)
                if not math.isfinite(f):
                    break  # beyond floats: the sum is infinite
                m, e = math.frexp(f)
                shift = e - 53 - low
                exact = int(m * 2**53)
                total -= exact << shift if shift >= 0 else exact >> -shift
        return np.array(places, dtype=np.int64), np.array(terms, dtype=np.float64)

    def _totals(self, at: np.ndarray, chunk: int = 1 << 15):
        """(place, its sum as a Python integer), a chunk of places' limbs at a time."""
        for lo in range(0, len(at), chunk):
            part = at[lo : lo + chunk]
            for place, limbs in zip(part.tolist(), self.limbs[part].tolist()):
                yield place, sum(limb << (self.LIMB * k) for k, limb in enumerate(limbs))


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
