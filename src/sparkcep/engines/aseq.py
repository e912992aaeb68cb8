"""`aseq`: A-Seq online aggregation of sequence patterns (aseq-online-aggregation.md).

Aggregates over the matches of SEQ patterns without building a single match:

- **Dynamic prefix counting** (Lemma 1–2): for a pattern (E1..En) keep the number of
  matches of each prefix; an event of type Em adds count(E1..Em-1) to count(E1..Em).
- **Start event marking** (Lemma 3–4): one prefix counter per START event, so that
  matches leave the window exactly when their start does.
- **Negation** by the recounting rule (Lemma 5–6): an event of a negated type between
  Em and Em+1 resets the count of (E1..Em).
- **Hashed prefix counters**: equivalence predicates and GROUP BY partition the stream;
  each partition has its own counters.
- **SUM/AVG/MIN/MAX** (section 5), exact: next to each count, the sum (and minimum,
  maximum, non-null count) of the aggregated attribute over the prefix matches counted.
- **Prefix sharing** (section 4.1): queries' patterns form a prefix tree; a counter of
  the tree serves every query whose pattern goes through it.
- **Chop-connect** (section 4.2): a pattern whose tail is another tree's path is chopped
  there; each START of the tail takes a *snapshot* of the head's counts per head START,
  and the counts connect as Σ snapshot × tail count (Lemma 7), with several pieces
  connected in turn (multi-connect).

The counters of all START events move together, column-wise: events with the same time
form a *group* (they cannot follow each other in a sequence), and step j updates every
start's counters with the group j places after it. Equal starts in one group share a
counter. What the counters produce are *contributions* (matches bundled by start and
end), turned into per-trigger rows by `aggregation.combine`.

Example 3 of the paper (window 7 s), the stream a1 b1 c1 a2 c2 b2 d1 c3 a3 d2 at
1..10 s, pattern SEQ(A, B, C, D):

>>> import pandas as pd
>>> from sparkcep.runners.local import aggregate_local
>>> stream = pd.DataFrame({"type": list("ABCACBDCAD"), "ts": range(1, 11)})
>>> aggregate_local(stream, "PATTERN SEQ(A a, B b, C c, D d) AGG COUNT WITHIN 7")
   ts  count
0   7      2
1  10      1
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from sparkcep.engines.aggregation import Contributions, channel
from sparkcep.events import EventTable
from sparkcep.plan import Plan

# ---- the prefix forest ------------------------------------------------------------------


@dataclass
class Node:
    parent: int  # -1 for a root
    kind: str  # "pos" (a positive component) or "neg" (the negations of a gap)
    bits: tuple[int, ...]  # unified component bits: one for pos, the negated ones for neg
    key: tuple  # identity used for sharing
    window: int = 0  # longest window of the queries using the node


@dataclass
class Piece:
    """A stretch of a query's pattern that is one path of the forest."""

    nodes: list[int]  # path from its root to its end


@dataclass
class QueryPlan:
    """How one query is computed: pieces connected in turn, and where its channels come from."""

    plan: Plan
    pieces: list[Piece]
    channel_source: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # channel -> (piece index, node, unified bit of the aggregated component)


@dataclass
class Signature:
    """A component as the data sees it: its type and local conditions, with the bit it
    has in the events' bitmask when several queries share one table."""

    event_type: str | None
    local: tuple
    index: int

    @property
    def bit(self) -> int:
        return 1 << self.index


