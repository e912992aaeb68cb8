"""Streaming: the same queries on live streams with Spark Structured Streaming.

    source ─check rows─▶ mask + filter (JVM) ─▶ watermark ─▶ groupBy(bucket of keys)
          .applyInPandasWithState(StreamStep)  ─▶ typed rows: match | late | rejected
          ─▶ foreachBatch: one file per micro-batch and kind, written atomically

One program (every engine the same way) runs per partition (key) of the stream; keys are
hashed into BUCKETS buckets, one Python call each per micro-batch. Each key's program
state and the events not yet released live in its bucket's value in Spark's state store,
stored as data (`engines.state`), never as pickles. Each micro-batch:

- an event older than the watermark the previous batch set is *late*: it goes to the
  late output with the reason (and is counted), never silently away;
- the other events wait in the state until the watermark passes them, then go to the
  program in time order (so the answers are those of a batch run over the same events);
- every bucket with state is woken when the watermark moves (an event-time timeout on a
  stand-in event time, see `prepare_stream`); in it, the keys that got events or whose
  time came (a waiting event the watermark passed, `Program.idle_until`) release what
  the watermark passed, `advance` reports what time closed (trailing negations), and a
  key with nothing left in its window has its state removed.

Output files are named by batch id and replaced atomically, so a micro-batch that Spark
re-runs after a crash (`kill -9`) rewrites the same files: restarted on its checkpoint,
a stream neither loses nor repeats rows.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcep.engines.base import Program
from sparkcep.engines.output import sort_rows
from sparkcep.engines.registry import compile_jobs
from sparkcep.engines.state import decode_bucket, decode_state, encode_bucket, encode_state
from sparkcep.errors import DataError, SparkcepError
from sparkcep.files import REPLACEMENT
from sparkcep.inputs import CORRUPT, ORDER_COL, OUT_OF_RANGE, REASON
from sparkcep.jsonlines import json_lines
from sparkcep.plan import Options, plan_queries
from sparkcep.plan.intervals import require_widths
from sparkcep.plan.model import STREAM_OPTIONS, takes_options
from sparkcep.prep.table import MASK, TICKS, stack_frames
from sparkcep.runners.spark.batch import named, output_schema, pandas_ready
from sparkcep.runners.spark.expr import filter_column, mask_column, to_column
from sparkcep.runners.spark.rows import (
    NOT_TIME,
    check_columns,
    integer_time,
    kind_of_spark,
    schema_of,
    text_cast,
    text_timestamp,
)
from sparkcep.runners.spark.session import default_parallelism, setting
from sparkcep.runners.spark.workers import check_worker_python
from sparkcep.timeunits import NANOS, TIME_LIMIT, UNITS, implausible_times

# applyInPandasWithState pads the frames a step yields with an all-null frame and joins
# them (pyspark/worker.py), of which pandas warns in every Python worker: PySpark's to mend,
# not the user's concern. This module is imported wherever a step runs.
warnings.filterwarnings(
    "ignore",
    message="The behavior of DataFrame concatenation with empty or all-NA entries",
    category=FutureWarning,
    module=r"pyspark\.worker",
)

WATERMARK = "__wm"
KEY = "__key"
KIND = "kind"  # match | late | rejected | pending
PENDING = "__pending"  # kind pending: events of the key held until the watermark passes
EVENT = "__e_"  # prefix of the input columns of late and rejected rows
TEXT = "__t_"  # prefix of a typed column's cell as read, of a CSV stream's rejected rows
STATE = T.StructType([T.StructField("blob", T.BinaryType())])
BUCKET = "__bucket"  # the group a key's events go to: a hash of the key
REJECTED_BUCKET = -1  # the group of rejected rows
# Keys are hashed into this many buckets, each one Python call per micro-batch. Fixed (not
# Spark's shuffle partitions) so that a checkpoint restarts into the same buckets.
BUCKETS = 16
ALL_KEYS = "*"  # the entry of a bucket whose keys share one program state
# Of each micro-batch's rows that pass the first checks (time, type, id), the first and
# last integer time and the types that occur, observed by Spark (in the stream's progress)
# on the way in, before the filter: every event counts, as in a batch run's warnings.
CHECKED = "sparkcep_checked"
FIRST = "__first_reason"  # a row's reason from the first checks (time, type, id)


def _nanos_per_tick(time_kind: str, time_unit: str | None) -> int:
    """Nanoseconds per tick of the time column. Integers of no declared unit are taken
    as microseconds: the watermark then runs in ticks, which is exact as long as every
    duration (window, lateness) is a bare number of ticks too."""
    if time_kind == "timestamp":
        return 1000  # timestamps are read as microseconds
    return NANOS[time_unit] if time_unit is not None else 1000


def parse_duration(text: str, nanos_per_tick: int = 1000, unit_known: bool = True) -> int:
    """A lateness: '10 s', '500ms', '2 min' -> microseconds; a bare number is in ticks
    of the time column.

    >>> parse_duration("2 s"), parse_duration("250", nanos_per_tick=1_000_000)
    (2000000, 250000)
    """
    text = text.strip()
    number = ""
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        else:
            break
    unit = text[len(number) :].strip()
    if not number or (unit and unit.lower() not in UNITS):
        raise SparkcepError(f"cannot read the duration '{text}' (e.g. 10 s, 500 ms, 2 min, 30)")
    if not unit:
        return int(float(number) * nanos_per_tick / 1000)
    if not unit_known:
        raise SparkcepError(
            f"the lateness '{text}' has a unit but the integer time column has none: give "
            "--time-unit ms|s|us|ns (time_unit=...), or write the lateness in ticks (e.g. 30)"
        )
    return int(float(number) * NANOS[UNITS[unit.lower()]] / 1000)


@dataclass
class Stream:
    """A query running on a stream: the typed rows of each kind, all from one stateful
    step. Write all three with `start` (one streaming query), or use one of them as any
    streaming DataFrame."""

    tagged: DataFrame  # the checked events, each with its key's bucket (BucketLayout.LEGACY)
    step: StreamStep
    rows_schema: T.StructType

    @property
    def rows(self) -> DataFrame:
        """Every row (kind + the program's output columns + __e_<input column> + reason),
        with the keys in the buckets of a stream whose checkpoint sparkcep does not know
        (`start` gives a new stream's its own: `BucketLayout`)."""
        return self.rows_in(BucketLayout.LEGACY)

    def rows_in(self, layout: BucketLayout) -> DataFrame:
        """`rows` with the keys in the buckets of `layout`."""
        tagged = self.tagged
        if layout != BucketLayout.LEGACY:
            tagged = tagged.withColumn(BUCKET, layout.bucket_column())
        # An event-time timeout wakes every key with state when the watermark moves, to
        # release what it has passed.
        return tagged.groupBy(BUCKET).applyInPandasWithState(
            self.step, self.rows_schema, STATE, "append", "EventTimeTimeout"
        )

    @property
    def program(self) -> Program:
        return self.step.program

    @property
    def input_columns(self) -> list[str]:
        return self.step.input_columns

    @property
    def matches(self) -> DataFrame:
        """The program's output rows (the columns a batch run returns)."""
        return self.rows.filter(F.col(KIND) == "match").select(*self.output_columns)

    @property
    def late(self) -> DataFrame:
        return self._events("late")

    @property
    def rejected(self) -> DataFrame:
        return self._events("rejected")

    @property
    def output_columns(self) -> list[str]:
        return [c.name for c in self.program.output]

    def _events(self, kind: str) -> DataFrame:
        cols = [
            F.col(f"`{event_column(kind, c, self.step.text)}`").alias(c) for c in self.input_columns
        ]
        return self.rows.filter(F.col(KIND) == kind).select(*cols, F.col(REASON))


def event_column(kind: str, column: str, text: list[str]) -> str:
    """The rows' column holding an input column of late or rejected events: its typed
    value, or for a rejected row of a CSV stream the cell as read (`text`, as a batch
    run writes it: docs/input.md)."""
    return (TEXT if kind == "rejected" and column in text else EVENT) + column


@takes_options(*STREAM_OPTIONS, required=("id_col",))
def stream(
    sdf: DataFrame | StreamSource, queries, *, options: Options | None = None, lateness: str = "0"
) -> Stream:
    """Run queries on a streaming DataFrame (docs/streaming.md): `.matches`, `.late` and
    `.rejected` are typed streaming DataFrames (a CSV folder's rejected rows hold the
    cells as read); `start(stream, ...)` writes them all
    to files, exactly once. An integer time column needs its `time_unit` when the
    window or the lateness has a unit."""
    sdf, step, rows_schema = prepare_stream(sdf, queries, options, lateness)
    check_worker_python(sdf.sparkSession)  # (once a session)
    return Stream(sdf, step, rows_schema)


@dataclass(frozen=True)
class BucketLayout:
    """The buckets a stream's keys are hashed into, each one group of the stateful step:
    one Python call per micro-batch, holding its keys' state. `ids`: the group key of
    each bucket.

    A stream sparkcep starts (`start`) has one bucket per state partition, each with an
    id that Spark's hash partitioning sends to a partition of its own: a task makes one
    call per micro-batch (G2, 50k events a micro-batch, 2 partitions: the stateful stage
    took 280 ms in 16 buckets, 220 ms in 2). It is kept in the checkpoint folder
    (BUCKETS_FILE), so a restart puts each key where its state is. A stream that
    started without that file (an earlier version's), or whose checkpoint sparkcep does
    not see, keeps the 16 buckets 0..15 (LEGACY)."""

    ids: tuple[int, ...]

    LEGACY: ClassVar[BucketLayout]

    @classmethod
    def one_per_partition(cls, partitions: int) -> BucketLayout:
        """For each of the partitions in turn, the smallest id Spark sends there."""
        ids, candidate = [], 0
        for partition in range(partitions):
            while spark_partition_of(candidate, partitions) != partition:
                candidate += 1
            ids.append(candidate)
            candidate = 0
        return cls(tuple(ids))

    def bucket_column(self) -> Column:
        """The bucket's id of each valid event's key (REJECTED_BUCKET for the others)."""
        index = F.pmod(F.xxhash64(F.col(KEY)), F.lit(len(self.ids)))
        if self.ids != tuple(range(len(self.ids))):
            ids = F.array(*[F.lit(i).cast("long") for i in self.ids])
            index = F.element_at(ids, (index + 1).cast("int"))
        return F.when(F.col(REASON).isNull(), index).otherwise(F.lit(REJECTED_BUCKET))


BucketLayout.LEGACY = BucketLayout(tuple(range(BUCKETS)))
BUCKETS_FILE = "sparkcep-buckets.json"


def bucket_layout(checkpoint: str, partitions: int) -> BucketLayout:
    """The buckets of the stream kept in `checkpoint` (a local folder): those its file
    names, LEGACY for a stream started without one, or for a new stream one bucket per
    state partition (the file written)."""
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return BucketLayout.LEGACY  # a folder sparkcep does not write to itself
    from sparkcep.runners.streaming.folder import keep, read_kept

    folder = Path(checkpoint.removeprefix("file:"))
    saved = folder / BUCKETS_FILE
    if saved.exists():
        return BucketLayout(tuple(read_kept(saved, checkpoint, _bucket_ids)["bucket_ids"]))
    if (folder / "offsets").exists():  # a stream started before its buckets were kept
        return BucketLayout.LEGACY
    layout = BucketLayout.one_per_partition(partitions)
    keep(saved, {"bucket_ids": list(layout.ids)})
    return layout


def _bucket_ids(kept) -> bool:
    ids = kept.get("bucket_ids") if isinstance(kept, dict) else None
    return isinstance(ids, list) and bool(ids) and all(isinstance(i, int) for i in ids)


def spark_partition_of(value: int, partitions: int) -> int:
    """The partition Spark's hash partitioning sends a long to (Murmur3, seed 42)."""
    return _murmur3_long(value, 42) % partitions


def _murmur3_long(value: int, seed: int) -> int:
    """Spark's Murmur3_x86_32.hashLong, as a signed 32-bit integer."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    def mix(h1: int, k1: int) -> int:
        k1 = rotl((k1 * 0xCC9E2D51) & mask, 15) * 0x1B873593 & mask
        h1 = rotl(h1 ^ k1, 13)
        return (h1 * 5 + 0xE6546B64) & mask

    value &= 0xFFFFFFFFFFFFFFFF
    h1 = mix(mix(seed & mask, value & mask), value >> 32)
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & mask
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


@dataclass
class StreamSource:
    """A folder read as a stream (`read_stream`): text columns, and the types they are read
    as (decided once, kept with the checkpoint)."""

    df: DataFrame
    types: dict[str, str]
    fmt: str | None = None  # the files' format


@dataclass
class _Prepared:
    sdf: DataFrame
    raw: dict[str, str]  # column -> the column holding its cell as read
    time_kind: str


def prepare_stream(source, queries, options: Options, lateness: str):
    """The stream ready for the stateful step: checked, tagged, filtered, keyed."""
    sdf = source.df if isinstance(source, StreamSource) else source
    types = source.types if isinstance(source, StreamSource) else {}
    csv = isinstance(source, StreamSource) and source.fmt == "csv"
    input_schema = sdf.schema
    type_col = _check_columns(list(sdf.columns), queries, options)
    prepared = _typed(sdf, types, options.time_col)
    schema = schema_of(prepared.sdf, ignore=(*prepared.raw.values(), CORRUPT))
    schema[options.time_col] = prepared.time_kind
    plans, names = plan_queries(queries, schema, options)
    require_widths(plans)  # a stream has no end to read U_max of interval times from
    nanos = _nanos_per_tick(prepared.time_kind, options.time_unit)
    unit_known = prepared.time_kind == "timestamp" or options.time_unit is not None
    delay = parse_duration(lateness, nanos, unit_known)
    run_options = replace(options, sharing="none" if options.sharing == "none" else "prefix")
    programs = compile_jobs(plans, names, run_options)
    if len(programs) > 1:
        raise SparkcepError("queries streamed together must partition the stream alike")
    program = programs[0]
    # A CSV stream's rejected rows keep their typed columns' cells as read
    text = [c for c in prepared.raw if c != CORRUPT] if csv else []
    sdf = _tagged(prepared, program, type_col, nanos, delay, text)
    out_fields = output_schema(program, sdf.schema).fields
    typed_fields = prepared.sdf.schema
    event_fields = [
        T.StructField(EVENT + name, typed_fields[name].dataType) for name in input_schema.names
    ]
    rows_schema = T.StructType(
        [T.StructField(KIND, T.StringType()), *out_fields, *event_fields,
         *[T.StructField(TEXT + name, T.StringType()) for name in text],
         T.StructField(REASON, T.StringType()), T.StructField(KEY, T.StringType()),
         T.StructField(PENDING, T.LongType())]
    )  # fmt: skip
    sdf, frame_names = pandas_ready(sdf)
    step = StreamStep(
        program, nanos, list(input_schema.names), prepared.raw, rows_schema.fieldNames(),
        frame_names, text,
    )  # fmt: skip
    return sdf, step, rows_schema


def _check_columns(columns: list[str], queries, options: Options) -> str | None:
    """The type column (None when no query names a type); raises on a missing column."""
    from sparkcep.runners.local import type_column

    if options.id_col is None:
        raise SparkcepError(
            "a stream has no row numbers: give the id column of the events (--id COL)"
        )
    if options.time_col == ORDER_COL:
        raise SparkcepError(
            "a stream has no row order of its own: give MATCH_RECOGNIZE an ORDER BY (its time "
            "column)"
        )
    type_col = type_column(columns, queries, options)
    check_columns(columns, options.time_col, type_col, options.id_col)
    return type_col


def _typed(sdf: DataFrame, types: dict[str, str], time_col: str) -> _Prepared:
    """Columns cast to their types (a source's decided types; the time column as integers
    or timestamps), each cast column's cell as read kept beside it."""
    raw: dict[str, str] = {}
    dtypes = dict(sdf.dtypes)
    columns = {}  # one projection: each expression reads the columns as they came
    for i, name in enumerate(sdf.columns):
        kind = types.get(name, "string")
        if name == time_col or kind != "string":
            raw[name] = f"__raw_{i}"
            columns[raw[name]] = F.col(f"`{name}`")
        if kind != "string" and name != time_col and dtypes[name] == "string":
            columns[name] = text_cast(F.col(f"`{name}`"), kind)
    sdf = sdf.withColumns(columns) if columns else sdf
    time_type = dtypes[time_col]
    if time_type == "string":
        text = F.col(f"`{time_col}`")
        if types.get(time_col) in ("long", "double"):
            sdf = sdf.withColumn(time_col, integer_time(text, T.StringType())[0])
            return _Prepared(sdf, raw, "int")
        sdf = sdf.withColumn(time_col, text_timestamp(text))
        return _Prepared(sdf, raw, "timestamp")
    dtype = sdf.schema[time_col].dataType
    kind = kind_of_spark(dtype)
    if kind == "float":  # whole values only: 12.5 is not a time, as in a batch run
        sdf = sdf.withColumn(time_col, integer_time(F.col(f"`{time_col}`"), dtype)[0])
        kind = "int"
    return _Prepared(sdf, raw, kind)


def _observed(time_kind: str, ticks: Column, type_col, first_checks: Column) -> list[Column]:
    """What Spark observes of a micro-batch for the warnings (`CHECKED`)."""
    time = ticks if time_kind == "int" else F.lit(None).cast("long")  # timestamps: no unit
    types = F.col(f"`{type_col}`") if type_col is not None else F.lit(None)
    return [
        F.min(F.when(first_checks, time)).alias("first"),
        F.max(F.when(first_checks, time)).alias("last"),
        F.collect_set(F.when(first_checks, types).cast("string")).alias("types"),
    ]


def _reason(prepared: _Prepared, program: Program, type_col, nanos: int) -> tuple[Column, Column]:
    """Why an event is rejected: its time, its type, a cell that is not what its column
    holds (in a column the program reads), or one of the program's row checks, from the
    column FIRST; and FIRST's own reason: those of the first checks (time, type, id:
    those before the program's own)."""
    time_col = program.options.time_col
    raw = F.col(f"`{time_col}`")
    missing_type = F.lit(False)
    if type_col is not None:
        missing_type = F.col(f"`{type_col}`").isNull() | (
            F.trim(F.col(f"`{type_col}`").cast("string")) == ""
        )
    far = F.lit(False)
    if prepared.time_kind == "int":  # the watermark needs the time in microseconds too
        limit = float(TIME_LIMIT // max(1, nanos // 1000))
        far = F.coalesce(F.abs(raw.cast("double")) >= F.lit(limit), F.lit(False))
        read = prepared.raw[time_col]  # an integer beyond ±TIME_LIMIT is read as no time
        far |= integer_time(F.col(read), prepared.sdf.schema[read].dataType)[1]
    text = F.col(prepared.raw[time_col]).cast("string")
    id_col = program.options.id_col
    corrupt, not_utf8 = _unreadable(prepared.sdf)
    first = (
        F.when(corrupt, F.lit("malformed row"))
        .when(not_utf8, F.lit("not UTF-8 text"))
        .when(text.isNull(), F.lit(f"{time_col} is missing"))
        .when(far, F.lit(OUT_OF_RANGE.format(time_col=time_col)))
        .when(raw.isNull(), F.lit(f"{time_col} {NOT_TIME}"))  # a batch run's words
        .when(missing_type, F.lit(f"{type_col} is missing"))
        .when(F.col(f"`{id_col}`").isNull(), F.lit(f"{id_col} is missing"))
    )
    reason = F.when(F.col(FIRST).isNotNull(), F.col(FIRST))
    for col in program.columns():
        if col in prepared.raw and col != time_col:
            text = F.col(prepared.raw[col])
            bad = text.isNotNull() & F.col(f"`{col}`").isNull()
            reason = reason.when(
                bad, F.concat(F.lit(f"{col}: '"), text, F.lit("' is not a number"))
            )
    for check in program.row_checks():
        reason = reason.when(~F.coalesce(to_column(check.holds), F.lit(False)), check.reason)
    return reason, first


def _unreadable(sdf: DataFrame) -> tuple[Column, Column]:
    """(a malformed row: its text in CORRUPT; a row with bytes that are not UTF-8, read as
    U+FFFD), as a batch run rejects them (docs/input.md)."""
    corrupt = F.col(CORRUPT).isNotNull() if CORRUPT in sdf.columns else F.lit(False)
    not_utf8 = F.lit(False)
    for name, dtype in sdf.dtypes:
        if dtype == "string" and name != CORRUPT and not name.startswith("__raw_"):
            cell = F.instr(F.col(f"`{name}`"), REPLACEMENT) > 0
            not_utf8 = not_utf8 | F.coalesce(cell, F.lit(False))
    return corrupt, not_utf8


def _tagged(
    prepared: _Prepared, program: Program, type_col, nanos: int, delay: int, text: list[str]
) -> DataFrame:
    """Reasons, ticks, component mask, watermark, filter and partition key; the cells as
    read of the `text` columns kept for the rejected rows."""
    time = F.col(f"`{program.options.time_col}`")
    ticks = F.unix_micros(time) if prepared.time_kind == "timestamp" else time.cast("long")
    mask = mask_column(program.signatures, type_col)
    keep = F.lit(True) if program.keep_unmatched else filter_column(program.signatures, type_col)
    reason, first = _reason(prepared, program, type_col, nanos)
    # The first checks' reason is a column of its own: the observed metrics read it as
    # it is (an expression there would be evaluated a second time, and interpreted:
    # the checking stage of a G2 micro-batch, 50k events: 131 -> 97 ms of JVM CPU).
    sdf = prepared.sdf.withColumn(FIRST, first).withColumn(REASON, reason)
    first_checks = F.col(FIRST).isNull()
    sdf = sdf.observe(CHECKED, *_observed(prepared.time_kind, ticks, type_col, first_checks))
    # The cells as read serve the reasons and the rejected rows only: the valid events'
    # go neither through the shuffle nor into the state.
    sdf = sdf.drop(*[r for c, r in prepared.raw.items() if c not in text], FIRST)
    if text:  # (Spark Connect refuses withColumns of nothing)
        rejected = F.col(REASON).isNotNull()
        sdf = sdf.withColumns(
            {prepared.raw[c]: F.when(rejected, F.col(prepared.raw[c])) for c in text}
        )
    sdf = sdf.withColumn(TICKS, ticks).withColumn(MASK, mask)
    # Event time in microseconds, for Spark's watermark (integer arithmetic: exact).
    if nanos >= 1000:
        micros_expr = F.col(TICKS) * F.lit(nanos // 1000)
    else:
        micros_expr = F.floor(F.col(TICKS) / F.lit(1000 // nanos)).cast("long")
    micros_expr = F.when(F.col(REASON).isNull(), micros_expr)
    sdf = sdf.withColumn(WATERMARK, F.timestamp_micros(F.coalesce(micros_expr, F.lit(0))))
    # Every event moves event time on, even one no component wants.
    sdf = sdf.withWatermark(WATERMARK, f"{delay} microseconds")
    # (Naming the event-time column keeps Spark from moving the filter before the
    # watermark, which would then not see the events filtered out.)
    never = F.col(WATERMARK) < F.timestamp_micros(F.lit(-(2**62)))
    sdf = sdf.filter(F.col(REASON).isNotNull() | keep | never)
    group_cols = list(program.partition_cols)
    if group_cols:
        key = F.to_json(F.array(*[F.col(f"`{c}`").cast("string") for c in group_cols]))
    else:
        key = F.lit("[]")
    valid = F.col(REASON).isNull()
    sdf = sdf.withColumn(KEY, F.when(valid, key).otherwise(F.lit("rejected")))
    sdf = sdf.withColumn(BUCKET, BucketLayout.LEGACY.bucket_column())
    # The stateful operator would drop late events itself (by the event-time column of
    # its input) before the step could report them. It needs an event-time column for
    # its event-time timeout, so it gets one no event is ever late by; the watermark is
    # still that of the real times above.
    never_late = F.timestamp_micros(F.lit(9 * 10**15)).alias(  # year 2255, within pandas
        WATERMARK, metadata={"spark.watermarkDelayMs": delay // 1000}
    )
    return sdf.select(*[F.col(f"`{c}`") for c in sdf.columns if c != WATERMARK], never_late)


class StreamStep:
    """The function applyInPandasWithState runs per bucket of keys and micro-batch (in the
    package, so that workers can import it), over the program compiled once on the driver.

    A bucket's state holds each of its keys' state apart (the events the watermark has not
    passed yet and the program's state, `encode_bucket`), with the time the key must be
    looked at again: only the keys that got events, or whose time came, are decoded, run
    and encoded again; the others' bytes are kept as they are."""

    def __init__(
        self, program: Program, nanos_per_tick: int, input_columns, raw, names, frame_names=None,
        text=(),
    ):  # fmt: skip
        self.timestamps = program.plans[0].time_kind == "timestamp"
        self.program = program
        self.nanos_per_tick = nanos_per_tick
        self.input_columns = list(input_columns)
        self.raw = dict(raw)  # column -> the column holding its cell as read
        self.names = list(names)
        self.frame_names = frame_names  # the input frames' column names (`pandas_ready`)
        self.text = list(text)  # the columns whose cells as read a rejected row shows

    def __call__(self, key, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        frames = [named(b, self.frame_names) if self.frame_names else b for b in batches if len(b)]
        if key[0] == REJECTED_BUCKET:
            for frame in frames:
                yield self._events("rejected", frame)
            return
        entries = decode_bucket(state.get[0]) if state.exists else {}
        # The watermark the previous micro-batch set, in ticks (None: none yet).
        ms = state.getCurrentWatermarkMs()
        watermark = ms * 1_000_000 // self.nanos_per_tick if ms > 0 else None
        out: list[pd.DataFrame] = []
        new = None
        if frames:
            kept_text = [self.raw[c] for c in self.text]
            new = stack_frames(frames).drop(columns=[BUCKET, WATERMARK, REASON, *kept_text])
            new = self._without_late(new, watermark, out)
        out += self._run_keys(entries, new, watermark)
        if not entries:
            state.remove()
        else:
            state.update((encode_bucket(entries),))
            # Be called again as soon as the watermark moves.
            state.setTimeoutTimestamp(ms + 1)
        for frame in out:
            if len(frame):
                yield frame

    def _without_late(self, new: pd.DataFrame, watermark, out: list) -> pd.DataFrame:
        """The new events the watermark has not passed; the others go to `out`, late."""
        if watermark is None:
            return new
        ticks = new[TICKS].to_numpy()
        late = ticks < watermark
        if not late.any():
            return new
        bad = new[late].copy()
        when = self._time_text
        bad[REASON] = [
            f"event time {when(t)} is before the watermark {when(watermark)} "
            "(its allowed lateness has passed)"
            for t in ticks[late]
        ]
        out.append(self._events("late", bad))
        return new[~late].reset_index(drop=True)

    def _run_keys(self, entries: dict, new: pd.DataFrame | None, watermark) -> list:
        """Run the keys that got events or whose time came; update `entries` in place."""
        if self.program.keys_together:
            return self._run_together(entries, new, watermark)
        program = self.program
        arrived = new.groupby(KEY, sort=False).indices if new is not None and len(new) else {}
        due = [k for k, (wake, _) in entries.items() if watermark is not None and wake <= watermark]
        touched = list(dict.fromkeys([*arrived, *due]))
        if not touched:
            return []
        states, waiting = {}, [new]
        for k in touched:
            pending, states[k] = (
                decode_state(entries[k][1]) if k in entries else (None, program.new_state())
            )
            waiting.append(pending)
        held, ready = self._held(waiting, watermark)
        released, kept = _by_key(held, ready), _by_key(held, ~ready)
        rows, counts = [], []
        for k in touched:
            program_state = states[k]
            if k in released:
                rows.append(program.process(program_state, self._given(released[k])))
            if watermark is not None:
                rows.append(program.advance(program_state, watermark))
            pending = kept.get(k)
            counts.append(0 if pending is None else len(pending))
            if pending is None and program.is_empty(program_state):
                entries.pop(k, None)
            else:
                wake = self._wake(pending, program_state, watermark)
                entries[k] = (wake, encode_state((pending, program_state)))
        return self._out(rows, touched, counts)

    def _run_together(self, entries: dict, new: pd.DataFrame | None, watermark) -> list:
        """The bucket's keys in one program state (`Program.keys_together`), run as one."""
        program = self.program
        entry = entries.get(ALL_KEYS)
        due = entry is not None and watermark is not None and entry[0] <= watermark
        if (new is None or not len(new)) and not due:
            return []
        pending, program_state = (
            decode_state(entry[1]) if entry is not None else (None, program.new_state())
        )
        held, ready = self._held([pending, new], watermark)
        rows = []
        if ready.any():
            rows.append(program.process(program_state, self._given(held[ready])))
        if watermark is not None:
            rows.append(program.advance(program_state, watermark))
        kept = held[~ready].reset_index(drop=True) if held is not None and not ready.all() else None
        if kept is None and program.is_empty(program_state):
            entries.pop(ALL_KEYS, None)
        else:
            wake = self._wake(kept, program_state, watermark)
            entries[ALL_KEYS] = (wake, encode_state((kept, program_state)))
        keys = [] if held is None else list(held[KEY].unique())
        sizes = {} if kept is None else kept[KEY].value_counts().to_dict()
        return self._out(rows, keys, [int(sizes.get(k, 0)) for k in keys])

    def _given(self, events: pd.DataFrame) -> pd.DataFrame:
        """The events as the program is given them: without the key text, nor the cells as
        read (which events held in a checkpoint of an earlier version may still have)."""
        return events.drop(columns=[*self.raw.values(), KEY], errors="ignore")

    def _held(self, frames: list, watermark) -> tuple[pd.DataFrame | None, np.ndarray]:
        """The waiting and new events in processing order, and which of them the
        watermark has passed (to be released)."""
        frames = [f for f in frames if f is not None and len(f)]
        if not frames:
            return None, np.zeros(0, dtype=bool)
        held = self.program.in_order(stack_frames(frames))
        if watermark is None:
            return held, np.zeros(len(held), dtype=bool)
        return held, held[TICKS].to_numpy() < watermark

    def _out(self, rows: list, keys: list, counts: list[int]) -> list:
        """The match rows, and each key's count of events held, as output frames."""
        rows = [r for r in rows if len(r)]
        marks = pd.DataFrame({KIND: "pending", KEY: keys, PENDING: counts})
        matches = [self._matches(pd.concat(rows, ignore_index=True))] if rows else []
        return [*matches, self._shaped(marks)]

    def _wake(self, pending: pd.DataFrame | None, program_state, watermark) -> int:
        """The watermark at which a key must be run again though no event came for it: when
        it passes a waiting event, or reaches the program's `idle_until` (the next move,
        when the program does not say)."""
        wakes = []
        if pending is not None:
            wakes.append(int(pending[TICKS].min()) + 1)
        if not self.program.is_empty(program_state):
            idle = self.program.idle_until(program_state)
            if idle is None:
                idle = watermark + 1 if watermark is not None else -(2**62)
            wakes.append(int(idle))
        return min(wakes)

    def _time_text(self, ticks: int) -> str:
        """A time as the user reads it: ISO 8601 for timestamps, else the number."""
        if self.timestamps:
            return pd.Timestamp(int(ticks), unit="us").isoformat() + "Z"
        return str(int(ticks))

    def _matches(self, rows: pd.DataFrame) -> pd.DataFrame:
        return self._shaped(rows.assign(**{KIND: "match"}))

    def _events(self, kind: str, frame: pd.DataFrame) -> pd.DataFrame:
        cols = {EVENT + c: frame[c] for c in self.input_columns}
        if kind == "rejected":
            cols.update({TEXT + c: frame[self.raw[c]] for c in self.text})
        shaped = pd.DataFrame(cols)
        shaped[REASON] = frame[REASON].to_numpy()
        shaped[KIND] = kind
        return self._shaped(shaped)

    def _shaped(self, frame: pd.DataFrame) -> pd.DataFrame:
        """All columns of the output schema, absent ones null.

        Absent columns hold None, not NaN: Spark converts a list column cell by cell and
        takes NaN for a value (a pending row has no `missing` list)."""
        none = np.full(len(frame), None, dtype=object)
        columns = {name: frame[name] if name in frame.columns else none for name in self.names}
        return pd.DataFrame(columns, index=frame.index)  # one frame, not a column at a time


def typed_frame(table: pa.Table) -> pd.DataFrame:
    """Rows taken from Spark as pandas of the types a batch run gives: integer and boolean
    columns nullable (pandas' default makes a column with a null float64, and 2**53 + 1
    then reads 2**53), lists of ids as lists (not float arrays when one holds a null).

    >>> table = pa.table({"id": [2**53 + 1, None], "ids": [[1, None], [2]]})
    >>> json_lines(typed_frame(table))
    ['{"id":9007199254740993,"ids":[1,null]}', '{"id":null,"ids":[2]}']
    """

    def kept(t: pa.DataType):
        if pa.types.is_integer(t):
            return pd.api.types.pandas_dtype(f"Int{t.bit_width}")
        if pa.types.is_boolean(t):
            return pd.BooleanDtype()
        if pa.types.is_nested(t):
            return pd.ArrowDtype(t)
        return None

    return table.to_pandas(types_mapper=kept)


def _by_key(frame: pd.DataFrame | None, rows: np.ndarray) -> dict[str, pd.DataFrame]:
    """The chosen rows of `frame` per key, each in the frame's order."""
    if frame is None or not rows.any():
        return {}
    chosen = frame[rows]
    return {
        k: chosen.take(idx).reset_index(drop=True)
        for k, idx in chosen.groupby(KEY, sort=False).indices.items()
    }


# ---- exactly-once file output ------------------------------------------------------------


class BatchWriter:
    """foreachBatch: the batch's rows of each kind to `<folder>/batch-<id>.jsonl` (or
    `.parquet`), or to the console.

    A file is written under a temporary name and renamed, so it is either whole or
    absent; a re-run of the same batch id (after a crash) replaces it with the same
    rows.
    """

    FORMATS = ("jsonl", "parquet", "console")

    def __init__(self, result: Stream, output: str, late: str, rejected: str, fmt: str = "jsonl"):
        if fmt not in self.FORMATS:
            raise SparkcepError(f"unknown output format '{fmt}' (one of {', '.join(self.FORMATS)})")
        self.folders = {"match": output, "late": late, "rejected": rejected}

        def events(kind):
            return [event_column(kind, c, result.step.text) for c in result.input_columns]

        self.columns = {
            "match": result.output_columns,
            "late": [*events("late"), REASON],
            "rejected": [*events("rejected"), REASON],
        }
        self.names = {f"{prefix}{c}": c for c in result.input_columns for prefix in (EVENT, TEXT)}
        self.order = result.program.order
        self.format = fmt
        self.totals = {"match": 0, "late": 0, "rejected": 0, "batches": 0}
        self.pending: dict[str, int] = {}  # key -> events held until the watermark passes
        self.reasons: Counter = Counter()  # the rejected rows' reasons
        self.program = result.program
        self.time_range: tuple[int, int] | None = None  # of every micro-batch so far
        self.types: set = set()  # the event types that occurred so far
        self.query = None  # the running query (set by `start`), whose progress holds ranges
        self.on_warning = None  # called with each warning once, as soon as it is known
        self._told: set[str] = set()
        self._folded = -1  # the last batch id whose progress was folded in

    @property
    def held(self) -> int:
        """Events held in the state until the watermark passes them (at the last batch)."""
        return sum(self.pending.values())

    def warnings(self) -> list[str]:
        """What the user should know of the stream so far, in the words of a batch run."""
        from sparkcep.runners.local import unknown_types

        if self.query is not None:  # the last micro-batches' progress (the others are in)
            self._observe(self.query.recentProgress)
        plans = self.program.plans
        out = [w for p in plans for w in p.warnings]
        if self.types:  # not before an event came (an empty stream has none of them)
            out += unknown_types(plans, self.types)
        return out + self._time_warnings()

    def _time_warnings(self) -> list[str]:
        first, last = self.time_range or (None, None)
        options = self.program.options
        return list(
            filter(None, [implausible_times(first, last, options.time_unit, options.time_col)])
        )

    def _fold_last(self) -> None:
        """Fold in the previous micro-batch's observations: its progress is complete when
        the next one is written (all of Spark's recent progress after a gap)."""
        last = self.query.lastProgress if self.query is not None else None
        if last is None:
            return
        self._observe(self.query.recentProgress if last.batchId > self._folded + 1 else [last])
        self._folded = max(self._folded, last.batchId)

    def _observe(self, progress) -> None:
        """Fold in what the micro-batches observed (`CHECKED`): a first and last time, a
        set of types, so one folded twice changes nothing."""
        for p in progress:
            seen = p.observedMetrics.get(CHECKED)
            if seen is None:
                continue
            self.types.update(seen["types"])
            if seen["first"] is None:
                continue
            first, last = seen["first"], seen["last"]
            if self.time_range is not None:
                first, last = min(first, self.time_range[0]), max(last, self.time_range[1])
            self.time_range = (first, last)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self._fold_last()  # kept per batch: Spark keeps only the last 100 batches' progress
        if self.on_warning is not None:  # unknown types: only the end of a stream knows
            for warning in self._time_warnings():
                if warning not in self._told:
                    self._told.add(warning)
                    self.on_warning(warning)
        rows = df.toArrow()
        kinds = rows.column(KIND)
        marks = rows.filter(pc.equal(kinds, "pending"))
        self.pending.update(zip(marks[KEY].to_pylist(), marks[PENDING].to_pylist()))
        for kind, folder in self.folders.items():
            table = rows.filter(pc.equal(kinds, kind)).select(self.columns[kind])
            table = table.rename_columns([self.names.get(c, c) for c in table.column_names])
            frame = typed_frame(table)
            lines = json_lines(frame)
            order = self._order(kind, frame, lines)
            lines = [lines[i] for i in order]
            self.totals[kind] += len(lines)
            if kind == "rejected":
                self.reasons.update(frame[REASON])
            if self.format == "console":
                for line in lines:
                    print(f"{kind}\t{line}", flush=True)
                continue
            path = Path(folder) / f"batch-{batch_id:06d}.{self.format}"
            if not lines:
                path.unlink(missing_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
            if self.format == "jsonl":
                tmp.write_text("\n".join(lines) + "\n")
            else:  # as a batch run writes parquet (Spark's way: its types, INT96 times)
                pq.write_table(
                    table.take(order), tmp, store_schema=False, use_deprecated_int96_timestamps=True
                )
            os.replace(tmp, path)
        self.totals["batches"] += 1

    def _order(self, kind: str, frame: pd.DataFrame, lines: list[str]) -> np.ndarray:
        """The rows in a batch run's order (matches), equal ones in the order of their
        text: a batch re-run after a crash rewrites the same file."""
        by_text = np.argsort(np.array(lines, dtype=object), kind="stable")
        if kind != "match":
            return by_text
        return sort_rows(frame.iloc[by_text].assign(__row=by_text), self.order)["__row"].to_numpy()


# ---- sources and running ----------------------------------------------------------------


def read_stream(spark, path: str, *, sep: str = ",", columns: list[str] | None = None,
                max_files: int | None = None, checkpoint: str | None = None,
                rows_per_second: int = 100, null_values=()):  # fmt: skip
    """A folder of event files as a stream (`folder_stream`: files in order of modification
    time, then name; types decided once and kept in `checkpoint`), or Spark's rate source
    when `path` is 'rate' (types A, B, C in turn, for demos)."""
    from sparkcep.files import input_files
    from sparkcep.runners.streaming.folder import read_folder

    if path == "rate":
        df = spark.readStream.format("rate").option("rowsPerSecond", rows_per_second).load()
        letters = F.element_at(
            F.array(F.lit("A"), F.lit("B"), F.lit("C")), (F.col("value") % 3 + 1).cast("int")
        )
        return df.select(
            F.col("value").alias("id"), F.col("timestamp").alias("ts"), letters.alias("type")
        )
    if not os.path.isdir(path):
        raise DataError(f"the input '{path}' is not a folder: a stream reads a folder of files")
    _, fmt = input_files(path)
    # The folder source lists the folder in a Python worker, whose working directory is
    # not the caller's: a relative path must be made absolute here.
    path = os.path.abspath(path)
    checkpoint = os.path.abspath(checkpoint) if checkpoint else None
    df, types = read_folder(
        spark, path, fmt, sep=sep, columns=columns, max_files=max_files, checkpoint=checkpoint,
        null_values=null_values,
    )  # fmt: skip
    return StreamSource(df, types, fmt)


def start(result: Stream, *, output: str, late: str, rejected: str, checkpoint: str,
          trigger: str, fmt: str = "jsonl", state_partitions: int | None = None):  # fmt: skip
    """Start writing a stream's rows; returns (StreamingQuery, BatchWriter).

    A new stream keeps its state in `state_partitions` partitions (default: one per core,
    at most BUCKETS), whatever `spark.sql.shuffle.partitions` says: each partition is a
    task of every micro-batch with a fixed cost (its state store's load and commit, its
    Python worker's start), and more tasks than cores run in turns. A restarted stream
    keeps the number its checkpoint was started with (Spark's own rule)."""
    writer = BatchWriter(result, output, late, rejected, fmt)
    if "://" not in checkpoint:  # the JVM resolves a relative path against its own folder
        checkpoint = os.path.abspath(checkpoint)
    spark = result.tagged.sparkSession
    if state_partitions is None:
        state_partitions = min(BUCKETS, default_parallelism(spark))
    rows = result.rows_in(bucket_layout(checkpoint, max(1, state_partitions)))
    query = rows.writeStream.foreachBatch(writer).option("checkpointLocation", checkpoint)
    if trigger == "available-now":
        query = query.trigger(availableNow=True)
    elif trigger == "once":
        query = query.trigger(once=True)
    else:
        query = query.trigger(processingTime=trigger)
    # The query takes a copy of the session's settings when it starts.
    with setting(spark, "spark.sql.shuffle.partitions", str(max(1, state_partitions))):
        writer.query = query.start()
    return writer.query, writer


def await_stream(query, timeout: float | None = None) -> bool:
    """Wait until the stream ends, or `timeout` seconds; on Ctrl-C (SIGINT), let the
    micro-batch in progress finish, stop the stream and return True (the rows written
    stay; a restart on the checkpoint goes on from there).

    Python's KeyboardInterrupt would come in the middle of a call to the JVM, breaking
    its connection, and a batch cut short fills the screen with the JVM's and py4j's
    traces: the signal only sets a flag here, looked at between short waits. A second
    Ctrl-C, while the stream stops, interrupts at once."""
    stop = threading.Event()

    def interrupted(*_):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not stop.is_set() and not query.awaitTermination(0.2):
            if deadline is not None and time.monotonic() >= deadline:
                break
        while stop.is_set() and query.isActive and query.status["isTriggerActive"]:
            time.sleep(0.1)
    finally:
        signal.signal(signal.SIGINT, previous)
    if query.isActive:
        query.stop()
    return stop.is_set()
