"""A small input checked in the driver (no Spark job that the answer does not need).
Below `driver_check_bytes()` of CSV (unpacked: `InputSource.size`), `sparkcep run`
reads and checks the rows in the driver with the local runner's reader and checks
(`runners.local.check_events`), while the JVM starts, and hands Spark the valid rows with
the column types Spark's checking pass would give them; the matching and writing run on
Spark as for any input. The summary, the rejected rows and the output are those of the
full Spark path (docs/input.md).

Only where the local reader reads as Spark does: CSV (any separator, --columns), whose
text columns both type by the one rule (`input_types.choose_kind`). Another format,
--pmf, or any error sends the run to the full path.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sparkcep.errors import DataError
from sparkcep.files import InputSource, malformed_cells, read_pandas, rows_as_read
from sparkcep.inputs import CORRUPT, READ_REASON, REASON, ROW
from sparkcep.plan import Options
from sparkcep.plan.columns import named_columns
from sparkcep.runners.local import CheckedEvents, check_events, type_column

if TYPE_CHECKING:
    from sparkcep.runners.spark.batch import SparkRun

ENV = "SPARKCEP_DRIVER_CHECK_BYTES"
DEFAULT_BYTES = 2**20  # the light driver's tiny input (spark_session.TINY_INPUT_BYTES)


def driver_check_bytes() -> int:
    """Inputs smaller than this are checked in the driver (SPARKCEP_DRIVER_CHECK_BYTES,
    read at each run; 0: never)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return DEFAULT_BYTES
    try:
        return max(int(value), 0)
    except ValueError:
        raise DataError(f"{ENV} must be a number of bytes (got '{value}')") from None


def size_text(n: int) -> str:
    """A size in words: 1 MiB, 512 KiB, 100 bytes."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n:,} bytes"


def where_checked(source: InputSource, options: Options) -> str:
    """Where `sparkcep run` through Spark checks the rows of this input, in words (for
    `explain`): in the driver, or by Spark's checking pass, and why."""
    limit = driver_check_bytes()
    why = full_path_reason(source, options, limit)
    if why is None:
        return f"in the driver by a Spark run (CSV under {size_text(limit)})"
    return f"by Spark's checking pass ({why})"


def full_path_reason(source: InputSource, options: Options, limit: int) -> str | None:
    """Why a Spark run over this input takes Spark's checking pass (the format, --pmf,
    the limit, the size unpacked, as the session's settings count it), or None when the
    driver may check it."""
    fmt = source.fmt
    if fmt != "csv" or options.pmf_col is not None:
        return f"{fmt} input" if fmt != "csv" else "--pmf"
    if limit == 0:
        return f"{ENV}=0"
    if source.size >= limit:
        return f"{source.size:,} bytes, not under {size_text(limit)}"
    return None


@dataclass
class DriverChecked:
    """Rows checked in the driver, and what the Spark runner needs of them."""

    events: CheckedEvents
    columns: list[str]  # the input's columns, in order
    id_col: str | None  # the id column given (--id); None: ids are row numbers
    events_read: int
    types: set | None  # the event types that occur (None: no type column)
    limit: int  # the size under which inputs are checked in the driver
    source: InputSource  # the input (its separator, null tokens)
    text: pd.DataFrame  # its rows as text, for the rejected rows (a small input)
    caught: list[str] = field(default_factory=list)  # warnings raised while checking

    @property
    def rejected(self) -> pd.DataFrame:
        """The rejected rows as the Spark path gives them, in row order: the input's
        columns as text, the malformed row's text, the reason, and the row number when
        ids are row numbers."""
        parts = [r for r in (self.events.rejected, self.events.later) if len(r)]
        rows = pd.concat(parts) if parts else self.events.rejected
        rows = rows.sort_values(ROW, kind="stable")  # in row order, as a local run's
        out = rows_as_read(self.text, rows[ROW].to_numpy(), self.source)
        out[REASON] = rows[REASON].to_numpy()
        if not self.id_col:
            out[ROW] = rows[ROW].to_numpy()
        return out


def check_in_driver(source: InputSource, queries, options: Options) -> DriverChecked | None:
    """The input checked in the driver, or None when it takes the full Spark path (too
    large, a format or a column Spark reads otherwise, or an error: the full path
    reports it as it always has)."""
    limit = driver_check_bytes()
    try:
        if full_path_reason(source, options, limit) is not None:
            return None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # pyspark's own notes (the session may be starting in another thread) are
            # not the user's, as in cli.main
            warnings.filterwarnings("ignore", category=UserWarning, module="pyspark")
            checked = _checked(source, queries, options, limit)
        if checked is not None:
            checked.caught = [str(w.message) for w in caught]
        return checked
    except Exception:  # the full path reports it (with SPARKCEP_DEBUG, its own trace)
        return None


