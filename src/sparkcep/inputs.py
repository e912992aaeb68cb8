"""Checking event rows in pandas: good rows go on, bad rows go to `rejected` with a reason."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sparkcep.errors import DataError
from sparkcep.schema import Kind, kind_of_pandas

ROW = "__row"  # 0-based row number in input order, the id when no id column is given
REASON = "reason"


def split_valid(
    frame: pd.DataFrame, *, time_col: str, type_col: str, id_col: str | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(valid rows with a normalised time column, rejected rows with a `reason`).

    A row is rejected when its time is missing or is neither an integer nor a timestamp,
    or its type is missing. Row numbers are kept in the ROW column.
    """
    for role, col in (("time", time_col), ("type", type_col), ("id", id_col)):
        if col is not None and col not in frame.columns:
            raise DataError(
                f"the {role} column '{col}' is not in the input "
                f"(columns: {', '.join(map(str, frame.columns))})"
            )
    frame = frame.copy()
    frame[ROW] = np.arange(len(frame), dtype=np.int64)
    reason = pd.Series(None, index=frame.index, dtype=object)
    time, bad_time = _parse_time(frame[time_col])
    missing_time = frame[time_col].isna().to_numpy()
    reason[missing_time] = f"{time_col} is missing"
    reason[bad_time & ~missing_time] = f"{time_col} is not an integer or a timestamp"
    types = frame[type_col]
    missing_type = types.isna().to_numpy() | (types.astype(str).str.strip() == "").to_numpy()
    reason[missing_type & reason.isna().to_numpy()] = f"{type_col} is missing"
    bad = reason.notna().to_numpy()
    rejected = frame[bad].copy()
    rejected[REASON] = reason[bad]
    valid = frame[~bad].copy()
    valid[time_col] = time[~bad]
    if not pd.api.types.is_string_dtype(valid[type_col].dtype):
        valid[type_col] = valid[type_col].astype(str)
    return valid, rejected


def _parse_time(col: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """The time column as int64 or datetime64 (UTC, naive), and where it failed."""
    if pd.api.types.is_datetime64_any_dtype(col.dtype):
        if getattr(col.dtype, "tz", None) is not None:
            col = col.dt.tz_convert("UTC").dt.tz_localize(None)
        return col, col.isna().to_numpy()
    if pd.api.types.is_integer_dtype(col.dtype):
        if col.isna().any():  # nullable Int64
            return col.fillna(0).astype(np.int64), col.isna().to_numpy()
        return col.astype(np.int64), np.zeros(len(col), bool)
    if pd.api.types.is_float_dtype(col.dtype):
        values = col.to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values) | (np.floor(values) != values)
        return pd.Series(np.where(bad, 0, values).astype(np.int64), index=col.index), bad
    text = col.astype("string")
    numbers = pd.to_numeric(text, errors="coerce")
    integral = numbers.notna() & (numbers == numbers.round())
    n_numbers = int(integral.sum())
    stamps = pd.to_datetime(text, errors="coerce", utc=True, format="mixed")
    n_stamps = int(stamps.notna().sum())
    if n_numbers >= n_stamps:
        bad = ~integral.to_numpy()
        return numbers.where(integral, 0).astype(np.int64), bad
    stamps = stamps.dt.tz_localize(None)
    return stamps, stamps.isna().to_numpy()


def schema_of(frame: pd.DataFrame) -> dict[str, Kind]:
    return {str(name): kind_of_pandas(dtype) for name, dtype in frame.dtypes.items()}


def as_frame(events) -> pd.DataFrame:
    """A pandas DataFrame from a DataFrame, a list of dicts or any iterable of dicts."""
    if isinstance(events, pd.DataFrame):
        return events
    rows = list(events)
    if not rows:
        raise DataError("the input holds no events")
    return pd.DataFrame.from_records(rows)
