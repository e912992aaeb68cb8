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

The registry maps names to engines; `choose(plan)` is the only place an engine is chosen.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from sparkcep.budget import Budget
from sparkcep.engines.arrays import lexsort
from sparkcep.errors import DataError, SparkcepError
from sparkcep.language import ast
from sparkcep.plan import Options, Plan
from sparkcep.prep.layout import RANGE
from sparkcep.prep.mask import Signatures, components_mask
from sparkcep.prep.table import MASK, frame_ticks, processing_order
from sparkcep.schema import Kind

QUERY = "query"  # the output column naming the query, when several run together


@dataclass(frozen=True)
class OutputColumn:
    """One output column: a kind, or the type of an input column (`like`)."""

    name: str
    kind: Kind = "unknown"
    is_list: bool = False
    like: str | None = None  # an input column whose type this column has (time, key, id)


@dataclass(frozen=True)
class RowCheck:
    """A condition every input row must meet for a program (a local expression over input
    columns: `AttrRef`s name columns, SQL null logic, a row passes only when TRUE), and the
    reason given to the rows that fail: every runner sends them to the rejected output.

    E.g. an interval time: `RowCheck(ts_upper >= ts, "ts_upper is before ts")`.
    """

    holds: ast.Expr
    reason: str


PANDAS_DTYPES = {
    "int": "Int64",
    "float": "float64",
    "bool": "boolean",
    "timestamp": "datetime64[ns]",
}


def empty_frame(output: Sequence[OutputColumn], frame: pd.DataFrame | None) -> pd.DataFrame:
    """No rows, with the output's columns and their types (from `frame` for `like`)."""
    cols = {}
    for col in output:
        if col.is_list:
            dtype: Any = object
        elif col.like is not None:
            dtype = frame[col.like].dtype if frame is not None and col.like in frame else object
        else:
            dtype = PANDAS_DTYPES.get(col.kind, object)
        cols[col.name] = pd.Series([], dtype=dtype)
    return pd.DataFrame(cols)


def merged_output(columns_of, plans, names, first=()) -> tuple[OutputColumn, ...]:
    """The output of queries run together: `first`, then each plan's columns
    (`columns_of(plan)`) once, a `query` column when the queries are named; a column two
    queries give different types is a query error, pointing where the later one makes it."""
    cols: dict[str, OutputColumn] = {}
    made_by: dict[str, str | None] = {}  # the query that gave a column its type
    if names is not None:
        cols[QUERY] = OutputColumn(QUERY, "string")
    for col in first:
        cols[col.name] = col
    for plan, name in zip(plans, names or [None] * len(plans)):
        for col in columns_of(plan):
            made_by.setdefault(col.name, name)
            if cols.setdefault(col.name, col) != col:
                raise plan.error(
                    f"queries run together give the column '{col.name}' different types "
                    f"(in {name} and {made_by[col.name]}): name it differently in one of them",
                    plan.span_of(col.name),
                )
    return tuple(cols.values())


