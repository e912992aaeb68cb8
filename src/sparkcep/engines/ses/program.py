"""Programs that match behind match windows (match-windows.md §4): one per matcher.

The pre-processing is `sparkcep.prep.match_windows`; a program adds the matcher A and
the bookkeeping of a stream of batches. Its state holds the events of the windows not
yet complete. A window W_h (the events from h on, within the window of h's time) is
complete once time has passed h + window: every event before `latest` has arrived after
a batch, every event before `to` after `advance(to)`, and every event at the end. Each
complete window is tested once, in time order; A is called for the candidates, and
reports the matches that start at W_h's first event.

`--prune` (Options.prune) switches the three prunings on in turn: `none` (the plain
match window: every event enters, the windows are not partitioned, A is called for
every window), `f` (filtering), `fp` (and partitioning by the key), `fpc` (and the
necessary match conditions: the default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

import sparkcep.engines.ses.matcher as _limits
from sparkcep.budget import CELL_BYTES, TooManyMatches, describe_size
from sparkcep.engines.base import Program
from sparkcep.engines.nfa.matcher import Matches, PatternMatcher
from sparkcep.engines.nfa.rows import match_rows, plan_order, plan_output
from sparkcep.engines.output import QUERY, OutputColumn, merged_output, sort_rows
from sparkcep.engines.ses.chain import EarliestChain
from sparkcep.engines.ses.conditions import Binding, Conditions
from sparkcep.engines.ses.count import COUNT_FROM, MatchCounter
from sparkcep.engines.ses.jointree import JoinTreeMatcher
from sparkcep.engines.ses.matcher import SesMatcher, TooManyBindings, pattern_sets
from sparkcep.engines.state import state_class
from sparkcep.plan import Plan
from sparkcep.plan.sets import SesSpec, prune_level
from sparkcep.prep.match_windows import WindowConditions, window_ends
from sparkcep.prep.table import EventTable, build_table, frame_ticks
from sparkcep.timeunits import duration_text

OWN = "__own"  # whether an event may start a match (Spark's time ranges own their events)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@state_class
@dataclass
class WindowState:
    buffer: pd.DataFrame | None = None  # events of the windows not yet complete, and later
    latest: int | None = None  # the latest time seen, in ticks
    until: int | None = None  # windows that end by this tick were matched (None: none yet)


class WindowedProgram(Program):
    """Plans keyed alike, matched by a window matcher behind match windows."""

    engine: ClassVar[str] = "windows"
    matcher_name: ClassVar[str] = ""
    always_partitioned: ClassVar[bool] = False  # the matcher relies on the key

    def __init__(self, plans, names, options):
        super().__init__(plans, names, options)
        self.prune = prune_level(options)
        self.keep_unmatched = "f" not in self.prune
        self.partitioned = "p" in self.prune or self.always_partitioned
        if not self.partitioned:
            self.partition_cols = self.segment_cols = ()
        self._output = self._merged_output()

    # ---- what it gives
    @property
    def output(self) -> tuple[OutputColumn, ...]:
        return self._output

    @property
    def order(self) -> tuple[str, ...]:
        first = plan_order(self.plans[0])
        if self.names is None:
            return first
        return (QUERY, *first[: len(self.plans[0].key)], "end", "start")

    def _merged_output(self) -> tuple[OutputColumn, ...]:
        return merged_output(
            lambda plan: plan_output(plan, self.id_col or ""), self.plans, self.names
        )

    def describe(self) -> list[tuple[str, str]]:
        plan = self.plans[0]
        lines = []
        if isinstance(plan.spec, SesSpec):
            sets = ", ".join(
                "{" + ", ".join(v + "+" * plan.component(v).kleene for v in s) + "}"
                for s in plan.spec.sets
            )
            lines.append(
                ("sets", f"SEQ({sets}): a set's variables in any order, the sets in sequence")
            )
            select = plan.spec.select
            lines.append(
                ("select", "the earliest and maximal matches (SELECT EARLIEST MAXIMAL)")
                if select != "all"
                else ("select", "every match (SELECT ALL, Definition 2)")
            )
        lines.append(("matcher", self.matcher_words(plan)))
        lines.append(("windows", _window_words(plan)))
        lines += self.prune_words(plan)
        return lines

    def matcher_words(self, plan: Plan) -> str:
        return self.matcher_name

    def prune_words(self, plan: Plan) -> list[tuple[str, str]]:
        sets = pattern_sets(plan)
        m = sum(len(s) for s in sets)
        prune = self.prune
        lines = [
            (
                "prune",
                f"--prune {prune}" + ("" if prune != "none" else ": the plain match window"),
            )
        ]
        if "f" in prune:
            lines.append(
                ("  f", "filtering (Theorem 1): an event that fits no variable enters no window")
            )
        else:
            lines.append(("  f", "off: every event enters the windows"))
        keys = ", ".join(plan.key)
        if self.partitioned and plan.key:
            why = "" if "p" in prune else " (always: this matcher relies on it)"
            lines.append(
                ("  p", f"partitioning (Definition 6): windows per {keys} (equalities tie "
                        f"every variable to it){why}")
            )  # fmt: skip
        elif plan.key:
            lines.append(("  p", f"off: windows hold every {keys}; the matcher checks them"))
        else:
            lines.append(("  p", "does not apply: no attribute is tied to every variable"))
        if "c" in prune:
            first = ", ".join(sets[0])
            lines.append(
                ("  c", f"necessary conditions (Theorem 2): |W| >= {m}, W[1] can bind "
                        f"{first}, and every variable's count is positive (Theorem 3)")
            )  # fmt: skip
        else:
            lines.append(("  c", "off: A is called for every window"))
        return lines

    # ---- running
    def new_state(self) -> WindowState:
        return WindowState()

    def process(self, state: WindowState, events: pd.DataFrame, *, owned=None) -> pd.DataFrame:
        ticks = self.check_time_order(events, state.latest)
        if len(ticks):
            top = int(ticks.max())
            state.latest = top if state.latest is None else max(state.latest, top)
        frame = events
        if owned is not None or (state.buffer is not None and OWN in state.buffer.columns):
            own = np.ones(len(events), bool) if owned is None else np.asarray(owned, bool)
            frame = events.assign(**{OWN: own})
        if state.buffer is not None and len(state.buffer):
            buffer = state.buffer
            if OWN in frame.columns and OWN not in buffer.columns:
                buffer = buffer.assign(**{OWN: True})
            frame = self.in_order(pd.concat([buffer, frame], ignore_index=True))
        else:
            frame = frame.reset_index(drop=True)
        return self._step(state, frame, state.latest)

    def advance(self, state: WindowState, to: int) -> pd.DataFrame:
        frame = state.buffer if state.buffer is not None else self._no_events()
        if state.until is not None and to <= state.until:
            return self.empty(frame)
        return self._step(state, frame, to)

    def flush(self, state: WindowState) -> pd.DataFrame:
        frame = state.buffer if state.buffer is not None else self._no_events()
        out = self._step(state, frame, INT64_MAX)
        state.buffer = None
        return out

    def is_empty(self, state: WindowState) -> bool:
        return state.buffer is None or not len(state.buffer)

    def _no_events(self) -> pd.DataFrame:
        return pd.DataFrame()

    def _step(self, state: WindowState, frame: pd.DataFrame, until: int | None) -> pd.DataFrame:
        """Match the windows that are complete by `until` and were not before."""
        if until is None:  # no event yet
            return self.empty(frame)
        done = state.until
        if not len(frame):
            state.until = until if done is None else max(done, until)
            state.buffer = None
            return self.empty(frame)
        outs = []
        mask = self.mask(frame)
        for i, plan in enumerate(self.plans):
            out = self._plan_windows(plan, frame, mask, done, until)
            if out is not None and len(out):
                if self.names is not None:
                    out.insert(0, QUERY, self.names[i])
                outs.append(out)
        state.until = until if done is None else max(done, until)
        self._keep(state, frame)
        result = self.concat(outs, frame)
        if len(outs) > 1:
            result = sort_rows(result, self.order)
        return result

    def _keep(self, state: WindowState, frame: pd.DataFrame) -> None:
        windows = [p.window for p in self.plans]
        if any(w is None for w in windows):
            state.buffer = frame if state.until < INT64_MAX else None
            return
        ticks = frame_ticks(frame, self.options.time_col)
        keep = ticks > _clip(state.until - max(windows))  # type: ignore[operator]
        state.buffer = frame[keep].reset_index(drop=True) if keep.any() else None

    def _plan_windows(self, plan, frame, mask, done, until) -> pd.DataFrame | None:
        segments = self.segments_of(frame) if self.partitioned else _ranges_only(frame)
        table = build_table(
            frame,
            mask=self.signatures.plan_mask(plan, mask),
            segment_cols=segments,
            time_col=self.options.time_col,
            tiebreak=self.tiebreak,
            attributes=plan.engine_attributes(),
            keep_unmatched=self.keep_unmatched,
        )
        if not len(table):
            return None
        ends = window_ends(table.ts, table.segment, plan.window)
        heads = _complete(table.ts, plan.window, done, until)
        if OWN in frame.columns:
            heads = heads[frame[OWN].to_numpy(dtype=bool)[table.row[heads]]]
        if "c" in self.prune and len(heads):
            conditions = WindowConditions(_set_bits(plan))
            heads = heads[conditions.candidates(table.mask, table.order, heads, ends[heads])]
        if not len(heads):
            return None
        matches = self.match_windows(plan, frame, table, heads, ends)
        if not len(matches):
            return None
        return match_rows(plan, frame, table, matches, self.id_col)

    def match_windows(self, plan, frame, table, heads, ends) -> Matches:
        raise NotImplementedError

    def key_codes(self, plan: Plan, frame: pd.DataFrame, table: EventTable) -> np.ndarray | None:
        """Unpartitioned windows: each event's key as a number (-1 for a null), so that
        the matcher keeps the events of a match in one partition."""
        if self.partitioned or not plan.key:
            return None
        rows = frame.iloc[table.row][list(plan.key)]
        codes = rows.groupby(list(plan.key), dropna=True, sort=False).ngroup()
        return codes.fillna(-1).to_numpy(dtype=np.int64)


class BindingProgram(WindowedProgram):
    """A program whose matcher gives bindings window by window (SES, join tree).

    Every match (SELECT ALL) of a pattern with no condition between events is counted
    window by window before any is enumerated (`count.MatchCounter`, for the windows
    whose bound exceeds `COUNT_FROM`): a window whose matches cannot fit the memory
    budget, or would take the matcher past its step limit, stops the run at once with
    one line; with `--max-matches`, a window with more matches than are still wanted
    is enumerated only that far."""

    count_first: ClassVar[bool] = True  # False: enumerate without counting (benchmarks)
    remedies: ClassVar[str] = (
        "use SELECT EARLIEST MAXIMAL, a smaller window{key} or --max-matches N"
    )

    def make_matcher(self, plan, table, columns, key):
        raise NotImplementedError

    def match_windows(self, plan, frame, table, heads, ends) -> Matches:
        attrs = plan.engine_attributes()
        columns = {a: table.columns[a].to_list() for a in attrs}
        key = self.key_codes(plan, frame, table)
        counts = self._count_first(plan, frame, table, key, heads, ends)
        matcher = self.make_matcher(plan, table, columns, key)
        found: list[Binding] = []
        firsts: list[int] = []
        meter = self.budget.meter()
        cap = self.budget.max_matches
        for h in heads.tolist():
            if meter.capped:
                break
            limit = None
            if cap is not None and counts.get(h, 0) > cap - meter.found:
                limit = cap - meter.found  # more than are still wanted: the first found
            for binding in matcher.matches(h, int(ends[h]), limit):
                found.append(binding)
                firsts.append(h)
                cells = 3 + sum(len(p) for p in binding.values())  # start, end, ids
                meter.hold(cells * CELL_BYTES, matches=1)
        return bindings_to_matches(plan, table, Conditions(plan, columns), found, firsts)

    # ---- counting before enumerating
    def _count_first(self, plan, frame, table, key, heads, ends) -> dict[int, int]:
        """The matches of the windows worth counting (head -> number); stops the run
        when they cannot be held or enumerated."""
        select = plan.spec.select if isinstance(plan.spec, SesSpec) else "all"
        if not self.count_first or not len(heads) or not MatchCounter.applies(plan, select):
            return {}
        counter = MatchCounter(plan, table, key)
        bounds = counter.log2_bounds(heads, ends[heads])
        memory, cap = self.budget.memory, self.budget.max_matches
        counts: dict[int, int] = {}
        total = matches = 0
        largest = (0, 0)
        for h in heads[bounds > np.log2(COUNT_FROM)].tolist():
            n, cells = counter.count(h, int(ends[h]))
            counts[h] = n
            nbytes = (3 * n + cells) * CELL_BYTES  # what the program would hold
            if cap is None and nbytes > memory:
                where = _window_text(plan, frame, table, h, self.options.time_col)
                raise TooManyMatches(
                    f"stopped before matching: {where} alone has {_many(n)} matches "
                    f"(SELECT ALL), whose rows take {_size(nbytes)}, more than the memory "
                    f"budget of {describe_size(memory)}; {self._remedies(plan)}"
                    + (", or raise --memory-budget" if nbytes < 2**40 else "")
                )
            self.check_window(counter, plan, frame, table, h, int(ends[h]), n, cap)
            total += nbytes
            matches += n
            largest = max(largest, (n, h))
        if cap is None and total > memory:
            where = _window_text(plan, frame, table, largest[1], self.options.time_col)
            raise TooManyMatches(
                f"stopped before matching: the match windows hold at least {_many(matches)} "
                f"matches (SELECT ALL; {where}, {_many(largest[0])}), whose rows take "
                f"{_size(total)}, more than the memory budget of {describe_size(memory)}; "
                f"{self._remedies(plan)}, or raise --memory-budget"
            )
        return counts

    def check_window(self, counter, plan, frame, table, h, end, n, cap) -> None:
        """Stops when the matcher could not enumerate the window's `n` matches."""

    def _remedies(self, plan: Plan) -> str:
        return self.remedies.format(key="" if plan.key else ", a key (WHERE [k])")


