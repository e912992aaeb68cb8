"""From forest nodes to a query's contributions: one piece directly, several pieces
connected by snapshots (Lemma 7, multi-connect)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparkcep.engines.arrays import ranges
from sparkcep.engines.aseq.combine import NO_WINDOW, Contributions
from sparkcep.engines.aseq.counters import GroupStats, PrefixCounters
from sparkcep.engines.aseq.forest import QueryPlan


@dataclass
class Chain:
    """Matches of a query's first pieces, bundled per (head START row, end group)."""

    tag: np.ndarray  # head start group
    group: np.ndarray  # end group
    count: np.ndarray
    sums: dict[str, np.ndarray]
    nonnull: dict[str, np.ndarray]
    mins: dict[str, np.ndarray]
    maxs: dict[str, np.ndarray]


def query_contributions(counters: PrefixCounters, qp: QueryPlan) -> Contributions:
    """The contributions of one query: its first piece, connected to the next ones."""
    st = counters.stats
    plan = qp.plan
    window = plan.window if plan.window is not None else NO_WINDOW
    chain = None
    for index, piece in enumerate(qp.pieces):
        root = piece.nodes[0]
        out = counters.outputs[piece.nodes[-1]]
        start_groups = counters.rows[root][out.row]
        local = {}
        for ch, (pi, node, bit) in qp.channel_source.items():
            if pi != index:
                continue
            key = (node, bit, ch.split(".", 1)[1])
            local[ch] = (out.sums[key], out.nonnull[key], out.mins[key], out.maxs[key])
        piece_chain = Chain(start_groups, out.group, out.count,
                            {c: v[0] for c, v in local.items()}, {c: v[1] for c, v in local.items()},
                            {c: v[2] for c, v in local.items()}, {c: v[3] for c, v in local.items()})  # fmt: skip
        chain = piece_chain if chain is None else _connect(chain, piece_chain, st, window)
        # Matches of this query must fit its own window (roots run to the longest one).
        keep = st.ts[chain.group] - st.ts[chain.tag] < window
        chain = _take(chain, np.flatnonzero(keep))
    assert chain is not None
    return Contributions(
        st.segment[chain.tag], st.ts[chain.tag], st.ts[chain.group], chain.count,
        chain.sums, chain.nonnull, chain.mins, chain.maxs,
    )  # fmt: skip


def piece_contributions(counters: PrefixCounters, qp: QueryPlan) -> Contributions:
    """Contributions of a one-piece query, carried START rows included."""
    (piece,) = qp.pieces
    root = piece.nodes[0]
    out = counters.outputs[piece.nodes[-1]]
    window = qp.plan.window if qp.plan.window is not None else NO_WINDOW
    start = counters.row_start_ts[root][out.row]
    end = counters.stats.ts[out.group]
    keep = np.flatnonzero(end - start < window)
    sums, nonnull, mins, maxs = {}, {}, {}, {}
    for ch, (_, node, bit) in qp.channel_source.items():
        key = (node, bit, ch.split(".", 1)[1])
        sums[ch], nonnull[ch] = out.sums[key][keep], out.nonnull[key][keep]
        mins[ch], maxs[ch] = out.mins[key][keep], out.maxs[key][keep]
    return Contributions(
        counters.row_segment[root][out.row][keep], start[keep], end[keep], out.count[keep],
        sums, nonnull, mins, maxs,
    )  # fmt: skip


def _take(c: Chain, idx: np.ndarray) -> Chain:
    def sub(d):
        return {k: v[idx] for k, v in d.items()}

    return Chain(
        c.tag[idx],
        c.group[idx],
        c.count[idx],
        sub(c.sums),
        sub(c.nonnull),
        sub(c.mins),
        sub(c.maxs),
    )


CONNECT_CHUNK = 4_000_000  # joined rows per step of _connect: bounds its memory


def _connect(head: Chain, tail: Chain, st: GroupStats, window: int) -> Chain:
    """Lemma 7 with snapshots: head matches that end before a tail START, per head tag,
    times the tail matches from that START (multi-connect: head may itself be a chain).

    Done for a few tail STARTs at a time, so the rows joined at once stay within
    CONNECT_CHUNK, and bundles of equal (head tag, end group) are merged as they come.
    """
    h = _take(head, np.argsort(head.group, kind="stable"))  # group ids: (segment, time) order
    t = _take(tail, np.argsort(tail.tag, kind="stable"))
    tail_starts, t_lo, t_count = np.unique(t.tag, return_index=True, return_counts=True)
    # Head bundles that can precede START d: ending in (ts[d] - window, d) in d's segment.
    lo = np.searchsorted(h.group, _window_floor(st, tail_starts, window), side="left")
    hi = np.maximum(np.searchsorted(h.group, tail_starts, side="left"), lo)
    work = np.cumsum((hi - lo) * t_count)
    parts, done, first = [], 0, 0
    while first < len(tail_starts) or not parts:
        last = max(int(np.searchsorted(work, done + CONNECT_CHUNK, side="right")), first + 1)
        sl = slice(first, last)
        parts.append(_connect_starts(h, t, st, window, tail_starts[sl], lo[sl], hi[sl],
                                     t_lo[sl], t_count[sl]))  # fmt: skip
        done, first = (int(work[last - 1]) if len(work) else 0), last
    return parts[0] if len(parts) == 1 else _merge(_concat_chains(parts), len(st.ts))


