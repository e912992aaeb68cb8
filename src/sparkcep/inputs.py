"""Checking event rows in pandas: good rows go on, bad rows go to `rejected` with a reason."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sparkcep.errors import DataError, missing_column
from sparkcep.input_types import (
    BOOLEAN,
    INFINITY,
    INTEGER,
    LEADING_ZERO,
    LONG_LIMIT,
    NULL_TOKENS,
    NUMBER,
    NUMERIC_SHARE,
    TIMESTAMP_TEXT,
    ZONED,
    choose_kind,
    mostly_numbers,
)
from sparkcep.input_types import (
    CORRUPT as CORRUPT,
)
from sparkcep.schema import Kind, kind_of_pandas
from sparkcep.timeunits import TIME_LIMIT

ROW = "__row"  # 0-based row number in input order, the id when no id column is given
ORDER_COL = "__order"  # the input's row order as the time (MATCH_RECOGNIZE without ORDER BY)
REASON = "reason"
READ_REASON = "__read_reason"  # why the reader could not use a row (malformed, not UTF-8)


def text_warning(col: str, numbers: int, present: int) -> str:
    """A column read by a query that is read as text although most of it is numbers."""
    return (
        f"column '{col}' is read as text: {numbers:,} of its {present:,} values are numbers, "
        f"under the {NUMERIC_SHARE:.0%} that makes it a column of numbers (docs/input.md); "
        "comparing it compares text ('10' < '9')"
    )


OUT_OF_RANGE = "{time_col} is out of range (integer times lie within ±2^62)"


def null_cells(frame: pd.DataFrame, null_values=()) -> pd.DataFrame:
    """Text cells that mean no value as nulls: blank once their spaces are trimmed, or
    (trimmed) one of the user's `null_values` (Spark's rule too: spark_rows._null_tokens)."""
    tokens = {*NULL_TOKENS, *(v.strip(" ") for v in null_values)}
    out = {}
    for col in frame.columns:
        if col in (CORRUPT, READ_REASON) or frame[col].dtype != object:
            continue
        cells = frame[col]
        # Each distinct cell trimmed once (a column of a million cells holds few), then
        # the cells looked up: a cell that is not text is never a token.
        try:
            distinct = pd.unique(cells)
        except TypeError:  # lists (JSON lines): no token among them, nor in its text
            distinct = [v for v in cells if isinstance(v, str)]
        blank = {v for v in distinct if isinstance(v, str) and v.strip(" ") in tokens}
        if blank:
            out[col] = cells.where(~cells.isin(blank), None)
    return frame.assign(**out) if out else frame


def split_valid(
    frame: pd.DataFrame, *, time_col: str, type_col: str | None, id_col: str | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(valid rows with a normalised time column, rejected rows with a `reason`).

    A row is rejected when its time is missing or is neither an integer nor a timestamp,
    or its type is missing (`type_col` None: the queries name no type, and none is read).
    Row numbers are kept in the ROW column (and are the time when `time_col` is
    ORDER_COL: MATCH_RECOGNIZE without ORDER BY).
    """
    for role, col in (("time", time_col), ("type", type_col), ("id", id_col)):
        if col is not None and col not in frame.columns and col != ORDER_COL:
            named = [c for c in frame.columns if c not in (CORRUPT, READ_REASON)]  # the input's
            raise DataError(missing_column(role, col, named))
    frame = frame.copy(deep=False)  # new columns only: the caller's frame stays as it was
    frame[ROW] = np.arange(len(frame), dtype=np.int64)
    if time_col == ORDER_COL:
        frame[ORDER_COL] = frame[ROW]
    # a numpy array: pandas' masked assignment costs milliseconds each, on any size
    reason = np.full(len(frame), None, dtype=object)
    time, bad_time, out_of_range = _parse_time(frame[time_col])
    missing_time = frame[time_col].isna().to_numpy()
    reason[missing_time] = f"{time_col} is missing"
    reason[bad_time & ~missing_time] = f"{time_col} is not an integer or a timestamp"
    reason[out_of_range & ~missing_time] = OUT_OF_RANGE.format(time_col=time_col)
    if type_col is not None:
        # judged per distinct type (a handful), not per row
        codes, uniques = pd.factorize(frame[type_col])
        blank = np.array([str(u).strip() == "" for u in uniques], dtype=bool)
        missing_type = (codes < 0) | np.where(
            codes >= 0, blank[codes] if len(blank) else False, False
        )
        reason[missing_type & pd.isna(reason)] = f"{type_col} is missing"
    if id_col is not None:  # an event without an id cannot be named in a match
        reason[frame[id_col].isna().to_numpy() & pd.isna(reason)] = f"{id_col} is missing"
    if READ_REASON in frame:  # set by files.read_pandas: comes first, as in Spark
        read = frame.pop(READ_REASON).to_numpy(dtype=object)
        reason = np.where(pd.notna(read), read, reason)
    bad = pd.notna(reason)
    rejected = frame[bad].copy()
    rejected[REASON] = reason[bad]
    if bad.any():
        valid = frame[~bad].drop(columns=[CORRUPT], errors="ignore")
    elif CORRUPT in frame.columns:
        valid = frame.drop(columns=[CORRUPT])
    else:  # every row valid: no copy of every cell (G2, 1M rows: 0.1 s)
        valid = frame.copy(deep=False)
    valid[time_col] = time[~bad]
    if type_col is not None and not pd.api.types.is_string_dtype(valid[type_col].dtype):
        valid[type_col] = valid[type_col].astype(str)
    return valid, rejected