class SesProgram(BindingProgram):
    engine = "ses"
    matcher_name = "SES automaton"
    # The earliest and maximal matches of plain variables with no condition between
    # them, for every window at once (chain.EarliestChain); False: window by window
    # (the benchmarks compare both).
    vectorized: ClassVar[bool] = True

    def make_matcher(self, plan, table, columns, key):
        return SesMatcher(plan, table, columns, key=key)

    def check_window(self, counter, plan, frame, table, h, end, n, cap) -> None:
        # Every match is a partial match tried: past the step limit, unless --max-matches
        # stops the window earlier.
        if cap is None and n > _limits.STEP_LIMIT:
            where = _window_text(plan, frame, table, h, self.options.time_col)
            raise TooManyBindings(
                f"stopped before matching: {where} alone has {_many(n)} matches (SELECT "
                f"ALL), more than the {_limits.STEP_LIMIT:,} partial matches one window "
                f"may take; {self._remedies(plan)}"
            )

    def match_windows(self, plan, frame, table, heads, ends) -> Matches:
        select = plan.spec.select if isinstance(plan.spec, SesSpec) else "all"
        if self.vectorized and EarliestChain.applies(plan, select):
            chain = EarliestChain(plan, table, self.key_codes(plan, frame, table))
            if chain.disjoint():
                first, positions = chain.matches(heads, ends[heads])
                if not plan.returns:
                    return _plain_matches(plan, table, first, positions)
                found = [{v: [int(p[i])] for v, p in positions.items()} for i in range(len(first))]
                columns = {a: table.columns[a].to_list() for a in plan.engine_attributes()}
                conditions = Conditions(plan, columns)
                return bindings_to_matches(plan, table, conditions, found, first)
        return super().match_windows(plan, frame, table, heads, ends)

    def matcher_words(self, plan: Plan) -> str:
        select = plan.spec.select if isinstance(plan.spec, SesSpec) else "all"
        what = "the earliest and maximal matches" if select != "all" else "every match"
        return f"SES automaton: {what} from each window's first event (A of Definition 4)"


