"""The shared pre-processing layer: events of one or more partitions as sorted numpy columns.

Every engine is fed an `EventTable`: events in processing order (partition, time,
tie-break, id), each with the bitmask of the components it can match (its type and local
conditions hold), an `order` rank that encodes precedence (`e ≺ f` iff
`order[e] < order[f]` within a partition) and the attribute columns the engine reads.
It is built from pandas here (local runner, and inside Spark's pandas UDFs); the Spark
runner computes the mask and the filter in the JVM and hands over the columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sparkcep.expressions import Vec, column_vec, truth
from sparkcep.language import ast
from sparkcep.plan import Plan

MASK = "__mask"  # column holding the component bitmask when it was computed upstream
TICKS = "__t"  # column holding the time in ticks when it was computed upstream (Spark)


@dataclass
class EventTable:
    ts: np.ndarray  # int64 ticks
    order: np.ndarray  # int64, nondecreasing within a segment; equal = same instant
    segment: np.ndarray  # int64, nondecreasing; one per partition
    mask: np.ndarray  # int64 bitmask of components
    columns: dict[str, Vec] = field(default_factory=dict)
    row: np.ndarray | None = None  # index of each event in the caller's frame

    def __len__(self) -> int:
        return len(self.ts)


def time_ticks(series: pd.Series) -> np.ndarray:
    """Time column -> int64 ticks (timestamps -> microseconds since the epoch, UTC)."""
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        values = (
            series.dt.tz_convert("UTC").dt.tz_localize(None)
            if getattr(series.dtype, "tz", None)
            else series
        )
        return values.to_numpy(dtype="datetime64[us]").astype(np.int64)
    return series.to_numpy(dtype=np.int64)


def component_mask(plan: Plan, frame: pd.DataFrame) -> np.ndarray:
    """Bitmask per row: bit i is set when the row can match component i (type + local)."""
    return components_mask(plan.components, plan.options.type_col, frame)


def components_mask(components, type_col: str, frame: pd.DataFrame) -> np.ndarray:
    """Bitmask per row for any components with `event_type`, `local` and `bit`."""
    n = len(frame)
    mask = np.zeros(n, dtype=np.int64)
    types = frame[type_col].to_numpy(dtype=object)
    cache: dict[str, Vec] = {}

    def resolve(node: ast.Expr) -> Vec:
        if isinstance(node, ast.AttrRef):
            if node.attr not in cache:
                cache[node.attr] = column_vec(frame[node.attr])
            return cache[node.attr]
        raise TypeError(f"not a local expression: {node!r}")

    for comp in components:
        ok = np.ones(n, dtype=bool) if comp.event_type is None else types == comp.event_type
        for expr in comp.local:
            if not ok.any():
                break
            ok &= truth(expr, resolve, n)
        mask[ok] |= comp.bit
    return mask


def sort_columns(plan: Plan, id_col: str) -> list[str]:
    """Processing order: key, time, tie-break, id."""
    cols = [*plan.key, plan.options.time_col]
    if plan.tiebreak:
        cols.append(plan.tiebreak)
    cols.append(id_col)
    return cols


def build_table(
    plan: Plan,
    frame: pd.DataFrame,
    id_col: str,
    *,
    sorted_: bool = False,
    segment_cols: list[str] | None = None,
    attributes: list[str] | None = None,
) -> EventTable:
    """Events (already valid: time and type present) -> EventTable.

    `frame` must hold the time column, the engine's attributes, the key columns, the
    tie-break column, `id_col` (its order breaks remaining ties) and either the type
    column or a precomputed MASK column; `sorted_` says it is in processing order.
    Partitions are the key's values, or those of `segment_cols` when given. Rows that
    match no component are dropped (except under strict contiguity, where they break
    runs); rows with a null key value are dropped (they belong to no partition).
    """
    if MASK in frame.columns:
        mask = frame[MASK].to_numpy(dtype=np.int64)
    else:
        mask = component_mask(plan, frame)
    segments = list(plan.key) if segment_cols is None else segment_cols
    keep = np.ones(len(frame), dtype=bool)
    if plan.strategy != "STRICT_CONTIGUITY":
        keep &= mask != 0
    for k in segments:
        keep &= ~frame[k].isna().to_numpy()
    row = np.flatnonzero(keep)
    if len(row) < len(frame):
        frame = frame.iloc[row]
        mask = mask[row]
    if not sorted_:
        order = _lexsort(frame, [*segments, *sort_columns(plan, id_col)[len(plan.key) :]])
        frame, mask, row = frame.iloc[order], mask[order], row[order]
    if TICKS in frame.columns:
        ts = frame[TICKS].to_numpy(dtype=np.int64)
    else:
        ts = time_ticks(frame[plan.options.time_col])
    segment = _group_ids(frame, segments)
    tie = [plan.tiebreak] if plan.tiebreak else []
    time_col = TICKS if TICKS in frame.columns else plan.options.time_col
    order_rank = _group_ids(frame, [*segments, time_col, *tie])
    names = plan.engine_attributes() if attributes is None else attributes
    columns = {name: column_vec(frame[name]) for name in names}
    return EventTable(ts, order_rank, segment, mask, columns, row)


def _lexsort(frame: pd.DataFrame, by: list[str]) -> np.ndarray:
    """Stable sort positions by columns (nulls first), keeping input order for ties."""
    if not len(frame):
        return np.arange(0)
    keys = []
    for name in reversed(by):
        col = frame[name]
        codes = _sort_codes(col)
        keys.append(codes)
    return np.lexsort(keys)


def _sort_codes(col: pd.Series) -> np.ndarray:
    null = col.isna().to_numpy()
    if pd.api.types.is_datetime64_any_dtype(col.dtype):
        values = time_ticks(col.fillna(pd.Timestamp(0)))
    elif pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        values = col.to_numpy(dtype=np.float64, na_value=np.nan)
        values = np.where(null, -np.inf, values)
        return values
    else:
        values = pd.factorize(col.astype(str).where(~null, ""), sort=True)[0]
    return np.where(null, np.iinfo(np.int64).min, values)


def _group_ids(frame: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """0, 1, 2, ... increasing each time the values of `cols` change (frame is sorted)."""
    n = len(frame)
    if n == 0 or not cols:
        return np.zeros(n, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for name in cols:
        col = frame[name]
        null = col.isna().to_numpy()
        if pd.api.types.is_datetime64_any_dtype(col.dtype):
            values = time_ticks(col)
        else:
            values = col.to_numpy()
        diff = np.zeros(n, dtype=bool)
        if n > 1:
            with np.errstate(invalid="ignore"):
                diff[1:] = values[1:] != values[:-1]
            both_null = null[1:] & null[:-1]
            diff[1:] &= ~both_null
            diff[1:] |= null[1:] != null[:-1]
        change |= diff
    return np.cumsum(change) - 1
