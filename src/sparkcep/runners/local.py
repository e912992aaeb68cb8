"""The local runner: pandas in, pandas out, no JVM (notebooks, tests, `run --local`)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import pandas as pd

from sparkcep.engines.nfa import find_matches
from sparkcep.events import build_table
from sparkcep.inputs import ROW, as_frame, schema_of, split_valid
from sparkcep.output import empty_output, output_frame
from sparkcep.plan import Options, Plan, analyze


@dataclass
class LocalRun:
    plan: Plan
    matches: pd.DataFrame
    rejected: pd.DataFrame
    events_read: int
    stats: dict = field(default_factory=dict)


def run_local(
    events,
    query: str | Plan,
    *,
    time_col: str = "ts",
    type_col: str = "type",
    id_col: str | None = None,
    time_unit: str | None = None,
    tiebreak: str | None = None,
    max_matches: int | None = None,
) -> LocalRun:
    """Match `query` on `events` (a pandas DataFrame or an iterable of dicts)."""
    frame = as_frame(events)
    valid, rejected = split_valid(frame, time_col=time_col, type_col=type_col, id_col=id_col)
    if isinstance(query, Plan):
        plan = query
    else:
        options = Options(time_col, type_col, id_col, time_unit, tiebreak)
        schema = schema_of(valid.drop(columns=[ROW]))
        plan = analyze(query, schema, options)
    ids = id_col or ROW
    table = build_table(plan, valid, ids)
    if not len(table):
        matches = empty_output(plan, valid, ids)
    else:
        found = find_matches(plan, table, max_matches=max_matches)
        matches = output_frame(plan, valid, table, found, ids)
    return LocalRun(plan, matches, rejected.drop(columns=[ROW]), len(frame))


def match_local(events, query: str, **options) -> pd.DataFrame:
    """The matches of `query` in `events`, as a pandas DataFrame (see docs/semantics.md).

    >>> import pandas as pd
    >>> events = pd.DataFrame({"type": ["A", "B", "C"], "ts": [1, 2, 3], "v": [1, 5, 9]})
    >>> match_local(events, "PATTERN SEQ(A a, B b, C c) WHERE a.v < b.v WITHIN 5")
       start  end  a  b  c
    0      1    3  0  1  2

    Rows whose time or type is missing or unreadable are left out with a warning;
    `run_local` returns them as `rejected`.
    """
    return _warn_rejected(run_local(events, query, **options), "run_local")


def _aggregate_plans(queries, schema, options: Options) -> tuple[list[Plan], list[str | None]]:
    """Plans and names of AGG queries given as text(s), a file's text or plans."""
    from sparkcep.errors import QueryError
    from sparkcep.language.parser import parse_file

    items = [queries] if isinstance(queries, str | Plan) else list(queries)
    plans, names = [], []
    for item in items:
        if isinstance(item, Plan):
            plans.append(item)
            names.append(item.query.name)
            continue
        for query in parse_file(item):
            plan = analyze(query, schema, options)
            if not plan.is_aggregate:
                raise QueryError(
                    "this query has no AGG clause: use match for pattern queries",
                    query.text,
                    query.span,
                )
            plans.append(plan)
            names.append(query.name)
    return plans, names


def jobs_for(plans: list[Plan], names: list, algorithm: str, sharing: str):
    """AGG queries grouped by how they partition the stream (each group runs together)."""
    from sparkcep.aggregate_job import AggregateJob

    groups: dict[tuple, list[int]] = {}
    for i, plan in enumerate(plans):
        groups.setdefault((plan.key, plan.tiebreak, plan.group_by), []).append(i)
    if len(plans) > 1:
        names = [n or f"q{i + 1}" for i, n in enumerate(names)]
    return [
        AggregateJob([plans[i] for i in idx], [names[i] for i in idx], algorithm, sharing)
        for idx in groups.values()
    ]


def run_aggregate_local(
    events,
    queries,
    *,
    time_col: str = "ts",
    type_col: str = "type",
    id_col: str | None = None,
    time_unit: str | None = None,
    tiebreak: str | None = None,
    algorithm: str = "aseq",
    sharing: str = "prefix",
) -> LocalRun:
    """AGG queries (one, a list, or a file's named queries) over `events`, locally."""
    frame = as_frame(events)
    valid, rejected = split_valid(frame, time_col=time_col, type_col=type_col, id_col=id_col)
    options = Options(time_col, type_col, id_col, time_unit, tiebreak)
    schema = schema_of(valid.drop(columns=[ROW]))
    plans, names = _aggregate_plans(queries, schema, options)
    ids = id_col or ROW
    outs = [job.run(valid, ids) for job in jobs_for(plans, names, algorithm, sharing)]
    rows = pd.concat(outs, ignore_index=True) if len(outs) > 1 else outs[0]
    if "query" in rows.columns:  # by query name; within one, by group, ts, trigger
        rows = rows.sort_values("query", kind="stable").reset_index(drop=True)
    return LocalRun(plans[0], rows, rejected.drop(columns=[ROW]), len(frame), {"plans": plans})


def aggregate_local(events, queries, **options) -> pd.DataFrame:
    """Rows of AGG queries over `events` (pandas in, pandas out; docs/aggregation.md).

    >>> import pandas as pd
    >>> events = pd.DataFrame({"type": list("ABAB"), "ts": [1, 2, 3, 4], "ip": list("xxyx")})
    >>> aggregate_local(events, "PATTERN SEQ(A a, B b) GROUP BY ip AGG COUNT WITHIN 10")
       ts ip  count
    0   2  x      1
    1   4  x      2
    """
    return _warn_rejected(run_aggregate_local(events, queries, **options), "run_aggregate_local")


def _warn_rejected(run: LocalRun, full: str) -> pd.DataFrame:
    """The run's rows, with a warning when input rows were rejected."""
    if len(run.rejected):
        warnings.warn(
            f"{len(run.rejected)} of {run.events_read} rows were rejected "
            f"(first reason: {run.rejected['reason'].iloc[0]}); {full}(...).rejected has them",
            stacklevel=3,
        )
    return run.matches