def _checked(source: InputSource, queries, options: Options, limit: int) -> DriverChecked | None:

    frame = read_pandas(source, text=True)
    columns = [c for c in frame.columns if c not in (CORRUPT, READ_REASON)]
    type_col = type_column(frame.columns, queries, options)
    read = named_columns(queries, columns, options)
    typed = {c for c in columns if read is None or c in read} - {options.time_col, type_col}
    events = check_events(frame, queries, options, typed=typed)
    types = None
    if type_col is not None:  # of every row, as Spark counts them (a malformed row's too)
        filled = (
            malformed_cells(frame, columns, source.sep, source.null_values)
            if CORRUPT in frame
            else frame
        )
        types = {str(t) for t in filled[type_col].dropna().unique()}
    return DriverChecked(events, columns, options.id_col, len(frame), types, limit, source, frame)


def valid_frame(checked: DriverChecked, time_col: str) -> tuple[pd.DataFrame, dict]:
    """The valid rows as the Spark runner takes them (the input's columns, the row
    number when ids are row numbers, the time in ticks in TICKS and in the time
    column) and each column's Spark type by name; a column of timestamps holds them
    in microseconds (as ticks: no time zone on the way into Spark)."""
    from sparkcep.prep.table import TICKS

    valid = checked.events.valid
    ticks = _ticks(valid[time_col])
    names = [*checked.columns, *([] if checked.id_col else [ROW])]
    out = valid[names].assign(**{time_col: ticks, TICKS: ticks})
    kinds = {c: _kind(out[c]) for c in out.columns}
    stamps = {c: _micros(out[c]) for c, k in kinds.items() if k == "timestamp"}
    return out.assign(**stamps).reset_index(drop=True), kinds


def tick_range(checked: DriverChecked, time_col: str) -> tuple[int | None, int | None]:
    """The first and last time in ticks among the rows the first check kept (as the
    Spark path's checking pass counts them, before the queries' own checks)."""
    times = [checked.events.valid[time_col], checked.events.later[time_col]]
    ticks = np.concatenate([_ticks(t) for t in times if len(t)] or [np.array([], np.int64)])
    return (int(ticks.min()), int(ticks.max())) if len(ticks) else (None, None)


def _ticks(time: pd.Series) -> np.ndarray:
    if pd.api.types.is_datetime64_any_dtype(time.dtype):
        return time.to_numpy(dtype="datetime64[us]").astype(np.int64)
    return time.to_numpy(dtype=np.int64)


def _micros(time: pd.Series) -> pd.Series:
    """Timestamps as microseconds (nulls kept)."""
    micros = time.to_numpy(dtype="datetime64[us]").astype(np.int64)
    return pd.Series(pd.array(micros, dtype="Int64"), index=time.index).where(time.notna())


def _kind(col: pd.Series) -> str:
    """The Spark type (a name for `spark_rows.spark_type`) of a column of valid rows."""
    kind = col.dtype.kind
    if kind == "M":
        return "timestamp"
    if kind in "iu":
        return "int"
    if kind == "f":
        return "float"
    if kind == "b" or str(col.dtype) == "boolean":
        return "bool"
    return "string"


def execute_driver_checked(
    spark, checked: DriverChecked, options: Options, partitions: int | None = None
) -> SparkRun:
    """Run the queries on rows checked in the driver (`driver_check.check_in_driver`):
    the valid rows become a Spark DataFrame with the column types Spark's checking pass
    gives them, and the matching runs as in `execute`, without the checking pass."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from sparkcep.prep.table import TICKS
    from sparkcep.runners.spark.batch import matched
    from sparkcep.runners.spark.rows import Checked, spark_type

    time_col = options.time_col
    rows, kinds = valid_frame(checked, time_col)
    ticks = checked.events.valid[time_col]
    time_kind = "timestamp" if pd.api.types.is_datetime64_any_dtype(ticks.dtype) else "int"
    stamps = [c for c, k in kinds.items() if k == "timestamp"]  # in microseconds
    schema = T.StructType(
        [T.StructField(c, spark_type("int" if c in stamps else k)) for c, k in kinds.items()]
    )
    valid = spark.createDataFrame(rows, schema)
    stamped = {c: F.timestamp_micros(F.col(f"`{c}`")) for c in stamps}
    if time_kind == "timestamp":
        stamped[time_col] = F.timestamp_micros(F.col(TICKS))
    valid = valid.withColumns(stamped) if stamped else valid
    events = checked.events
    min_tick, max_tick = tick_range(checked, time_col)
    duplicates = int(events.valid[options.id_col].duplicated().sum()) if options.id_col else 0
    done = Checked(
        valid, None, options.id_col or ROW, checked.events_read, len(events.rejected),
        min_tick, max_tick, time_kind, types=checked.types, id_given=options.id_col is not None,
        mostly_text=events.mostly, later_count=len(events.later), duplicates=duplicates,
    )  # fmt: skip
    run = matched(done, events.plans, events.programs, options, partitions)
    run.rejected_rows = checked.rejected
    run.driver_checked = size_text(checked.limit)
    return run
