"""A-Seq's prefix counters (aseq-online-aggregation.md §3, §5): per START event, the
number of matches of each prefix of the forest's patterns, and the sum, non-null count,
minimum and maximum of aggregated attributes over them, all STARTs moving together."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sparkcep.engines.aseq.forest import Forest, Node
from sparkcep.engines.state import state_class
from sparkcep.prep.table import EventTable


@dataclass
class GroupStats:
    """Per group of equal-time events: how many events bind each component, and the sum,
    non-null count, min and max of aggregated attributes over them."""

    start: np.ndarray  # first event position of each group
    ts: np.ndarray
    segment: np.ndarray
    segment_end: np.ndarray  # first group of the next segment
    count: dict[int, np.ndarray]  # bit -> events of the group with the bit
    values: dict[tuple[int, str], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


def group_stats(table: EventTable, bits: set[int], channels: set[tuple[int, str]]) -> GroupStats:
    n = len(table)
    change = np.ones(n, dtype=bool)
    if n:
        change[1:] = (table.order[1:] != table.order[:-1]) | (
            table.segment[1:] != table.segment[:-1]
        )
    starts = np.flatnonzero(change)
    gid = np.cumsum(change) - 1
    ngroups = len(starts)
    seg = table.segment[starts]
    seg_change = (
        np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]]) if ngroups else np.zeros(0, np.int64)
    )
    seg_end_of = np.r_[seg_change[1:], ngroups]
    seg_end = np.repeat(seg_end_of, np.diff(np.r_[seg_change, ngroups]))
    counts = {}
    for b in bits:
        has = (table.mask >> b) & 1
        counts[b] = np.bincount(gid, weights=has, minlength=ngroups).astype(np.int64)
    values = {}
    for b, attr in channels:
        col = table.columns[attr]
        has = ((table.mask >> b) & 1).astype(bool) & ~col.nulls()
        v = col.values
        idx = gid[has]
        vv = v[has]
        if vv.dtype.kind in "iu":
            sums = np.zeros(ngroups, dtype=np.int64)
            np.add.at(sums, idx, vv)
        else:
            sums = np.zeros(ngroups, dtype=np.float64)
            np.add.at(sums, idx, vv.astype(np.float64))
        nn = np.bincount(idx, minlength=ngroups).astype(np.int64)
        mins = np.full(ngroups, np.inf)
        maxs = np.full(ngroups, -np.inf)
        np.minimum.at(mins, idx, vv.astype(np.float64))
        np.maximum.at(maxs, idx, vv.astype(np.float64))
        values[(b, attr)] = (sums, nn, mins, maxs)
    return GroupStats(starts, table.ts[starts], seg, seg_end, counts, values)


@dataclass
class PieceOutput:
    """Contributions of one forest node, per start row: rows are (root, start group)."""

    row: np.ndarray  # start row (index into the root's rows)
    group: np.ndarray  # end group
    count: np.ndarray
    sums: dict = field(default_factory=dict)  # channel key -> array
    nonnull: dict = field(default_factory=dict)
    mins: dict = field(default_factory=dict)
    maxs: dict = field(default_factory=dict)


@state_class
@dataclass
class CarryRows:
    """Counters of one root's START rows between batches (incremental use): the key of
    their partition, their start time, and their counts and channel values."""

    key: np.ndarray  # object array of key tuples
    start_ts: np.ndarray
    cnt: np.ndarray  # rows x subtree nodes
    chans: dict  # channel -> (sums, non-nulls, mins, maxs), each rows x subtree nodes

    def __len__(self) -> int:
        return len(self.start_ts)

    def take(self, keep: np.ndarray) -> CarryRows:
        chans = {ch: tuple(a[keep] for a in arrays) for ch, arrays in self.chans.items()}
        return CarryRows(self.key[keep], self.start_ts[keep], self.cnt[keep], chans)

    def expire(self, now: int, window: int) -> CarryRows:
        """The rows whose START is still inside the window at time `now`."""
        return self.take(self.start_ts > now - window)


class PrefixCounters:
    """Runs the counters of every root of a forest over one EventTable.

    `carry` continues the counters of earlier batches (START rows by root), matched to
    this table's partitions by `segment_keys` (the key tuple of each segment).
    """

    def __init__(
        self,
        forest: Forest,
        table: EventTable,
        carry: dict[int, CarryRows] | None = None,
        segment_keys: list[tuple] | None = None,
    ):
        self.forest = forest
        self.table = table
        self.carry = carry or {}
        self.segment_keys = segment_keys
        self.collect: set[int] = set()
        self.channels: dict[int, set[tuple[int, str]]] = {}  # source node -> {(bit, attr)}
        for qp in forest.queries:
            for piece in qp.pieces:
                self.collect.add(piece.nodes[-1])
            for ch, (_, node, bit) in qp.channel_source.items():
                attr = ch.split(".", 1)[1]
                self.channels.setdefault(node, set()).add((bit, attr))
        bits = set()
        for node in forest.nodes:
            bits.update(node.bits)
        all_channels = {c for cs in self.channels.values() for c in cs}
        self.stats = group_stats(table, bits, all_channels)
        self.outputs: dict[int, PieceOutput] = {}
        self.rows: dict[int, np.ndarray] = {}  # root -> start group of each row (-1: carried)
        self.row_start_ts: dict[int, np.ndarray] = {}
        self.row_segment: dict[int, np.ndarray] = {}
        self.final: dict[int, CarryRows] = {}  # counters after this table, per root
        self.peak_counters = 0  # most counters alive at once (the paper's memory measure)
        children: dict[int, list[int]] = {}
        for i, node in enumerate(forest.nodes):
            children.setdefault(node.parent, []).append(i)
        self.children = children
        for root in children.get(-1, []):
            self._run_root(root)

    def subtree(self, root: int) -> list[int]:
        order, stack = [], [root]
        while stack:
            n = stack.pop()
            order.append(n)
            stack.extend(reversed(self.children.get(n, [])))
        order.sort()  # parents are created before their children
        return order

    def _run_root(self, root: int):
        st = self.stats
        nodes = self.forest.nodes
        sub = self.subtree(root)
        col = {n: i for i, n in enumerate(sub)}
        (root_bit,) = nodes[root].bits
        new_rows = np.flatnonzero(st.count[root_bit] > 0)
        carried = self.carry.get(root)
        ncarry = 0 if carried is None else len(carried.start_ts)
        window = nodes[root].window
        nnodes = len(sub)
        chans = [(src, b, a) for src in sub for (b, a) in self.channels.get(src, ())]
        # Row arrays: carried rows first, then this table's START groups.
        base = new_rows.copy()  # step j processes group base + j
        seg_end = st.segment_end[new_rows]
        start_ts = st.ts[new_rows]
        row_seg = st.segment[new_rows]
        if ncarry:
            first_group = np.full(int(st.segment.max(initial=-1)) + 1, -1, dtype=np.int64)
            idx = np.arange(len(st.segment))[::-1]
            first_group[st.segment[idx]] = idx
            lookup = {k: i for i, k in enumerate(self.segment_keys or [])}
            cseg = np.array([lookup.get(k, -1) for k in carried.key], dtype=np.int64)
            present = cseg >= 0
            cbase = np.where(present, first_group[np.maximum(cseg, 0)] - 1, -1)
            cend = np.where(
                present, st.segment_end[np.maximum(first_group[np.maximum(cseg, 0)], 0)], 0
            )
            base = np.concatenate([cbase, base])
            seg_end = np.concatenate([cend, seg_end])
            start_ts = np.concatenate([carried.start_ts, start_ts])
            row_seg = np.concatenate([cseg, row_seg])
        rows = np.concatenate([np.full(ncarry, -1, dtype=np.int64), new_rows])
        self.rows[root] = rows
        self.row_start_ts[root] = start_ts
        self.row_segment[root] = row_seg
        nrows = len(rows)
        cnt = np.zeros((nrows, nnodes), dtype=np.int64 if carried is None else carried.cnt.dtype)
        if ncarry:
            cnt[:ncarry] = carried.cnt
        cnt[ncarry:, 0] = st.count[root_bit][new_rows]
        # Channels: per (source node, bit, attr), arrays over the subtree's nodes.
        sums, nns, mins, maxs = {}, {}, {}, {}
        for ch in chans:
            src, b, a = ch
            dtype = st.values[(b, a)][0].dtype
            if ncarry and ch in carried.chans and carried.chans[ch][0].dtype != dtype:
                dtype = np.float64
            sums[ch] = np.zeros((nrows, nnodes), dtype=dtype)
            nns[ch] = np.zeros((nrows, nnodes), dtype=np.int64)
            mins[ch] = np.full((nrows, nnodes), np.inf)
            maxs[ch] = np.full((nrows, nnodes), -np.inf)
            if ncarry and ch in carried.chans:
                cs, cn, cmn, cmx = carried.chans[ch]
                sums[ch][:ncarry], nns[ch][:ncarry], mins[ch][:ncarry], maxs[ch][:ncarry] = (
                    cs,
                    cn,
                    cmn,
                    cmx,
                )
            if src == root:
                s_, nn, mn, mx = st.values[(b, a)]
                new = slice(ncarry, nrows)
                sums[ch][new, 0], nns[ch][new, 0] = s_[new_rows], nn[new_rows]
                mins[ch][new, 0], maxs[ch][new, 0] = mn[new_rows], mx[new_rows]
        # The negations of the gap right after the first component start with its counts.
        for n in sub[1:]:
            if nodes[n].parent == root and nodes[n].kind == "neg":
                cnt[ncarry:, col[n]] = cnt[ncarry:, 0]
                for ch in chans:
                    for arr in (sums, nns, mins, maxs):
                        arr[ch][ncarry:, col[n]] = arr[ch][ncarry:, 0]
        parts: dict[int, list] = {n: [] for n in sub if n in self.collect}
        if root in parts and nrows > ncarry:
            new = np.arange(ncarry, nrows)
            self._emit(parts[root], new, new_rows, cnt[new, 0], col[root], chans,
                       {ch: sums[ch][new, 0] for ch in chans}, {ch: nns[ch][new, 0] for ch in chans},
                       {ch: mins[ch][new, 0] for ch in chans}, {ch: maxs[ch][new, 0] for ch in chans},
                       root)  # fmt: skip
        # int64 is exact while a count times the events of one group cannot overflow;
        # beyond, counts become Python integers (exact, slower).
        most = max((int(st.count[b].max(initial=0)) for b in st.count), default=1)
        for _, b, a in chans:
            values = st.values[(b, a)][0]
            if values.dtype.kind in "iu" and len(values):
                most *= max(1, int(np.abs(values).max()))  # an int sum grows as count x value
        guard = (2**62) // (max(most, 1) + 1)  # pre + pre * count stays below 2**63
        active = np.arange(nrows)
        step = 0
        while len(active):
            step += 1
            g = base[active] + step
            alive = g < seg_end[active]
            alive[alive] &= st.ts[g[alive]] - start_ts[active[alive]] < window
            active, g = active[alive], g[alive]
            if not len(active):
                break
            self.peak_counters = max(
                self.peak_counters, len(active) * nnodes * (1 + 4 * len(chans))
            )
            pre = cnt[active]
            if cnt.dtype != object and pre.max(initial=0) > guard:
                cnt = cnt.astype(object)
                pre = cnt[active]
                for ch in chans:
                    nns[ch] = nns[ch].astype(object)
                    if sums[ch].dtype.kind in "iu":
                        sums[ch] = sums[ch].astype(object)
            d = np.zeros_like(pre)
            reset = np.zeros((len(active), nnodes), dtype=bool)
            dch = {ch: (np.zeros_like(sums[ch][active]), np.zeros_like(nns[ch][active]),
                        np.full((len(active), nnodes), np.inf), np.full((len(active), nnodes), -np.inf))
                   for ch in chans}  # fmt: skip
            for n in sub[1:]:
                j, p = col[n], col[nodes[n].parent]
                node = nodes[n]
                if node.kind == "pos":
                    (b,) = node.bits
                    c = st.count[b][g]
                    d[:, j] = pre[:, p] * c
                    for ch in chans:
                        src, cb, attr = ch
                        ds, dn, dmin, dmax = dch[ch]
                        if src == n:
                            s, nn, mn, mx = st.values[(cb, attr)]
                            has = pre[:, p] > 0
                            ds[:, j] = pre[:, p] * s[g]
                            dn[:, j] = pre[:, p] * nn[g]
                            dmin[:, j] = np.where(has, mn[g], np.inf)
                            dmax[:, j] = np.where(has, mx[g], -np.inf)
                        elif col.get(src, nnodes) < j and _below(nodes, n, src):
                            ds[:, j] = sums[ch][active, p] * c
                            dn[:, j] = nns[ch][active, p] * c
                            dmin[:, j] = np.where(c > 0, mins[ch][active, p], np.inf)
                            dmax[:, j] = np.where(c > 0, maxs[ch][active, p], -np.inf)
                else:
                    d[:, j] = d[:, p]
                    hit = np.zeros(len(active), dtype=bool)
                    for b in node.bits:
                        hit |= st.count[b][g] > 0
                    reset[:, j] = hit
                    for ch in chans:
                        ds, dn, dmin, dmax = dch[ch]
                        ds[:, j], dn[:, j], dmin[:, j], dmax[:, j] = (
                            ds[:, p],
                            dn[:, p],
                            dmin[:, p],
                            dmax[:, p],
                        )
            # Recounting rule: a negated event kills the prefixes formed before its group.
            if reset.any():
                kept = np.where(reset, 0, pre)
                cnt[active] = kept + d
                for ch in chans:
                    sums[ch][active] = np.where(reset, 0, sums[ch][active])
                    nns[ch][active] = np.where(reset, 0, nns[ch][active])
                    mins[ch][active] = np.where(reset, np.inf, mins[ch][active])
                    maxs[ch][active] = np.where(reset, -np.inf, maxs[ch][active])
            else:
                cnt[active] = pre + d
            for ch in chans:
                ds, dn, dmin, dmax = dch[ch]
                sums[ch][active] += ds
                nns[ch][active] += dn
                mins[ch][active] = np.minimum(mins[ch][active], dmin)
                maxs[ch][active] = np.maximum(maxs[ch][active], dmax)
            for n, out in parts.items():
                if n == root:
                    continue
                j = col[n]
                new = np.flatnonzero(d[:, j] != 0)
                if len(new):
                    self._emit(
                        out, active[new], g[new], d[new, j], j, chans,
                        {ch: dch[ch][0][new, j] for ch in chans}, {ch: dch[ch][1][new, j] for ch in chans},
                        {ch: dch[ch][2][new, j] for ch in chans}, {ch: dch[ch][3][new, j] for ch in chans},
                        n,
                    )  # fmt: skip
        for n, chunks in parts.items():
            self.outputs[n] = _gather(chunks, chans, root)
        keys = np.empty(nrows, dtype=object)
        for i in range(ncarry):
            keys[i] = carried.key[i]
        seg_keys = self.segment_keys or [()] * (int(st.segment.max(initial=-1)) + 1)
        for i, segment in enumerate(row_seg[ncarry:], start=ncarry):
            keys[i] = seg_keys[segment]
        self.final[root] = CarryRows(
            keys, start_ts, cnt, {ch: (sums[ch], nns[ch], mins[ch], maxs[ch]) for ch in chans}
        )

    def _emit(self, out, row, group, count, j, chans, sums, nns, mins, maxs, node):
        out.append((row, group, count, sums, nns, mins, maxs))


def _below(nodes: list[Node], n: int, src: int) -> bool:
    p = nodes[n].parent
    while p >= 0:
        if p == src:
            return True
        p = nodes[p].parent
    return False


def _gather(chunks, chans, root) -> PieceOutput:
    if not chunks:
        z = np.zeros(0, dtype=np.int64)
        f = np.zeros(0)
        return PieceOutput(z, z, z, {c: f for c in chans}, {c: z for c in chans},
                           {c: f for c in chans}, {c: f for c in chans})  # fmt: skip

    def cat(i):
        return _cat([c[i] for c in chunks])

    return PieceOutput(
        cat(0), cat(1), cat(2),
        {ch: _cat([c[3][ch] for c in chunks]) for ch in chans},
        {ch: _cat([c[4][ch] for c in chunks]) for ch in chans},
        {ch: _cat([c[5][ch] for c in chunks]) for ch in chans},
        {ch: _cat([c[6][ch] for c in chunks]) for ch in chans},
    )  # fmt: skip


def _cat(arrays):
    if any(a.dtype == object for a in arrays):
        return np.concatenate([np.asarray(a).astype(object) for a in arrays])
    return np.concatenate(arrays)