class Forest:
    """The prefix trees of a set of A-Seq queries (one path per query, or per piece)."""

    def __init__(self, plans: list[Plan], sharing: str = "prefix"):
        if sharing not in ("none", "prefix", "chop"):
            raise ValueError(f"sharing is none, prefix or chop, not {sharing!r}")
        self.sharing = sharing
        self.nodes: list[Node] = []
        self.signatures: list[Signature] = []
        self._sig_index: dict[tuple, int] = {}
        self._node_index: dict[tuple, int] = {}
        steps = [self._steps(p, i) for i, p in enumerate(plans)]
        self.queries: list[QueryPlan] = []
        if sharing == "chop":
            # Patterns that can be chopped are laid out after the others, so their tails
            # find the paths the other queries create.
            order = sorted(range(len(plans)), key=lambda i: len(steps[i]))
        else:
            order = list(range(len(plans)))
        placed: dict[int, QueryPlan] = {}
        for i in order:
            placed[i] = self._place(plans[i], steps[i], i)
        self.queries = [placed[i] for i in range(len(plans))]

    # Each positive component is a step; the negations of a gap ride on the next step.
    def _steps(self, plan: Plan, qi: int) -> list[tuple]:
        steps = []
        pending_neg: list[int] = []
        for comp in plan.components:
            sig = self._signature(comp)
            if comp.negated:
                pending_neg.append(sig)
                continue
            steps.append((tuple(sorted(set(pending_neg))), sig, comp))
            pending_neg = []
        return steps

    def _signature(self, comp) -> int:
        from sparkcep.language import ast

        key = (
            comp.event_type,
            tuple(sorted(ast.to_text(e).replace(f"{comp.var}.", "$.") for e in comp.local)),
        )
        if key not in self._sig_index:
            if len(self.signatures) >= 62:
                raise ValueError("more than 62 distinct components across the queries")
            self._sig_index[key] = len(self.signatures)
            self.signatures.append(
                Signature(comp.event_type, tuple(comp.local), len(self.signatures))
            )
        return self._sig_index[key]

    def _node(self, parent: int, kind: str, bits: tuple, owner: int, window: int) -> int:
        key = (parent, kind, bits) if self.sharing != "none" else (parent, kind, bits, owner)
        if key not in self._node_index:
            self._node_index[key] = len(self.nodes)
            self.nodes.append(Node(parent, kind, bits, key, window))
        idx = self._node_index[key]
        self.nodes[idx].window = max(self.nodes[idx].window, window)
        return idx

    def _path(self, steps, owner: int, window: int) -> list[int]:
        path: list[int] = []
        parent = -1
        for negs, sig, _ in steps:
            if negs and parent >= 0:
                parent = self._node(parent, "neg", negs, owner, window)
                path.append(parent)
            parent = self._node(parent, "pos", (sig,), owner, window)
            path.append(parent)
        return path

    def _root_path(self, steps) -> bool:
        """Is this sequence of steps already a path from a root of the forest?"""
        parent = -1
        for negs, sig, _ in steps:
            if negs and parent >= 0:
                key = (parent, "neg", negs)
                if key not in self._node_index:
                    return False
                parent = self._node_index[key]
            key = (parent, "pos", (sig,))
            if key not in self._node_index:
                return False
            parent = self._node_index[key]
        return True

    def _place(self, plan: Plan, steps, owner: int) -> QueryPlan:
        window = plan.window if plan.window is not None else np.iinfo(np.int64).max // 4
        cuts: list[int] = []  # step indices where a new piece starts
        if self.sharing == "chop":
            end = len(steps)
            while end > 1:
                # the longest tail steps[start:end] that is a path elsewhere (no negation
                # may sit at the cut)
                found = None
                for start in range(1, end):
                    if steps[start][0]:
                        continue
                    if self._root_path(steps[start:end]):
                        found = start
                        break
                if found is None:
                    break
                cuts.append(found)
                end = found
        bounds = [0, *sorted(cuts), len(steps)]
        pieces = []
        for lo, hi in itertools.pairwise(bounds):
            pieces.append(Piece(self._path(steps[lo:hi], owner, window)))
        qp = QueryPlan(plan, pieces)
        # Where each aggregated variable sits.
        step_of = {}
        for i, (_, sig, comp) in enumerate(steps):
            step_of[comp.var] = (i, sig)
        for item in plan.agg:
            if item.var is None:
                continue
            i, sig = step_of[item.var]
            piece = max(p for p, lo in enumerate(bounds[:-1]) if lo <= i)
            pos_nodes = [n for n in pieces[piece].nodes if self.nodes[n].kind == "pos"]
            node = pos_nodes[i - bounds[piece]]
            qp.channel_source[channel(item)] = (piece, node, sig)
        return qp

    def describe(self) -> list[str]:
        """Each query's pieces, for `explain`."""
        lines = []
        for qp in self.queries:
            parts = []
            for piece in qp.pieces:
                names = []
                for n in piece.nodes:
                    node = self.nodes[n]
                    sig = ",".join(str(self.signatures[b].event_type or "ANY") for b in node.bits)
                    names.append(("!" if node.kind == "neg" else "") + sig)
                parts.append("(" + " ".join(names) + ")")
            lines.append(" + ".join(parts))
        return lines


# ---- the counters -------------------------------------------------------------------------


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


@dataclass
class CarryRows:
    """Counters of one root's START rows between batches (incremental use): the key of
    their partition, their start time, and their counts and channel values."""

    key: np.ndarray  # object array of key tuples
    start_ts: np.ndarray
    cnt: np.ndarray  # rows x subtree nodes
    chans: dict  # channel -> (sums, non-nulls, mins, maxs), each rows x subtree nodes


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

    def _subtree(self, root: int) -> list[int]:
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
        sub = self._subtree(root)
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


# ---- from pieces to a query's contributions ---------------------------------------------


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
    window = plan.window if plan.window is not None else np.iinfo(np.int64).max // 4
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
    window = qp.plan.window if qp.plan.window is not None else np.iinfo(np.int64).max // 4
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
    from sparkcep.engines.nfa import _ranges

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
                                     t_lo[sl], t_count[sl], _ranges))  # fmt: skip
        done, first = (int(work[last - 1]) if len(work) else 0), last
    return parts[0] if len(parts) == 1 else _merge(_concat_chains(parts), len(st.ts))


def _connect_starts(h, t, st, window, starts, lo, hi, t_lo, t_count, ranges) -> Chain:
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
    window = qp.plan.window if qp.plan.window is not None else np.iinfo(np.int64).max // 4
    chain = None
    for piece in qp.pieces[:pieces]:
        out = counters.outputs[piece.nodes[-1]]
        part = Chain(counters.rows[piece.nodes[0]][out.row], out.group, out.count, {}, {}, {}, {})
        chain = part if chain is None else _connect(chain, part, st, window)
    return chain
