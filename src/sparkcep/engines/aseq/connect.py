"""From forest nodes to a query's contributions: one piece directly, several pieces
connected by snapshots (Lemma 7, multi-connect)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sparkcep.engines.arrays import ranges
from sparkcep.engines.aseq.combine import (
    NEVER,
    Channel,
    Contributions,
    Moments,
    _cumsum0,
    concat_arrays,
    sum_by,
    window_of,
)
from sparkcep.engines.aseq.counters import GroupStats, PrefixCounters
from sparkcep.engines.aseq.forest import QueryPlan


@dataclass
class Chain:
    """Matches of a query's first pieces, bundled per (head START row, end group)."""

    tag: np.ndarray  # head start group
    group: np.ndarray  # end group
    count: np.ndarray
    moments: dict[Channel, Moments] = field(default_factory=dict)

    def take(self, index: np.ndarray) -> Chain:
        moments = {ch: m.take(index) for ch, m in self.moments.items()}
        return Chain(self.tag[index], self.group[index], self.count[index], moments)

    @staticmethod
    def concat(parts: list[Chain]) -> Chain:
        return Chain(
            concat_arrays([p.tag for p in parts]),
            concat_arrays([p.group for p in parts]),
            concat_arrays([p.count for p in parts]),
            {ch: Moments.concat([p.moments[ch] for p in parts]) for ch in parts[0].moments},
        )

    def merged(self, ngroups: int) -> Chain:
        """One bundle per (tag, end group): counts and sums added, min of mins, max of maxs."""
        n = ngroups + 1
        uniq, inverse = np.unique(self.tag * n + self.group, return_inverse=True)
        if len(uniq) == len(self.tag):
            return self
        inverse = inverse.ravel()
        k = len(uniq)
        moments = {ch: m.bundled(inverse, k) for ch, m in self.moments.items()}
        return Chain(uniq // n, uniq % n, sum_by(inverse, self.count, k), moments)


def query_contributions(counters: PrefixCounters, qp: QueryPlan) -> Contributions:
    """The contributions of one query: its first piece, connected to the next ones.

    The last connect gives one-sided bundles (`connect_ends`) when the query's aggregates
    need no more; the connects before it, and all of them for MIN or MAX, give a bundle
    per (head START, end group) (`_connect`)."""
    stats = counters.stats
    window = window_of(qp.plan)
    last = len(qp.pieces) - 1 if ends_suffice(counters, qp) else len(qp.pieces)
    chain = None
    for index in range(last):
        piece = _piece_chain(counters, qp, index)
        chain = piece if chain is None else _connect(chain, piece, stats, window)
    assert chain is not None
    if last < len(qp.pieces):
        return connect_ends(chain, _piece_chain(counters, qp, last), stats, window)
    return Contributions(
        stats.segment[chain.tag],
        stats.ts[chain.tag],
        stats.ts[chain.group],
        chain.count,
        chain.moments,
    )


def ends_suffice(counters: PrefixCounters, qp: QueryPlan) -> bool:
    """Can the query's last connect give one-sided bundles? Yes for a chopped query whose
    aggregates are COUNT, and SUM or AVG of integers: MIN and MAX need each bundle's start
    and end, and float sums added across START events would let values from outside a
    window leak into it through rounding (docs/aggregation.md)."""
    if len(qp.pieces) < 2 or any(i.func in ("min", "max") for i in qp.plan.aggregate.items):
        return False
    values = counters.stats.values
    return all(
        values[(s.values.bit, s.values.attr)].sums.dtype.kind in "iu"
        for s in qp.channel_source.values()
    )


def _piece_chain(counters: PrefixCounters, qp: QueryPlan, index: int) -> Chain:
    """The matches of the query's piece `index` that fit the query's window, with the
    channels counted in it.

    A shared root runs to the longest window of the queries through it, so a piece can
    hold matches longer than this query's window: every snapshot row of their START has
    expired by their end (Example 8's expiration check). They are dropped here, before
    any connect: the connects rely on each tail bundle (d, e) having d in e's window."""
    piece = qp.pieces[index]
    end = piece.nodes[-1]
    out = counters.outputs[end] if index == 0 else counters.output_by_start(end)
    start_groups = counters.rows[piece.nodes[0]].group[out.row]
    moments = {
        ch: out.moments[source.values]
        for ch, source in qp.channel_source.items()
        if source.piece == index
    }
    chain = Chain(start_groups, out.group, out.count, moments)
    ts = counters.stats.ts
    fits = ts[chain.group] - ts[chain.tag] < window_of(qp.plan)
    return chain if fits.all() else chain.take(np.flatnonzero(fits))


def piece_contributions(counters: PrefixCounters, qp: QueryPlan, index: int) -> Contributions:
    """Contributions of a one-piece query (the `index`-th of the forest), carried START
    rows included: its totals by end and by start, and its pairs."""
    (piece,) = qp.pieces
    channels = {ch: source.values for ch, source in qp.channel_source.items()}
    rows = counters.rows[piece.nodes[0]]
    return counters.totals[index].contributions(rows, counters.stats, channels)


CONNECT_CHUNK = 1_000_000  # joined rows per step of _connect: bounds its memory


@dataclass
class TailStarts:
    """The distinct START groups of a tail chain, each with the head bundles that can
    precede it (head[head_lo:head_hi]) and its own bundles (tail_lo, tail_count of them)."""

    group: np.ndarray
    head_lo: np.ndarray
    head_hi: np.ndarray
    tail_lo: np.ndarray
    tail_count: np.ndarray

    def __getitem__(self, index: slice) -> TailStarts:
        return TailStarts(
            self.group[index],
            self.head_lo[index],
            self.head_hi[index],
            self.tail_lo[index],
            self.tail_count[index],
        )


def _connect(head: Chain, tail: Chain, stats: GroupStats, window: int) -> Chain:
    """Lemma 7 with snapshots: head matches that end before a tail START, per head tag,
    times the tail matches from that START (multi-connect: head may itself be a chain).

    Done for a few tail STARTs at a time, so the rows joined at once stay within
    CONNECT_CHUNK, and bundles of equal (head tag, end group) are merged as they come.
    """
    head = head.take(np.argsort(head.group, kind="stable"))  # group ids: (segment, time) order
    tail = tail.take(np.argsort(tail.tag, kind="stable"))
    groups, tail_lo, tail_count = np.unique(tail.tag, return_index=True, return_counts=True)
    # Head bundles that can precede START d: ending in (ts[d] - window, d) in d's segment.
    lo = np.searchsorted(head.group, _window_floor(stats, groups, window), side="left")
    hi = np.maximum(np.searchsorted(head.group, groups, side="left"), lo)
    starts = TailStarts(groups, lo, hi, tail_lo, tail_count)
    work = np.cumsum((hi - lo) * tail_count)
    parts, done, first = [], 0, 0
    while first < len(groups) or not parts:
        last = max(int(np.searchsorted(work, done + CONNECT_CHUNK, side="right")), first + 1)
        parts.append(_connect_starts(head, tail, stats, window, starts[first:last]))
        done, first = (int(work[last - 1]) if len(work) else 0), last
    return parts[0] if len(parts) == 1 else Chain.concat(parts).merged(len(stats.ts))


def _connect_starts(
    head: Chain, tail: Chain, stats: GroupStats, window: int, starts: TailStarts
) -> Chain:
    ts = stats.ts
    # 1. Snapshot pairs: for each tail START d, the head bundles (tag a, end e) before it
    #    with a within the window of d; summed per (a, d): the head's counts at d.
    d_idx, h_idx = ranges(starts.head_lo, starts.head_hi)
    ok = ts[starts.group[d_idx]] - ts[head.tag[h_idx]] < window
    d_idx, h_idx = d_idx[ok], h_idx[ok]
    n = len(ts) + 1
    uniq, inverse = np.unique(head.tag[h_idx] * n + d_idx, return_inverse=True)
    inverse = inverse.ravel()
    npairs = len(uniq)
    snap_count = sum_by(inverse, head.count[h_idx], npairs)
    snap_moments = {ch: m.take(h_idx).bundled(inverse, npairs) for ch, m in head.moments.items()}
    pair_tag, pair_d = uniq // n, uniq % n
    # 2. Join each pair with the tail bundles of its START d.
    lo = starts.tail_lo[pair_d]
    p_idx, t_idx = ranges(lo, lo + starts.tail_count[pair_d])
    ok = ts[tail.group[t_idx]] - ts[pair_tag[p_idx]] < window
    p_idx, t_idx = p_idx[ok], t_idx[ok]
    count = snap_count[p_idx] * tail.count[t_idx]
    moments = {}
    if snap_moments:  # aggregated variables in the head: times the tail's matches
        tail_count = tail.count[t_idx]
        for ch, m in snap_moments.items():
            moments[ch] = m.take(p_idx).scaled(tail_count)
    if tail.moments:  # aggregated variables in the tail: times the head's matches
        head_count = snap_count[p_idx]
        for ch, m in tail.moments.items():
            moments[ch] = m.take(t_idx).scaled(head_count)
    chain = Chain(pair_tag[p_idx], tail.group[t_idx], count, moments)
    return chain.take(np.flatnonzero(count != 0)).merged(len(ts))


def _window_floor(stats: GroupStats, groups: np.ndarray, window: int) -> np.ndarray:
    """Per group g: the first group of g's segment whose time is > ts[g] - window."""
    return stats.window_bounds(window)[0][groups]


def snapshot_counts(counters: PrefixCounters, qp: QueryPlan, pieces: int) -> Chain:
    """The connected counts of a query's first `pieces` pieces (Example 9's snapshots)."""
    window = window_of(qp.plan)
    chain = None
    for piece in qp.pieces[:pieces]:
        out = counters.outputs[piece.nodes[-1]]
        part = Chain(counters.rows[piece.nodes[0]].group[out.row], out.group, out.count)
        chain = part if chain is None else _connect(chain, part, counters.stats, window)
    return chain


# ---- the last connect, one-sided (COUNT, SUM and AVG need no more) ----------------------


@dataclass
class Totals:
    """Counts of matches and, per channel, the sums and non-null counts of their values."""

    count: np.ndarray
    sums: dict[Channel, np.ndarray]
    nonnull: dict[Channel, np.ndarray]

    def times(self, other: Totals) -> Totals:
        """Each match of `self` followed by each of `other` (their channels are apart)."""
        sums = {ch: _times(v, other.count) for ch, v in self.sums.items()}
        nonnull = {ch: _times(v, other.count) for ch, v in self.nonnull.items()}
        for ch in other.sums:
            sums[ch] = _times(other.sums[ch], self.count)
            nonnull[ch] = _times(other.nonnull[ch], self.count)
        return Totals(_times(self.count, other.count), sums, nonnull)

    @staticmethod
    def of(chain: Chain) -> Totals:
        moments = chain.moments
        return Totals(
            chain.count,
            {ch: m.sums for ch, m in moments.items()},
            {ch: m.nonnull for ch, m in moments.items()},
        )

    def take(self, index: np.ndarray) -> Totals:
        return Totals(
            self.count[index],
            {ch: v[index] for ch, v in self.sums.items()},
            {ch: v[index] for ch, v in self.nonnull.items()},
        )

    def bundled(self, by: np.ndarray, n: int) -> tuple[np.ndarray, Totals]:
        """(the distinct values of `by`, in 0..n-1, ascending; the totals of each)."""
        present = np.zeros(n, dtype=bool)
        present[by] = True
        uniq = np.flatnonzero(present)
        inverse = np.cumsum(present) - 1
        inverse, k = inverse[by], len(uniq)

        def total(values):
            return sum_by(inverse, _exact(values), k)

        return uniq, Totals(
            total(self.count),
            {ch: total(v) for ch, v in self.sums.items()},
            {ch: total(v) for ch, v in self.nonnull.items()},
        )

    @staticmethod
    def concat(parts: list[Totals]) -> Totals:
        first = parts[0]
        return Totals(
            concat_arrays([p.count for p in parts]),
            {ch: concat_arrays([p.sums[ch] for p in parts]) for ch in first.sums},
            {ch: concat_arrays([p.nonnull[ch] for p in parts]) for ch in first.nonnull},
        )


class Running:
    """Running totals of bundles sorted by `key`: the totals of any key range in O(log n)."""

    def __init__(self, key: np.ndarray, totals: Totals):
        self.key = key
        self.count = _cumsum0(totals.count)
        self.sums = {ch: _cumsum0(v) for ch, v in totals.sums.items()}
        self.nonnull = {ch: _cumsum0(v) for ch, v in totals.nonnull.items()}

    def between(self, lo_key: np.ndarray, hi_key: np.ndarray) -> Totals:
        """Per entry, the totals of the bundles with lo_key <= key < hi_key."""
        lo = np.searchsorted(self.key, lo_key, side="left")
        return self.span(lo, np.searchsorted(self.key, hi_key, side="left"))

    def span(self, lo: np.ndarray, hi: np.ndarray) -> Totals:
        """Per entry, the totals of the bundles at positions lo..hi-1."""
        hi = np.maximum(hi, lo)
        return Totals(
            self.count[hi] - self.count[lo],
            {ch: c[hi] - c[lo] for ch, c in self.sums.items()},
            {ch: c[hi] - c[lo] for ch, c in self.nonnull.items()},
        )


@dataclass
class Ends:
    """The sides of a connect: head bundles (key tag, end) and tail bundles (key START,
    end) as running totals, the tail bundles themselves and their ends; the head tags
    (where each one's bundles begin, and per group the first tag at or after it), and the
    tail STARTs with where their bundles lie in the tail (tail_lo, tail_count) and which
    tags can precede each (tags[lo:hi]); per group, the bounds of its window."""

    head: Running
    tail: Running
    tail_bundles: Totals
    tail_end: np.ndarray
    tags: np.ndarray
    tag_first: np.ndarray
    tag_rank: np.ndarray
    starts: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    tail_lo: np.ndarray
    tail_count: np.ndarray
    floor: np.ndarray
    ceiling: np.ndarray


def connect_ends(head: Chain, tail: Chain, stats: GroupStats, window: int) -> Contributions:
    """Lemma 7 without a join: the matches (a, ..., e) of head START a and tail end e are
    Σ over tail STARTs d of snap(a, d) × tail(d, e), snap(a, d) being the head's matches
    from a that end before d (the snapshot). COUNT, SUM and AVG need only their totals by
    end, E(e) (starts a inside e's window), and by start, S(a) (ends e inside a's window):

        E(e) = Σ_d tail(d, e) × Σ_{a in window of e} snap(a, d)
        S(a) = Σ_d snap(a, d) × Σ_{e in window of a} tail(d, e)

    each inner sum a difference of running totals. The work is the snapshot pairs (a, d)
    and the tail's bundles, not their product; a few tail STARTs at a time keep the pairs
    within CONNECT_CHUNK."""
    n = len(stats.ts) + 1
    head, head_key = _sorted(head, n)
    tail, tail_key = _sorted(tail, n)
    floor, ceiling = stats.window_bounds(window)
    tags, tag_first = np.unique(head.tag, return_index=True)
    starts, tail_lo, tail_count = np.unique(tail.tag, return_index=True, return_counts=True)
    lo = np.searchsorted(tags, floor[starts], side="left")
    hi = np.maximum(np.searchsorted(tags, starts, side="left"), lo)
    tails = Totals.of(tail)
    ends = Ends(
        Running(head_key, Totals.of(head)),
        Running(tail_key, tails),
        tails,
        tail.group,
        tags,
        tag_first,
        np.searchsorted(tags, np.arange(n), side="left"),
        starts,
        lo,
        hi,
        tail_lo,
        tail_count,
        floor,
        ceiling,
    )
    work = np.cumsum(hi - lo + tail_count)
    by_end, by_start, done, first = [], [], 0, 0
    while first < len(starts):
        last = max(int(np.searchsorted(work, done + CONNECT_CHUNK, side="right")), first + 1)
        end_part, start_part = _ends_of_starts(ends, n, slice(first, last))
        by_end.append(end_part)
        by_start.append(start_part)
        done, first = int(work[last - 1]), last
    return _one_sided(by_end, by_start, stats, list(head.moments) + list(tail.moments))


def _ends_of_starts(ends: Ends, n: int, chunk: slice):
    """The totals by end group and by head tag of the matches through the tail STARTs
    `chunk`: ((end groups, their totals), (tags, their totals))."""
    starts, lo, hi = ends.starts[chunk], ends.lo[chunk], ends.hi[chunk]
    # Snapshot pairs (a, d): the tags a before START d in its window, in (d, a) order;
    # snap(a, d) adds up the head bundles of a that end before d.
    d_idx, a_pos = ranges(lo, hi)
    a, d = ends.tags[a_pos], starts[d_idx]
    snap = ends.head.span(ends.tag_first[a_pos], np.searchsorted(ends.head.key, a * n + d))
    pairs = Running(None, snap)
    pair_lo = np.concatenate(([0], np.cumsum(hi - lo)))
    # E: each tail bundle (d, e) times the snapshots of d whose tag is inside e's window.
    tail_lo = ends.tail_lo[chunk]
    t_idx, t_pos = ranges(tail_lo, tail_lo + ends.tail_count[chunk])
    e = ends.tail_end[t_pos]
    # d is in e's window (_piece_chain), so e's floor is at most d: skip stays in d's pairs.
    skip = np.clip(ends.tag_rank[ends.floor[e]] - lo[t_idx], 0, None)
    inside = pairs.span(pair_lo[t_idx] + skip, pair_lo[t_idx + 1])
    by_end = inside.times(ends.tail_bundles.take(t_pos)).bundled(e, n)
    # S: each snapshot (a, d) times the tail bundles of d that end inside a's window.
    within_hi = np.searchsorted(ends.tail.key, d * n + ends.ceiling[a], side="left")
    within = ends.tail.span(tail_lo[d_idx], within_hi)
    by_start = snap.times(within).bundled(a, n)
    return by_end, by_start


def _one_sided(by_end, by_start, stats: GroupStats, channels: list[Channel]) -> Contributions:
    """Contributions from the totals by end group (start NEVER) and by tag (end NEVER)."""
    if not by_end:
        return Contributions.empty(channels)
    n = len(stats.ts) + 1
    e, at_end = _merge(by_end, n)
    a, at_start = _merge(by_start, n)
    totals = Totals.concat([at_end, at_start])
    never_e, never_a = np.full(len(e), NEVER), np.full(len(a), NEVER)
    start = np.concatenate([never_e, stats.ts[a]])  # E: counted from its end on
    end = np.concatenate([stats.ts[e], never_a])  # S: taken off when its start expires
    shape = len(start)
    moments = {
        ch: Moments(
            totals.sums[ch], totals.nonnull[ch], np.full(shape, np.inf), np.full(shape, -np.inf)
        )
        for ch in channels
    }
    segment = np.concatenate([stats.segment[e], stats.segment[a]])
    return Contributions(segment, start, end, totals.count, moments)


def _merge(parts: list[tuple[np.ndarray, Totals]], n: int) -> tuple[np.ndarray, Totals]:
    if len(parts) == 1:
        return parts[0]
    keys = concat_arrays([k for k, _ in parts])
    return Totals.concat([t for _, t in parts]).bundled(keys, n)


def _sorted(chain: Chain, n: int) -> tuple[Chain, np.ndarray]:
    """The chain's bundles in (tag, end group) order, and that order's key."""
    key = chain.tag * n + chain.group
    if len(key) > 1 and not (key[1:] >= key[:-1]).all():
        order = np.argsort(key, kind="stable")
        chain, key = chain.take(order), key[order]
    return chain, key


def _largest(values: np.ndarray) -> float:
    """The largest magnitude among integers (as a float: no overflow)."""
    if not len(values):
        return 0.0
    return max(abs(float(values.max())), abs(float(values.min())))


def _exact(values: np.ndarray) -> np.ndarray:
    """Integers as Python integers when their total could leave int64."""
    if values.dtype.kind not in "iu" or _largest(values) * len(values) < 2**62:
        return values
    if np.abs(values.astype(np.float64)).sum() >= 2**62:
        return values.astype(object)
    return values


def _times(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x * y entry by entry, as Python integers where int64 could overflow."""
    if x.dtype.kind in "iu" and y.dtype.kind in "iu" and _largest(x) * _largest(y) >= 2**62:
        return x.astype(object) * y.astype(object)
    return x * y
