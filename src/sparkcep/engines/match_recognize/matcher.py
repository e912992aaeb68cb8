"""The row pattern matcher: the preferred match starting at a row of a partition.

It runs the compiled pattern (`pattern.RowPatternProgram`) as a Pike virtual machine, as
Trino does: every partial match is a *thread*, threads are kept in preferment order, each
row is offered to every thread waiting at a LABEL whose variable's DEFINE holds for the
row in that thread's match so far; when a thread completes, the threads behind it (less
preferred) are dropped and the ones before it go on, so the last completion is the most
preferred match. Two threads at the same instruction whose futures cannot differ (they
agree on everything DEFINE can still read of their matches) are *equivalent*: the less
preferred one is dropped, which keeps the number of threads small.

What DEFINE can read of a match so far is kept per thread as *features*: the last and
first few rows mapped to each variable that DEFINE navigates to, with their labels, and
the running state of its aggregates. Row-local conditions were computed for every row
before matching (`okbits`: one bit per variable).

The V-shape of Trino's documentation, on one customer's order prices:

>>> import numpy as np
>>> from sparkcep.engines.match_recognize import compile_query
>>> from sparkcep.plan.match_recognize import analyze_match_recognize
>>> from sparkcep.plan import Options
>>> plan = analyze_match_recognize('''SELECT * FROM orders MATCH_RECOGNIZE (
...   ORDER BY ts MEASURES LAST(U.totalprice) AS top PATTERN (A B+ C+ D+) SUBSET U = (C, D)
...   DEFINE B AS totalprice < PREV(totalprice),
...          C AS totalprice > PREV(totalprice) AND totalprice <= A.totalprice,
...          D AS totalprice > PREV(totalprice))''', None, Options())
>>> query = compile_query(plan.spec, plan.window)
>>> prices = [90, 80, 70, 80, 90, 100, 110, 90]
>>> segment = query.segment({"totalprice": prices, "ts": list(range(8))},
...                         np.arange(8), offset=0, final=True)
>>> matcher = RowPatternMatcher(query, segment)
>>> labels, excluded = matcher.attempt(0, mn=1)
>>> "".join(query.variables[x] for x in labels)
'ABBCCDD'
"""

from __future__ import annotations

from sparkcep.engines.match_recognize.expressions import (
    UNKNOWN,
    agg_add,
    agg_start,
    agg_value,
)
from sparkcep.engines.match_recognize.pattern import DONE
from sparkcep.errors import SparkcepError

UNDECIDED = "undecided"  # more rows (or the end of the partition) are needed to decide
NO_MATCH = "no match"
MAX_THREADS = 200_000


class TooManyThreads(SparkcepError):
    pass


class FeatureView:
    """A thread's match so far, with row `cur` mapped to `label`, as DEFINE sees it."""

    __slots__ = ("cols", "cur", "feat", "hist", "label", "layout", "lo", "mn", "n", "start")

    def __init__(self, segment, layout, thread, cur: int, label: int, start: int, mn: int):
        self.cols = segment.cols
        self.lo, self.n = segment.lo, segment.n
        self.layout = layout
        self.feat = thread[2]
        self.hist = thread[1]
        self.cur = cur
        self.label = label
        self.start = start
        self.mn = mn

    @property
    def end(self) -> int:
        return self.cur

    def nav(self, kind: str, members, n: int, upto: int):
        slot = self.layout.slots.get((kind, members))
        label = self.label
        mine = members is None or label in members
        if slot is None:  # every row, and no CLASSIFIER read: positions only
            pos = self.cur - n if kind == "last" else self.start + n
            if pos < self.start or pos > self.cur:
                return None
            return pos, (label if pos == self.cur else UNKNOWN)
        rows = self.feat[slot]
        if kind == "last":
            if mine:
                if n == 0:
                    return self.cur, label
                n -= 1
            return rows[-1 - n] if n < len(rows) else None
        if n < len(rows):
            return rows[n]
        if mine and n == len(rows):
            return self.cur, label
        return None

    def label_at(self, pos: int, upto: int):
        if pos == self.cur:
            return self.label
        if pos < self.start or pos > self.cur:
            return None
        node = self.hist
        for _ in range(self.cur - 1 - pos):
            node = node[1]
        return node[0]

    def aggregate(self, i: int, upto: int):
        spec = self.layout.aggs[i]
        state = self.feat[self.layout.agg_slots[i]]
        if spec.members is None or self.label in spec.members:
            value = None if spec.arg is None else spec.arg(self, self.cur, self.label, self.cur)
            state = agg_add(spec.func, state, value, spec.arg is None)
        return agg_value(spec.func, state)