def duplicate_ids(valid: pd.DataFrame, id_col: str | None) -> list[str]:
    """A warning counting the valid events whose id an earlier event has (--id)."""
    if id_col is None or id_col not in valid.columns:
        return []
    return duplicate_warning(int(valid[id_col].duplicated().sum()), id_col)


def duplicate_warning(n: int, id_col: str) -> list[str]:
    if not n:
        return []
    return [
        f"{n:,} event{'s have' if n > 1 else ' has'} the id of another event (--id {id_col}): "
        "a match names them ambiguously; give each event its own id"
    ]


def _parse_time(col: pd.Series) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """The time column as int64 or datetime64 (UTC, naive), where it is not a time, and
    where it is an integer beyond ±TIME_LIMIT (kept out: window arithmetic would wrap)."""
    none = np.zeros(len(col), bool)
    if pd.api.types.is_datetime64_any_dtype(col.dtype):
        if getattr(col.dtype, "tz", None) is not None:
            col = col.dt.tz_convert("UTC").dt.tz_localize(None)
        return col, col.isna().to_numpy(), none
    if pd.api.types.is_integer_dtype(col.dtype):
        null = col.isna().to_numpy()
        ints, far = _in_range(col.where(~col.isna(), 0))
        return pd.Series(ints, index=col.index), null, far & ~null
    if pd.api.types.is_float_dtype(col.dtype):
        return _integral(col.to_numpy(dtype=np.float64), col.index)
    text = col.astype("string").str.strip()
    integer = text.str.fullmatch(r"[+-]?[0-9]+").fillna(False).to_numpy(dtype=bool)
    numbers = pd.to_numeric(text.where(~integer), errors="coerce").astype(np.float64)
    integral = numbers.notna() & (numbers == numbers.round())
    n_numbers = int(integral.sum()) + int(integer.sum())
    stamps = text_timestamps(text)
    n_stamps = int(stamps.notna().sum())
    if n_numbers >= n_stamps:
        out, bad, far = _integral(numbers.to_numpy(dtype=np.float64, na_value=np.nan), col.index)
        if integer.any():  # exactly, not through floats (ns times have 19 digits)
            exact, exact_far = _in_range(pd.Series([int(v) for v in text[integer]]))
            out[integer] = exact
            bad[integer] = False
            far[integer] = exact_far
        return out, bad, far
    return stamps, stamps.isna().to_numpy(), none


