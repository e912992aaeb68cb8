"""The event table every engine is fed: events of one or more partitions as numpy columns.

Events come in *processing order* — partition, time, tie-break, id — each with the bitmask
of the components it can match (its type and local conditions hold), an `order` rank that
encodes precedence (`e ≺ f` iff `order[e] < order[f]` within a partition) and the
attribute columns the engine reads. An interval time (`ts_end`) and a probability
(`prob`) ride along for the engines that read them; they are absent by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sparkcep.expressions import Vec, column_vec

MASK = "__mask"  # the component bitmask, when computed upstream (Spark)
TICKS = "__t"  # the time in ticks, when computed upstream (Spark)


@dataclass
class EventTable:
    ts: np.ndarray  # int64 ticks
    order: np.ndarray  # int64, nondecreasing within a segment; equal = same instant
    segment: np.ndarray  # int64, nondecreasing; one per partition
    mask: np.ndarray  # int64 bitmask of components
    columns: dict[str, Vec] = field(default_factory=dict)
    row: np.ndarray | None = None  # index of each event in the caller's frame
    ts_end: np.ndarray | None = None  # int64 ticks: the end of an interval time

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


def frame_ticks(frame: pd.DataFrame, time_col: str) -> np.ndarray:
    """The ticks of a frame's events: TICKS when Spark computed them, else the time column."""
    if TICKS in frame.columns:
        return frame[TICKS].to_numpy(dtype=np.int64)
    return time_ticks(frame[time_col])


def stack_frames(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """`pd.concat(frames, ignore_index=True)`; frames of the same columns and numpy dtypes
    are joined one column at a time. pandas' own join, where the frames' columns are laid
    out in blocks differently, looks at every cell of an object column whose first cell
    is null (`JoinUnit._is_valid_na_for`: 40% of a stream's Python time, G2)."""
    first = frames[0] if frames else None
    same = (
        first is not None
        and len(frames) > 1
        and first.columns.is_unique
        and all(isinstance(t, np.dtype) for t in first.dtypes)
        and all(f.columns.equals(first.columns) and f.dtypes.equals(first.dtypes) for f in frames)
    )
    if not same:
        return pd.concat(frames, ignore_index=True)
    columns = {
        name: np.concatenate([f.iloc[:, i].to_numpy() for f in frames])
        for i, name in enumerate(first.columns)
    }
    return pd.DataFrame(columns, columns=first.columns, copy=False)


def processing_order(frame: pd.DataFrame, by: list[str]) -> np.ndarray:
    """Stable sort positions by columns (nulls first), keeping input order for ties."""
    if not len(frame):
        return np.arange(0)
    return np.lexsort([_sort_codes(frame[name]) for name in reversed(by)])


def build_table(
    frame: pd.DataFrame,
    *,
    mask: np.ndarray,
    segment_cols: list[str],
    time_col: str,
    tiebreak: str | None,
    attributes: list[str] | tuple[str, ...],
    keep_unmatched: bool = False,
    time_end_col: str | None = None,
) -> EventTable:
    """Events in processing order -> EventTable.

    Partitions are the values of `segment_cols`. Rows whose `mask` is 0 are dropped
    (unless `keep_unmatched`: under strict contiguity they break runs), and so are rows
    with a null segment value (they belong to no partition). `row` maps each event back
    to its row of `frame`.
    """
    keep = np.ones(len(frame), dtype=bool)
    if not keep_unmatched:
        keep &= mask != 0
    for k in segment_cols:
        keep &= ~_nulls(frame[k])
    row = np.flatnonzero(keep)
    if len(row) < len(frame):
        frame = frame.iloc[row]
        mask = mask[row]
    ts = frame_ticks(frame, time_col)
    segment = _group_ids(frame, segment_cols)
    tie = [tiebreak] if tiebreak else []
    time_key = TICKS if TICKS in frame.columns else time_col
    order_rank = _group_ids(frame, [*segment_cols, time_key, *tie])
    columns = {name: column_vec(frame[name]) for name in attributes}
    ts_end = time_ticks(frame[time_end_col]) if time_end_col else None
    return EventTable(ts, order_rank, segment, np.asarray(mask, np.int64), columns, row, ts_end)


def segment_firsts(table: EventTable) -> np.ndarray:
    """The position of the first event of each segment."""
    if not len(table):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, table.segment[1:] != table.segment[:-1]])


def _sort_codes(col: pd.Series) -> np.ndarray:
    values = col.to_numpy() if isinstance(col.dtype, np.dtype) else None
    if values is not None and values.dtype.kind in "iu":  # no nulls: the values themselves
        return values
    if values is not None and values.dtype.kind == "f":
        return np.where(np.isnan(values), -np.inf, values)
    null = col.isna().to_numpy()
    if pd.api.types.is_datetime64_any_dtype(col.dtype):
        values = time_ticks(col.fillna(pd.Timestamp(0)))
    elif pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        values = col.to_numpy(dtype=np.float64, na_value=np.nan)
        return np.where(null, -np.inf, values)
    else:
        values = pd.factorize(col.astype(str).where(~null, ""), sort=True)[0]
    return np.where(null, np.iinfo(np.int64).min, values)


def _nulls(col: pd.Series) -> np.ndarray:
    """Where `col` is null; a numpy integer or bool column never is (pandas' isna costs
    more than the small batches of a stream)."""
    if isinstance(col.dtype, np.dtype) and col.dtype.kind in "iub":
        return np.zeros(len(col), dtype=bool)
    return col.isna().to_numpy()


def _group_ids(frame: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """0, 1, 2, ... increasing each time the values of `cols` change (frame is sorted)."""
    n = len(frame)
    if n == 0 or not cols:
        return np.zeros(n, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for name in cols:
        col = frame[name]
        null = _nulls(col)
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