class FeatureLayout:
    """Which features a thread carries: slots of (kind, members) row lists and aggregates."""

    def __init__(self, navs: dict, aggs, agg_indexes, needs_history: bool):
        self.slots: dict = {}
        self.kinds: list = []
        for (kind, members), depth in navs.items():
            self.slots[(kind, members)] = len(self.kinds)
            self.kinds.append((kind, members, depth + 1))
        self.aggs = aggs
        self.agg_slots: dict[int, int] = {}
        for i in agg_indexes:
            self.agg_slots[i] = len(self.kinds)
            self.kinds.append(("agg", i, 0))
        self.needs_history = needs_history

    def __bool__(self) -> bool:
        return bool(self.kinds) or self.needs_history

    def initial(self) -> tuple:
        return tuple(
            agg_start(self.aggs[members].func) if kind == "agg" else ()
            for kind, members, _ in self.kinds
        )

    def update(self, feat: tuple, view: FeatureView, label: int, pos: int) -> tuple:
        out = list(feat)
        for slot, (kind, members, keep) in enumerate(self.kinds):
            if kind == "agg":
                spec = self.aggs[members]
                if spec.members is None or label in spec.members:
                    value = None if spec.arg is None else spec.arg(view, pos, label, pos)
                    out[slot] = agg_add(spec.func, feat[slot], value, spec.arg is None)
            elif members is None or label in members:
                rows = feat[slot]
                if kind == "last":
                    out[slot] = (
                        (*rows[-(keep - 1) :], (pos, label)) if keep > 1 else ((pos, label),)
                    )
                elif len(rows) < keep:
                    out[slot] = (*rows, (pos, label))
        return tuple(out)