def text_timestamps(text: pd.Series) -> pd.Series:
    """Text as timestamps (UTC, naive, to the microsecond; NaT where a cell is not one by
    TIMESTAMP_TEXT), as Spark reads them (`spark_rows.text_timestamp`).

    >>> text_timestamps(pd.Series(["2014-1-2T10:00+01:00", "22/10/2014", "2014/10/22 11:15"]))
    0   2014-01-02 09:00:00
    1                   NaT
    2   2014-10-22 11:15:00
    dtype: datetime64[ns]
    """
    text = text.astype("string")
    ok = text.str.fullmatch(TIMESTAMP_TEXT, flags=re.ASCII).fillna(False).to_numpy(dtype=bool)
    out = pd.Series(pd.NaT, index=text.index, dtype="datetime64[ns]")
    zoned = text.str.contains(ZONED).fillna(False).to_numpy(dtype=bool)
    # apart: pandas carries a zone over to the zoneless cells that follow it
    for part in (ok & zoned, ok & ~zoned):
        if part.any():
            cells = text[part].str.strip().str.replace("/", "-", regex=False)
            stamps = pd.to_datetime(cells, errors="coerce", utc=True, format="ISO8601")
            out[part] = stamps.dt.tz_localize(None).dt.floor("us").to_numpy(dtype="datetime64[ns]")
    return out


def _in_range(ints: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integers (any width) -> (int64 values, 0 where out of range; out of range)."""
    if ints.dtype == object or ints.dtype.kind == "u" or str(ints.dtype) == "UInt64":
        values = ints.astype(object).to_numpy()
        far = np.array([not -TIME_LIMIT < int(v) < TIME_LIMIT for v in values], dtype=bool)
        return np.where(far, 0, values).astype(np.int64), far
    values = ints.to_numpy(dtype=np.int64)
    far = (values >= TIME_LIMIT) | (values <= -TIME_LIMIT)
    return np.where(far, 0, values), far


def _integral(values: np.ndarray, index) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """Floats that should be integer times: (int64 times, not integral, out of range)."""
    bad = ~np.isfinite(values) | (np.floor(values) != values)
    far = ~bad & ~(np.abs(values) < TIME_LIMIT)
    ints = np.where(bad | far, 0, values).astype(np.int64)
    return pd.Series(ints, index=index), bad, far


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


def typed_columns(
    frame: pd.DataFrame, skip, rows: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, dict[str, pd.Series], dict[str, tuple[int, int]]]:
    """Text columns with the type the one rule gives them (`input_types.choose_kind`:
    integers, doubles, booleans, timestamps or text); per column of numbers, the reason
    of each row whose cell is not a number (None elsewhere); and the columns left text
    although most of their values are numbers: (numbers, present values).

    Each column is judged over all of `frame`'s rows (every value read, as Spark
    judges it); the rows returned are those of `rows` (default: all), a frame with
    some of `frame`'s rows (its valid ones)."""
    rows = frame if rows is None else rows
    # positions, not labels: a caller's frame may repeat index labels
    at = np.arange(len(frame)) if rows is frame else rows[ROW].to_numpy()

    def taken(series: pd.Series) -> pd.Series:
        return pd.Series(series.to_numpy()[at], index=rows.index, dtype=series.dtype)

    bad_cells: dict[str, pd.Series] = {}
    mostly: dict[str, tuple[int, int]] = {}
    changed = {}
    for col in frame.columns:
        if col in skip or col not in rows.columns or frame[col].dtype != object:
            continue
        typed, failing, counts = _typed_column(frame[col])
        if typed is None:
            if numbers := mostly_numbers(counts):
                mostly[col] = numbers
            continue
        changed[col] = taken(typed)
        if failing.any():
            reasons = pd.Series(None, index=frame.index, dtype=object)
            reasons[failing] = [f"{col}: '{v}' is not a number" for v in frame[col][failing]]
            bad_cells[col] = taken(reasons)
    if changed:
        rows = rows.assign(**changed)
    return rows, bad_cells, mostly


def text_counts(values: pd.Series) -> dict[str, int]:
    """The counts of `input_types.choose_kind` over a column of text cells."""
    return _distinct_counts(values)[3]