class JoinTreeProgram(BindingProgram):
    engine = "jointree"
    matcher_name = "join tree"

    remedies = (
        "use --algorithm ses (SELECT EARLIEST MAXIMAL, or --max-matches N) or a smaller window{key}"
    )

    def make_matcher(self, plan, table, columns, key):
        return JoinTreeMatcher(plan, table, columns, key=key)

    def check_window(self, counter, plan, frame, table, h, end, n, cap) -> None:
        # The tree builds every match, and first each v+'s Kleene closure node, one
        # partial match each: past the step limit, whatever --max-matches says.
        limit = _limits.STEP_LIMIT
        what = None
        if n > limit:
            what = f"alone has {_many(n)} matches (SELECT ALL)"
        else:
            for var in sorted(counter.kleene):
                k = counter.closure(h, end, var)
                if k > limit:
                    what = f"gives the join tree {_many(k)} sequences of {var}+ (its closure node)"
                    break
        if what is not None:
            where = _window_text(plan, frame, table, h, self.options.time_col)
            raise TooManyBindings(
                f"stopped before matching: {where} {what}, more than the {limit:,} partial "
                f"matches one window may take; {self._remedies(plan)}"
            )

    def matcher_words(self, plan: Plan) -> str:
        return (
            "join tree (ZStream): every match from each window's first event; a "
            "conjunction node per set, sequence nodes between sets"
        )