class RowPatternMatcher:
    """Matches one partition's rows (a `Segment` of a `CompiledQuery`)."""

    def __init__(self, query, segment):
        self.q = query
        self.seg = segment
        self.program = query.program
        self.layout = query.layout
        n_eval = segment.n if segment.final else segment.n - query.lookahead
        self.n_eval = max(n_eval, 0)

    def attempt(self, start: int, mn: int):
        """The preferred match starting at row `start`: (labels, exclusion bounds), or
        NO_MATCH, or UNDECIDED when the rows at hand cannot tell yet."""
        seg, q = self.seg, self.q
        if start >= self.n_eval:
            return UNDECIDED
        if seg.candidates is not None and not seg.candidates[start]:
            return NO_MATCH  # its first two rows already rule a match out
        ticks, okbits, history = seg.ticks, seg.okbits, q.history
        window, n_eval = q.window, self.n_eval
        t0 = ticks[start]
        feat0 = self.layout.initial() if self.layout else None
        current: list = []
        self._schedule(current, set(), 0, None, feat0, None, start)
        best = None
        j = start
        while current:
            if j >= n_eval:
                return self._stop(current, best, j, t0)
            if window is not None and ticks[j] - t0 >= window:
                return self._out_of_window(current, best)
            bits = okbits[j]
            if feat0 is None:
                current, best = self._step(current, best, j, bits, history, start, mn)
            else:
                current, best = self._step_with_features(current, best, j, bits, start, mn)
            j += 1
        return NO_MATCH if best is None else self._result(best, start)

    def _step(self, current, best, j, bits, history, start, mn):
        """Offer row j to every thread (no features: threads at one instruction are
        equivalent)."""
        op, arg = self.program.op, self.program.a
        table = self._table(j + 1)
        nxt: list = []
        visited: set = set()
        for thread in current:
            pc = thread[0]
            if op[pc] == DONE:
                return nxt, thread
            label = arg[pc]
            if not (bits >> label) & 1:
                continue
            if history[label] and not self._holds(thread, j, label, start, mn):
                continue
            hist = (label, thread[1])
            for target, saves in table[pc + 1]:
                if target in visited:
                    continue
                visited.add(target)
                ex = thread[3]
                for _ in range(saves):
                    ex = (j + 1, ex)
                nxt.append((target, hist, None, ex))
        return nxt, best

    def _step_with_features(self, current, best, j, bits, start, mn):
        op, arg, history = self.program.op, self.program.a, self.q.history
        nxt: list = []
        visited: set = set()
        for thread in current:
            pc = thread[0]
            if op[pc] == DONE:
                return nxt, thread
            label = arg[pc]
            if not (bits >> label) & 1:
                continue
            if history[label] and not self._holds(thread, j, label, start, mn):
                continue
            view = FeatureView(self.seg, self.layout, thread, j, label, start, mn)
            feat = self.layout.update(thread[2], view, label, j)
            self._schedule(nxt, visited, pc + 1, (label, thread[1]), feat, thread[3], j + 1)
            if len(nxt) > MAX_THREADS:
                raise TooManyThreads(
                    f"the pattern keeps more than {MAX_THREADS:,} partial matches alive from "
                    "one row: bound it (WITHIN, a {n,m} quantifier) or make DEFINE stricter"
                )
        return nxt, best

    def _table(self, index: int) -> list:
        seg = self.seg
        at_start = seg.base + index == 0  # the partition's first row
        if index < seg.n:
            return self.program.table(at_start, False)
        return self.program.table(at_start, True if seg.final else None)

    def _out_of_window(self, current, best):
        """Row j is beyond the window: threads waiting for a row die."""
        for thread in current:
            if thread[0] >= 0 and self.program.op[thread[0]] == DONE:
                return self._result(thread, None)
        return NO_MATCH if best is None else self._result(best, None)

    def _holds(self, thread, j, label, start, mn) -> bool:
        view = FeatureView(self.seg, self.layout, thread, j, label, start, mn)
        return all(f(view) is True for f in self.q.history[label])

    def _schedule(self, out, visited, pc, hist, feat, excl, index):
        keyed = feat is not None
        with_history = keyed and self.layout.needs_history
        for target, saves in self._table(index)[pc]:
            if keyed:
                key = (target, feat, hist) if with_history else (target, feat)
            else:
                key = target
            if key in visited:
                continue
            visited.add(key)
            ex = excl
            for _ in range(saves):
                ex = (index, ex)
            out.append((target, hist, feat, ex))

    def _stop(self, current, best, j, t0):
        """No more rows to offer: decide if the rows at hand allow it."""
        seg, window = self.seg, self.q.window
        if seg.final and j >= seg.n:
            closed = True
        elif self.program.op[current[0][0]] == DONE if current[0][0] >= 0 else False:
            return self._result(current[0], None)
        elif window is None:
            return UNDECIDED
        elif j < seg.n:
            closed = seg.ticks[j] - t0 >= window
        else:
            closed = seg.horizon is not None and seg.horizon - t0 >= window
        if not closed:
            return UNDECIDED
        for thread in current:  # rows beyond: threads waiting for a row die
            pc = thread[0]
            if pc < 0:
                return UNDECIDED  # waiting for the partition's end ($)
            if self.program.op[pc] == DONE:
                return self._result(thread, None)
        return NO_MATCH if best is None else self._result(best, None)

    @staticmethod
    def _result(thread, start):
        labels = []
        node = thread[1]
        while node is not None:
            labels.append(node[0])
            node = node[1]
        labels.reverse()
        bounds = []
        node = thread[3]
        while node is not None:
            bounds.append(node[0])
            node = node[1]
        bounds.reverse()
        return labels, bounds
