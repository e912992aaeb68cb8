"""A-Seq's prefix counters (aseq-online-aggregation.md §3, §5): per START event, the
number of matches of each prefix of the forest's patterns, and the moments (sum, non-null
count, minimum and maximum) of aggregated attributes over them, all STARTs moving together."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sparkcep.engines.aseq.combine import (
    NEVER,
    Channel,
    Contributions,
    ExactSums,
    Moments,
    add_both,
    concat_arrays,
    window_of,
)
from sparkcep.engines.aseq.forest import Forest, Node, NodeValues, QueryPlan
from sparkcep.engines.state import state_class
from sparkcep.prep.table import EventTable, segment_firsts


@dataclass
class GroupStats:
    """Per group of equal-time events: how many events bind each component, and the
    moments of aggregated attributes over them."""

    start: np.ndarray  # first event position of each group
    ts: np.ndarray
    segment: np.ndarray
    segment_end: np.ndarray  # first group of the next segment
    segment_first: np.ndarray  # first group of each segment
    count: dict[int, np.ndarray]  # bit -> events of the group with the bit
    values: dict[tuple[int, str], Moments]  # (bit, attribute) -> moments of its events
    _bounds: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    def window_bounds(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """Per group g, the groups of g's segment within `window` of it: the first whose
        time is > ts[g] - window (floor) and the first whose time is >= ts[g] + window
        (ceiling; the segment's end when there is none)."""
        if window not in self._bounds:
            times = np.unique(self.ts)
            base = len(times) + 1
            # (segment, time rank) as one sortable number; groups are in that order.
            segment = self.segment.astype(np.int64) * base
            rank = segment + np.searchsorted(times, self.ts)
            big = np.iinfo(np.int64).max // 2
            low = np.clip(self.ts, -big + window, None) - window
            high = np.clip(self.ts, None, big - window) + window
            floor = segment + np.searchsorted(times, low, side="right")
            ceiling = segment + np.searchsorted(times, high, side="left")
            self._bounds[window] = (
                np.searchsorted(rank, floor, side="left"),
                np.searchsorted(rank, ceiling, side="left"),
            )
        return self._bounds[window]


def group_stats(table: EventTable, bits: set[int], columns: set[tuple[int, str]]) -> GroupStats:
    """The groups of `table`, with the counts of `bits` and the moments of `columns`
    ((bit, attribute): the attribute over the events with the bit)."""
    n = len(table)
    change = np.ones(n, dtype=bool)
    if n:
        change[1:] = (table.order[1:] != table.order[:-1]) | (
            table.segment[1:] != table.segment[:-1]
        )
    if change.all():  # every event its own group (distinct times): the table's arrays
        starts = group_of = np.arange(n)
    else:
        starts = np.flatnonzero(change)
        group_of = np.cumsum(change) - 1  # the group of each event
    ngroups = len(starts)
    segment_first = group_of[segment_firsts(table)]
    if len(segment_first) == 1:  # one partition: the same end for every group, no copy
        segment_end = np.broadcast_to(np.int64(ngroups), (ngroups,))
    else:
        segment_end = np.repeat(
            np.r_[segment_first[1:], ngroups], np.diff(np.r_[segment_first, ngroups])
        )
    counts = {}
    for bit in bits:
        has = (table.mask >> bit) & 1
        # int32: events in one group; what they multiply is int64
        counts[bit] = np.bincount(group_of, weights=has, minlength=ngroups).astype(np.int32)
    values = {}
    for bit, attr in columns:
        col = table.columns[attr]
        has = ((table.mask >> bit) & 1).astype(bool) & ~col.nulls()
        values[(bit, attr)] = _group_moments(col.values[has], group_of[has], ngroups)
    alone = ngroups == n  # table.ts[starts] would copy the table's arrays
    return GroupStats(
        starts,
        table.ts if alone else table.ts[starts],
        table.segment if alone else table.segment[starts],
        segment_end,
        segment_first,
        counts,
        values,
    )


def _group_moments(values: np.ndarray, group: np.ndarray, ngroups: int) -> Moments:
    floats = values.astype(np.float64)
    if values.dtype.kind in "iu":
        sums = np.zeros(ngroups, dtype=np.int64)
        np.add.at(sums, group, values)
    else:
        sums = np.zeros(ngroups, dtype=np.float64)
        np.add.at(sums, group, floats)
    mins = np.full(ngroups, np.inf)
    maxs = np.full(ngroups, -np.inf)
    np.minimum.at(mins, group, floats)
    np.maximum.at(maxs, group, floats)
    nonnull = np.bincount(group, minlength=ngroups).astype(np.int64)
    return Moments(sums, nonnull, mins, maxs)


@dataclass
class PieceOutput:
    """Contributions of one forest node, per start row: rows are (root, start group)."""

    row: np.ndarray  # start row (index into the root's rows)
    group: np.ndarray  # end group
    count: np.ndarray
    moments: dict[NodeValues, Moments] = field(default_factory=dict)

    @staticmethod
    def concat(parts: list[PieceOutput], sources: list[NodeValues]) -> PieceOutput:
        if not parts:
            none = np.zeros(0, dtype=np.int64)
            return PieceOutput(none, none, none, {s: Moments.empty() for s in sources})
        return PieceOutput(
            concat_arrays([p.row for p in parts]),
            concat_arrays([p.group for p in parts]),
            concat_arrays([p.count for p in parts]),
            {s: Moments.concat([p.moments[s] for p in parts]) for s in sources},
        )


class EndTotals:
    """What a one-piece query reads of its counters, as the trigger rows need it and in
    memory that follows the events, not the matches: the new matches of each step added
    up by end group (they count from their end on) and by START row (they are taken off
    when the START leaves the window), with the sums and non-null counts of the values.
    Float sums are added up exactly (`ExactSums`): added up in floating point across
    STARTs, values from before a window would leak into it through rounding.

    MIN/MAX need a match's start and end together, and are kept per (START row, end
    group), only where a START row's running minimum or maximum changes (its
    *records*); so are infinite float sums."""

    def __init__(self, node: int, window: int, places: tuple[int, int], sources, **read):
        """`places`: (START rows, groups); `read` gives `floats` (the sources whose values
        are floats), `summed` (those a SUM or an AVG reads) and `best` (each START row's
        running extremes so far, for the sources a MIN or a MAX reads)."""
        rows, groups = places
        self.node = node
        self.window = window
        self.sources: list[NodeValues] = list(sources)
        self.floats: set[NodeValues] = read["floats"] & set(self.sources)
        self.best: dict[NodeValues, Moments] = read["best"]
        self.by_end = PlaceTotals(groups, self.sources)
        self.by_start = PlaceTotals(rows, self.sources)
        exact = self.floats & read["summed"]  # MIN/MAX alone need no sum
        self.exact_end = {s: ExactSums(groups) for s in exact}
        self.exact_start = {s: ExactSums(rows) for s in exact}
        self.pairs: list[PieceOutput] = []  # extreme records and infinite sums

    def add(self, row: np.ndarray, group: np.ndarray, count: np.ndarray, moments) -> None:
        """New matches: `count` of them from START `row` ending at `group`, with
        `moments` (source -> Moments) of their values."""
        self.by_end.add_at(group, count, moments, self.floats)
        self.by_start.add_at(row, count, moments, self.floats)
        for source in self.exact_end:
            sums = moments[source].sums
            finite = np.isfinite(sums)
            if finite.all():
                add_both(self.exact_end[source], group, self.exact_start[source], row, sums)
            else:
                kept = (group[finite], row[finite], sums[finite])
                add_both(self.exact_end[source], kept[0], self.exact_start[source], *kept[1:])
            if not finite.all():  # infinities and nan: combine counts them apart
                nothing = np.zeros(len(row), np.int64)
                infinite = {source: Moments(sums, nothing, *_no_extremes(len(row)))}
                self._pair(row, group, infinite, ~finite)
        for source, best in self.best.items():
            m = moments[source]
            lower = m.mins < best.mins[row]
            higher = m.maxs > best.maxs[row]
            best.mins[row] = np.minimum(best.mins[row], m.mins)
            best.maxs[row] = np.maximum(best.maxs[row], m.maxs)
            record = lower | higher
            if record.any():
                mins = np.where(lower, m.mins, np.inf)
                maxs = np.where(higher, m.maxs, -np.inf)
                zeros = np.zeros(len(row), dtype=np.int64)
                self._pair(row, group, {source: Moments(zeros, zeros, mins, maxs)}, record)

    def _pair(self, row, group, moments: dict[NodeValues, Moments], keep: np.ndarray) -> None:
        n = int(keep.sum())
        full = {s: moments[s].take(keep) if s in moments else _nothing(n) for s in self.sources}
        zeros = np.zeros(n, dtype=np.int64)
        self.pairs.append(PieceOutput(row[keep], group[keep], zeros, full))

    def contributions(
        self, rows: RootRows, stats: GroupStats, channels: dict[Channel, NodeValues]
    ) -> Contributions:
        """The query's contributions: one-sided by end and by start, then the pairs."""
        pairs = PieceOutput.concat(self.pairs, self.sources)
        paired = Contributions(
            rows.segment[pairs.row],
            rows.start_ts[pairs.row],
            stats.ts[pairs.group],
            pairs.count,
            {ch: pairs.moments[source] for ch, source in channels.items()},
        )
        one_sided = self.by_end.one_sided(
            self.by_start,
            (stats.segment, stats.ts),
            (rows.segment, rows.start_ts),
            {
                ch: (
                    source,
                    source in self.floats,
                    (self.exact_end[source], self.exact_start[source])
                    if source in self.exact_end
                    else None,
                )
                for ch, source in channels.items()
            },
        )
        if not len(paired):
            return one_sided
        return Contributions.concat([one_sided, paired], keep_empty=True)


def _terms(place, terms, places, by_end: bool, channel: Channel, floats) -> Contributions:
    """One-sided bundles (by end or by start) at `place` ((partition, time) of each in
    `places`) holding float `terms` of `channel`'s sum; `floats`: which channels have
    float sums (the others integer)."""
    n = len(place)
    never = np.full(n, NEVER)
    zeros = np.zeros(n, dtype=np.int64)
    moments = {}
    for other, is_float in floats.items():
        values = terms if other == channel else (np.zeros(n) if is_float else zeros)
        moments[other] = Moments(values, zeros, *_no_extremes(n))
    segment, times = places[0][place], places[1][place]
    start, end = (never, times) if by_end else (times, never)
    return Contributions(segment, start, end, zeros, moments)


class PlaceTotals:
    """Counts, sums and non-null counts added up at n places (int64 while no place can
    have left it, Python integers beyond)."""

    def __init__(self, n: int, sources: list[NodeValues]):
        self.count = np.zeros(n, dtype=np.int64)
        self.sums = {s: np.zeros(n, dtype=np.int64) for s in sources}
        self.nonnull = {s: np.zeros(n, dtype=np.int64) for s in sources}
        # per place, every amount added there in magnitude (a float): bounds each entry
        self.bound = np.zeros(n)

    def add_at(self, place, count, moments, floats) -> None:
        if not len(place):
            return
        if self.count.dtype != object:
            amounts = [v for _, v in self._arrays(count, moments, floats)]
            magnitude = sum(np.abs(v.astype(np.float64)) for v in amounts)
            np.add.at(self.bound, place, magnitude)
            if self.bound[place].max() >= 2**62 or any(v.dtype == object for v in amounts):
                self._widen()
        arrays = self._arrays(count, moments, floats)
        for total, values in arrays:
            if total.dtype == object:
                for i, v in zip(place.tolist(), values.tolist()):
                    total[i] += v
            else:
                np.add.at(total, place, values)

    def _arrays(self, count, moments, floats) -> list[tuple[np.ndarray, np.ndarray]]:
        """(total, amounts to add to it) for the count and each value's totals."""
        arrays = [(self.count, count)]
        for source, m in moments.items():
            if source in self.sums:
                arrays.append((self.nonnull[source], m.nonnull))
                if source not in floats:
                    arrays.append((self.sums[source], m.sums))
        return arrays

    def _widen(self) -> None:
        self.count = self.count.astype(object)
        self.sums = {s: v.astype(object) for s, v in self.sums.items()}
        self.nonnull = {s: v.astype(object) for s, v in self.nonnull.items()}

    def one_sided(self, by_start: PlaceTotals, ends, starts, channels) -> Contributions:
        """Contributions from these totals by end place and `by_start`'s by start place:
        `ends` and `starts` give each place's (partition, time), `channels` each
        channel's (key here, whether its values are floats, and for a float sum its
        `ExactSums` by end and by start place, or None).

        A float sum is handed over as the floats whose exact total it is (combine adds
        floats exactly, so a window's total is the correctly rounded sum of its matches'
        values): the first, the sum rounded, in the place's own bundle, the rest (where
        rounding lost bits) in bundles of their own."""
        e = np.flatnonzero(self.count != 0)
        a = np.flatnonzero(by_start.count != 0)
        moments, rest = {}, []
        for ch, (key, floats, exact) in channels.items():
            moments[ch] = Moments.concat(
                [self.moments(key, e, floats), by_start.moments(key, a, floats)]
            )
            if exact is None:
                continue
            for sums, at, places, offset, by_end in (
                (exact[0], e, ends, 0, True), (exact[1], a, starts, len(e), False)
            ):  # fmt: skip
                place, terms = sums.terms(sums.places())
                first = np.r_[True, place[1:] != place[:-1]] if len(place) else place > 0
                index = np.searchsorted(at, place[first])
                if not (at[index] == place[first]).all():
                    raise AssertionError("a float sum where no match ends or starts")
                moments[ch].sums[offset + index] = terms[first]
                kinds = {other: other_floats for other, (_, other_floats, _) in channels.items()}
                extra = ~first
                rest.append(_terms(place[extra], terms[extra], places, by_end, ch, kinds))
        one_sided = Contributions(
            concat_arrays([ends[0][e], starts[0][a]]),
            concat_arrays([np.full(len(e), NEVER), starts[1][a]]),
            concat_arrays([ends[1][e], np.full(len(a), NEVER)]),
            concat_arrays([self.count[e], by_start.count[a]]),
            moments,
        )
        rest = [part for part in rest if len(part)]
        return Contributions.concat([one_sided, *rest], keep_empty=True) if rest else one_sided

    def moments(self, source: NodeValues, at: np.ndarray, floats: bool) -> Moments:
        sums = np.zeros(len(at)) if floats else self.sums[source][at]
        return Moments(sums, self.nonnull[source][at], *_no_extremes(len(at)))


def _no_extremes(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(n, np.inf), np.full(n, -np.inf)


def _nothing(n: int) -> Moments:
    zeros = np.zeros(n, dtype=np.int64)
    return Moments(zeros, zeros, *_no_extremes(n))


@state_class
@dataclass
class CarryRows:
    """Counters of one root's START rows between batches (incremental use): the key of
    their partition, their start time, and their counts and moments."""

    key: np.ndarray  # object array of key tuples
    start_ts: np.ndarray
    count: np.ndarray  # rows x subtree nodes
    moments: dict[NodeValues, Moments]  # each rows x subtree nodes

    def __len__(self) -> int:
        return len(self.start_ts)

    def take(self, keep: np.ndarray) -> CarryRows:
        moments = {s: m.take(keep) for s, m in self.moments.items()}
        return CarryRows(self.key[keep], self.start_ts[keep], self.count[keep], moments)

    def expire(self, now: int, window: int) -> CarryRows:
        """The rows whose START is still inside the window at time `now`."""
        return self.take(self.start_ts > now - window)


@dataclass
class Subtree:
    """One root's tree of the forest: its nodes (parents first; a node's column in the
    counters is its place here) and the values counted at them."""

    root: int
    nodes: list[int]
    column: dict[int, int]  # node -> column
    sources: list[NodeValues]


@dataclass
class RootRows:
    """The START rows of one root: the rows carried from earlier batches first, then this
    table's groups that hold a START event."""

    group: np.ndarray  # start group of each row (-1: carried)
    base: np.ndarray  # step j takes group base + j
    segment_end: np.ndarray  # the first group past the row's segment
    start_ts: np.ndarray
    segment: np.ndarray  # the row's segment in this table (-1: not in it)
    carried: int  # how many rows were carried

    def __len__(self) -> int:
        return len(self.group)

    @property
    def new(self) -> slice:
        """This table's rows."""
        return slice(self.carried, len(self.group))


@dataclass
class Counts:
    """The counters of one root: per START row and subtree node, the number of matches of
    the node's prefix and the moments of each counted value over them."""

    count: np.ndarray  # rows x subtree nodes
    moments: dict[NodeValues, Moments]  # each rows x subtree nodes

    def widen(self) -> None:
        """Counts and integer sums as Python integers, exact beyond 64 bits."""
        self.count = self.count.astype(object)
        self.moments = {s: m.widened() for s, m in self.moments.items()}


@dataclass
class NodeStep:
    """How a subtree node takes a step: from its parent's counts (`parent` column) and
    the group's events with its bits; which values it reads from those events (`read`)
    and which it carries from its ancestors' prefixes (`inherit`); the negation nodes
    that take its new matches too; the classes of groups (by the tree's bits they hold)
    in which it has events."""

    column: int
    parent: int
    negated: bool
    bits: tuple[int, ...]
    read: list[NodeValues]
    inherit: list[NodeValues]
    negations: list[int] = field(default_factory=list)  # columns of its negation children
    classes: list[int] = field(default_factory=list)  # group classes holding its events


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
        self.collect: set[int] = set()  # nodes whose matches chopped queries connect
        self.sources: dict[int, list[NodeValues]] = {}  # node -> values counted there
        # the values a MIN or a MAX reads: only theirs keep extremes in the counters
        self.extremes: set[NodeValues] = set()
        for qp in forest.queries:
            self.extremes |= _sources_of(qp, ("min", "max"))
            if len(qp.pieces) > 1:
                self.collect.update(piece.nodes[-1] for piece in qp.pieces)
            for source in qp.channel_source.values():
                counted = self.sources.setdefault(source.values.node, [])
                if source.values not in counted:
                    counted.append(source.values)
        bits = {bit for node in forest.nodes for bit in node.bits}
        columns = {(s.bit, s.attr) for counted in self.sources.values() for s in counted}
        self.stats = group_stats(table, bits, columns)
        self.outputs: dict[int, PieceOutput] = {}
        self.totals: dict[int, EndTotals] = {}  # one-piece query (its index) -> its totals
        self._by_start: dict[int, PieceOutput] = {}
        self.rows: dict[int, RootRows] = {}  # root -> its START rows
        self.final: dict[int, CarryRows] = {}  # counters after this table, per root
        self.peak_counters = 0  # most counters alive at once (the paper's memory measure)
        self.updates = 0  # (START row, group holding some node's events) pairs stepped
        children: dict[int, list[int]] = {}
        for i, node in enumerate(forest.nodes):
            children.setdefault(node.parent, []).append(i)
        self.children = children
        for root in children.get(-1, []):
            self._run_root(root)

    def output_by_start(self, node: int) -> PieceOutput:
        """The contributions of `node` in (start row, end group) order (kept once made)."""
        if node not in self._by_start:
            out = self.outputs[node]
            key = out.row * (len(self.stats.ts) + 1) + out.group
            if len(key) > 1 and not (key[1:] >= key[:-1]).all():
                order = np.argsort(key, kind="stable")
                moments = {s: m.take(order) for s, m in out.moments.items()}
                out = PieceOutput(out.row[order], out.group[order], out.count[order], moments)
            self._by_start[node] = out
        return self._by_start[node]

    def subtree(self, root: int) -> list[int]:
        order, stack = [], [root]
        while stack:
            n = stack.pop()
            order.append(n)
            stack.extend(reversed(self.children.get(n, [])))
        order.sort()  # parents are created before their children
        return order

    def _run_root(self, root: int) -> None:
        """The counters of one root's tree over the table: its START rows set up, then
        moved together step by step, what queries read of them collected as they come,
        and the rows left for the next batch kept in `final`."""
        nodes = self.subtree(root)
        tree = Subtree(
            root,
            nodes,
            {n: i for i, n in enumerate(nodes)},
            [s for n in nodes for s in self.sources.get(n, ())],
        )
        carried = self.carry.get(root)
        rows = self._root_rows(root, carried)
        self.rows[root] = rows
        counts = self._start_counts(tree, rows, carried)
        self._seed_negations(tree, rows, counts)
        found: dict[int, list[PieceOutput]] = {n: [] for n in nodes if n in self.collect}
        if root in found and len(rows) > rows.carried:
            found[root].append(_start_matches(rows, counts))
        totals = self._end_totals(tree, rows, counts)
        for total in totals:
            if total.node == root and len(rows) > rows.carried:
                start = _start_matches(rows, counts)
                total.add(start.row, start.group, start.count, start.moments)
        self._run_steps(tree, rows, counts, found, totals)
        for n, parts in found.items():
            self.outputs[n] = PieceOutput.concat(parts, tree.sources)
        keys = self._row_keys(rows, carried)
        self.final[root] = CarryRows(keys, rows.start_ts, counts.count, counts.moments)

    def _end_totals(self, tree: Subtree, rows: RootRows, counts: Counts) -> list[EndTotals]:
        """The totals of the one-piece queries that end in this tree."""
        out = []
        for index, qp in enumerate(self.forest.queries):
            end = qp.pieces[-1].nodes[-1]
            if len(qp.pieces) > 1 or end not in tree.column:
                continue
            sources = [source.values for source in qp.channel_source.values()]
            j = tree.column[end]
            # Each row's extremes so far: the carried rows' counters (a root's own column
            # holds its START, not yet reported: none).
            best = {
                s: _nothing(len(rows))
                if end == tree.root
                else counts.moments[s].take((slice(None), j)).copy()
                for s in _sources_of(qp, ("min", "max"))
            }
            total = EndTotals(
                end,
                window_of(qp.plan),
                (len(rows), len(self.stats.ts)),
                sources,
                floats={s for s in sources if counts.moments[s].sums.dtype.kind == "f"},
                summed=_sources_of(qp, ("sum", "avg")),
                best=best,
            )
            self.totals[index] = total
            out.append(total)
        return out

    # ---- carry-row setup
    def _root_rows(self, root: int, carried: CarryRows | None) -> RootRows:
        """The root's START rows: those carried, then the groups with a START event."""
        stats = self.stats
        (root_bit,) = self.forest.nodes[root].bits
        starts = np.flatnonzero(stats.count[root_bit] > 0)
        rows = RootRows(
            starts,
            starts.copy(),
            stats.segment_end[starts],
            stats.ts[starts],
            stats.segment[starts],
            0 if carried is None else len(carried),
        )
        if not rows.carried:
            return rows
        # A carried row continues before the first group of its partition's segment here.
        index = {key: i for i, key in enumerate(self.segment_keys or [])}
        segment = np.array([index.get(key, -1) for key in carried.key], dtype=np.int64)
        present = segment >= 0
        first = stats.segment_first[np.maximum(segment, 0)]
        return RootRows(
            np.concatenate([np.full(rows.carried, -1, dtype=np.int64), rows.group]),
            np.concatenate([np.where(present, first - 1, -1), rows.base]),
            np.concatenate([np.where(present, stats.segment_end[first], 0), rows.segment_end]),
            np.concatenate([carried.start_ts, rows.start_ts]),
            np.concatenate([segment, rows.segment]),
            rows.carried,
        )

    def _row_keys(self, rows: RootRows, carried: CarryRows | None) -> np.ndarray:
        """The partition key of each row (for the next batch)."""
        keys = np.empty(len(rows), dtype=object)
        for i in range(rows.carried):
            keys[i] = carried.key[i]
        segment_keys = self.segment_keys or [()] * len(self.stats.segment_first)
        for i, segment in enumerate(rows.segment[rows.new], start=rows.carried):
            keys[i] = segment_keys[segment]
        return keys

    # ---- channel allocation
    def _start_counts(self, tree: Subtree, rows: RootRows, carried: CarryRows | None) -> Counts:
        """The counters before the first step: the carried rows' own, and each new START
        row's first component."""
        stats = self.stats
        shape = (len(rows), len(tree.nodes))
        count = np.zeros(shape, dtype=np.int64 if carried is None else carried.count.dtype)
        if rows.carried:
            count[: rows.carried] = carried.count
        (root_bit,) = self.forest.nodes[tree.root].bits
        starts = rows.group[rows.new]
        count[rows.new, 0] = stats.count[root_bit][starts]
        moments = {}
        for source in tree.sources:
            events = stats.values[(source.bit, source.attr)]
            before = carried.moments.get(source) if rows.carried else None
            dtype = events.sums.dtype
            if before is not None and before.sums.dtype != dtype:
                dtype = np.float64
            moments[source] = Moments.zeros(shape, dtype, extremes=source in self.extremes)
            if before is not None:
                moments[source].put(slice(None, rows.carried), before)
            if source.node == tree.root:
                moments[source].put((rows.new, 0), events.take(starts))
        return Counts(count, moments)

    # ---- negation seeding
    def _seed_negations(self, tree: Subtree, rows: RootRows, counts: Counts) -> None:
        """The negations of the gap right after the first component start with its counts."""
        nodes = self.forest.nodes
        for n in tree.nodes[1:]:
            if nodes[n].parent == tree.root and nodes[n].kind == "neg":
                j = tree.column[n]
                counts.count[rows.new, j] = counts.count[rows.new, 0]
                for moments in counts.moments.values():
                    moments.put((rows.new, j), moments.take((rows.new, 0)))

    # ---- overflow guard
    def _overflow_guard(self, tree: Subtree) -> int:
        """The largest count the int64 counters take a step from without overflow.

        int64 is exact while a count times the events of one group cannot overflow;
        beyond, counts become Python integers (exact, slower)."""
        stats = self.stats
        most = max((int(counts.max(initial=0)) for counts in stats.count.values()), default=1)
        for source in tree.sources:
            sums = stats.values[(source.bit, source.attr)].sums
            if sums.dtype.kind in "iu" and len(sums):
                most *= max(1, int(np.abs(sums).max()))  # an int sum grows as count x value
        return (2**62) // (max(most, 1) + 1)  # before + before * count stays below 2**63

    # ---- the step loop
    def _run_steps(
        self,
        tree: Subtree,
        rows: RootRows,
        counts: Counts,
        found: dict[int, list[PieceOutput]],
        totals: list[EndTotals],
    ) -> None:
        """Step j takes, for each START row, the group j places after the row's, while it
        is in the row's segment and window. In a step each node touches only the rows
        whose group holds one of its events (A-Seq's per-event work: an event updates the
        counters of its own component), children before parents so that every update
        reads the counts from before the step (equal-time events never chain). A root
        with no child takes no step."""
        if len(tree.nodes) == 1:
            return
        guard = self._overflow_guard(tree)
        node_steps = self._node_steps(tree)
        group_class, nclasses = self._group_classes(tree, node_steps)
        readers = {
            node.column: [t for t in totals if tree.column[t.node] == node.column]
            for node in node_steps
        }
        pieces = {tree.column[n]: parts for n, parts in found.items()}  # by column
        window = self.forest.nodes[tree.root].window
        width = len(tree.nodes) * (1 + 4 * len(tree.sources))  # counters per row
        ts = self.stats.ts
        # Only the groups holding some node's events change a counter: a row steps
        # through those alone (`relevant`), from the first one after its base.
        relevant = np.flatnonzero(self._holds_events(group_class, node_steps, nclasses))
        at = np.searchsorted(relevant, rows.base, side="right")  # each row's next one
        active = np.arange(len(rows))
        while len(active):
            alive = at[active] < len(relevant)
            active = active[alive]
            groups = relevant[at[active]]
            alive = groups < rows.segment_end[active]
            alive[alive] &= ts[groups[alive]] - rows.start_ts[active[alive]] < window
            active, groups = active[alive], groups[alive]
            if not len(active):
                break
            at[active] += 1
            self.peak_counters = max(self.peak_counters, len(active) * width)
            self.updates += len(active)
            classes = group_class[groups]
            order = np.argsort(classes, kind="stable")
            bounds = np.concatenate(([0], np.cumsum(np.bincount(classes, minlength=nclasses))))
            for node in node_steps:
                parts = [order[bounds[c] : bounds[c + 1]] for c in node.classes]
                parts = [part for part in parts if len(part)]
                if not parts:
                    continue
                sel = parts[0] if len(parts) == 1 else np.concatenate(parts)
                row, group = active[sel], groups[sel]
                if node.negated:
                    _reset(counts, tree, node.column, row)
                    continue
                gain, deltas = self._gain(counts, node, row, group, guard)
                for column in (node.column, *node.negations):
                    _add(counts, column, row, gain, deltas)
                if node.column in pieces or readers[node.column]:
                    self._emit(tree, node.column, pieces, readers, rows, (row, group, gain, deltas))

    def _node_steps(self, tree: Subtree) -> list[NodeStep]:
        """The steps of the tree's nodes below its root, children before parents."""
        nodes = self.forest.nodes
        out = []
        for n in tree.nodes[1:]:
            node = nodes[n]
            ancestors = _ancestors(nodes, n)
            out.append(
                NodeStep(
                    tree.column[n],
                    tree.column[node.parent],
                    node.kind == "neg",
                    node.bits,
                    [s for s in tree.sources if s.node == n],
                    [s for s in tree.sources if s.node in ancestors],
                )
            )
        for step in out:
            step.negations = [o.column for o in out if o.negated and o.parent == step.column]
        return sorted(out, key=lambda step: -step.column)  # parents come before children

    def _group_classes(self, tree: Subtree, node_steps: list[NodeStep]) -> tuple[np.ndarray, int]:
        """Each group's class: which of the tree's bits its events have (class 0: none),
        and the classes each node has events in (set on the node steps)."""
        bits = sorted({bit for node in node_steps for bit in node.bits})
        stats = self.stats
        code = np.zeros(len(stats.ts), dtype=np.int64)
        if len(bits) < 63:
            for i, bit in enumerate(bits):
                code |= (stats.count[bit] > 0).astype(np.int64) << i
            keys, group_class = np.unique(code, return_inverse=True)
            held = [{bits[i] for i in range(len(bits)) if (int(k) >> i) & 1} for k in keys]
        else:  # too many bits for one number: one class per distinct set of bits
            sets = [frozenset(b for b in bits if stats.count[b][g] > 0) for g in range(len(code))]
            index: dict[frozenset, int] = {}
            group_class = np.array([index.setdefault(x, len(index)) for x in sets], np.int64)
            held = list(index)
        for node in node_steps:
            node.classes = [c for c, present in enumerate(held) if present & set(node.bits)]
        # int16 where it fits: numpy sorts 16-bit integers by radix (a step sorts by class)
        dtype = np.int16 if len(held) < 2**15 else np.int64
        return group_class.ravel().astype(dtype), len(held)

    @staticmethod
    def _holds_events(group_class: np.ndarray, node_steps, nclasses: int) -> np.ndarray:
        """Per group: does it hold an event of some node?"""
        held = np.zeros(nclasses, dtype=bool)
        for node in node_steps:
            held[node.classes] = True
        return held[group_class]

    def _gain(self, counts: Counts, node: NodeStep, row, group, guard: int):
        """The new matches of `node`'s prefix at `row` (its events in `group`), from its
        parent's counts before the step, and what they add to each counted value."""
        stats = self.stats
        prefixes = counts.count[row, node.parent]
        if counts.count.dtype != object and len(row):
            most = max(counts.count[row, c].max() for c in (node.column, *node.negations))
            if max(prefixes.max(), most) > guard:
                counts.widen()
                prefixes = counts.count[row, node.parent]
        (bit,) = node.bits
        events = stats.count[bit][group]
        deltas = {}
        for source in node.read:  # the value of the event that extends each prefix
            values = stats.values[(source.bit, source.attr)]
            if source not in self.extremes:
                values = values.without_extremes()
            deltas[source] = values.take(group).scaled(prefixes)
        for source in node.inherit:  # the values in each prefix, once per event
            deltas[source] = counts.moments[source].take((row, node.parent)).scaled(events)
        return prefixes * events, deltas

    # ---- emission
    def _emit(self, tree, column, pieces, readers, rows: RootRows, matches) -> None:
        """The new matches of a node queries read (`matches`: START row, end group, count,
        values): as contributions (chopped queries' pieces) and into the totals of the
        one-piece queries ending there."""
        row, group, gain, deltas = matches
        new = gain != 0
        if not new.any():
            return
        row, group, gain = row[new], group[new], gain[new]
        deltas = {s: m.take(new) for s, m in deltas.items()}
        if column in pieces:
            moments = {s: deltas[s] if s in deltas else _nothing(len(row)) for s in tree.sources}
            pieces[column].append(PieceOutput(row, group, gain, moments))
        root_window = self.forest.nodes[tree.root].window
        for total in readers[column]:
            keep = slice(None)
            if total.window < root_window:
                keep = self.stats.ts[group] - rows.start_ts[row] < total.window
            moments = {s: deltas[s].take(keep) for s in total.sources}
            total.add(row[keep], group[keep], gain[keep], moments)


def _add(counts: Counts, column: int, row, gain, deltas) -> None:
    """Add a step's new matches (and their values) to a column's counters."""
    counts.count[row, column] += gain
    for source, delta in deltas.items():
        moments = counts.moments[source]
        moments.put((row, column), moments.take((row, column)).plus(delta))


def _reset(counts: Counts, tree: Subtree, column: int, row) -> None:
    """A negated event: the prefixes it follows cannot be extended (Lemmas 5-6)."""
    counts.count[row, column] = 0
    for source in tree.sources:
        moments = counts.moments[source]
        moments.put((row, column), moments.take((row, column)).cleared(np.ones(len(row), bool)))


def _sources_of(qp: QueryPlan, funcs: tuple[str, ...]) -> set[NodeValues]:
    """The values a query takes one of `funcs` of (e.g. the minimum or maximum)."""
    return {
        qp.channel_source[Channel(item.var, item.attr)].values
        for item in qp.plan.aggregate.items
        if item.func in funcs
    }


def _start_matches(rows: RootRows, counts: Counts) -> PieceOutput:
    """The matches of a one-component prefix: the new START rows themselves."""
    new = np.arange(rows.carried, len(rows))
    moments = {s: m.take((new, 0)) for s, m in counts.moments.items()}
    return PieceOutput(new, rows.group[rows.new], counts.count[new, 0], moments)


def _ancestors(nodes: list[Node], n: int) -> set[int]:
    out = set()
    parent = nodes[n].parent
    while parent >= 0:
        out.add(parent)
        parent = nodes[parent].parent
    return out
