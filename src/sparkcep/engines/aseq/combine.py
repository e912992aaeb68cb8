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

import itertools
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
    -inf). The four arrays have one shape: one entry per bundle. Where no MIN or MAX
    reads the channel, the counters need not keep its extremes: `mins` and `maxs` are
    then None (not kept), and stay None through every operation.

    >>> m = Moments.of_values(np.array([3, 5]), np.array([False, True]))
    >>> m.sums.tolist(), m.nonnull.tolist(), m.mins.tolist(), m.maxs.tolist()
    ([3, 0], [1, 0], [3.0, inf], [3.0, -inf])
    >>> twice = m.scaled(np.array([2, 0]))  # the first bundle's match taken twice
    >>> twice.sums.tolist(), twice.nonnull.tolist(), twice.mins.tolist()
    ([6, 0], [2, 0], [3.0, inf])
    >>> Moments(m.sums, m.nonnull, None, None).plus(m).mins is None
    True
    """

    sums: np.ndarray
    nonnull: np.ndarray
    mins: np.ndarray | None
    maxs: np.ndarray | None

    @staticmethod
    def zeros(shape, sum_dtype=np.float64, count_dtype=np.int64, extremes=True) -> Moments:
        """Bundles of no match (`extremes`: with their minimum and maximum kept)."""
        return Moments(
            np.zeros(shape, dtype=sum_dtype),
            np.zeros(shape, dtype=count_dtype),
            np.full(shape, np.inf) if extremes else None,
            np.full(shape, -np.inf) if extremes else None,
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

    @property
    def extremes(self) -> bool:
        """Are the minimum and maximum kept?"""
        return self.mins is not None

    def without_extremes(self) -> Moments:
        return Moments(self.sums, self.nonnull, None, None)

    @staticmethod
    def concat(parts: list[Moments]) -> Moments:
        kept = all(p.extremes for p in parts)
        return Moments(
            concat_arrays([p.sums for p in parts]),
            concat_arrays([p.nonnull for p in parts]),
            concat_arrays([p.mins for p in parts]) if kept else None,
            concat_arrays([p.maxs for p in parts]) if kept else None,
        )

    def take(self, index) -> Moments:
        if not self.extremes:
            return Moments(self.sums[index], self.nonnull[index], None, None)
        return Moments(self.sums[index], self.nonnull[index], self.mins[index], self.maxs[index])

    def copy(self) -> Moments:
        if not self.extremes:
            return Moments(self.sums.copy(), self.nonnull.copy(), None, None)
        return Moments(self.sums.copy(), self.nonnull.copy(), self.mins.copy(), self.maxs.copy())

    def put(self, index, other: Moments) -> None:
        """Overwrite the bundles at `index` with `other`'s."""
        self.sums[index] = other.sums
        self.nonnull[index] = other.nonnull
        if self.extremes:
            if not other.extremes:
                raise ValueError("extremes kept here, not in what is put")
            self.mins[index] = other.mins
            self.maxs[index] = other.maxs

    def scaled(self, count: np.ndarray) -> Moments:
        """Each bundle's matches, each taken `count` times (count >= 0)."""
        if not self.extremes:
            return Moments(self.sums * count, self.nonnull * count, None, None)
        some = count > 0
        return Moments(
            self.sums * count,
            self.nonnull * count,
            np.where(some, self.mins, np.inf),
            np.where(some, self.maxs, -np.inf),
        )

    def plus(self, other: Moments) -> Moments:
        """The bundles of both, entry by entry."""
        kept = self.extremes and other.extremes
        return Moments(
            self.sums + other.sums,
            self.nonnull + other.nonnull,
            np.minimum(self.mins, other.mins) if kept else None,
            np.maximum(self.maxs, other.maxs) if kept else None,
        )

    def cleared(self, where: np.ndarray) -> Moments:
        """Bundles of no match where `where` holds, the others unchanged."""
        return Moments(
            np.where(where, 0, self.sums),
            np.where(where, 0, self.nonnull),
            np.where(where, np.inf, self.mins) if self.extremes else None,
            np.where(where, -np.inf, self.maxs) if self.extremes else None,
        )

    def bundled(self, inverse: np.ndarray, n: int) -> Moments:
        """Entries with equal `inverse` (in 0..n-1) bundled into one."""
        return Moments(
            sum_by(inverse, self.sums, n),
            sum_by(inverse, self.nonnull, n),
            min_by(inverse, self.mins, n) if self.extremes else None,
            max_by(inverse, self.maxs, n) if self.extremes else None,
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
    integer times a power of two, so the running sums are taken over exact integers (in
    32-bit limbs, one int64 column each: `window_total` takes a column at a time) and
    each total is rounded once. Infinities are counted apart (inf - inf is nan)."""
    finite = np.isfinite(values)
    clean = np.where(finite, values, 0.0)
    nonzero = clean != 0
    out = np.zeros(len(window_total(np.zeros(len(values), dtype=np.int64))))
    if nonzero.any():
        ints, exps = _mantissas(clean[nonzero])
        low = int(exps.min()) // LIMB * LIMB
        width = (int(exps.max()) - low) // LIMB + 3  # a mantissa spans 3 limbs at most
        if width > MOST_LIMBS:  # magnitudes too far apart for limbs: Python integers
            return _python_float_total(values, finite, window_total)
        limb, amounts = _limb_amounts(ints, exps - low)
        columns = []
        for k in range(width):
            column = np.zeros(len(values), dtype=np.int64)
            for j in range(3):
                at = limb == k - j
                column[np.flatnonzero(nonzero)[at]] = amounts[j][at]
            # each column below 2**32 in magnitude: its running sums stay within int64
            columns.append(window_total(column).astype(np.int64))
        limbs = np.stack(columns, axis=1)
        del columns
        out = np.concatenate(
            [
                _round_limbs(limbs[i : i + TERMS_CHUNK], low)
                for i in range(0, len(limbs), TERMS_CHUNK)
            ]
            or [np.zeros(0)]
        )
    return _with_infinities(out, values, finite, window_total)


def _python_float_total(values, finite, window_total) -> np.ndarray:
    """`_exact_float_total` with Python integers (magnitudes more than MOST_LIMBS limbs
    apart)."""
    ints, exps = _mantissas(np.where(finite, values, 0.0))
    nonzero = ints != 0
    low = int(exps[nonzero].min()) if nonzero.any() else 0
    exps = np.where(nonzero, exps, low)
    scaled = np.empty(len(values), dtype=object)
    scaled[:] = [int(m) << int(e - low) for m, e in zip(ints.tolist(), exps.tolist())]
    totals = window_total(scaled)
    out = np.array([_to_float(t, low) for t in totals.tolist()], dtype=np.float64)
    return _with_infinities(out, values, finite, window_total)


def _with_infinities(out, values, finite, window_total) -> np.ndarray:
    if not finite.all():
        pos = window_total((values == np.inf).astype(np.int64)) > 0
        neg = window_total((values == -np.inf).astype(np.int64)) > 0
        out = np.where(pos, np.inf, out)
        out = np.where(neg, -np.inf, out)
        out = np.where(pos & neg, np.nan, out)
    return out


LIMB = 32  # bits of a limb of an exact sum
MASK = (1 << LIMB) - 1
MOST_LIMBS = 48  # limbs of one exact sum before combine falls back to Python integers
TERMS_CHUNK = 1 << 16  # places whose sums ExactSums.terms rounds at once


def _mantissas(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Finite floats as int64 m and e, value = m * 2**e exactly (|m| < 2**53)."""
    mantissa, exponent = np.frexp(values)
    ints = (mantissa * 2.0**53).astype(np.int64)  # exact: a double has 53 bits
    return ints, exponent.astype(np.int64) - 53


def _limb_amounts(ints: np.ndarray, shift: np.ndarray):
    """m * 2**shift (shift >= 0) as signed amounts to add to limbs limb, limb + 1 and
    limb + 2 (each below 2**32 in magnitude): (limb, [three amount arrays])."""
    limb, offset = shift >> 5, shift & (LIMB - 1)
    negative = ints < 0
    some_negative = bool(negative.any())
    magnitude = np.abs(ints) if some_negative else ints
    low_part = (magnitude & MASK) << offset  # below 2**63
    middle = (low_part >> LIMB) + ((magnitude >> LIMB) << offset)  # below 2**53
    amounts = [low_part & MASK, middle & MASK, middle >> LIMB]
    if some_negative:
        amounts = [np.where(negative, -a, a) for a in amounts]
    return limb, amounts


def add_both(first: ExactSums, at_first, second: ExactSums, at_second, values) -> None:
    """The same floats added to two ExactSums (by end and by start place): split into
    limb amounts once when both have the same units (as they do, fed the same floats)."""
    some = values != 0
    if not some.all():
        at_first, at_second, values = at_first[some], at_second[some], values[some]
    if not len(values):
        return
    ints, exps = _mantissas(values)
    low, high = int(exps.min()), int(exps.max())
    first._fit(low, high)
    second._fit(low, high)
    if first.low != second.low:
        first._add(at_first, ints, exps - first.low)
        second._add(at_second, ints, exps - second.low)
        return
    if max(first.adds, second.adds) + len(ints) >= min(first.MOST_ADDS, second.MOST_ADDS):
        first._carry()
        second._carry()
    limb, amounts = _limb_amounts(ints, exps - first.low)
    for sums, place in ((first, at_first), (second, at_second)):
        flat = sums.limbs.reshape(-1)  # a view: the adds land in the limbs
        where = place * sums.limbs.shape[1] + limb
        for j, amount in enumerate(amounts):
            np.add.at(flat, where + j, amount)
        sums.adds += len(ints)


def _normalize(limbs: np.ndarray) -> np.ndarray:
    """The same integers (rows of limbs, least significant first) with every limb but the
    top one in [0, 2**32): the top one carries the sign. In place; returned."""
    for k in range(limbs.shape[1] - 1):
        carry = limbs[:, k] >> LIMB
        limbs[:, k] -= carry << LIMB
        limbs[:, k + 1] += carry
    return limbs


def _round_limbs(limbs: np.ndarray, low: int) -> np.ndarray:
    """Each row of limbs (units 2**low, signed amounts below 2**62) as the float nearest to
    its integer (ties to even): correctly rounded, as int / int is."""
    limbs = _normalize(np.concatenate([limbs, np.zeros((len(limbs), 1), np.int64)], axis=1))
    negative = limbs[:, -1] < 0
    if negative.any():  # magnitudes: negated, normalized again (the top limb >= 0 then)
        limbs[negative] = _normalize(-limbs[negative])
    out = np.zeros(len(limbs))
    nonzero = (limbs != 0).any(axis=1)
    if not nonzero.any():
        return out
    rows = np.flatnonzero(nonzero)
    m = limbs[rows]
    width = m.shape[1]
    top = width - 1 - np.argmax(m[:, ::-1] != 0, axis=1)  # the highest limb in use
    index = np.arange(len(rows))

    def limb_at(k):
        return np.where(k >= 0, m[index, np.maximum(k, 0)], 0)

    l2, l1, l0 = limb_at(top), limb_at(top - 1), limb_at(top - 2)
    below = np.cumsum(m != 0, axis=1)  # nonzero limbs up to each one
    sticky = np.where(top >= 3, below[index, np.maximum(top - 3, 0)] > 0, False)
    bits = np.frexp(l2.astype(np.float64))[1].astype(np.int64)  # 1..32: l2's bit length
    # The 55 leading bits of l2 l1 l0 (53, a guard bit and a round bit); what is left
    # below them only decides a tie (sticky).
    up_shift = np.clip(23 - bits, 0, None)
    down_shift = np.clip(bits - 23, 0, None)
    lead = (l2 << (55 - bits)) | np.where(bits <= 23, l1 << up_shift, l1 >> down_shift)
    lead |= l0 >> (bits + 9)
    sticky |= (l1 & ((np.int64(1) << down_shift) - 1)) != 0
    sticky |= (l0 & ((np.int64(1) << (bits + 9)) - 1)) != 0
    sticky |= (lead & 1) != 0
    mantissa = lead >> 2
    guard = (lead >> 1) & 1
    mantissa += guard & (sticky | (mantissa & 1))
    exponent = bits + 11 + LIMB * (top - 2) + low
    with np.errstate(over="ignore"):  # beyond floats: infinite
        values = np.ldexp(mantissa.astype(np.float64), exponent.astype(np.int32))
    tiny = exponent + 53 < -1021  # subnormal: ldexp would round a second time
    for i in np.flatnonzero(tiny):
        total = sum(int(v) << (LIMB * k) for k, v in enumerate(m[i].tolist()))
        values[i] = _to_float(total, low)
    out[rows] = np.where(negative[rows], -values, values)
    return out


class ExactSums:
    """Exact sums of finite floats at n places. Every finite float is an integer times a
    power of two, so a sum is an integer in units of 2**low: here in 32-bit limbs of an
    int64 array (place x limb), each float's 53-bit mantissa added with numpy as three
    amounts below 2**32 to three limbs, the carries moved up from time to time. `terms`
    gives each sum back as a few floats whose exact total it is (the first is the sum
    rounded), for `combine`, which adds floats exactly.

    >>> sums = ExactSums(2)
    >>> sums.add_at(np.array([0, 0, 0, 1]), np.array([1e16, 1.0, -1e16, 0.1]))
    >>> sums.terms(sums.places())
    (array([0, 1]), array([1. , 0.1]))
    >>> sums.add_at(np.array([1, 1]), np.array([2.0**-60, -0.1]))
    >>> sums.terms(np.array([1]))[1].tolist() == [2.0**-60]  # 0.1 - 0.1, exactly
    True
    """

    LIMB = LIMB
    MOST_ADDS = 1 << 30  # amounts added since the last carry: 2**30 x 2**32 < 2**63

    def __init__(self, n: int):
        self.limbs = np.zeros((n, 0), dtype=np.int64)
        self.low: int | None = None  # a multiple of LIMB
        self.adds = 0  # amounts added to any one place since the last carry, at most

    def add_at(self, place: np.ndarray, values: np.ndarray) -> None:
        some = values != 0
        if not some.all():
            place, values = place[some], values[some]
        if not len(values):
            return
        ints, exps = _mantissas(values)
        self._fit(int(exps.min()), int(exps.max()))
        self._add(place, ints, exps - self.low)

    def _add(self, place, ints, shift) -> None:
        if self.adds + len(ints) >= self.MOST_ADDS:
            self._carry()
        limb, amounts = _limb_amounts(ints, shift)
        flat = self.limbs.reshape(-1)  # a view: the adds land in the limbs
        where = place * self.limbs.shape[1] + limb
        for j, amount in enumerate(amounts):
            np.add.at(flat, where + j, amount)
        self.adds += len(ints)

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

    def _carry(self) -> None:
        """Each limb below 2**32, its excess carried to the next one up (the top limb
        kept below 2**40 in magnitude, a limb added when it is not)."""
        _normalize(self.limbs)
        self.adds = 0
        if len(self.limbs) and np.abs(self.limbs[:, -1]).max() >= 1 << 40:
            self.limbs = np.hstack([self.limbs, np.zeros((len(self.limbs), 1), np.int64)])
            _normalize(self.limbs)

    def places(self) -> np.ndarray:
        """The places with a sum."""
        if not self.limbs.shape[1]:
            return np.zeros(0, dtype=np.int64)
        self._carry()
        return np.flatnonzero((self.limbs != 0).any(axis=1))

    def terms(self, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(places, floats): for each place of `at` with a sum, the floats that add up to
        it exactly (the first is the sum rounded; more follow where it lost bits), the
        places in the order of `at`."""
        at = np.asarray(at, dtype=np.int64)
        if not self.limbs.shape[1] or not len(at):
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        self._carry()
        if len(at) > TERMS_CHUNK:  # a chunk of places at a time: bounded copies
            parts = [self.terms(at[i : i + TERMS_CHUNK]) for i in range(0, len(at), TERMS_CHUNK)]
            return np.concatenate([p for p, _ in parts]), np.concatenate([t for _, t in parts])
        low = self.low or 0
        rest = np.hstack([self.limbs[at], np.zeros((len(at), 2), np.int64)])  # room
        order = np.arange(len(at))
        places, terms, rounds = [], [], []
        for turn in itertools.count():
            live = (rest != 0).any(axis=1)
            if not live.any():
                break
            rest, order = rest[live], order[live]
            rounded = _round_limbs(rest.copy(), low)
            places.append(order)
            terms.append(rounded)
            rounds.append(np.full(len(order), turn))
            finite = np.isfinite(rounded)  # beyond floats: the sum is infinite
            rest, order, rounded = rest[finite], order[finite], rounded[finite]
            ints, exps = _mantissas(rounded)
            shift = exps - low
            # a rounded sum has no bit below 2**low (where it lost none, it is the sum)
            ints = np.where(shift < 0, ints >> np.clip(-shift, 0, 63), ints)
            limb, amounts = _limb_amounts(-ints, np.maximum(shift, 0))
            rows = np.arange(len(rest))
            for j, amount in enumerate(amounts):
                rest[rows, limb + j] += amount
            _normalize(rest)
        if not places:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        position = np.concatenate(places)
        turn = np.concatenate(rounds)
        order = np.lexsort((turn, position))
        return at[position[order]], np.concatenate(terms)[order]


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
    """min/max over the contributions alive at each trigger: end <= t < start + w.

    Each contribution is alive at a run of consecutive triggers of its group (in time
    order): a range of them, whose minimum it lowers. Each range is covered by two
    blocks of a power-of-two length (a sparse table, one row per length), the blocks
    pushed down to single triggers at the end: O(contributions + triggers x log)."""
    sign = 1.0 if func == "min" else -1.0
    result = np.full(len(trig.ts), None, dtype=object)
    signed = sign * values.astype(np.float64)
    alive = np.flatnonzero(np.isfinite(signed))
    n = len(trig.ts)
    if not len(alive) or not n:
        return result
    order = np.lexsort((trig.ts, trig.group))  # triggers by (group, time)
    group, ts = trig.group[order].astype(np.int64), trig.ts[order].astype(np.int64)
    cg = np.asarray(cgroup, dtype=np.int64)[alive]
    lo_t, hi_t = end[alive].astype(np.int64), start[alive].astype(np.int64) + w
    times = np.unique(np.concatenate([ts, lo_t, hi_t]))
    span = len(times) + 1

    def key(g, t):
        return g * span + np.searchsorted(times, t)

    keys = key(group, ts)
    lo = np.searchsorted(keys, key(cg, lo_t), side="left")
    hi = np.searchsorted(keys, key(cg, hi_t), side="left")
    some = hi > lo
    lo, hi, v = lo[some], hi[some], signed[alive][some]
    if not len(v):
        return result
    level = np.frexp((hi - lo).astype(np.float64))[1].astype(np.int64) - 1  # 2**level <= len
    levels = int(level.max()) + 1
    table = np.full(levels * n, np.inf)
    np.minimum.at(table, level * n + lo, v)
    np.minimum.at(table, level * n + hi - (np.int64(1) << level), v)
    table = table.reshape(levels, n)
    for k in range(levels - 1, 0, -1):  # a block of 2**k: its two halves
        half = 1 << (k - 1)
        np.minimum(table[k - 1], table[k], out=table[k - 1])
        np.minimum(table[k - 1][half:], table[k][: n - half], out=table[k - 1][half:])
    best = table[0]
    found = np.isfinite(best)
    result[order[found]] = (sign * best[found]).tolist()
    return result
