"""One partition's events, instant by instant, through one of the three algorithms.

Each instant's events are added to the segment (the ring and, for CBS-Tree, the tree);
then every predicate whose sink symbol arrived is retrieved with CBR from the index the
algorithm uses — the CBS-Tree, DirectMatch's scan, or ToFel's queues — and a found
min-latest occurrence replaces the predicate's rejected instances. The CBS-Tree runs
compiled (`kernel.py`: a whole batch of instants per call, every rule's retrieval cut to
its window); without numba it runs in Python (`tree.py`, `cbr.py`, DirectMatch while
fewer than L events have arrived), with the same answers. Rules with one predicate share its occurrences
(`RuleSet.predicates`): each is found once and reported for every one of them. A row is
reported when the instant is owned (Spark's time ranges; always, otherwise).
"""

from __future__ import annotations

import gc
import itertools
from dataclasses import dataclass

import numpy as np

from sparkcep.budget import CELL_BYTES, Budget
from sparkcep.engines.episodes.cbr import CBR
from sparkcep.engines.episodes.rules import RuleSet
from sparkcep.engines.episodes.tofel import ToFel
from sparkcep.engines.episodes.window import (
    DirectMatch,
    Segment,
    SharedAnswers,
    TreeIndex,
    grow_for,
    push,
    resize,
    start,
)

kernel = None  # the compiled CBS-Tree (kernel.py), imported by the first matcher that uses it


def _kernel():
    """kernel.py, or None without numba (the Python CBS-Tree gives the same answers).
    Imported when first needed: numba takes about 0.4 s to import; the compiled code is
    read from numba's cache (compiled once, about 7 s, on the first run ever)."""
    global kernel
    if kernel is None:
        try:
            from sparkcep.engines.episodes import kernel as compiled
        except ImportError:  # pragma: no cover
            return None
        kernel = compiled
    return kernel


ALGORITHMS = {
    "episodes": "CBS-Tree over the last L events (DirectMatch while fewer have arrived)",
    "tofel": "ToFel: forward partial matches of each rule, advanced by every event",
    "directmatch": "DirectMatch: scan the raw events of the window",
}
MIN_CAPACITY = 8
MAX_START_CAPACITY = 1024


@dataclass
class Found:
    """A min-latest occurrence of a predicate, one row for each of its `rules`: the ids
    of its events (in vertex order) and its first and last time."""

    rules: tuple[int, ...]
    ids: np.ndarray
    start_time: object
    end_time: object


class _Lows(dict):
    """Predicate window -> the first position within it, computed when first asked."""

    def __init__(self, seg: Segment, tick: int):
        super().__init__()
        self.seg, self.tick = seg, tick

    def __missing__(self, window: int) -> int:
        low = self[window] = self.seg.lower(self.tick - window)
        return low