def _connect_starts(h, t, st, window, starts, lo, hi, t_lo, t_count) -> Chain:
    # 1. Snapshot pairs: for each tail START d, the head bundles (tag a, end e) before it
    #    with a within the window of d; summed per (a, d): the head's counts at d.
    d_idx, h_idx = ranges(lo, hi)
    d_groups = starts[d_idx]
    ok = st.ts[d_groups] - st.ts[h.tag[h_idx]] < window
    d_idx, h_idx = d_idx[ok], h_idx[ok]
    n = len(st.ts) + 1
    uniq, inverse = np.unique(h.tag[h_idx] * n + d_idx, return_inverse=True)
    inverse = inverse.ravel()
    npairs = len(uniq)
    snap_cnt = _sum_by(inverse, h.count[h_idx], npairs)
    snap = {
        ch: (_sum_by(inverse, h.sums[ch][h_idx], npairs), _sum_by(inverse, h.nonnull[ch][h_idx], npairs),
             _min_by(inverse, h.mins[ch][h_idx], npairs), _max_by(inverse, h.maxs[ch][h_idx], npairs))
        for ch in h.sums
    }  # fmt: skip
    pair_tag, pair_d = uniq // n, uniq % n
    # 2. Join each pair with the tail bundles of its START d.
    p_idx, t_idx = ranges(t_lo[pair_d], t_lo[pair_d] + t_count[pair_d])
    ok = st.ts[t.group[t_idx]] - st.ts[pair_tag[p_idx]] < window
    p_idx, t_idx = p_idx[ok], t_idx[ok]
    count = snap_cnt[p_idx] * t.count[t_idx]
    sums, nonnull, mins, maxs = {}, {}, {}, {}
    for ch, (s, nn, mn, mx) in snap.items():  # aggregated variable in the head
        sums[ch] = s[p_idx] * t.count[t_idx]
        nonnull[ch] = nn[p_idx] * t.count[t_idx]
        mins[ch] = np.where(t.count[t_idx] != 0, mn[p_idx], np.inf)
        maxs[ch] = np.where(t.count[t_idx] != 0, mx[p_idx], -np.inf)
    for ch in t.sums:  # aggregated variable in the tail
        sums[ch] = snap_cnt[p_idx] * t.sums[ch][t_idx]
        nonnull[ch] = snap_cnt[p_idx] * t.nonnull[ch][t_idx]
        mins[ch] = np.where(snap_cnt[p_idx] != 0, t.mins[ch][t_idx], np.inf)
        maxs[ch] = np.where(snap_cnt[p_idx] != 0, t.maxs[ch][t_idx], -np.inf)
    keep = np.flatnonzero(count != 0)
    chain = Chain(pair_tag[p_idx], t.group[t_idx], count, sums, nonnull, mins, maxs)
    return _merge(_take(chain, keep), len(st.ts))


def _window_floor(st: GroupStats, groups: np.ndarray, window: int) -> np.ndarray:
    """Per group g: the first group of g's segment whose time is > ts[g] - window."""
    times = np.unique(st.ts)
    base = len(times) + 1
    # (segment, time rank) as one sortable number; groups are in that order already.
    rank = st.segment.astype(np.int64) * base + np.searchsorted(times, st.ts)
    floor = np.clip(st.ts[groups] - window, np.iinfo(np.int64).min // 2, None)
    wanted = st.segment[groups].astype(np.int64) * base + np.searchsorted(
        times, floor, side="right"
    )
    return np.searchsorted(rank, wanted, side="left")


def _concat_chains(parts: list[Chain]) -> Chain:
    def cat(get):
        return np.concatenate([get(p) for p in parts])

    def cat_dict(get):
        return {k: cat(lambda p, k=k: get(p)[k]) for k in get(parts[0])}

    return Chain(
        cat(lambda p: p.tag), cat(lambda p: p.group), cat(lambda p: p.count),
        cat_dict(lambda p: p.sums), cat_dict(lambda p: p.nonnull),
        cat_dict(lambda p: p.mins), cat_dict(lambda p: p.maxs),
    )  # fmt: skip


def _merge(c: Chain, ngroups: int) -> Chain:
    """One bundle per (tag, end group): counts and sums added, min of mins, max of maxs."""
    n = ngroups + 1
    uniq, inverse = np.unique(c.tag * n + c.group, return_inverse=True)
    if len(uniq) == len(c.tag):
        return c
    inverse = inverse.ravel()
    k = len(uniq)
    return Chain(
        uniq // n, uniq % n, _sum_by(inverse, c.count, k),
        {ch: _sum_by(inverse, v, k) for ch, v in c.sums.items()},
        {ch: _sum_by(inverse, v, k) for ch, v in c.nonnull.items()},
        {ch: _min_by(inverse, v, k) for ch, v in c.mins.items()},
        {ch: _max_by(inverse, v, k) for ch, v in c.maxs.items()},
    )  # fmt: skip


def _sum_by(inverse: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    if values.dtype == object:
        out = np.zeros(n, dtype=object)
        for i, v in zip(inverse, values):
            out[i] += v
        return out
    out = np.zeros(n, dtype=values.dtype)
    np.add.at(out, inverse, values)
    return out


def _min_by(inverse, values, n):
    out = np.full(n, np.inf)
    np.minimum.at(out, inverse, values.astype(np.float64))
    return out


def _max_by(inverse, values, n):
    out = np.full(n, -np.inf)
    np.maximum.at(out, inverse, values.astype(np.float64))
    return out


def snapshot_counts(counters: PrefixCounters, qp: QueryPlan, pieces: int) -> Chain:
    """The connected counts of a query's first `pieces` pieces (Example 9's snapshots)."""
    st = counters.stats
    window = qp.plan.window if qp.plan.window is not None else NO_WINDOW
    chain = None
    for piece in qp.pieces[:pieces]:
        out = counters.outputs[piece.nodes[-1]]
        part = Chain(counters.rows[piece.nodes[0]][out.row], out.group, out.count, {}, {}, {}, {})
        chain = part if chain is None else _connect(chain, part, st, window)
    return chain
