"""Matches (event positions) -> output rows, as docs/semantics.md "Output" says:
`start`, `end`, the key columns, each positive variable's event id (a list for a Kleene
variable) and the RETURN values; ordered by key, end, start, then the ids."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparkcep.engines.nfa.matcher import Matches
from sparkcep.engines.output import OutputColumn, sort_rows
from sparkcep.plan import Plan
from sparkcep.prep.table import EventTable
from sparkcep.schema import Kind


def plan_output(plan: Plan, id_col: str) -> tuple[OutputColumn, ...]:
    time_col = plan.options.time_col
    cols = [OutputColumn("start", like=time_col), OutputColumn("end", like=time_col)]
    cols += [OutputColumn(k, like=k) for k in plan.key]
    cols += [OutputColumn(c.var, is_list=c.kleene, like=id_col) for c in plan.positives]
    cols += [OutputColumn(r.name, r.kind, r.is_list) for r in plan.returns]
    if plan.timeouts:  # OUTPUT TIMEOUTS (timeouts.py)
        cols += [OutputColumn("timeout", "bool"), OutputColumn("reached", "string")]
    return tuple(cols)


def plan_order(plan: Plan) -> tuple[str, ...]:
    return (*plan.key, "end", "start", *[c.var for c in plan.positives])


def match_rows(
    plan: Plan,
    frame: pd.DataFrame,
    table: EventTable,
    matches: Matches,
    id_col: str,
    extra: dict | None = None,
) -> pd.DataFrame:
    """One row per match. `frame` is the events frame `table` was built from; `extra`
    adds columns (one value per match, in `matches` order)."""
    row = table.row
    time = frame[plan.options.time_col].to_numpy()
    ids = frame[id_col].to_numpy()
    first_rows = row[matches.first]
    out: dict[str, object] = {
        "start": time[first_rows],
        "end": time[row[matches.last]],
    }
    for k in plan.key:
        out[k] = frame[k].to_numpy()[first_rows]
    for comp in plan.positives:
        pos = matches.positions[comp.var]
        if comp.kleene:
            out[comp.var] = [ids[row[p]].tolist() for p in pos]
        else:
            out[comp.var] = ids[row[pos.astype(np.int64)]]
    for col in plan.returns:
        out[col.name] = _typed(matches.values[col.name], col.kind, col.is_list)
    out.update(extra or {})
    if plan.timeouts:  # a complete match (timeouts.py)
        out["timeout"] = pd.array([False] * len(matches), dtype="boolean")
        out["reached"] = plan.positives[-1].var
    return sort_rows(pd.DataFrame(out), plan_order(plan))


def _typed(values: list, kind: Kind, is_list: bool):
    if is_list:
        return values
    if kind == "int":
        return pd.array(values, dtype="Int64")
    if kind == "float":
        return pd.array([np.nan if v is None else v for v in values], dtype="float64")
    if kind == "bool":
        return pd.array(values, dtype="boolean")
    if kind == "timestamp":  # engines compute on microseconds since the epoch
        return pd.to_datetime(pd.array(values, dtype="Int64"), unit="us")
    return values