def concat_rows(parts: list[pd.DataFrame], empty: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of frames whose columns may differ (queries run together), in the columns
    of `empty` (the output), then any other in the order they come. A column a frame lacks
    is null in its rows and keeps its type: pandas alone makes such integers floats (an id
    above 2^53 loses its last digits) and fills lists with NaN (not a list to Arrow).

    >>> kleene = pd.DataFrame({"a": [9007199254740993], "b": [[9007199254740995]]})
    >>> single = pd.DataFrame({"a": [1], "c": [9007199254740997]})
    >>> rows = concat_rows([kleene, single])
    >>> rows["b"].tolist(), rows["c"].tolist()
    ([[9007199254740995], None], [<NA>, 9007199254740997])
    >>> rows.dtypes.astype(str).tolist()
    ['int64', 'object', 'Int64']
    >>> concat_rows([single], empty=rows.iloc[:0]).columns.tolist()  # the output's columns
    ['a', 'b', 'c']
    """
    first = list(empty.columns) if empty is not None else []
    names = list(dict.fromkeys([*first, *(c for p in parts for c in p.columns)]))
    if len(parts) == 1 and len(parts[0].columns) == len(names):
        return parts[0]
    dtypes = {}
    for name in names:
        present = [p[name].dtype for p in parts if name in p.columns]
        dtype = present[0] if present else empty[name].dtype  # type: ignore[index]
        if any(d.kind == "O" for d in present):  # e.g. counts beyond 64 bits: Python ints
            dtype = np.dtype(object)
        elif len(present) < len(parts) or len(set(map(str, present))) > 1:
            dtype = _NULLABLE.get(dtype.kind, dtype)  # null in some rows: a nullable type
        dtypes[name] = dtype
    filled = []
    for part in parts:
        cols = {}
        for name, dtype in dtypes.items():
            if name in part.columns:
                col = part[name]
                cols[name] = col if col.dtype == dtype else col.astype(dtype)
            elif dtype.kind == "O":  # lists, text: None (pandas would give NaN)
                cols[name] = pd.Series([None] * len(part), index=part.index, dtype=object)
            else:
                cols[name] = pd.Series(None, index=part.index, dtype=dtype)
        filled.append(pd.DataFrame(cols, index=part.index))
    return pd.concat(filled, ignore_index=True)


_NULLABLE = {"i": pd.Int64Dtype(), "u": pd.Int64Dtype(), "b": pd.BooleanDtype()}


def sort_rows(frame: pd.DataFrame, order: tuple[str, ...] | list[str]) -> pd.DataFrame:
    """Rows sorted by `order` (lists of ids compare as tuples), stably; nulls come first.
    A frame already in that order (with a 0..n-1 index) is returned as it is."""
    if len(frame) < 2 or not order:
        return frame.reset_index(drop=True)
    keys = []  # least significant first, as np.lexsort takes them
    for name in reversed(order):
        keys += sort_keys(frame[name])
    if in_lexical_order(keys):
        return frame if _plain_index(frame.index) else frame.reset_index(drop=True)
    return frame.iloc[lexsort(keys)].reset_index(drop=True)


def sort_keys(values: pd.Series) -> list[np.ndarray]:
    """Arrays whose lexical order (the last one first) is the order of `values`: nulls
    first, then the values ascending (lists as tuples). Numbers and times are compared as
    they are; other values are ranked first (factorized)."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return [values.to_numpy()]
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        numbers = values.to_numpy()
        missing = np.isnan(numbers)
        return [np.where(missing, 0.0, numbers), ~missing] if missing.any() else [numbers]
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.kind in "iub":
        missing = values.isna().to_numpy()
        numbers = values.to_numpy(dtype=dtype.numpy_dtype, na_value=0)
        return [numbers, ~missing] if missing.any() else [numbers]
    if dtype.kind in "mM" and isinstance(dtype, np.dtype | pd.DatetimeTZDtype):
        return [values.array.asi8]  # NaT is the smallest integer: first, as nulls are
    if dtype.kind == "O" and isinstance(values.iloc[0], list):
        values = values.map(tuple)
    return [pd.factorize(values, sort=True)[0]]


def in_lexical_order(keys: list[np.ndarray]) -> bool:
    """Whether the rows are in lexical order of `keys` (the last one first), each row
    against the next."""
    undecided = np.ones(len(keys[0]) - 1, dtype=bool)
    for key in reversed(keys):
        before, after = key[:-1], key[1:]
        if (undecided & (after < before)).any():
            return False
        undecided &= after == before
        if not undecided.any():
            return True
    return True


def _plain_index(index: pd.Index) -> bool:
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1


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
        return events.iloc[processing_order(events, cols)].reset_index(drop=True)

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


ENGINES: dict[str, Engine] = {}


def register(engine: Engine) -> Engine:
    ENGINES[engine.name] = engine
    return engine


def choose(plan: Plan) -> Engine:
    """The engine for a plan: the one `--algorithm` names, else the first registered one
    that answers it."""
    wanted = plan.options.algorithm
    if wanted is None:
        first = _first_engine()
        if first.reason(plan) is None:  # first in the order: the others need no import
            return first
    _load_engines()
    if wanted is not None:
        if wanted not in ENGINES:
            raise SparkcepError(f"unknown algorithm '{wanted}' (known: {', '.join(ENGINES)})")
        engine = ENGINES[wanted]
        why = engine.reason(plan)
        if why is not None:
            raise SparkcepError(f"--algorithm {wanted} cannot answer this query: {why}")
        return engine
    reasons = []
    for engine in ENGINES.values():
        why = engine.reason(plan)
        if why is None:
            return engine
        reasons.append(f"{engine.name}: {why}")
    raise SparkcepError("no engine answers this query (" + "; ".join(reasons) + ")")


def declined(plan: Plan, chosen: Engine) -> list[tuple[str, str]]:
    """The engines tried before `chosen` and why they declined (for `explain`)."""
    _load_engines()
    out = []
    for engine in ENGINES.values():
        if engine is chosen:
            break
        why = engine.reason(plan)
        if why is not None and engine.applies_to(plan):
            out.append((engine.name, why))
    return out


def compile_jobs(
    plans: Sequence[Plan], names: Sequence[str | None], options: Options
) -> list[Program]:
    """Programs for a set of queries: one per engine and way of partitioning the stream."""
    groups: dict[tuple, list[int]] = {}
    engines: dict[tuple, Engine] = {}
    for i, plan in enumerate(plans):
        engine = choose(plan)
        key = (engine.name, engine.job_key(plan))
        groups.setdefault(key, []).append(i)
        engines[key] = engine
    several = len(plans) > 1 or any(n is not None for n in names)
    labels = [n or f"q{i + 1}" for i, n in enumerate(names)] if several else list(names)
    return [
        engines[key].compile([plans[i] for i in idx], [labels[i] for i in idx], options)
        for key, idx in groups.items()
    ]


_LOADED = False
# The order `choose` tries engines in (engines not named here come after).
ORDER = ("nfa", "aseq", "twostep", "imprecise", "ayac", "ses", "jointree", "nfa-windows")
ORDER += ("episodes", "tofel", "directmatch", "match_recognize", "funnel")


def _first_engine() -> Engine:
    """The engine `choose` tries first, its package alone imported (a run whose queries
    it answers imports no other engine)."""
    from sparkcep.engines import nfa  # noqa: F401

    return ENGINES[ORDER[0]]


def _load_engines() -> None:
    """Import the engine packages (each registers itself), then keep the registry in
    the order `choose` tries them, whichever package was imported first (its doctests,
    a test)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from sparkcep.engines import (  # noqa: F401
        aseq,
        ayac,
        episodes,
        funnel,
        imprecise,
        match_recognize,
        nfa,
        ses,
    )
    from sparkcep.engines.ayac import engine  # noqa: F401

    ranked = sorted(
        ENGINES.items(),
        key=lambda item: (item[0] not in ORDER, ORDER.index(item[0]) if item[0] in ORDER else 0),
    )
    ENGINES.clear()
    ENGINES.update(ranked)


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


def tie_warning(tied: int) -> str:
    return (
        f"{tied:,} events share a time with another event of the same partition; equal "
        "times are never in sequence — add ORDER BY ts, col (or --tiebreak col) to order them"
    )
