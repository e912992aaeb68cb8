"""The Spark batch runner: Spark reads, checks, filters and partitions; an engine matches.

    events ──check rows──▶ valid ──mask + filter (JVM)──▶ partition ──sort──▶ engine per
                └─▶ rejected (with a reason)               by key, or by time ranges
                                                           that overlap by the window

Keyed queries are repartitioned by the key and each Spark partition is matched in one
call over all its keys (a segment per key). Unkeyed queries with a window are split into
time ranges of at least the window's length; each range also receives the events up to
one window before and after it, and reports only the matches that start inside it, so
no match is lost or reported twice. Unkeyed queries without a window run in one
partition.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcep.errors import DataError
from sparkcep.events import MASK, TICKS
from sparkcep.files import CORRUPT
from sparkcep.inputs import OUT_OF_RANGE, REASON, ROW
from sparkcep.plan import Options, Plan, analyze
from sparkcep.runners.spark_expr import filter_column, mask_column
from sparkcep.runners.warmup import archive_options
from sparkcep.schema import Kind
from sparkcep.timeunits import TIME_LIMIT

RANGE = "__range"
MID = "__mid"
SPLIT = "__split"
EVENTS_PER_RANGE = 200_000  # unkeyed queries: aim for ranges of about this many events


def spark_session(master: str | None = None, *, app_name: str = "sparkcep", **conf) -> SparkSession:
    """A SparkSession set up for sparkcep: local mode by default, UTC, UI off."""
    if master is None or master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master or "local[*]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.adaptive.enabled", "true")
    )
    if master is None or master.startswith("local"):
        builder = builder.config("spark.python.daemon.module", "sparkcep.runners.daemon")
    java_options = [f"-Dlog4j2.configurationFile={_log4j_config()}", *archive_options()]
    extra = conf.pop("spark.driver.extraJavaOptions", None)
    if extra:
        java_options.append(extra)
    builder = builder.config("spark.driver.extraJavaOptions", " ".join(java_options))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _log4j_config() -> str:
    from importlib.resources import files

    return Path(str(files("sparkcep").joinpath("log4j2.properties"))).as_uri()


# ---- reading kinds off Spark schemas ---------------------------------------------------


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


# ---- checking rows ----------------------------------------------------------------------


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
    splits: int = 0
    extra: dict = field(default_factory=dict)


def check_rows(
    df: DataFrame,
    *,
    time_col: str,
    type_col: str,
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
        len(stats),
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


# ---- matching ---------------------------------------------------------------------------


@dataclass
class SparkRun:
    plan: Plan
    unordered: DataFrame  # the matches, in no particular order
    rejected: DataFrame
    checked: Checked
    partitions: int
    layout: str  # how the work was split, in words
    order: list[str] = field(default_factory=list)  # output order: key, end, start, ids
    max_matches: int | None = None

    @property
    def matches(self) -> DataFrame:
        """The matches in output order (a global sort)."""
        ordered = self.unordered.orderBy(*[F.col(f"`{c}`") for c in self.order])
        return ordered if self.max_matches is None else ordered.limit(self.max_matches)


def schema_of(df: DataFrame, ignore: tuple[str, ...] = ()) -> dict[str, Kind]:
    return {f.name: kind_of_spark(f.dataType) for f in df.schema.fields if f.name not in ignore}


def run(
    df: DataFrame,
    query: str | Plan,
    *,
    time_col: str = "ts",
    type_col: str = "type",
    id_col: str | None = None,
    time_unit: str | None = None,
    tiebreak: str | None = None,
    max_matches: int | None = None,
    split_cols: list[Column] | None = None,
    infer_types: bool = False,
    partitions: int | None = None,
) -> SparkRun:
    """Match `query` on a Spark DataFrame; returns matches and rejected rows (lazy)."""
    checked = check_rows(
        df,
        time_col=time_col,
        type_col=type_col,
        id_col=id_col,
        split_cols=split_cols,
        infer_types=infer_types,
    )
    if isinstance(query, Plan):
        plan = query
    else:
        options = Options(time_col, type_col, id_col, time_unit, tiebreak)
        schema = schema_of(checked.valid, ignore=(TICKS, ROW))
        schema[time_col] = checked.time_kind
        plan = analyze(query, schema, options)
    spark = df.sparkSession
    if partitions is None:
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    events = checked.valid.withColumn(MASK, mask_column(plan))
    if plan.strategy != "STRICT_CONTIGUITY":
        events = events.filter(filter_column(plan))
    for k in plan.key:
        events = events.filter(F.col(f"`{k}`").isNotNull())
    needed = [
        *plan.key,
        time_col,
        TICKS,
        *([plan.tiebreak] if plan.tiebreak else []),
        checked.id_col,
        MASK,
        *plan.engine_attributes(),
    ]
    events = events.select(*[F.col(f"`{c}`") for c in dict.fromkeys(needed)])
    lay = _layout(
        events, list(plan.key), list(plan.key), plan.window, plan.window, checked, partitions
    )
    events, segment_cols, ranged = lay.events, lay.segment_cols, lay.ranged
    t0, range_len, layout, n_parts = lay.t0, lay.range_len, lay.text, lay.parts
    sort_cols = [*segment_cols, TICKS, *([plan.tiebreak] if plan.tiebreak else []), checked.id_col]
    events = events.sortWithinPartitions(*[F.col(f"`{c}`") for c in sort_cols])
    id_type = checked.valid.schema[checked.id_col].dataType
    out_schema = output_schema(plan, checked.valid.schema, id_type)
    matcher = PartitionMatcher(
        plan, checked.id_col, segment_cols, ranged, t0, range_len, max_matches
    )
    matches = events.mapInPandas(matcher, out_schema)
    order = [*plan.key, "end", "start", *[c.var for c in plan.positives]]
    return SparkRun(plan, matches, checked.rejected, checked, n_parts, layout, order, max_matches)


def match(df: DataFrame, query: str, **options) -> DataFrame:
    """The matches of `query` in the Spark DataFrame `df`, as a Spark DataFrame.

    Options (keyword-only): time_col="ts", type_col="type", id_col=None (ids are then
    0-based row numbers in the DataFrame's order), time_unit=None (ms, s, us or ns for
    an integer time column), tiebreak=None, max_matches=None, partitions=None.
    Rejected rows are counted in a warning; `sparkcep.runners.spark.run` returns them.
    """
    result = run(df, query, **options)
    if result.checked.rejected_count:
        warnings.warn(
            f"{result.checked.rejected_count} of {result.checked.events_read} rows were "
            "rejected (time or type missing or unreadable); run(...).rejected has them",
            stacklevel=2,
        )
    return result.matches


@dataclass
class Layout:
    events: DataFrame
    segment_cols: list[str]
    ranged: bool
    t0: int
    range_len: int
    text: str
    parts: int


def _layout(
    events: DataFrame,
    partition_cols: list[str],
    segment_cols: list[str],
    window: int | None,
    after: int,
    checked: Checked,
    partitions: int,
) -> Layout:
    """Spread the work: by `partition_cols` when there are any; else into time ranges of
    at least the window that also receive the `window` before them and `after` after
    them; else one partition."""
    t0 = checked.min_tick or 0
    if partition_cols:
        events = events.repartition(partitions, *[F.col(f"`{k}`") for k in partition_cols])
        text = f"partitioned by {', '.join(partition_cols)} into {partitions} Spark partitions"
        return Layout(events, segment_cols, False, t0, 0, text, partitions)
    span = None if checked.min_tick is None else checked.max_tick - checked.min_tick + 1
    if window is not None and span is not None and window < span and span + 2 * window < 2**62:
        # (Ranges help only when the window is shorter than the input's time span, and
        # their bounds, t0 + range x length ± window, must stay within int64.)
        valid_events = checked.events_read - checked.rejected_count
        n_ranges = max(partitions, math.ceil(valid_events / EVENTS_PER_RANGE))
        range_len = max(window, math.ceil(span / n_ranges))
        n_ranges = math.ceil(span / range_len)
        events = _explode_ranges(events, window, after, t0, range_len, n_ranges)
        events = events.repartition(min(partitions, n_ranges), F.col(RANGE))
        text = f"no key: {n_ranges} time ranges of {range_len} ticks, overlapping by the window ({window})"
        return Layout(events, [RANGE, *segment_cols], True, t0, range_len, text, n_ranges)
    if window is None:
        warnings.warn(
            "the query has neither a key nor a window: all events are matched in one partition",
            stacklevel=3,
        )
        text = "no key and no window: one partition"
    else:
        text = "no key, and the window spans the input's time: one partition"
    return Layout(events.repartition(1), segment_cols, False, t0, 0, text, 1)


def _explode_ranges(
    events: DataFrame, w: int, after: int, t0: int, length: int, n_ranges: int
) -> DataFrame:
    """Each event goes to every range [lo, lo+length) with lo − w < t < lo + length + after."""
    t = F.col(TICKS)
    own = F.floor((t - F.lit(t0)) / F.lit(length)).cast("long")
    candidates = F.array(own - 1, own, own + 1)
    events = events.withColumn(RANGE, F.explode(candidates))
    lo = F.lit(t0) + F.col(RANGE) * F.lit(length)
    keep = (
        (F.col(RANGE) >= 0)
        & (F.col(RANGE) < n_ranges)
        & (t > lo - F.lit(w))
        & (t < lo + F.lit(length) + F.lit(after))
    )
    return events.filter(keep)


def output_schema(plan: Plan, input_schema: T.StructType, id_type: T.DataType) -> T.StructType:
    time_type = input_schema[plan.options.time_col].dataType
    fields = [T.StructField("start", time_type), T.StructField("end", time_type)]
    for k in plan.key:
        fields.append(T.StructField(k, input_schema[k].dataType))
    for comp in plan.positives:
        fields.append(T.StructField(comp.var, T.ArrayType(id_type) if comp.kleene else id_type))
    for col in plan.returns:
        dtype = spark_type(col.kind)
        fields.append(T.StructField(col.name, T.ArrayType(dtype) if col.is_list else dtype))
    return T.StructType(fields)


class PartitionMatcher:
    """The function mapInPandas runs on each Spark partition (pickled to the workers).

    It gathers the partition's batches into chunks of whole segments (keys or time
    ranges) and matches each chunk in one engine call.
    """

    CHUNK_ROWS = 500_000

    def __init__(self, plan, id_col, segment_cols, ranged, t0, range_len, max_matches):
        self.plan = plan
        self.id_col = id_col
        self.segment_cols = segment_cols
        self.ranged = ranged
        self.t0 = t0
        self.range_len = range_len
        self.max_matches = max_matches

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        pending: list[pd.DataFrame] = []
        rows = 0
        for batch in batches:
            if not len(batch):
                continue
            pending.append(batch)
            rows += len(batch)
            if rows >= self.CHUNK_ROWS and self.segment_cols:
                frame = pd.concat(pending, ignore_index=True)
                cut = self._last_segment_start(frame)
                if cut > 0:
                    yield from self._match(frame.iloc[:cut].reset_index(drop=True))
                    frame = frame.iloc[cut:].reset_index(drop=True)
                pending, rows = [frame], len(frame)
        if pending:
            yield from self._match(pd.concat(pending, ignore_index=True))

    def _last_segment_start(self, frame: pd.DataFrame) -> int:
        last = frame.iloc[-1]
        same = pd.Series(True, index=frame.index)
        for c in self.segment_cols:
            same &= frame[c] == last[c]
        differing = (~same).to_numpy().nonzero()[0]
        return int(differing[-1]) + 1 if len(differing) else 0

    def _match(self, frame: pd.DataFrame) -> Iterator[pd.DataFrame]:
        from sparkcep.engines.nfa import find_matches
        from sparkcep.events import build_table
        from sparkcep.output import output_frame

        table = build_table(
            self.plan, frame, self.id_col, sorted_=True, segment_cols=self.segment_cols
        )
        if not len(table):
            return
        starts = None
        if self.ranged:
            ticks = frame[TICKS].to_numpy()
            own = (ticks - self.t0) // self.range_len
            starts = (own == frame[RANGE].to_numpy())[table.row]
        matches = find_matches(self.plan, table, starts=starts, max_matches=self.max_matches)
        if len(matches):
            yield output_frame(self.plan, frame, table, matches, self.id_col)


# ---- aggregation -----------------------------------------------------------------------


@dataclass
class SparkAggregateRun:
    plans: list[Plan]
    rows: DataFrame
    rejected: DataFrame
    checked: Checked
    partitions: int
    layout: str
    order: list[str]


def run_aggregate(
    df: DataFrame,
    queries,
    *,
    time_col: str = "ts",
    type_col: str = "type",
    id_col: str | None = None,
    time_unit: str | None = None,
    tiebreak: str | None = None,
    algorithm: str = "aseq",
    sharing: str = "prefix",
    split_cols: list[Column] | None = None,
    infer_types: bool = False,
    partitions: int | None = None,
) -> SparkAggregateRun:
    """AGG queries over a Spark DataFrame: rows per trigger event (lazy)."""
    from sparkcep.runners.local import _aggregate_plans, jobs_for

    checked = check_rows(
        df, time_col=time_col, type_col=type_col, id_col=id_col, split_cols=split_cols,
        infer_types=infer_types,
    )  # fmt: skip
    options = Options(time_col, type_col, id_col, time_unit, tiebreak)
    schema = schema_of(checked.valid, ignore=(TICKS, ROW))
    schema[time_col] = checked.time_kind
    plans, names = _aggregate_plans(queries, schema, options)
    spark = df.sparkSession
    if partitions is None:
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    id_type = checked.valid.schema[checked.id_col].dataType
    outs, layouts, parts = [], [], 0
    multi = len(plans) > 1 or names[0] is not None
    for job in jobs_for(plans, names, algorithm, sharing):
        plan = job.plans[0]
        comps = job.components()
        events = checked.valid.withColumn(MASK, mask_column(plan, comps))
        events = events.filter(filter_column(plan, comps))
        for k in job.key:
            events = events.filter(F.col(f"`{k}`").isNotNull())
        needed = [
            *job.key, time_col, TICKS, *([plan.tiebreak] if plan.tiebreak else []),
            checked.id_col, type_col, *job.attributes(),
            *_local_attributes(job),
        ]  # fmt: skip
        events = events.select(*[F.col(f"`{c}`") for c in dict.fromkeys(needed)])
        windows = [p.window for p in job.plans]
        window = None if any(w is None for w in windows) else max(windows)
        lay = _layout(events, list(job.group_by), list(job.key), window, 0, checked, partitions)
        sort_cols = [
            *lay.segment_cols,
            TICKS,
            *([plan.tiebreak] if plan.tiebreak else []),
            checked.id_col,
        ]
        events = lay.events.sortWithinPartitions(*[F.col(f"`{c}`") for c in sort_cols])
        schema_out = aggregate_schema(job, checked.valid.schema, multi)
        runner = AggregateMatcher(
            job, checked.id_col, lay.segment_cols, lay.ranged, lay.t0, lay.range_len
        )
        outs.append(events.mapInPandas(runner, schema_out))
        layouts.append(lay.text)
        parts += lay.parts
    rows = outs[0]
    for other in outs[1:]:
        rows = rows.unionByName(other, allowMissingColumns=True)
    group_cols = list(dict.fromkeys(g for p in plans for g in p.group_by))
    order = (["query"] if multi else []) + group_cols + ["ts"]
    del id_type
    return SparkAggregateRun(
        plans, rows, checked.rejected, checked, parts, "; ".join(layouts), order
    )


def aggregate(df: DataFrame, queries, **options) -> DataFrame:
    """Rows of AGG queries (one text, a list, or a file's named queries) over `df`.

    Options as `match`, plus algorithm="aseq" | "twostep" and sharing="chop" | "prefix"
    | "none". With several queries the rows carry a `query` column.
    """
    result = run_aggregate(df, queries, **options)
    if result.checked.rejected_count:
        warnings.warn(
            f"{result.checked.rejected_count} of {result.checked.events_read} rows were "
            "rejected (time or type missing or unreadable)",
            stacklevel=2,
        )
    return result.rows.orderBy(*[F.col(f"`{c}`") for c in result.order])


def _local_attributes(job) -> list[str]:
    from sparkcep.language import ast

    names = []
    for comp in job.components():
        for expr in comp.local:
            for node in ast.walk(expr):
                if isinstance(node, ast.AttrRef):
                    names.append(node.attr)
    return names


def aggregate_schema(job, input_schema: T.StructType, with_query: bool) -> T.StructType:
    plan = job.plans[0]
    fields = [T.StructField("query", T.StringType())] if with_query else []
    fields.append(T.StructField("ts", input_schema[plan.options.time_col].dataType))
    for g in plan.group_by:
        fields.append(T.StructField(g, input_schema[g].dataType))
    seen = set()
    for p in job.plans:
        for item in p.agg:
            if item.name in seen:
                continue
            seen.add(item.name)
            if item.func == "count" or (item.kind == "int" and item.func != "avg"):
                dtype = T.LongType()
            else:
                dtype = T.DoubleType()
            fields.append(T.StructField(item.name, dtype))
    return T.StructType(fields)


class AggregateMatcher:
    """mapInPandas over one Spark partition: the job's rows for the triggers it owns."""

    def __init__(self, job, id_col, segment_cols, ranged, t0, range_len):
        self.job = job
        self.id_col = id_col
        self.segment_cols = segment_cols
        self.ranged = ranged
        self.t0 = t0
        self.range_len = range_len

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = [b for b in batches if len(b)]
        if not frames:
            return
        frame = pd.concat(frames, ignore_index=True)
        owned = None
        if self.ranged:
            own = (frame[TICKS].to_numpy() - self.t0) // self.range_len
            owned = own == frame[RANGE].to_numpy()
        rows = self.job.run(
            frame, self.id_col, sorted_=True, segment_cols=self.segment_cols, owned=owned,
            split_col=RANGE if self.ranged else None,
        )  # fmt: skip
        if len(rows):
            yield rows
