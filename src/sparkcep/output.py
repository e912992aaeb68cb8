"""Matches (event positions) -> the output rows of the contract in docs/semantics.md."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparkcep.engines.nfa import Matches
from sparkcep.events import EventTable
from sparkcep.plan import Plan
from sparkcep.schema import Kind


def output_frame(
    plan: Plan, frame: pd.DataFrame, table: EventTable, matches: Matches, id_col: str
) -> pd.DataFrame:
    """One row per match: start, end, key columns, ids per variable, RETURN values.

    `frame` is the events frame `table` was built from; `id_col` names its id column.
    """
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
    result = pd.DataFrame(out)
    if not len(result):
        return empty_output(plan, frame, id_col)
    return sort_output(plan, result)


def sort_output(plan: Plan, frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in output order: key, end, start, then the ids of the bound events."""
    cols = [*plan.key, "end", "start", *[c.var for c in plan.positives]]
    if len(frame) < 2:
        return frame.reset_index(drop=True)
    keys = []
    for name in reversed(cols):
        values = frame[name]
        if values.dtype == object and len(values) and isinstance(values.iloc[0], list):
            values = values.map(tuple)
        keys.append(pd.factorize(values, sort=True)[0])
    order = np.lexsort(keys)
    return frame.iloc[order].reset_index(drop=True)


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


def empty_output(plan: Plan, frame: pd.DataFrame | None, id_col: str) -> pd.DataFrame:
    """No matches, with the output's columns (and their types, when `frame` is given)."""

    def dtype(name):
        return object if frame is None else frame[name].dtype

    cols: dict[str, pd.Series] = {}
    cols["start"] = pd.Series([], dtype=dtype(plan.options.time_col))
    cols["end"] = pd.Series([], dtype=dtype(plan.options.time_col))
    for k in plan.key:
        cols[k] = pd.Series([], dtype=dtype(k))
    for comp in plan.positives:
        cols[comp.var] = pd.Series([], dtype=object if comp.kleene else dtype(id_col))
    dtypes = {"int": "Int64", "float": "float64", "bool": "boolean", "timestamp": "datetime64[ns]"}
    for col in plan.returns:
        dtype = object if col.is_list else dtypes.get(col.kind, object)
        cols[col.name] = pd.Series([], dtype=dtype)
    return pd.DataFrame(cols)
