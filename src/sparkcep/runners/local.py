"""The local runner: pandas in, pandas out, no JVM (notebooks, tests, `run --local`).

events ─check rows─▶ valid ─plan─▶ programs (one per engine and partitioning)
       └─▶ rejected                 └─ each runs once over the events in processing order
"""

from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from sparkcep.engines.base import Program, failed_checks
from sparkcep.engines.output import QUERY, concat_rows, sort_rows, tie_warning
from sparkcep.engines.registry import compile_jobs
from sparkcep.inputs import (
    CORRUPT,
    ORDER_COL,
    READ_REASON,
    REASON,
    ROW,
    as_frame,
    duplicate_ids,
    schema_of,
    split_valid,
    text_warning,
    typed_columns,
)
from sparkcep.plan import Options, Plan, plan_queries, uses_types
from sparkcep.plan.intervals import frame_width, needs_data_width, with_data_widths
from sparkcep.plan.model import takes_options
from sparkcep.prep.table import MASK
from sparkcep.timeunits import implausible_times


@dataclass
class RunResult:
    """What a local run gives: the rows, the rejected input rows with their reasons."""

    plans: list[Plan]
    matches: pd.DataFrame | None  # the output rows (matches, or AGG rows); None: counted
    rejected: pd.DataFrame
    events_read: int
    programs: list[Program] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # what the user should know of the run
    counted: int | None = None  # the number of rows, when only counted (count_only)
    rejected_at: np.ndarray | None = None  # the rejected rows' 0-based numbers in the input

    @property
    def plan(self) -> Plan:
        return self.plans[0]

    @property
    def row_count(self) -> int:
        """How many rows the run gives (built or only counted)."""
        return len(self.matches) if self.matches is not None else int(self.counted or 0)

    @property
    def label(self) -> str:
        return self.programs[0].label if self.programs else "matches"


LocalRun = RunResult  # the name earlier versions used


def order_by_options(queries, options: Options) -> Options:
    """For a MATCH_RECOGNIZE text, the time column and tie-break of its ORDER BY (its
    modules imported for such a text only); `options` otherwise."""
    from sparkcep.language.forms import is_match_recognize

    if not isinstance(queries, str) or not is_match_recognize(queries):
        return options
    from sparkcep.plan.match_recognize import query_options

    return query_options(queries, options)


def execute_local(events, queries, options: Options, *, count_only: bool = False) -> RunResult:
    """Run queries (a text, a file's named queries, a list, or plans) over events.

    `count_only`: the rows are counted, not built where a program can count without them
    (`Program.count`; `run --count`): the result's `matches` is None, `counted` their
    number (the same as `len(matches)` of a run that builds them, `max_matches` too)."""
    frame = as_frame(events)
    options = order_by_options(queries, options)
    checked = check_events(frame, queries, options)
    plans, programs, valid = checked.plans, checked.programs, checked.valid
    rejected = checked.rejected
    if len(checked.later):  # rows rejected by the queries' own checks, in row order
        rejected = pd.concat([r for r in (rejected, checked.later) if len(r)])
        rejected = rejected.sort_values(ROW, kind="stable")
    rows, counted, tied = _run_programs(programs, valid, options.max_matches, count_only)
    warnings_ = [w for p in plans for w in p.warnings] + duplicate_ids(valid, options.id_col)
    warnings_ += [text_warning(c, *checked.mostly[c]) for c in checked.mostly if c in checked.read]
    if tied and not any(p.tiebreak for p in plans):
        warnings_.append(tie_warning(tied))
    if options.type_col in valid.columns:
        warnings_ += unknown_types(plans, set(valid[options.type_col].unique()))
    rejected = rejected.drop(columns=[ORDER_COL], errors="ignore")  # not the user's
    warnings_ += time_warnings(options, [valid, checked.later])
    at = rejected[ROW].to_numpy(np.int64)
    # Without an id column, a rejected row keeps its row number (ROW), as through Spark.
    if options.id_col is not None:
        rejected = rejected.drop(columns=[ROW])
    else:
        rejected = rejected[[c for c in rejected.columns if c != ROW] + [ROW]]
    result = RunResult(plans, rows, rejected, len(frame), programs)
    result.warnings = warnings_
    result.counted = counted
    result.rejected_at = at
    return result


