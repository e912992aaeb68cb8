"""Checking rows in Spark: good rows go on with their time in ticks, bad rows go to
`rejected` with a reason; counts and the time range come out of the same pass."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcep.errors import DataError, missing_column
from sparkcep.files import CORRUPT, REPLACEMENT
from sparkcep.input_types import INFINITY, NUMBER, choose_kind, mostly_numbers
from sparkcep.inputs import (
    LEADING_ZERO,
    NULL_TOKENS,
    ORDER_COL,
    OUT_OF_RANGE,
    REASON,
    ROW,
    TIMESTAMP_TEXT,
)
from sparkcep.prep.table import TICKS
from sparkcep.schema import Kind
from sparkcep.timeunits import TIME_LIMIT

MID = "__mid"
SPLIT = "__split"
PRE, POST = "__pre", "__post"  # the first reason before / after the time's reading
NOT_TIME = "is not an integer or a timestamp"
CAST = "__cast"  # a text cell read as another type, in the projection of facts
RAW = "__raw"  # the cell as read, beside a column read as numbers
# A row's cells as read (a struct), kept by the one read (spark_once) where the row is
# rejected, or may be: the valid rows then hold only the columns the programs read.
AS_READ = "__as_read"


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
    first_rejected: int  # rows the checking pass rejected (counted in that pass)
    min_tick: int | None
    max_tick: int | None
    time_kind: Kind
    # Text columns read as numbers although a few cells are not: column -> the column
    # holding the cell as read (a query that reads the column rejects those rows).
    coerced: dict[str, str] = field(default_factory=dict)
    types: set | None = None  # the event types that occur (None: no type column)
    id_given: bool = False  # ids come from a column (--id), not row numbers
    # Text columns most of whose values are numbers: (numbers, present values).
    mostly_text: dict[str, tuple[int, int]] = field(default_factory=dict)
    # Rows the queries' own checks reject (bad cells, a program's row checks), counted
    # only when asked: writing the rejected file counts them without a job of its own.
    later: tuple[DataFrame, ...] = ()
    later_count: int | None = None
    # Valid events whose id another has, when counted already (rows checked in the
    # driver: runners/spark/driver_check.py); None: counted by a Spark job when asked.
    duplicates: int | None = None
    # The checked rows kept by Spark (one read of the input: runners/spark/one_read.py),
    # until `release`.
    cached: DataFrame | None = None
    # The counts of rows checked on their way to the matcher (runners/spark/one_pass.py),
    # filled in by `settle` once the job that reads them has run.
    pending: object | None = None

    def settle(self) -> None:
        """Take the counts of a job that checked the rows as it read them (one_pass); a
        no-op otherwise."""
        if self.pending is not None:
            self.pending.settle(self)

    def release(self) -> None:
        """Drop the checked rows Spark keeps (when it keeps them)."""
        if self.cached is not None:
            self.cached.unpersist()
            self.cached = None

    @property
    def rejected_count(self) -> int:
        if self.later_count is None:
            self.later_count = sum(df.count() for df in self.later)
        return self.first_rejected + self.later_count

    def may_reject(self) -> bool:
        """Whether any row may be rejected (without a Spark job)."""
        if self.later_count is not None:  # counted
            return bool(self.first_rejected or self.later_count)
        return bool(self.first_rejected or self.later)

    def rejected_written(self, rows: int) -> None:
        """The rejected file holds `rows` rows: the count of every rejected row."""
        self.later_count = rows - self.first_rejected

    def rejecting(self, valid: DataFrame, failing: DataFrame) -> Checked:
        """These checks moved the `failing` rows from the valid ones to the rejected."""
        return replace(
            self,
            valid=valid,
            rejected=_union_as_read(self.rejected, failing),
            later=(*self.later, failing),
            later_count=None,
        )

    def duplicate_ids(self) -> int:
        """Valid events whose id another valid event has (a Spark job; --id only)."""
        if not self.id_given:
            return 0
        if self.duplicates is not None:
            return self.duplicates
        counts = self.valid.groupBy(F.col(f"`{self.id_col}`")).count()
        extra = counts.filter(F.col("count") > 1).agg(F.sum(F.col("count") - 1)).first()[0]
        return int(extra or 0)


def _union_as_read(rejected: DataFrame, failing: DataFrame) -> DataFrame:
    """Rejected rows of two checks together. A column that is text in one (cells as
    read) and typed in the other becomes text in both: Spark would cast the text to
    the other type, and a cell such as 'soon' in a time column fails the whole run."""
    mine = {f.name: f.dataType for f in rejected.schema.fields}
    theirs = {f.name: f.dataType for f in failing.schema.fields}
    text = {
        name
        for name in mine.keys() & theirs.keys()
        if mine[name] != theirs[name] and T.StringType() in (mine[name], theirs[name])
    }

    def as_text(df: DataFrame) -> DataFrame:
        return df.select(
            *[F.col(f"`{c}`").cast("string").alias(c) if c in text else F.col(f"`{c}`")
              for c in df.columns]
        )  # fmt: skip

    return as_text(rejected).unionByName(as_text(failing), allowMissingColumns=True)


def check_rows(
    df: DataFrame,
    *,
    time_col: str,
    type_col: str | None,
    id_col: str | None,
    split_cols: list[Column] | None = None,
    infer_types: bool = False,
    read: set[str] | None = None,
) -> Checked:
    """Split rows into valid and rejected, number them when there is no id column, and
    gather counts and the time range, in one pass over the data.

    `split_cols` name the input splits in input order (file, offset) so that row numbers
    follow the input order; by default, Spark's partitions of `df` in order.
    `infer_types` (text input) reads the null tokens of `inputs.NULL_TOKENS` as nulls and
    gives each text column the type of the one rule (`input_types.choose_kind`) over
    counts taken in the same pass;
    `read` (the columns the queries may read) limits that to those columns, the others
    stay text as read.

    Each row's facts (why it would be rejected, its time read each way, its cells read
    as each type) are computed in one projection that both the counting pass and the
    rows read. The input is read twice: keeping the projection between the passes
    (`persist`) was measured to cost as much CPU as reading it again (G2 CSV: 5.99 s
    JVM CPU either way; 6.65 s keeping the facts too), so it is not kept.
    """
    columns = df.columns
    check_columns(columns, time_col, type_col, id_col)
    if infer_types:
        df = _null_tokens(df)
    reasons = _Reasons(df, time_col, type_col, text=infer_types, id_col=id_col)
    split_cols = split_cols if split_cols is not None else [F.spark_partition_id()]
    split_names = [f"{SPLIT}{i}" for i in range(len(split_cols))]
    inferred = _text_columns(df, (time_col, type_col, CORRUPT)) if infer_types else []
    if read is not None:
        inferred = [c for c in inferred if c in read]
    facts = [*reasons.probe(), *[c.alias(n) for n, c in zip(split_names, split_cols)]]
    aggs = reasons.aggregates()
    if id_col is None:
        facts.append(F.monotonically_increasing_id().alias(MID))
        aggs.append(F.min(MID).alias("base"))
    for i, name in enumerate(inferred):
        for kind, c in _casts(name).items():
            if kind != "any":
                facts.append(c.alias(f"{CAST}{i}_{kind}"))
            # a malformed row's cells are not values read (local leaves them empty)
            cell = F.when(~reasons.corrupt, _cast_column(name, i, kind))
            aggs.append(F.count(cell).alias(f"c{i}_{kind}"))
    # One projection: the aggregates and the rows both read its columns (an aggregate
    # of the expressions themselves evaluates each several times).
    wide = df.select("*", *facts)
    fact_names = [n for n in wide.columns if n not in columns]
    stats = wide.groupBy(*split_names).agg(*aggs).collect()
    stats = sorted(stats, key=lambda r: tuple(_sortable(r[n]) for n in split_names))
    events_read = sum(r["n"] for r in stats)
    if events_read == 0:
        raise DataError("the input holds no events")
    time_kind = reasons.time_kind(stats)
    staged = wide.withColumn(REASON, reasons.reason(time_kind))
    id_given = id_col is not None
    if id_col is None:
        staged, id_col = _row_numbers(staged, stats, split_names), ROW
    # Rejected rows keep their cells as read; valid rows get their columns' types.
    rejected = staged.filter(F.col(REASON).isNotNull()).drop(*fact_names)
    if infer_types:
        rejected = _valid_text(rejected)
    typed, coerced, mostly = _typed_columns(staged.filter(F.col(REASON).isNull()), inferred, stats)
    ticks = F.col(f"__tick_{time_kind}")
    valid = (
        typed.drop(REASON, *([CORRUPT] if CORRUPT in columns else []))
        .withColumn(time_col, F.timestamp_micros(ticks) if time_kind == "timestamp" else ticks)
        .withColumn(TICKS, ticks)
        .drop(*fact_names)
    )
    tmins = [r[f"tmin_{time_kind}"] for r in stats if r[f"tmin_{time_kind}"] is not None]
    tmaxs = [r[f"tmax_{time_kind}"] for r in stats if r[f"tmax_{time_kind}"] is not None]
    return Checked(
        valid,
        rejected,
        id_col,
        events_read,
        sum(r[f"bad_{time_kind}"] for r in stats),
        min(tmins) if tmins else None,
        max(tmaxs) if tmaxs else None,
        "timestamp" if time_kind == "timestamp" else "int",
        coerced,
        {t for r in stats for t in r["types"]} if type_col is not None else None,
        id_given,
        mostly_text=mostly,
    )


def check_columns(columns: list[str], time_col: str, type_col: str | None, id_col: str | None):
    """The time, type and id columns must be in the input (whose columns are named
    without the reader's own, CORRUPT; ORDER_COL, the row order, the run adds)."""
    named = [c for c in columns if c != CORRUPT]
    for role, col in (("time", time_col), ("type", type_col), ("id", id_col)):
        if col is not None and col not in named and col != ORDER_COL:
            raise DataError(missing_column(role, col, named))


def _cast_column(name: str, i: int, kind: str) -> Column:
    """The cell of text column `name` (inferred as the i-th) read as `kind`, from the
    projection of facts ("any": the cell as read)."""
    return F.col(f"`{name}`") if kind == "any" else F.col(f"{CAST}{i}_{kind}")


class _Reasons:
    """Why a row is rejected, for each way the time column can be read."""

    def __init__(
        self, df: DataFrame, time_col: str, type_col: str | None, text: bool = False,
        id_col: str | None = None,
    ):  # fmt: skip
        self.time_col, self.type_col = time_col, type_col
        self.raw = F.col(f"`{time_col}`")
        self.candidates = _time_candidates(df, time_col)  # kind -> parsed time column
        self.type_missing = F.lit(False)
        if type_col is not None:  # None: the queries name no type (every component is ANY)
            self.type_missing = F.col(f"`{type_col}`").isNull() | (
                F.trim(F.col(f"`{type_col}`").cast("string")) == ""
            )
        self.corrupt = F.col(CORRUPT).isNotNull() if CORRUPT in df.columns else F.lit(False)
        self.far = integer_time(self.raw, df.schema[time_col].dataType)[1]
        self.id_col = id_col
        self.id_missing = F.col(f"`{id_col}`").isNull() if id_col else F.lit(False)
        self.not_utf8 = F.lit(False)
        # Spark reads bytes that are not UTF-8 as U+FFFD (docs/input.md). Each cell is
        # searched (joining the cells to search them once made a text per row: G2, one
        # read, 7.9 against 7.6 JVM CPU seconds).
        for c in _text_columns(df, (CORRUPT,)) if text else []:
            self.not_utf8 = self.not_utf8 | F.coalesce(
                F.col(f"`{c}`").contains(REPLACEMENT), F.lit(False)
            )

    def causes(self) -> tuple[list[tuple[Column, str]], list[tuple[Column, str]]]:
        """Why a row is rejected, in the order the reasons are given: those before the
        time's reading, and those after it."""
        time = self.time_col
        before = [
            (self.corrupt, "malformed row"),
            (self.not_utf8, "not UTF-8 text"),
            (self.raw.isNull(), f"{time} is missing"),
            (self.far, OUT_OF_RANGE.format(time_col=time)),
        ]
        after = [
            (self.type_missing, f"{self.type_col} is missing"),
            (self.id_missing, f"{self.id_col} is missing"),
        ]
        return before, after

    def reason(self, kind: str) -> Column:
        """The row's reason when the time is read as `kind` (null: valid), from the
        columns of `probe`."""
        before, after = self.causes()
        pre, post = F.col(PRE), F.col(POST)
        texts = [F.lit(text) for _, text in before]
        return (
            F.when(pre.isNotNull(), F.element_at(F.array(*texts), pre + 1))
            .when(F.col(f"__tick_{kind}").isNull(), F.lit(f"{self.time_col} {NOT_TIME}"))
            .when(post.isNotNull(), F.element_at(F.array(*[F.lit(t) for _, t in after]), post + 1))
        )

    def ticks(self, kind: str) -> Column:
        return _ticks(kind, self.candidates[kind])

    def probe(self) -> list[Column]:
        """Per row: the first reason before the time's reading (`PRE`, an index) and
        after it (`POST`), the type as text, and the time in ticks for each reading
        (null where it does not read)."""
        before, after = self.causes()
        cols = [_first(before).alias(PRE), _first(after).alias(POST)]
        if self.type_col is not None:
            cols.append(F.col(f"`{self.type_col}`").cast("string").alias("__type"))
        return cols + [self.ticks(kind).alias(f"__tick_{kind}") for kind in self.candidates]

    def aggregates(self) -> list[Column]:
        """Counts, types and time range per split, over the columns of `probe`: a row is
        bad for a reading when `reason` gives it a reason (PRE or POST, or no ticks)."""
        aggs = [F.count(F.lit(1)).alias("n")]
        if self.type_col is not None:  # which types occur (a query may name one that doesn't)
            aggs.append(F.collect_set("__type").alias("types"))
        other = F.col(PRE).isNotNull() | F.col(POST).isNotNull()
        for kind in self.candidates:
            ticks = F.col(f"__tick_{kind}")
            aggs += [
                F.sum(F.when(other | ticks.isNull(), 1).otherwise(0)).alias(f"bad_{kind}"),
                F.min(F.when(~other, ticks)).alias(f"tmin_{kind}"),
                F.max(F.when(~other, ticks)).alias(f"tmax_{kind}"),
            ]
        return aggs

    def time_kind(self, stats) -> str:
        """The reading of the time column that rejects fewer rows (integers on a tie)."""
        return min(self.candidates, key=lambda k: (sum(r[f"bad_{k}"] for r in stats), k != "int"))


def _first(causes: list[tuple[Column, str]]) -> Column:
    """The index of the first cause that holds (null: none)."""
    out = F.when(causes[0][0], F.lit(0))
    for i, (cond, _) in enumerate(causes[1:], 1):
        out = out.when(cond, F.lit(i))
    return out


def _ticks(kind: str, parsed: Column) -> Column:
    return F.unix_micros(parsed) if kind == "timestamp" else parsed


def _null_tokens(df: DataFrame, null_values=(), only: set[str] | None = None) -> DataFrame:
    """Text cells that mean no value become nulls: blank once trimmed, or (trimmed) one of
    the user's `null_values` (the local reader: inputs.null_cells); in the columns `only`
    names (None: every text column)."""
    nulled = {
        name: null_cell(F.col(f"`{name}`"), null_values)
        for name in _text_columns(df, (CORRUPT,))
        if only is None or name in only
    }
    # One projection, not one per column: each withColumn is a plan analysed in the JVM
    # (about 20 ms each for a small run's plans).
    return df.withColumns(nulled) if nulled else df


def null_cell(col: Column, null_values=()) -> Column:
    """A text cell, null where it means no value (`_null_tokens`)."""
    tokens = list(dict.fromkeys([*NULL_TOKENS, *(v.strip(" ") for v in null_values)]))
    return F.when(F.trim(col).isin(*tokens), None).otherwise(col)


def _valid_text(df: DataFrame) -> DataFrame:
    """Text cells with bytes that are not UTF-8, made text (U+FFFD for each bad byte)."""
    made = {name: F.make_valid_utf8(F.col(f"`{name}`")) for name in _text_columns(df, ())}
    return df.withColumns(made) if made else df


def _text_columns(df: DataFrame, skip) -> list[str]:
    return [
        f.name
        for f in df.schema.fields
        if isinstance(f.dataType, T.StringType) and f.name not in skip
    ]


def _typed_columns(
    staged: DataFrame, inferred: list[str], stats
) -> tuple[DataFrame, dict, dict[str, tuple[int, int]]]:
    """Each text column as the narrowest type most of its values have; the cell as read is
    kept beside a column read as numbers where some cells are not. Also the columns left
    text although most of their values are numbers: (numbers, present values)."""
    coerced, mostly, columns = {}, {}, {}
    for i, name in enumerate(inferred):
        counts = {kind: sum(r[f"c{i}_{kind}"] for r in stats) for kind in _casts(name)}
        kind = choose_kind(counts)
        if kind != "string":
            if counts[kind] < counts["any"]:  # the text as read, beside the number
                coerced[name] = f"{RAW}{i}"
                columns[coerced[name]] = F.col(f"`{name}`")
            columns[name] = _cast_column(name, i, kind)
        elif numbers := mostly_numbers(counts):
            mostly[name] = numbers
    # one projection: every expression reads the columns as they were (the text)
    return (staged.withColumns(columns) if columns else staged), coerced, mostly


def _row_numbers(staged: DataFrame, stats, split_names: list[str]) -> DataFrame:
    """Row number = position in its split + rows in the splits before it."""
    deltas, total = [], 0
    one = len(split_names) == 1  # one file, or partitions: a number (no text per row)
    for r in stats:
        text = "\u0001".join(str(r[n]) for n in split_names)
        key = F.lit(r[split_names[0]]).cast("long") if one else F.lit(text)
        deltas += [key, F.lit(total - int(r["base"]))]
        total += r["n"]
    split_key = (
        F.col(split_names[0]).cast("long") if one
        else F.concat_ws("\u0001", *[F.col(n).cast("string") for n in split_names])
    )  # fmt: skip
    delta = F.element_at(F.create_map(*deltas), split_key)
    return staged.withColumn(ROW, F.col(MID) + delta).drop(MID)


def reject_bad_cells(checked: Checked, read: set[str]) -> Checked:
    """Rows whose cell in a column read as numbers is not a number, in a column the
    queries read, leave the valid rows for the rejected ones (with the cell as read)."""
    cols = [c for c in checked.coerced if c in read]
    drop = list(checked.coerced.values())
    as_read = AS_READ in checked.valid.columns  # the one read kept only some columns
    if as_read:
        drop.append(AS_READ)
    if not cols:
        return replace(checked, valid=checked.valid.drop(*drop))
    reason = F.lit(None).cast("string")
    for col in reversed(cols):
        raw = F.col(checked.coerced[col])
        bad = raw.isNotNull() & F.col(f"`{col}`").isNull()
        reason = F.when(
            bad, F.concat(F.lit(f"{col}: '"), raw, F.lit("' is not a number"))
        ).otherwise(reason)
    staged = checked.valid.withColumn(REASON, reason)
    failing = staged.filter(F.col(REASON).isNotNull())
    # every cell as read
    as_text = {col: F.col(raw) for col, raw in checked.coerced.items()}
    if as_read:  # the columns the valid rows did not keep
        fields = checked.valid.schema[AS_READ].dataType.fieldNames()
        for col in [c for c in fields if c not in failing.columns and c != CORRUPT]:
            as_text[col] = F.col(f"{AS_READ}.`{col}`")
    failing = failing.withColumns(as_text).drop(TICKS, *drop)
    return checked.rejecting(staged.filter(F.col(REASON).isNull()).drop(REASON, *drop), failing)


def _time_candidates(df: DataFrame, time_col: str) -> dict[str, Column]:
    """The ways to read the time column: as integers, as timestamps, or both (text)."""
    raw = F.col(f"`{time_col}`")
    time_type = df.schema[time_col].dataType
    if isinstance(time_type, T.TimestampType | T.TimestampNTZType | T.DateType):
        return {"timestamp": raw.cast("timestamp")}
    ints, _ = integer_time(raw, time_type)
    if isinstance(time_type, T.NumericType):
        return {"int": ints}
    return {"int": ints, "timestamp": text_timestamp(raw)}


def text_timestamp(col: Column) -> Column:
    """Text as a timestamp, null where it is not one by the one rule of every reader
    (inputs.TIMESTAMP_TEXT; the local runner: `inputs.text_timestamps`)."""
    iso = F.regexp_replace(F.trim(col), "/", "-")
    # hours and minutes then a zone: Spark's cast wants the seconds there
    iso = F.regexp_replace(iso, "([T ][0-9]{1,2}:[0-9]{2})(?=Z|[+-])", "$1:00")
    return F.when(col.rlike(TIMESTAMP_TEXT), iso.try_cast("timestamp"))


def integer_time(col: Column, dtype: T.DataType) -> tuple[Column, Column]:
    """(the time read as an integer, null where it is none or lies beyond ±TIME_LIMIT;
    whether it is an integer beyond ±TIME_LIMIT, a rejected row's reason).

    An integer is an integer number, integer text (exactly, all 19 digits of a time in
    nanoseconds), or a number with a whole value, written `12.0` or `1e3` (as a float
    column holds it): the local runner reads times so too (`inputs._parse_time`)."""
    limit = F.lit(TIME_LIMIT)
    if not isinstance(dtype, T.NumericType | T.StringType):  # timestamps, dates, ...
        return F.lit(None).cast("long"), F.lit(False)
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        inside = (col < limit) & (col > -limit)
        return F.when(inside, col.cast("long")), F.coalesce(~inside, F.lit(False))
    if isinstance(dtype, T.DecimalType):  # exact: no detour through doubles
        inside = F.abs(col) < limit
        return (
            F.when(inside & (col == F.floor(col)), col.cast("long")),
            F.coalesce(~inside, F.lit(False)),
        )
    if isinstance(dtype, T.NumericType):
        return _whole(col.cast("double"))
    # Integer text exactly (nanosecond times have 19 digits: no detour through doubles);
    # other text may be a number with a whole value. Regular expressions guard the casts:
    # a failing try_cast throws and catches an exception per cell (10x slower).
    digits = F.regexp_extract(col, INTEGER_DIGITS, 1)
    n = F.length(digits)
    inside = (n >= 1) & (
        (n < len(LIMIT_DIGITS)) | ((n == len(LIMIT_DIGITS)) & (digits < F.lit(LIMIT_DIGITS)))
    )
    whole, far = _whole(F.when(col.rlike(NUMBER), col.try_cast("double")))
    plain = col.rlike(PLAIN_INTEGER)  # within the times: 18 digits at most
    return (
        F.when(plain, col.cast("long")).when(inside, F.trim(col).cast("long")).when(n == 0, whole),
        F.when(plain, F.lit(False)).when(n > 0, ~inside).otherwise(far),
    )


INTEGER_DIGITS = r"^\s*[+-]?([0-9]+)\s*$"
LIMIT_DIGITS = str(TIME_LIMIT)  # 19 digits: same-length digit strings compare as numbers
# The text of a number (input_types.NUMBER, INFINITY): Spark's cast alone would also read
# Java's '1d', '1.5f' and '0x1p3', which no other reader does.
NUMBER_TEXT = f"{NUMBER}|{INFINITY}"


def _whole(number: Column) -> tuple[Column, Column]:
    """(a double with a whole value within ±TIME_LIMIT as a long; whether it is a finite
    number beyond ±TIME_LIMIT)."""
    limit = F.lit(TIME_LIMIT)
    finite = ~F.isnan(number) & (F.abs(number) < F.lit(float("inf")))
    inside = F.abs(number) < limit  # NaN is above every number in Spark: not inside
    whole = F.when(inside & (number == F.floor(number)), number.cast("long"))
    return whole, F.coalesce(finite & ~inside, F.lit(False))


def text_number(col: Column) -> Column:
    """Text as a double (null where it is not a number), as the local runner reads it:
    'nan' and a number too large for a double ('1e400') are none, 'inf' is one. A cell
    that is not the text of a number is not tried: a failing try_cast throws and catches
    an exception (a column of words: +1.4 s of CPU per million cells)."""
    number = col.try_cast("double")
    finite_or_said = (F.abs(number) < F.lit(float("inf"))) | col.rlike("(?i)inf")
    return F.when(col.rlike(NUMBER_TEXT), F.when(finite_or_said, number))


def integer_text(col: Column, number: Column | None = None) -> Column:
    """Integer text as a long (null: not integer text, or beyond the longs); `number`:
    `text_number(col)`, when the caller has it. Only the cells that read as a number
    without a '.' or an exponent try the cast (see `text_number`); with the double read
    anyway, this costs what a regular expression over the whole cell did (G2's integer
    column, quiet: 1.98 against 2.01 CPU s) and no exception is thrown."""
    number = text_number(col) if number is None else number
    plain = number.isNotNull() & (F.instr(col, ".") == 0) & ~col.contains("e") & ~col.contains("E")
    return F.when(plain, col.try_cast("long"))


# A plain number ('-12', '3.25': no blank, '+', exponent or leading zero; at most 18
# digits before the point) reads by Spark's cast exactly as by every reader's rules, and
# is neither a leading zero nor beyond the longs or the times. Most cells are plain: the
# checks try this one expression first, and the rules' several only where it fails
# (G2, 4M rows: the checking job's time, below).
PLAIN_NUMBER = r"^-?(0|[1-9][0-9]{0,17})(\.[0-9]+)?$"
PLAIN_INTEGER = r"^-?(0|[1-9][0-9]{0,17})$"


def _casts(name: str) -> dict[str, Column]:
    col = F.col(f"`{name}`")
    number = text_number(col)
    plain = col.rlike(PLAIN_NUMBER)
    return {
        "any": col,
        "long": text_cast(col, "long", number),
        "double": text_cast(col, "double", number),
        "boolean": text_cast(col, "boolean"),
        "timestamp": text_cast(col, "timestamp"),
        "zeros": F.when(~plain & col.rlike(LEADING_ZERO), F.lit(True)),
    }


def _sortable(value):
    return (value is None, value if value is not None else 0)


def text_cast(col: Column, kind: str, number: Column | None = None) -> Column:
    """Text as a value of a Spark type ('long', 'double', 'boolean', 'timestamp'): null
    where the text is not one; `number`: `text_number(col)`, when the caller has it. A
    plain number (PLAIN_NUMBER, most cells) is cast at once; the rules' several
    expressions read the others (a stream's micro-batch of G2, 50k events: its checking
    stage, 97 -> 78 ms of JVM CPU)."""
    if kind in ("long", "double"):
        number = text_number(col) if number is None else number
        plain = col.rlike(PLAIN_NUMBER)
        if kind == "double":
            return F.when(plain, col.cast("double")).otherwise(number)
        whole = plain & (F.instr(col, ".") == 0)
        return F.when(whole, col.cast("long")).when(~plain, integer_text(col, number))
    if kind == "boolean":
        return F.when(F.lower(col).isin("true", "false"), F.lower(col) == "true")
    if kind == "timestamp":
        return text_timestamp(col)
    return col.try_cast(kind)