class NfaWindowsProgram(WindowedProgram):
    engine = "nfa-windows"
    always_partitioned = True

    def match_windows(self, plan, frame, table, heads, ends) -> Matches:
        starts = np.zeros(len(table), dtype=bool)
        starts[heads] = True
        return PatternMatcher(plan, table, self.budget).run(starts=starts)

    def matcher_words(self, plan: Plan) -> str:
        return "nfa: the runs that start at each candidate window's first event, all at once"


def bindings_to_matches(
    plan: Plan, table: EventTable, conditions: Conditions, found: list[Binding], firsts
) -> Matches:
    """Bindings (variable -> table positions) as the nfa engine's `Matches`."""
    n = len(found)
    first = np.asarray(firsts, dtype=np.int64)
    last = np.asarray([max(max(p) for p in b.values()) for b in found], dtype=np.int64)
    positions: dict[str, np.ndarray] = {}
    for comp in plan.positives:
        if comp.kleene:
            arr = np.empty(n, dtype=object)
            arr[:] = [np.asarray(b[comp.var], dtype=np.int64) for b in found]
            positions[comp.var] = arr
        else:
            positions[comp.var] = np.asarray([b[comp.var][0] for b in found], dtype=np.int64)
    values = {col.name: [conditions.value(col, b) for b in found] for col in plan.returns}
    segment = table.segment[first] if n else np.zeros(0, dtype=np.int64)
    return Matches(first, last, segment, positions, values)