@dataclass
class CheckedEvents:
    """Rows checked in pandas: the valid ones (typed, row numbers in ROW), the rejected
    ones with their reasons (cells as read), and the plans and programs they were
    checked for. `execute_local` runs on them; so does the Spark runner for an input
    small enough to be checked in the driver (runners/spark/driver_check.py)."""

    valid: pd.DataFrame
    rejected: pd.DataFrame  # time, type or id missing or unreadable, a malformed row
    later: pd.DataFrame  # a bad cell in a column the queries read, then failed row checks
    plans: list[Plan]
    programs: list[Program]
    mostly: dict[str, tuple[int, int]]  # text columns that are mostly numbers
    read: set[str]  # the columns the programs read

    def rejected_note(self) -> str:
        """`; N rows rejected (...)` for a summary, or nothing when none was."""
        n = len(self.rejected) + len(self.later)
        if not n:
            return ""
        return (
            f"; {n:,} row{'s' * (n != 1)} rejected (time, type or a cell unreadable), not looked at"
        )


def check_events(
    frame: pd.DataFrame, queries, options: Options, *, typed: set[str] | None = None
) -> CheckedEvents:
    """Check the rows of `frame` for the queries: split_valid, the columns of numbers
    (`typed_columns`; only the columns in `typed` when given), the plans and programs,
    then each row's bad cells and the programs' row checks."""
    type_col = type_column(frame.columns, queries, options)
    valid, rejected = split_valid(
        frame, time_col=options.time_col, type_col=type_col, id_col=options.id_col
    )
    skip = {options.time_col, ROW, CORRUPT, READ_REASON}
    if typed is not None:
        skip |= {c for c in frame.columns if c not in typed}
    read_as, bad_cells, mostly = typed_columns(frame, skip=skip, rows=valid)
    original, valid = valid, read_as
    plans, names = plan_queries(queries, schema_of(valid.drop(columns=[ROW])), options)
    programs = compile_jobs(plans, names, replace(options, id_col=options.id_col or ROW))
    read = {c for program in programs for c in program.columns()}
    cells = [c for c in bad_cells if c in read]
    reasons = _first_reason([bad_cells[c] for c in cells], len(valid))
    by_cell = ~pd.isna(reasons)
    checks = [c for program in programs for c in program.row_checks()]
    if checks:
        reasons = np.where(pd.isna(reasons), failed_checks(checks, valid), reasons)
    failing = ~pd.isna(reasons)
    later = original[failing].assign(**{REASON: reasons[failing]})
    # the rows of a bad cell first, then those of a failed check (the order the Spark
    # runner rejects them in), each in row order
    later = later.iloc[np.argsort(~by_cell[failing], kind="stable")]
    valid = valid[~failing]
    if needs_data_width(plans):  # U_max of interval times: the widest of the rows kept
        plans = with_data_widths(plans, lambda spec: frame_width(spec, valid, options.time_col))
        programs = compile_jobs(plans, names, replace(options, id_col=options.id_col or ROW))
    return CheckedEvents(valid, rejected, later, plans, programs, mostly, read)


def _run_programs(programs: list[Program], valid: pd.DataFrame, cap: int | None, count_only):
    """(rows or None, their number when only counted, tied events): each program runs
    once over the valid events in its processing order; at most `cap` rows in all."""
    outs, counted, tied = [], 0, 0
    for program in programs:
        events = program.in_order(_seen(program, valid))
        if count_only:
            counted += program.count(events)
        else:
            outs.append(program.run(events))
        tied = max(tied, program.tied_events(events))
    if count_only:
        return None, counted if cap is None else min(counted, cap), tied
    rows = merge_rows(programs, outs)
    return (rows if cap is None else rows.head(cap)), None, tied


def _seen(program: Program, valid: pd.DataFrame) -> pd.DataFrame:
    """The events a program is given, as the Spark runner gives them (runners/spark/batch.py,
    `_laid_out`): with their component bitmask (MASK, computed once), and without the
    rows no component can take unless the program sees every event."""
    mask = program.mask(valid)
    events = valid.copy(deep=False)  # a new column on the same cells (assign copies them)
    events[MASK] = mask
    if program.keep_unmatched or (mask != 0).all():
        return events
    return events[mask != 0]