class Matcher:
    """Min-latest occurrences of a rule set over the segments of a stream."""

    def __init__(self, rules: RuleSet, algorithm: str, budget: Budget | None = None):
        if algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r}")
        self.budget = budget or Budget()  # the occurrences a `feed` holds count against it
        self.rules = rules
        self.algorithm = algorithm
        # One CBR per predicate, on its first rule (its rules differ in the consequent only).
        self.cbr = [CBR(rules[members[0]]) for members in rules.predicates]
        self.tofel = ToFel(rules) if algorithm == "tofel" else None
        self.compiled = (
            _Compiled(rules) if algorithm == "episodes" and _kernel() is not None else None
        )

    def feed(
        self, seg: Segment, symbols, ticks, new_instant, times, ids, owned=None
    ) -> list[Found]:
        """Events of one segment in processing order (symbol ids >= 0), with the start
        of each instant marked; returns the occurrences found at owned instants.

        Python's cyclic garbage collector waits meanwhile (as in `EpisodeProgram.process`):
        a batch makes an object or more per occurrence, tens of thousands of them, which set
        off full collections walking every object of the process, the parsed rules included
        (10,000 dense episodes, 5,000 events, 278,569 occurrences: making their `Found`s
        took 1.1 of the 2.6 s with the collector on, 0.35 s with it waiting)."""
        if not len(symbols):
            return []
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._feed(seg, symbols, ticks, new_instant, times, ids, owned)
        finally:
            if collecting:
                gc.enable()

    def _feed(self, seg: Segment, symbols, ticks, new_instant, times, ids, owned) -> list[Found]:
        n = len(symbols)
        if seg.capacity == 0:
            start(seg, self._start_capacity(), times, ids)
        if self.compiled is not None:
            return self.compiled.feed(seg, symbols, ticks, new_instant, times, ids, owned, self)
        starts = [*np.flatnonzero(new_instant).tolist(), n]
        found: list[Found] = []
        symbols, ticks = symbols.tolist(), ticks.tolist()
        meter = self.budget.meter()
        for a, b in itertools.pairwise(starts):
            mine = owned is None or bool(owned[b - 1])
            before = len(found)
            self._instant(seg, symbols[a:b], ticks[a], times[a:b], ids[a:b], mine, found)
            for occurrence in found[before:]:  # a row per rule: ids, positions, times, rule
                size = (3 + 2 * len(occurrence.ids)) * CELL_BYTES
                meter.hold_each(size, len(occurrence.rules))
        return found

    def _start_capacity(self) -> int:
        return min(max(self.rules.max_window, MIN_CAPACITY), MAX_START_CAPACITY)

    def _instant(self, seg: Segment, symbols, tick, times, ids, mine, found) -> None:
        first = seg.count
        if self.algorithm == "episodes":
            seg.tree()  # built (or rebuilt after the state was read back) before the pushes
        for s, t, i in zip(symbols, times, ids):
            grow_for(seg, tick, self.rules.max_window)
            push(seg, s, tick, first, t, i)
        lows = _Lows(seg, tick)
        rules = self.rules
        if self.tofel is not None:  # ToFel finds its occurrences forward: no retrieval
            fired = self.tofel.arrive(seg, range(first, seg.count), symbols, lows)
            # A predicate's rules hold the same matches: they fire together.
            if mine:
                for p in sorted({rules.predicate_of[r] for r in fired}):
                    members = rules.predicates[p]
                    found.append(self._found(seg, members, fired[members[0]]))
            return
        arrived = {s: first + i for i, s in enumerate(symbols)}
        triggered = rules.triggered(arrived)
        rt = seg.count - 1
        shared = self._shared(seg) if triggered else None
        for p in triggered:
            members = rules.predicates[p]
            # The predicate's rejected instances are kept under its first rule: a state
            # stored when every rule kept its own reads back the same.
            lead = members[0]
            cbr = self.cbr[p]
            low = lows[cbr.rule.window]
            pos = cbr.match(shared, low, rt, seg.rejected.get(lead, ()), arrived)
            if pos is None:
                continue
            seg.rejected[lead] = tuple(sorted(cbr.rejected(shared, pos)))
            if mine:
                found.append(self._found(seg, members, pos))

    @staticmethod
    def _found(seg: Segment, members: tuple[int, ...], pos) -> Found:
        cap = seg.capacity
        ids = seg.ident[[q % cap for q in pos]]
        start, end = seg.time[min(pos) % cap], seg.time[max(pos) % cap]
        return Found(members, ids, start, end)

    def _shared(self, seg: Segment) -> SharedAnswers:
        """One index for every rule of the instant: the CBS-Tree (DirectMatch while
        fewer than L events have arrived), or DirectMatch."""
        if self.algorithm == "episodes" and seg.count >= seg.capacity:
            return SharedAnswers(TreeIndex(seg))
        return SharedAnswers(DirectMatch(seg))

    def prune(self, seg: Segment, horizon: int) -> bool:
        """Time reached `horizon`: forget what no occurrence ending from then on can
        use. Returns whether the segment still holds anything."""
        if seg.count == 0:
            return False
        last = int(seg.tick[(seg.count - 1) % seg.capacity])
        if last <= horizon - self.rules.max_window:
            return False
        low = seg.lower(horizon - self.rules.max_window)
        seg.rejected = {r: p for r, p in seg.rejected.items() if p and max(p) >= low}
        held = getattr(seg, "_kernel", None)
        if held is not None:  # what was dropped lies before every window from now on
            held.rejected_of = seg.rejected
        if self.tofel is not None:
            self.tofel.prune(seg, lambda w: seg.lower(horizon - w))
        return True


