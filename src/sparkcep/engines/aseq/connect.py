"""From forest nodes to a query's contributions: one piece directly, several pieces
connected by snapshots (Lemma 7, multi-connect)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sparkcep.engines.arrays import ranges
from sparkcep.engines.aseq.combine import (
    Channel,
    Contributions,
    Moments,
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
    """The contributions of one query: its first piece, connected to the next ones."""
    stats = counters.stats
    window = window_of(qp.plan)
    chain = None
    for index in range(len(qp.pieces)):
        piece = _piece_chain(counters, qp, index)
        chain = piece if chain is None else _connect(chain, piece, stats, window)
        # Matches of this query must fit its own window (roots run to the longest one).
        keep = stats.ts[chain.group] - stats.ts[chain.tag] < window
        chain = chain.take(np.flatnonzero(keep))
    assert chain is not None
    return Contributions(
        stats.segment[chain.tag],
        stats.ts[chain.tag],
        stats.ts[chain.group],
        chain.count,
        chain.moments,
    )


def _piece_chain(counters: PrefixCounters, qp: QueryPlan, index: int) -> Chain:
    """The matches of the query's piece `index`, with the channels counted in it."""
    piece = qp.pieces[index]
    out = counters.outputs[piece.nodes[-1]]
    start_groups = counters.rows[piece.nodes[0]].group[out.row]
    moments = {
        ch: out.moments[source.values]
        for ch, source in qp.channel_source.items()
        if source.piece == index
    }
    return Chain(start_groups, out.group, out.count, moments)


def piece_contributions(counters: PrefixCounters, qp: QueryPlan) -> Contributions:
    """Contributions of a one-piece query, carried START rows included."""
    (piece,) = qp.pieces
    rows = counters.rows[piece.nodes[0]]
    out = counters.outputs[piece.nodes[-1]]
    start = rows.start_ts[out.row]
    end = counters.stats.ts[out.group]
    keep = np.flatnonzero(end - start < window_of(qp.plan))
    moments = {
        ch: out.moments[source.values].take(keep) for ch, source in qp.channel_source.items()
    }
    return Contributions(
        rows.segment[out.row][keep], start[keep], end[keep], out.count[keep], moments
    )


CONNECT_CHUNK = 4_000_000  # joined rows per step of _connect: bounds its memory


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
    times = np.unique(stats.ts)
    base = len(times) + 1
    # (segment, time rank) as one sortable number; groups are in that order already.
    rank = stats.segment.astype(np.int64) * base + np.searchsorted(times, stats.ts)
    floor = np.clip(stats.ts[groups] - window, np.iinfo(np.int64).min // 2, None)
    wanted = stats.segment[groups].astype(np.int64) * base + np.searchsorted(
        times, floor, side="right"
    )
    return np.searchsorted(rank, wanted, side="left")


def snapshot_counts(counters: PrefixCounters, qp: QueryPlan, pieces: int) -> Chain:
    """The connected counts of a query's first `pieces` pieces (Example 9's snapshots)."""
    window = window_of(qp.plan)
    chain = None
    for piece in qp.pieces[:pieces]:
        out = counters.outputs[piece.nodes[-1]]
        part = Chain(counters.rows[piece.nodes[0]].group[out.row], out.group, out.count)
        chain = part if chain is None else _connect(chain, part, counters.stats, window)
    return chain
