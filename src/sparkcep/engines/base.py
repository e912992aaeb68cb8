"""The one engine interface: an `Engine` compiles plans into a `Program`; runners drive
programs and never name an engine.

    plans ──choose──▶ Engine ──compile──▶ Program ──▶ process / advance / flush over
                                                      time-sorted events of a partition

A `Program` is built once and never changes (as FlinkCEP's compiled `NFA`); the state of
one partition of the stream is a separate small value (as FlinkCEP's `NFAState`), so
streaming stores state, not plans. A program declares everything a runner needs:

- which events it wants: `signatures` (type + local conditions, one bit each: the mask
  and the pushed-down filter), `keep_unmatched` (strict contiguity sees every event),
  `columns()` it reads;
- how the stream may be split: `partition_cols` (whole partitions on one worker),
  `segment_cols` (what one run of the automaton or one set of counters sees), `reach`
  (how far before and after its own events a time range must see, None = unbounded);
- what it returns: `output`, the one output contract (the empty pandas frame, the Spark
  schema, `explain` and the docs come from it), and `order`, the rows' order.

Events given to `process` are in processing order (segment, time, tie-break, id), hold
one or more segments, and are never older than what an earlier call saw of their
segment; `owned` (a bool per row) says which events may anchor output (Spark's time
ranges). `advance(state, to)` says no event before `to` will come; `flush` ends the
stream. Each returns rows of `output`.

An engine may offer more than answering queries: `MinesRules` and `FitsModels` declare
those capabilities (the jobs that need them find the engine by them, never by its name).
Which engines there are, and `choose(plan)`, the only place an engine is chosen, live in
`engines.registry`; the helpers for output rows in `engines.output`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from sparkcep.budget import Budget
from sparkcep.engines.output import OutputColumn, concat_rows, empty_frame
from sparkcep.errors import DataError
from sparkcep.language import ast
from sparkcep.plan import Options, Plan
from sparkcep.prep.layout import RANGE
from sparkcep.prep.mask import Signatures, components_mask
from sparkcep.prep.table import MASK, frame_ticks, processing_order


@dataclass(frozen=True)
class RowCheck:
    """A condition every input row must meet for a program (a local expression over input
    columns: `AttrRef`s name columns, SQL null logic, a row passes only when TRUE), and the
    reason given to the rows that fail: every runner sends them to the rejected output.

    E.g. an interval time: `RowCheck(ts_upper >= ts, "ts_upper is before ts")`.
    """

    holds: ast.Expr
    reason: str


def failed_checks(checks: Sequence[RowCheck], frame: pd.DataFrame) -> np.ndarray:
    """Per row, the reason of the first check it fails, or None."""
    from sparkcep.expressions import column_vec, truth

    reasons = np.full(len(frame), None, dtype=object)
    cache: dict[str, Any] = {}

    def resolve(node):
        if node.attr not in cache:
            cache[node.attr] = column_vec(frame[node.attr])
        return cache[node.attr]

    for check in checks:
        ok = truth(check.holds, resolve, len(frame))
        reasons[~ok & pd.isna(reasons)] = check.reason
    return reasons


class Program(ABC):
    """A compiled job: one or more plans that partition the stream alike."""

    engine: ClassVar[str]

    def __init__(self, plans: Sequence[Plan], names: Sequence[str | None], options: Options):
        self.plans = tuple(plans)
        self.options = options
        # What its matchers may hold (--memory-budget) and need (--max-matches): each
        # matcher the program builds is given it.
        self.budget = Budget.of(options)
        # Names label the rows when several queries run together (compile_jobs names them).
        self.names = tuple(names) if any(n is not None for n in names) else None
        self.id_col = options.id_col  # runners set it (row numbers when the input has none)
        self.signatures = Signatures(self.plans)
        first = self.plans[0]
        self.segment_cols: tuple[str, ...] = first.key
        self.partition_cols: tuple[str, ...] = first.key
        self.tiebreak = first.tiebreak
        self.keep_unmatched = False

    # ---- what the program needs and gives
    @property
    def reach(self) -> tuple[int | None, int | None]:
        """Ticks a time range must see before and after its own events (None: all)."""
        windows = [p.window for p in self.plans]
        w = None if any(x is None for x in windows) else max(windows)  # type: ignore[type-var]
        return w, w

    @property
    @abstractmethod
    def output(self) -> tuple[OutputColumn, ...]: ...

    @property
    @abstractmethod
    def order(self) -> tuple[str, ...]: ...

    @property
    def label(self) -> str:
        """What a row is, for summaries: 'matches' or 'rows'."""
        return "matches"

    def attributes(self) -> tuple[str, ...]:
        """Attribute columns the kernel reads."""
        names: list[str] = []
        for plan in self.plans:
            names += plan.engine_attributes()
        return tuple(dict.fromkeys(names))

    def columns(self) -> tuple[str, ...]:
        """Every input column the program reads (the filter's included)."""
        opts = self.options
        names = [*self.partition_cols, *self.segment_cols, opts.time_col]
        names += [c for c in (self.tiebreak, self.id_col, opts.type_col) if c]
        names += [c for c in (opts.time_end_col, opts.prob_col) if c]
        names += self.attributes()
        for plan in self.plans:
            names += plan.local_attributes()
        return tuple(dict.fromkeys(names))

    def describe(self) -> list[tuple[str, str]]:
        """Lines for `explain` that only this engine can say."""
        return []

    def explain_lines(self) -> list[tuple[str, str]] | None:
        """All of `explain`'s lines after the engine's, for a program whose plan is not a
        SEQ pattern (None: `explain` describes the pattern, and adds `describe()`)."""
        return None

    def row_checks(self) -> tuple[RowCheck, ...]:
        """What an input row must meet besides a time and a type (none by default)."""
        return ()

    # ---- running
    @abstractmethod
    def new_state(self) -> Any: ...

    @abstractmethod
    def process(
        self, state: Any, events: pd.DataFrame, *, owned: np.ndarray | None = None
    ) -> pd.DataFrame: ...

    @abstractmethod
    def advance(self, state: Any, to: int) -> pd.DataFrame: ...

    @abstractmethod
    def flush(self, state: Any) -> pd.DataFrame: ...

    @abstractmethod
    def is_empty(self, state: Any) -> bool: ...

    @property
    def keys_together(self) -> bool:
        """Whether one state may hold several partitions (keys) of a stream fed as a
        stream runner feeds them: each `process` call gets whole instants of several
        keys, each key in time order, and no event earlier than the latest time of any
        earlier call (time moves at watermarks); `advance` closes every key at once.
        Streams then run a bucket of keys in one call (False: one state per key)."""
        return False

    def idle_until(self, state: Any) -> int | None:
        """A time (ticks) before which `advance(state, to)` may be left out: it would give
        no rows, and later calls give the same rows without it; from then on, advancing
        may give rows or empty the state. None: advance at every watermark (the default,
        always right). Streams use it to leave alone the keys that got nothing new."""
        return None

    def run(self, events: pd.DataFrame, *, owned: np.ndarray | None = None) -> pd.DataFrame:
        """One shot over events in processing order: process, then flush."""
        state = self.new_state()
        out = self.process(state, events, owned=owned)
        return self.concat([out, self.flush(state)], events)

    def count(self, events: pd.DataFrame, *, owned: np.ndarray | None = None) -> int:
        """How many rows `run` gives over the same events (`run --count`). This default
        builds them; an engine that can count without building them overrides it."""
        return len(self.run(events, owned=owned))

    # ---- helpers for programs
    def sort_columns(self, segment_cols: Sequence[str] = ()) -> list[str]:
        """Processing order: segment, time, tie-break, id."""
        cols = [*(segment_cols or self.segment_cols), self.options.time_col]
        if self.tiebreak:
            cols.append(self.tiebreak)
        cols.append(self.id_col or "")
        return [c for c in cols if c]

    def segments_of(self, events: pd.DataFrame) -> list[str]:
        """The columns whose values tell the segments of `events`: a Spark time range
        (RANGE), when the frame has one, then the segment columns."""
        return [RANGE, *self.segment_cols] if RANGE in events.columns else list(self.segment_cols)

    def in_order(self, events: pd.DataFrame) -> pd.DataFrame:
        """`events` sorted into processing order (for callers that hold unsorted rows)."""
        cols = [c for c in self.sort_columns(self.segments_of(events)) if c in events.columns]
        order = processing_order(events, cols)
        if len(order) and (order[0] == 0) and (np.diff(order) == 1).all():
            shallow = events.copy(deep=False)  # in order already: no copy of every cell
            shallow.index = pd.RangeIndex(len(events))
            return shallow
        return events.iloc[order].reset_index(drop=True)

    def mask(self, events: pd.DataFrame) -> np.ndarray:
        """The shared component bitmask: computed upstream (MASK) or here."""
        if MASK in events.columns:
            return events[MASK].to_numpy(dtype=np.int64)
        return components_mask(self.signatures, self.options.type_col, events)

    def empty(self, frame: pd.DataFrame | None = None) -> pd.DataFrame:
        return empty_frame(self.output, frame)

    def concat(self, outs: list[pd.DataFrame], frame: pd.DataFrame | None) -> pd.DataFrame:
        outs = [o for o in outs if len(o)]
        if not outs:
            return self.empty(frame)
        return concat_rows(outs, self.empty(frame))  # one query's rows too: all columns

    def tied_events(self, events: pd.DataFrame, owned: np.ndarray | None = None) -> int:
        """How many of the events this program sees share their instant (time, and the
        tie-break column when there is one) with another of their partition: equal times
        are never in sequence, which a user may not expect (docs/semantics.md)."""
        if not len(events):
            return 0
        seen = np.ones(len(events), bool) if self.keep_unmatched else self.mask(events) != 0
        if owned is not None:
            seen &= owned
        cols = [*self.segments_of(events), self.options.time_col]
        cols += [self.tiebreak] if self.tiebreak else []
        frame = events.loc[seen, cols].assign(__one=1)
        sizes = frame.groupby(cols, dropna=False, sort=False)["__one"].transform("size")
        return int((sizes > 1).sum())

    def check_time_order(self, events: pd.DataFrame, latest: int | None) -> np.ndarray:
        """The events' ticks; raises when they go back in time within a segment, or
        behind what the state saw (`latest`)."""
        ticks = frame_ticks(events, self.options.time_col)
        if not len(ticks):
            return ticks
        if latest is not None and ticks.min() < latest:
            raise DataError("a partition's events must arrive in time order")
        if len(ticks) > 1:
            back = np.diff(ticks) < 0
            segments = self.segments_of(events)
            if back.any() and segments:
                same = np.ones(len(ticks) - 1, dtype=bool)
                for c in segments:
                    values = events[c].to_numpy()
                    same &= values[1:] == values[:-1]
                back &= same
            if back.any():
                raise DataError("a partition's events must arrive in time order")
        return ticks


class Engine(ABC):
    """An algorithm that answers some plans; registered by name."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    # A few queries over columns type, ts, v, k, seq and id that exercise the engine:
    # the conformance suite (`sparkcep.checks`) runs every check on them.
    examples: ClassVar[tuple[str, ...]] = ()
    # Whether its programs hold matches or partial matches (their matchers then count
    # them against `Program.budget`); False: its state is counters, bounded without one.
    holds_matches: ClassVar[bool] = True
    # A query that finds many matches on a crowded stream (`sparkcep.checks.crowded_events`:
    # every event within the window of every other): the suite checks that a small memory
    # budget stops it and the default one lets it finish (for an engine that holds no
    # matches, that its state stays bounded).
    crowded_example: ClassVar[str] = ""

    @abstractmethod
    def reason(self, plan: Plan) -> str | None:
        """None when this engine answers `plan`; otherwise why not (for `explain`)."""

    @abstractmethod
    def compile(
        self, plans: Sequence[Plan], names: Sequence[str | None], options: Options
    ) -> Program: ...

    def applies_to(self, plan: Plan) -> bool:
        """Whether `plan` is of the kind this engine is for (its reason is worth showing)."""
        return True

    def job_key(self, plan: Plan) -> tuple:
        """Plans with equal keys run together in one program."""
        return (plan.key, plan.tiebreak)


@runtime_checkable
class MinesRules(Protocol):
    """An engine that also mines its rules from history (`sparkcep mine-rules`)."""

    def rule_mining(self) -> Any:
        """The rule-mining kernel (a module: `mine`, `MiningSettings`' helpers...)."""


@runtime_checkable
class FitsModels(Protocol):
    """An engine whose queries take a model fitted on history (`sparkcep fit`)."""

    def model_fitting(self) -> Any:
        """The model-fitting kernel (a module: `FitPlan`, `fit_law`, `model_json`...)."""