class _Compiled:
    """The rules as the arrays `kernel.run` reads, and the feeding of a segment through it:
    the kernel stops to let the ring grow (L doubles, as `grow_for`) and when its output
    is full; the occurrences become `Found` rows between calls."""

    def __init__(self, rules: RuleSet):
        # (the kernel is looked up at each use: a matcher unpickled in a Spark worker finds
        # the module not yet imported there)
        self.rules = rules
        leads = [rules[members[0]] for members in rules.predicates]
        self.members = rules.predicates
        self.n_vertices = np.array([len(r.symbols) for r in leads], np.int64)
        self.v_off = np.concatenate([[0], np.cumsum(self.n_vertices)]).astype(np.int64)
        self.v_sym = np.array([s for r in leads for s in r.symbols], np.int64)
        self.v_ret = np.array([v for r in leads for v in r.retrieval], np.int64)
        self.v_topo = np.array([v for r in leads for v in r.topological], np.int64)
        succ = [ws for r in leads for ws in r.succ]
        self.s_off = np.concatenate([[0], np.cumsum([len(ws) for ws in succ])]).astype(np.int64)
        self.s_list = np.array([w for ws in succ for w in ws], np.int64)
        self.windows = np.array(sorted({r.window for r in leads}), np.int64)
        self.p_win = np.searchsorted(self.windows, [r.window for r in leads]).astype(np.int64)
        n_symbols = len(rules.symbols)
        by_sink = [rules.predicates_by_sink.get(s, ()) for s in range(n_symbols)]
        self.sink_off = np.concatenate([[0], np.cumsum([len(p) for p in by_sink])]).astype(np.int64)
        self.sink_list = np.array([p for ps in by_sink for p in ps], np.int64)
        self.n_rules = np.array([len(m) for m in self.members], np.int64)
        self.max_v = int(self.n_vertices.max())
        self.out_pred = np.empty(max(4 * len(leads), 1 << 15), np.int64)
        self.out_pos = np.empty((len(self.out_pred), self.max_v), np.int64)

    def held(self, seg: Segment) -> _Held:
        """The segment's tree and rejected instances as arrays (made again after the
        state was stored and read back, or the ring grew)."""
        held = getattr(seg, "_kernel", None)
        if held is None or held.rejected_of is not seg.rejected:
            held = _Held(self, seg)
            seg._kernel = held
        if held.tree is None or held.tree.capacity != seg.capacity:
            held.tree = _kernel().Tree(seg.capacity, len(self.rules.symbols))
            _kernel().build(seg.capacity, held.tree.bits, seg.sym, seg.count)
        return held

    def feed(self, seg: Segment, symbols, ticks, new_instant, times, ids, owned, matcher):
        n = len(symbols)
        syms = np.asarray(symbols, np.int64)
        ticks = np.asarray(ticks, np.int64)
        new_instant = np.asarray(new_instant, np.bool_)
        owned = np.ones(n, np.bool_) if owned is None else np.asarray(owned, np.bool_)
        found: list[Found] = []
        meter = matcher.budget.meter()
        i = 0
        while True:
            held = self.held(seg)
            entry = seg.count
            state = np.array([seg.count, seg.capacity], np.int64)
            why, i_next, nf = self._run(seg, held, state, syms, ticks, new_instant, owned, i)
            count = int(state[0])
            self._found(seg, entry, i, nf, times, ids, found, meter)
            # The ring's other columns, for the events the kernel pushed
            take = min(count - entry, seg.capacity)
            if take:
                q = np.arange(count - take, count)
                slots, rows = q % seg.capacity, i + (q - entry)
                seg.time[slots] = times[rows]
                seg.ident[slots] = ids[rows]
            seg.count = count
            if why == _kernel().DONE:  # (a predicate changed in several calls: written once)
                self._write_back(seg, held)
                return found
            if why == _kernel().GROW:
                self._grow(seg, ticks, new_instant, i_next)
            i = int(i_next)

    def _run(self, seg: Segment, held: _Held, state, syms, ticks, new_instant, owned, i):
        """One call of the kernel from event i: (why it returned, where to go on, the
        number of occurrences it wrote)."""
        return _kernel().run(
            syms, ticks, new_instant, owned, i, seg.sym, seg.tick, seg.first, state,
            held.tree.bits, *self._rule_arrays(held),
        )  # fmt: skip

    def _rule_arrays(self, held: _Held) -> tuple:
        """The kernel's arguments after the ring and the tree: the rules, the rejected
        instances and the output buffer."""
        return (
            self.v_off, self.v_sym, self.v_ret, self.v_topo, self.s_off, self.s_list,
            self.p_win, self.windows, self.rules.max_window, self.sink_off, self.sink_list,
            held.rej, held.rej_n, held.changed, self.out_pred, self.out_pos,
        )  # fmt: skip

    def _grow(self, seg: Segment, ticks, new_instant, i: int) -> None:
        """Double L until the instant at event i leaves no event of the largest window
        behind (`grow_for`, checked for each of the instant's events)."""
        j = i + 1
        while j < len(ticks) and not new_instant[j]:
            j += 1
        tick, window = int(ticks[i]), self.rules.max_window

        def short() -> bool:
            cap = seg.capacity
            return any(
                q >= cap and seg.tick[q % cap] > tick - window
                for q in range(seg.count, seg.count + j - i)
            )

        while short():
            resize(seg, 2 * seg.capacity)

    def _found(self, seg: Segment, entry: int, i: int, nf: int, times, ids, found, meter):
        """Found rows for the kernel's occurrences: a position before `entry` is still in
        the ring's time and id columns, a later one is in this batch."""
        if not nf:
            return
        pred = self.out_pred[:nf]
        pos = self.out_pos[:nf]
        valid = pos >= 0
        batch = pos >= entry
        cap = seg.capacity
        ring_slot = np.where(valid & ~batch, pos, 0) % cap
        row = np.where(batch, i + pos - entry, 0)
        id_of = np.where(batch, ids[row], seg.ident[ring_slot])
        first = np.where(valid, pos, np.iinfo(np.int64).max).argmin(axis=1)
        last = pos.argmax(axis=1)
        at = np.arange(nf)
        time_of = np.where(batch, times[row], seg.time[ring_slot])
        starts, ends = time_of[at, first], time_of[at, last]
        nv = self.n_vertices[pred]
        # Each occurrence's ids: the rows of one new array per number of vertices (views,
        # made in numpy's loop), not a slice and a copy each
        ids_of: list = [None] * nf
        order = np.argsort(nv, kind="stable")
        for group in np.split(order, np.flatnonzero(np.diff(nv[order])) + 1):
            for k, row in zip(group.tolist(), id_of[group, : nv[group[0]]]):
                ids_of[k] = row
        rules = map(self.members.__getitem__, pred.tolist())
        found += map(Found, rules, ids_of, starts, ends)
        # A row per rule: ids, positions, times, rule (as the Python path holds them)
        nbytes, rows = (3 + 2 * nv) * CELL_BYTES, self.n_rules[pred]
        if meter.held + int((nbytes * rows).sum()) <= meter.budget.memory:
            meter.held += int((nbytes * rows).sum())
            meter.found += int(rows.sum())
        else:  # stop at the same match as one occurrence at a time
            for size, count in zip(nbytes.tolist(), rows.tolist()):
                meter.hold_each(size, count)

    def _write_back(self, seg: Segment, held: _Held) -> None:
        """The rejected instances the kernel changed, into the segment's state."""
        changed = np.flatnonzero(held.changed)
        if not len(changed):
            return
        held.changed[changed] = 0
        for p in changed.tolist():
            at = self.v_off[p]
            kept = held.rej[at : at + held.rej_n[p]].tolist()
            seg.rejected[self.members[p][0]] = tuple(sorted(set(kept)))


class _Held:
    """Beside a segment's state: its CBS-Tree as arrays, and each predicate's rejected
    instances as rows (`seg.rejected` is what is stored)."""

    def __init__(self, compiled: _Compiled, seg: Segment):
        n = len(compiled.members)
        self.tree = None
        self.rej = np.zeros(compiled.v_off[-1], np.int64)  # predicate p's from v_off[p] on
        self.rej_n = np.zeros(n, np.int64)
        self.changed = np.zeros(n, np.uint8)
        for p, members in enumerate(compiled.members):
            kept = seg.rejected.get(members[0], ())
            if kept:
                at = compiled.v_off[p]
                self.rej[at : at + len(kept)] = kept
                self.rej_n[p] = len(kept)
        self.rejected_of = seg.rejected