def _window_text(plan: Plan, frame: pd.DataFrame, table: EventTable, h: int, time_col: str) -> str:
    """'the match window from <time> (<key> <value>)': the window of table position h."""
    row = frame.iloc[int(table.row[h]) if table.row is not None else h]
    keys = ", ".join(f"{k} {row[k]}" for k in plan.key if k in frame.columns)
    return f"the match window from {row[time_col]}" + (f" ({keys})" if keys else "")


def _many(n: int) -> str:
    """
    >>> _many(12345), _many(2**60), _many(2**5000)
    ('12,345', 'about 1.2e+18', 'about 2^5000')
    """
    if n < 10**15:
        return f"{n:,}"
    if n.bit_length() < 1000:
        return f"about {float(n):.1e}"
    return f"about 2^{n.bit_length() - 1}"


def _size(nbytes: int) -> str:
    return describe_size(nbytes) if nbytes < 2**40 else f"{_many(nbytes)} bytes"


def _plain_matches(plan: Plan, table: EventTable, first, positions) -> Matches:
    last = np.max(np.vstack(list(positions.values())), axis=0) if len(first) else first
    segment = table.segment[first] if len(first) else np.zeros(0, dtype=np.int64)
    return Matches(first, last, segment, {v: p.astype(np.int64) for v, p in positions.items()}, {})


def _set_bits(plan: Plan) -> list[list[int]]:
    index = {c.var: c.index for c in plan.positives}
    return [[index[v] for v in members] for members in pattern_sets(plan)]


def _ranges_only(frame: pd.DataFrame) -> list[str]:
    from sparkcep.prep.layout import RANGE

    return [RANGE] if RANGE in frame.columns else []


def _clip(x: int) -> int:
    return min(max(x, INT64_MIN), INT64_MAX)


def _complete(ts: np.ndarray, window: int | None, done: int | None, until: int) -> np.ndarray:
    """Positions whose window ends (ts + window) in (done, until]."""
    if window is None:
        ok = np.ones(len(ts), bool) if until >= INT64_MAX else np.zeros(len(ts), bool)
        return np.flatnonzero(ok)
    ok = ts <= _clip(until - window)
    if done is not None:
        ok &= ts > _clip(done - window)
    return np.flatnonzero(ok)


def _window_words(plan: Plan) -> str:
    spec = plan.spec if isinstance(plan.spec, SesSpec) else None
    if plan.window is None:
        return "each event's match window is the rest of its partition (no WITHIN)"
    inclusive = spec is not None and spec.inclusive
    tau = plan.window - 1 if inclusive else plan.window
    sign = "<=" if inclusive else "<"
    within = plan.query.within
    length = f"{tau} ticks"
    if plan.time_kind != "timestamp" and plan.options.time_unit is None and within.unit:
        length = duration_text(tau, None, (within.amount, within.unit))  # no ticks to say
    return (
        f"each event's match window holds the events e with 0 <= e.ts - ts {sign} {length} "
        "(Definition 3); A is called once the window is complete"
    )


__all__ = [
    "JoinTreeProgram",
    "NfaWindowsProgram",
    "SesProgram",
    "WindowState",
    "WindowedProgram",
]