def _distinct_counts(values: pd.Series):
    """(codes of each cell's distinct value, the distinct values as text, per kind where
    each distinct value reads as it, the counts). Text is judged once per distinct value (a type column of a million
    rows holds a handful), with vectorised string operations: the rules of
    `input_types.cell_counts`."""
    codes, uniques = pd.factorize(values)
    text = pd.Series(uniques, dtype=object).astype(str)
    present = ~text.str.strip(" ").isin(NULL_TOKENS).to_numpy()
    integer = text.str.fullmatch(INTEGER, flags=re.ASCII).to_numpy(dtype=bool)
    integer[integer] = [-LONG_LIMIT <= int(v) < LONG_LIMIT for v in text[integer]]
    number = text.str.fullmatch(NUMBER, flags=re.ASCII).to_numpy(dtype=bool)
    parsed = pd.to_numeric(text.where(number), errors="coerce").to_numpy(dtype=np.float64)
    number = number & np.isfinite(parsed)
    number |= text.str.fullmatch(INFINITY, flags=re.ASCII).to_numpy(dtype=bool)
    flags = {
        "any": present,
        "zeros": text.str.match(LEADING_ZERO, flags=re.ASCII).to_numpy(dtype=bool),
        "long": integer,
        "double": number,
        "boolean": text.str.lower().isin(BOOLEAN).to_numpy(),
        "timestamp": text_timestamps(text).notna().to_numpy(),
    }
    weight = np.bincount(codes[codes >= 0], minlength=len(text))
    counts = {k: int(weight[f & present].sum()) for k, f in flags.items()}
    return codes, text, flags, counts


def _typed_column(values: pd.Series):
    """(the column as the type the one rule gives it, or None for text; where a present
    cell is not of that type; the counts the rule judged)."""
    if pd.api.types.infer_dtype(values, skipna=True) != "string":
        return _typed_objects(values)
    codes, distinct, flags, counts = _distinct_counts(values)
    kind = choose_kind(counts)
    if kind == "string":
        return None, None, counts
    known = codes >= 0
    at = np.where(known, codes, 0)
    failing = known & flags["any"][at] & ~flags[kind][at]
    if kind == "long":
        ints = pd.array([None] * len(distinct), dtype="Int64")
        ints[np.flatnonzero(flags["long"])] = [int(v) for v in distinct[flags["long"]]]
        out = pd.array([None] * len(values), dtype="Int64")
        good = known & flags["long"][at]
        out[np.flatnonzero(good)] = ints[codes[good]]
        return pd.Series(out, index=values.index), failing, counts
    if kind == "double":
        floats = np.array([float(v) if ok else np.nan for v, ok in zip(distinct, flags["double"])])
        out = np.where(known & flags["double"][at], floats[at], np.nan)
        return pd.Series(out, index=values.index), failing, counts
    if kind == "boolean":
        truth = pd.array(distinct.str.lower() == "true", dtype="boolean")
        out = pd.array([None] * len(values), dtype="boolean")
        out[np.flatnonzero(known)] = truth[codes[known]]
        return pd.Series(out, index=values.index), failing, counts
    stamps = text_timestamps(distinct).to_numpy()  # timestamps: every present cell is one
    out = np.where(known, stamps[at], np.datetime64("NaT"))
    return pd.Series(out, index=values.index, dtype="datetime64[ns]"), failing, counts


def _typed_objects(values: pd.Series):
    """`_typed_column` for a column of other objects than text (JSON lines: numbers and
    text in one field): numbers, or text; bools are neither numbers nor present."""
    present = values.notna() & ~values.map(lambda v: isinstance(v, bool)).astype(bool)
    numbers = pd.to_numeric(values.where(present), errors="coerce")
    ints = values.map(_integer_text)
    zeros = values.map(lambda v: isinstance(v, str) and re.match(LEADING_ZERO, v) is not None)
    counts = {
        "any": int(present.sum()),
        "zeros": int(zeros.sum()),
        "long": int((present & ints.notna()).sum()),
        "double": int(numbers.notna().sum()),
        "boolean": 0,
        "timestamp": 0,
    }
    kind = choose_kind(counts)
    if kind == "string":
        return None, None, counts
    if kind == "long":  # exactly: pd.to_numeric gives floats once a cell fails
        numbers = pd.array([None] * len(values), dtype="Int64")
        good = (present & ints.notna()).to_numpy()
        numbers[np.flatnonzero(good)] = ints[good].to_numpy()
        numbers = pd.Series(numbers, index=values.index)
    return numbers, (present & numbers.isna()).to_numpy(), counts


def _integer_text(v):
    """The integer a cell holds when it is written as one (text or int), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"\s*[+-]?[0-9]{1,18}\s*", v):
        return int(v)
    return None
