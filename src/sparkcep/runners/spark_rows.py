"""Checking rows in Spark: good rows go on with their time in ticks, bad rows go to
`rejected` with a reason; counts and the time range come out of the same pass."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcep.errors import DataError
from sparkcep.files import CORRUPT
from sparkcep.inputs import OUT_OF_RANGE, REASON, ROW
from sparkcep.prep.table import TICKS
from sparkcep.schema import Kind
from sparkcep.timeunits import TIME_LIMIT

MID = "__mid"
SPLIT = "__split"


def kind_of_spark(dtype: T.DataType) -> Kind:
    if isinstance(dtype, T.BooleanType):
        return "bool"
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return "int"
    if isinstance(dtype, T.FloatType | T.DoubleType | T.DecimalType):
        return "float"
    if isinstance(dtype, T.StringType):
        return "string"
    if isinstance(dtype, T.TimestampType | T.TimestampNTZType | T.DateType):
        return "timestamp"
    return "unknown"


def spark_type(kind: Kind) -> T.DataType:
    return {
        "int": T.LongType(),
        "float": T.DoubleType(),
        "string": T.StringType(),
        "bool": T.BooleanType(),
        "timestamp": T.TimestampType(),
    }.get(kind, T.StringType())


def schema_of(df: DataFrame, ignore: tuple[str, ...] = ()) -> dict[str, Kind]:
    return {f.name: kind_of_spark(f.dataType) for f in df.schema.fields if f.name not in ignore}


@dataclass
class Checked:
    """Valid rows (time normalised, ticks in TICKS, ids in `id_col`) and rejected rows."""

    valid: DataFrame
    rejected: DataFrame
    id_col: str
    events_read: int
    rejected_count: int
    min_tick: int | None
    max_tick: int | None
    time_kind: Kind


def check_rows(
    df: DataFrame,
    *,
    time_col: str,
    type_col: str | None,
    id_col: str | None,
    split_cols: list[Column] | None = None,
    infer_types: bool = False,
) -> Checked:
    """Split rows into valid and rejected, number them when there is no id column, and
    gather counts and the time range, in one pass over the data.

    `split_cols` name the input splits in input order (file, offset) so that row numbers
    follow the input order; by default, Spark's partitions of `df` in order.
    `infer_types` (for CSV read as text) gives each string column the narrowest type all
    its values have (integer, double, boolean, timestamp, else string), as Spark's
    inferSchema does, but in the same pass.
    """
    columns = df.columns
    for role, col in (("time", time_col), ("type", type_col), ("id", id_col)):
        if col is not None and col not in columns:
            raise DataError(
                f"the {role} column '{col}' is not in the input (columns: {', '.join(columns)})"
            )
    raw = F.col(f"`{time_col}`")
    candidates = _time_candidates(df, time_col)  # kind -> parsed time column
    type_missing = F.lit(False)
    if type_col is not None:  # None: the queries name no type (every component is ANY)
        type_missing = F.col(f"`{type_col}`").isNull() | (
            F.trim(F.col(f"`{type_col}`").cast("string")) == ""
        )
    corrupt = F.col(CORRUPT).isNotNull() if CORRUPT in columns else F.lit(False)

    far = _beyond_time_limit(df, time_col)

    def reason_for(parsed: Column) -> Column:
        return (
            F.when(corrupt, F.lit("malformed row"))
            .when(raw.isNull(), F.lit(f"{time_col} is missing"))
            .when(far, F.lit(OUT_OF_RANGE.format(time_col=time_col)))
            .when(parsed.isNull(), F.lit(f"{time_col} is not an integer or a timestamp"))
            .when(type_missing, F.lit(f"{type_col} is missing"))
        )

    def ticks_of(kind: str, parsed: Column) -> Column:
        return F.unix_micros(parsed) if kind == "timestamp" else parsed

    split_cols = split_cols if split_cols is not None else [F.spark_partition_id()]
    staged = df
    if id_col is None:
        staged = staged.withColumn(MID, F.monotonically_increasing_id())
    split_names = [f"{SPLIT}{i}" for i in range(len(split_cols))]
    for name, col in zip(split_names, split_cols):
        staged = staged.withColumn(name, col)
    aggs = [F.count(F.lit(1)).alias("n")]
    if id_col is None:
        aggs.append(F.min(MID).alias("base"))
    for kind, parsed in candidates.items():
        bad = reason_for(parsed).isNotNull()
        aggs += [
            F.sum(F.when(bad, 1).otherwise(0)).alias(f"bad_{kind}"),
            F.min(F.when(~bad, ticks_of(kind, parsed))).alias(f"tmin_{kind}"),
            F.max(F.when(~bad, ticks_of(kind, parsed))).alias(f"tmax_{kind}"),
        ]
    inferred = [
        f.name
        for f in df.schema.fields
        if infer_types
        and isinstance(f.dataType, T.StringType)
        and f.name not in (time_col, type_col, CORRUPT)
    ]
    for i, name in enumerate(inferred):
        aggs += [F.count(c).alias(f"c{i}_{kind}") for kind, c in _casts(name).items()]
    stats = staged.groupBy(*split_names).agg(*aggs).collect()
    stats = sorted(stats, key=lambda r: tuple(_sortable(r[n]) for n in split_names))
    events_read = sum(r["n"] for r in stats)
    if events_read == 0:
        raise DataError("the input holds no events")
    # The time column's kind: the reading that rejects fewer rows (integers on a tie).
    time_kind = min(candidates, key=lambda k: (sum(r[f"bad_{k}"] for r in stats), k != "int"))
    parsed = candidates[time_kind]
    rejected_count = sum(r[f"bad_{time_kind}"] for r in stats)
    tmins = [r[f"tmin_{time_kind}"] for r in stats if r[f"tmin_{time_kind}"] is not None]
    tmaxs = [r[f"tmax_{time_kind}"] for r in stats if r[f"tmax_{time_kind}"] is not None]
    for i, name in enumerate(inferred):
        counts = {kind: sum(r[f"c{i}_{kind}"] for r in stats) for kind in _casts(name)}
        for kind in ("long", "double", "boolean", "timestamp"):
            if counts["any"] and counts[kind] == counts["any"]:
                staged = staged.withColumn(name, _casts(name)[kind])
                break
    staged = staged.withColumn(REASON, reason_for(parsed))
    if id_col is None:
        # Row number = position in its split + rows in the splits before it.
        deltas, total = [], 0
        for r in stats:
            key = "\u0001".join(str(r[n]) for n in split_names)
            deltas += [F.lit(key), F.lit(total - int(r["base"]))]
            total += r["n"]
        split_key = F.concat_ws("\u0001", *[F.col(n).cast("string") for n in split_names])
        delta = F.element_at(F.create_map(*deltas), split_key)
        staged = staged.withColumn(ROW, F.col(MID) + delta).drop(MID)
        id_col = ROW
    staged = staged.drop(*split_names)
    rejected = staged.filter(F.col(REASON).isNotNull())
    valid = (
        staged.filter(F.col(REASON).isNull())
        .drop(REASON, *([CORRUPT] if CORRUPT in columns else []))
        .withColumn(time_col, parsed)
        .withColumn(TICKS, ticks_of(time_kind, parsed))
    )
    return Checked(
        valid,
        rejected,
        id_col,
        events_read,
        rejected_count,
        min(tmins) if tmins else None,
        max(tmaxs) if tmaxs else None,
        "timestamp" if time_kind == "timestamp" else "int",
    )


def _time_candidates(df: DataFrame, time_col: str) -> dict[str, Column]:
    """The ways to read the time column: as integers, as timestamps, or both (text)."""
    raw = F.col(f"`{time_col}`")
    time_type = df.schema[time_col].dataType
    if isinstance(time_type, T.TimestampType | T.TimestampNTZType | T.DateType):
        return {"timestamp": raw.cast("timestamp")}
    limit = F.lit(TIME_LIMIT)
    if isinstance(time_type, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return {"int": F.when((raw < limit) & (raw > -limit), raw.cast("long"))}
    if isinstance(time_type, T.FloatType | T.DoubleType | T.DecimalType):
        whole = (raw == F.floor(raw)) & (F.abs(raw) < limit)
        return {"int": F.when(whole, raw.cast("long"))}
    return {"int": _text_to_long(raw), "timestamp": F.expr(f"try_cast(`{time_col}` AS TIMESTAMP)")}


INTEGER_DIGITS = r"^\s*[+-]?([0-9]+)\s*$"
LIMIT_DIGITS = str(TIME_LIMIT)  # 19 digits: same-length digit strings compare as numbers


def _text_digits(col: Column) -> tuple[Column, Column]:
    """(the digits of an integer text, '' otherwise; whether it lies within ±TIME_LIMIT)."""
    digits = F.regexp_extract(col, INTEGER_DIGITS, 1)
    n = F.length(digits)
    in_range = (n >= 1) & (
        (n < len(LIMIT_DIGITS)) | ((n == len(LIMIT_DIGITS)) & (digits < F.lit(LIMIT_DIGITS)))
    )
    return digits, in_range


def _text_to_long(col: Column) -> Column:
    # Guarded: a failing try_cast to BIGINT costs an exception per row (10x slower).
    _, in_range = _text_digits(col)
    return F.when(in_range, F.trim(col).cast("long"))


def _text_to_any_long(col: Column) -> Column:
    """Integer text as a long, over the whole range of longs (ids, not times)."""
    digits = F.regexp_extract(col, INTEGER_DIGITS, 1)
    n = F.length(digits)
    return F.when((n >= 1) & (n <= 18), F.trim(col).cast("long")).when(
        n == 19, F.trim(col).try_cast("long")
    )


def _beyond_time_limit(df: DataFrame, time_col: str) -> Column:
    """True where the time is an integer beyond ±TIME_LIMIT (a rejected row's reason)."""
    raw = F.col(f"`{time_col}`")
    time_type = df.schema[time_col].dataType
    if isinstance(time_type, T.NumericType):
        return F.coalesce(F.abs(raw.cast("double")) >= F.lit(float(TIME_LIMIT)), F.lit(False))
    if isinstance(time_type, T.StringType):
        digits, in_range = _text_digits(raw)
        return F.coalesce((F.length(digits) > 0) & ~in_range, F.lit(False))
    return F.lit(False)


def _casts(name: str) -> dict[str, Column]:
    col = f"`{name}`"
    return {
        "any": F.col(col),
        "long": _text_to_any_long(F.col(col)),
        "double": F.expr(f"try_cast({col} AS DOUBLE)"),
        "boolean": F.when(F.lower(F.col(col)).isin("true", "false"), F.lower(F.col(col)) == "true"),
        "timestamp": F.expr(f"try_cast({col} AS TIMESTAMP)"),
    }


def _sortable(value):
    return (value is None, value if value is not None else 0)