def time_warnings(options: Options, frames: list[pd.DataFrame]) -> list[str]:
    """A warning when the integer times of these rows, in the unit given, are not those of
    real events (timeunits.implausible_times); the same for every runner."""
    times = [f[options.time_col] for f in frames if len(f) and options.time_col in f]
    if not times or not all(t.dtype.kind in "iu" for t in times):
        return []
    first, last = min(int(t.min()) for t in times), max(int(t.max()) for t in times)
    warning = implausible_times(first, last, options.time_unit, options.time_col)
    return [warning] if warning else []


def unknown_types(plans: list[Plan], present: set) -> list[str]:
    """A warning for each component type that no input event has, with the closest one."""
    out = []
    named = dict.fromkeys(c.event_type for p in plans for c in p.components if c.event_type)
    for name in named:
        if name in present:
            continue
        close = difflib.get_close_matches(name, [str(t) for t in present], n=1, cutoff=0.6)
        hint = f"; the closest type in the input is '{close[0]}'" if close else ""
        out.append(f"no event has the type '{name}'{hint}: its component never matches")
    return out


def _first_reason(columns: list[pd.Series], n: int) -> np.ndarray:
    """Per row, the first non-null reason among `columns`, or None."""
    reasons = np.full(n, None, dtype=object)
    for col in columns:
        reasons = np.where(pd.isna(reasons), col.to_numpy(dtype=object), reasons)
    return np.where(pd.isna(reasons), None, reasons)


def type_column(columns, queries, options: Options) -> str | None:
    """The type column to check: none when the input has none and no query names a type."""
    if options.type_col not in columns and not uses_types(queries):
        return None
    return options.type_col


def merge_rows(programs: list[Program], outs: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows of several programs in output order (by query name when several)."""
    if len(outs) == 1:
        return sort_rows(outs[0], programs[0].order)
    rows = concat_rows(outs)  # every program's columns, as Spark's union of them
    return rows.sort_values(QUERY, kind="stable").reset_index(drop=True)


@takes_options()
def run_local(events, queries, *, options: Options | None = None) -> RunResult:
    """Run pattern or AGG queries on `events` (a pandas DataFrame or an iterable of
    dicts); returns the rows and the rejected input rows.

    `queries` is a query text, a file's text of named queries (`QUERY name: ...;`), or
    a list of them; the options are those of `sparkcep.Options` (`time_end_col`,
    `pmf_col` and `max_width` give an interval time: docs/imprecise.md).
    """
    return execute_local(events, queries, options)


@takes_options()
def match_local(events, queries, *, options: Options | None = None) -> pd.DataFrame:
    """The matches of a query in `events`, as a pandas DataFrame (docs/semantics.md).

    >>> import pandas as pd
    >>> events = pd.DataFrame({"type": ["A", "B", "C"], "ts": [1, 2, 3], "v": [1, 5, 9]})
    >>> match_local(events, "PATTERN SEQ(A a, B b, C c) WHERE a.v < b.v WITHIN 5")
       start  end  a  b  c
    0      1    3  0  1  2

    Rows whose time or type is missing or unreadable are left out with a warning;
    `run_local` returns them as `rejected`.
    """
    return _warn_rejected(execute_local(events, queries, options), "run_local")


@takes_options()
def aggregate_local(events, queries, *, options: Options | None = None) -> pd.DataFrame:
    """Rows of AGG queries over `events` (pandas in, pandas out; docs/aggregation.md).

    >>> import pandas as pd
    >>> events = pd.DataFrame({"type": list("ABAB"), "ts": [1, 2, 3, 4], "ip": list("xxyx")})
    >>> aggregate_local(events, "PATTERN SEQ(A a, B b) GROUP BY ip AGG COUNT WITHIN 10")
       ts ip  count
    0   2  x      1
    1   4  x      2
    """
    return _warn_rejected(execute_local(events, queries, options), "run_local")


run_aggregate_local = run_local  # AGG queries run through the same path


def _warn_rejected(run: RunResult, full: str) -> pd.DataFrame:
    """The run's rows, with a warning when input rows were rejected."""
    if len(run.rejected):
        warnings.warn(
            f"{len(run.rejected)} of {run.events_read} rows were rejected "
            f"(first reason: {run.rejected['reason'].iloc[0]}); sparkcep.{full}(...).rejected "
            "has them",
            stacklevel=3,
        )
    return run.matches
