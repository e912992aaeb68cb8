"""A-Seq's prefix counters (aseq-online-aggregation.md §3, §5): per START event, the
number of matches of each prefix of the forest's patterns, and the moments (sum, non-null
count, minimum and maximum) of aggregated attributes over them, all STARTs moving together."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sparkcep.engines.aseq.combine import Moments, concat_arrays
from sparkcep.engines.aseq.forest import Forest, Node, NodeValues
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
    starts = np.flatnonzero(change)
    group_of = np.cumsum(change) - 1  # the group of each event
    ngroups = len(starts)
    segment_first = group_of[segment_firsts(table)]
    segment_end = np.repeat(
        np.r_[segment_first[1:], ngroups], np.diff(np.r_[segment_first, ngroups])
    )
    counts = {}
    for bit in bits:
        has = (table.mask >> bit) & 1
        counts[bit] = np.bincount(group_of, weights=has, minlength=ngroups).astype(np.int64)
    values = {}
    for bit, attr in columns:
        col = table.columns[attr]
        has = ((table.mask >> bit) & 1).astype(bool) & ~col.nulls()
        values[(bit, attr)] = _group_moments(col.values[has], group_of[has], ngroups)
    return GroupStats(
        starts, table.ts[starts], table.segment[starts], segment_end, segment_first, counts, values
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

    def add(self, rows: np.ndarray, before: np.ndarray, step: Step) -> None:
        """One step: the new matches added to `rows` (counts `before` the step), with
        the prefixes a negated event killed cleared first (the recounting rule)."""
        if step.reset.any():
            self.count[rows] = np.where(step.reset, 0, before) + step.count
            for source, delta in step.moments.items():
                moments = self.moments[source]
                moments.put(rows, moments.take(rows).cleared(step.reset).plus(delta))
        else:
            self.count[rows] = before + step.count
            for source, delta in step.moments.items():
                moments = self.moments[source]
                moments.put(rows, moments.take(rows).plus(delta))


@dataclass
class Step:
    """What one step adds, per active START row and subtree node: new matches and their
    moments, and where a negated event resets the prefixes."""

    count: np.ndarray
    reset: np.ndarray
    moments: dict[NodeValues, Moments]


@dataclass
class NodeStep:
    """How a subtree node takes a step: from its parent's counts (`parent` column) and
    the group's events with its bits; which values it reads from those events (`read`)
    and which it carries from its ancestors' prefixes (`inherit`)."""

    column: int
    parent: int
    negated: bool
    bits: tuple[int, ...]
    read: list[NodeValues]
    inherit: list[NodeValues]


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
        self.collect: set[int] = set()  # nodes whose matches a query reads
        self.sources: dict[int, list[NodeValues]] = {}  # node -> values counted there
        for qp in forest.queries:
            for piece in qp.pieces:
                self.collect.add(piece.nodes[-1])
            for source in qp.channel_source.values():
                counted = self.sources.setdefault(source.values.node, [])
                if source.values not in counted:
                    counted.append(source.values)
        bits = {bit for node in forest.nodes for bit in node.bits}
        columns = {(s.bit, s.attr) for counted in self.sources.values() for s in counted}
        self.stats = group_stats(table, bits, columns)
        self.outputs: dict[int, PieceOutput] = {}
        self._by_start: dict[int, PieceOutput] = {}
        self.rows: dict[int, RootRows] = {}  # root -> its START rows
        self.final: dict[int, CarryRows] = {}  # counters after this table, per root
        self.peak_counters = 0  # most counters alive at once (the paper's memory measure)
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
        self._run_steps(tree, rows, counts, found)
        for n, parts in found.items():
            self.outputs[n] = PieceOutput.concat(parts, tree.sources)
        keys = self._row_keys(rows, carried)
        self.final[root] = CarryRows(keys, rows.start_ts, counts.count, counts.moments)

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
            moments[source] = Moments.zeros(shape, dtype)
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
        self, tree: Subtree, rows: RootRows, counts: Counts, found: dict[int, list[PieceOutput]]
    ) -> None:
        """Step j adds the group j places after each START row's, while it is in the
        row's segment and window. A root with no child takes no step."""
        if len(tree.nodes) == 1:
            return
        guard = self._overflow_guard(tree)
        node_steps = self._node_steps(tree)
        window = self.forest.nodes[tree.root].window
        width = len(tree.nodes) * (1 + 4 * len(tree.sources))  # counters per row
        ts = self.stats.ts
        active = np.arange(len(rows))
        offset = 0
        while len(active):
            offset += 1
            groups = rows.base[active] + offset
            alive = groups < rows.segment_end[active]
            alive[alive] &= ts[groups[alive]] - rows.start_ts[active[alive]] < window
            active, groups = active[alive], groups[alive]
            if not len(active):
                break
            self.peak_counters = max(self.peak_counters, len(active) * width)
            before = counts.count[active]
            if counts.count.dtype != object and before.max(initial=0) > guard:
                counts.widen()
                before = counts.count[active]
            step = self._step(node_steps, groups, before, counts, active)
            counts.add(active, before, step)
            self._emit(tree, found, active, groups, step)

    def _node_steps(self, tree: Subtree) -> list[NodeStep]:
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
        return out

    def _step(
        self,
        node_steps: list[NodeStep],
        groups: np.ndarray,
        before: np.ndarray,
        counts: Counts,
        active: np.ndarray,
    ) -> Step:
        """The matches each node's prefix gains at `groups` (one per active row)."""
        stats = self.stats
        shape = (len(active), before.shape[1])
        step = Step(
            np.zeros_like(before),
            np.zeros(shape, dtype=bool),
            {
                s: Moments.zeros(shape, m.sums.dtype, m.nonnull.dtype)
                for s, m in counts.moments.items()
            },
        )
        for node in node_steps:
            j, parent = node.column, node.parent
            if node.negated:  # the negations of a gap: the next positive's new matches
                step.count[:, j] = step.count[:, parent]
                hit = np.zeros(len(active), dtype=bool)
                for bit in node.bits:
                    hit |= stats.count[bit][groups] > 0
                step.reset[:, j] = hit
                for delta in step.moments.values():
                    delta.put((slice(None), j), delta.take((slice(None), parent)))
                continue
            (bit,) = node.bits
            events = stats.count[bit][groups]
            prefixes = before[:, parent]
            step.count[:, j] = prefixes * events
            for source in node.read:  # the value of the event that extends each prefix
                values = stats.values[(source.bit, source.attr)].take(groups)
                step.moments[source].put((slice(None), j), values.scaled(prefixes))
            for source in node.inherit:  # the values in each prefix, once per event
                prefix = counts.moments[source].take((active, parent))
                step.moments[source].put((slice(None), j), prefix.scaled(events))
        return step

    # ---- emission
    def _emit(
        self,
        tree: Subtree,
        found: dict[int, list[PieceOutput]],
        active: np.ndarray,
        groups: np.ndarray,
        step: Step,
    ) -> None:
        """The new matches of the nodes queries read, as contributions."""
        for n, parts in found.items():
            if n == tree.root:
                continue
            j = tree.column[n]
            new = np.flatnonzero(step.count[:, j] != 0)
            if len(new):
                moments = {s: m.take((new, j)) for s, m in step.moments.items()}
                parts.append(PieceOutput(active[new], groups[new], step.count[new, j], moments))


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
