"""Checking event rows in pandas: good rows go on, bad rows go to `rejected` with a reason."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sparkcep.errors import DataError, missing_column
from sparkcep.schema import Kind, kind_of_pandas
from sparkcep.timeunits import TIME_LIMIT

ROW = "__row"  # 0-based row number in input order, the id when no id column is given
ORDER_COL = "__order"  # the input's row order as the time (MATCH_RECOGNIZE without ORDER BY)
REASON = "reason"
CORRUPT = "__corrupt_record"  # the text of a row that could not be parsed (Spark's column)
READ_REASON = "__read_reason"  # why the reader could not use a row (malformed, not UTF-8)
# Cells that mean "no value" in text input (CSV), the same for pandas and Spark: an empty
# (or blank) cell only; the user may name more (`--null-value`, `null_values=`), since a
# word such as 'NA' is a value (a case id, a country code).
NULL_TOKENS = ("",)
# Timestamp text, the one rule of every reader (docs/input.md): a date written year
# first with '-' or '/', then optionally a time after 'T' or a space (hours and minutes,
# seconds, a fraction, read to the microsecond) and a zone ('Z', '+01:00', '+0100', '-05').
TIMESTAMP_TEXT = (
    r"^\s*[0-9]{4}([-/])[0-9]{1,2}\1[0-9]{1,2}"
    r"([T ][0-9]{1,2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?\s*$"
)
ZONED = r":[0-9]{2}(?:\.[0-9]*)?(?:Z|[+-][0-9]{2}(?::?[0-9]{2})?)\s*$"  # timestamp text with a zone
# A number written with a leading zero ('007', '01'): an id or a code, not a quantity; a
# text column holding one stays text, so that '01' and '1' stay two values.
LEADING_ZERO = r"^\s*[+-]?0[0-9]"
# A text column whose non-empty cells are numbers but for a few (under 10%) is a column of
# numbers: those cells are not numbers, and a query that reads the column rejects their
# rows with the reason (docs/language.md, "Input").
NUMERIC_SHARE = 0.9
MOSTLY_NUMBERS = 0.5  # a text column at least this much numbers is worth a warning


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
        try:  # vectorised: a cell that is not text gives NaN, never a token
            blank = cells.str.strip(" ").isin(tokens)
        except AttributeError:  # no text in the column at all
            continue
        if blank.any():
            out[col] = cells.where(~blank, None)
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
            raise DataError(missing_column(role, col, frame.columns))
    frame = frame.copy()
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
    valid = frame[~bad].drop(columns=[CORRUPT], errors="ignore")
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
    ok = text.str.fullmatch(TIMESTAMP_TEXT).fillna(False).to_numpy(dtype=bool)
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


def numeric_columns(
    frame: pd.DataFrame, skip, rows: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, dict[str, pd.Series], dict[str, tuple[int, int]]]:
    """Text columns that hold numbers but for a few cells, as numbers; per such column,
    the reason of each row whose cell is not a number (None elsewhere); and the columns
    left text although most of their values are numbers: (numbers, present values).

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
        numbers, failing, good, present = _numeric_column(frame[col])
        if numbers is None:
            if present and good >= MOSTLY_NUMBERS * present:
                mostly[col] = (good, present)
            continue
        changed[col] = taken(numbers)
        if failing.any():
            reasons = pd.Series(None, index=frame.index, dtype=object)
            reasons[failing] = [f"{col}: '{v}' is not a number" for v in frame[col][failing]]
            bad_cells[col] = taken(reasons)
    if changed:
        rows = rows.assign(**changed)
    return rows, bad_cells, mostly


def _numeric_column(values: pd.Series):
    """(the column as numbers, where a present cell is not one, how many present cells
    are numbers, how many are present); the column is None when under NUMERIC_SHARE of
    its present cells are numbers, or when a number is written with a leading zero
    (LEADING_ZERO: ids and codes stay text, counted as no numbers). Text is judged once
    per distinct value (a type column of a million rows holds a handful), which gives the
    same answer as judging every cell; other objects (bools are not numbers, nor present) cell by cell."""
    if pd.api.types.infer_dtype(values, skipna=True) == "string":
        codes, uniques = pd.factorize(values)
        distinct = pd.Series(uniques, dtype=object)
        count = np.bincount(codes[codes >= 0], minlength=len(distinct))
        parsed = pd.to_numeric(distinct, errors="coerce")
        number = parsed.notna().to_numpy()
        present_cells, good = int(count.sum()), int(count[number].sum())
        if distinct.str.match(LEADING_ZERO).any():  # ids or codes: text, and no warning
            return None, None, 0, present_cells
        if not present_cells or good < NUMERIC_SHARE * present_cells:
            return None, None, good, present_cells
        ints = distinct[number].map(_integer_text)
        known = codes >= 0
        failing = known & ~np.where(known, number[codes], False)
        if ints.notna().all():  # every number written as an integer: exact Int64
            as_int = pd.array([None] * len(distinct), dtype="Int64")
            as_int[np.flatnonzero(number)] = ints.to_numpy()
            out = pd.array([None] * len(values), dtype="Int64")
            out[np.flatnonzero(known)] = as_int[codes[known]]
            return pd.Series(out, index=values.index), failing, good, present_cells
        taken = pd.Series(parsed.to_numpy()[np.where(known, codes, 0)], index=values.index)
        return (taken if known.all() else taken.where(known)), failing, good, present_cells
    present = values.notna() & ~values.map(lambda v: isinstance(v, bool)).astype(bool)
    n = int(present.sum())
    if not n:
        return None, None, 0, 0
    numbers = pd.to_numeric(values.where(present), errors="coerce")
    good = int(numbers.notna().sum())
    if values.map(lambda v: isinstance(v, str) and re.match(LEADING_ZERO, v) is not None).any():
        return None, None, 0, n
    if good < NUMERIC_SHARE * n:
        return None, None, good, n
    # Integers when every number is written as one (as Spark reads text: "2.0" is a
    # double), and exactly: pd.to_numeric gives floats once a cell fails.
    ints = values[numbers.notna()].map(_integer_text)
    if len(ints) and ints.notna().all():
        numbers = pd.array([None] * len(values), dtype="Int64")
        numbers[np.flatnonzero(present & values.map(_integer_text).notna())] = ints.to_numpy()
        numbers = pd.Series(numbers, index=values.index)
    return numbers, (present & numbers.isna()).to_numpy(), good, n


def _integer_text(v):
    """The integer a cell holds when it is written as one (text or int), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, str) and re.fullmatch(r"\s*[+-]?[0-9]{1,18}\s*", v):
        return int(v)
    return None
