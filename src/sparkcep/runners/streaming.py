"""Streaming: the same queries on live streams with Spark Structured Streaming.

    source ─check rows─▶ mask + filter (JVM) ─▶ watermark ─▶ groupBy(key)
          .applyInPandasWithState(StreamStep)  ─▶ rows of kind match | late | rejected
          ─▶ foreachBatch: one file per micro-batch and kind, written atomically

Per partition key, the engine operator (PatternOperator or AggregateOperator) and the
events not yet released live in Spark's state store, pickled. Each micro-batch:

- an event older than the watermark the previous batch set is *late*: it goes to the
  late output with the reason (and is counted), never silently away;
- the other events wait in the state until the watermark passes them, then go to the
  operator in time order (so the answers are those of a batch run over the same events);
- every micro-batch wakes the keys that have state (a processing-time timeout: with an
  event-time one Spark would drop late events before they could be reported): their
  waiting events the watermark has passed are released, trailing-negation matches whose
  window closed are reported, and a key with nothing left in its window has its state
  removed.

Output files are named by batch id and replaced atomically, so a micro-batch that Spark
re-runs after a crash (`kill -9`) rewrites the same files: restarted on its checkpoint,
a stream neither loses nor repeats rows.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcep.errors import DataError, SparkcepError
from sparkcep.events import MASK, TICKS
from sparkcep.inputs import OUT_OF_RANGE, REASON
from sparkcep.jsonlines import json_lines
from sparkcep.plan import Options, Plan, analyze
from sparkcep.runners.spark import kind_of_spark, schema_of
from sparkcep.runners.spark_expr import filter_column, mask_column
from sparkcep.timeunits import NANOS, TIME_LIMIT

WATERMARK = "__wm"
KEY = "__key"
OUTPUT = T.StructType(
    [
        T.StructField("kind", T.StringType()),  # match | late | rejected
        T.StructField("payload", T.StringType()),  # the row, as a JSON object
    ]
)
STATE = T.StructType([T.StructField("blob", T.BinaryType())])


def _nanos_per_tick(time_kind: str, time_unit: str | None) -> int:
    if time_kind == "timestamp":
        return 1000  # timestamps are read as microseconds
    if time_unit is None:
        raise SparkcepError(
            "streaming needs to know the unit of an integer time column for its watermark: "
            "give --time-unit ms|s|us|ns (time_unit=...)"
        )
    return NANOS[time_unit]


def parse_duration(text: str) -> int:
    """'10 s', '500ms', '2 min' -> microseconds."""
    from sparkcep.language.parser import UNITS

    text = text.strip()
    number = ""
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        else:
            break
    unit = text[len(number) :].strip() or "s"
    if not number or unit.lower() not in UNITS:
        raise SparkcepError(f"cannot read the duration '{text}' (e.g. 10 s, 500 ms, 2 min)")
    return int(float(number) * NANOS[UNITS[unit.lower()]] / 1000)


@dataclass
class StreamPlan:
    plans: list[Plan]
    names: list
    aggregate: bool
    id_col: str
    group_cols: list[str]
    nanos_per_tick: int
    columns: list[str]  # input columns, for the late/rejected payloads


def stream(
    sdf: DataFrame,
    query: str,
    *,
    time_col: str = "ts",
    type_col: str = "type",
    id_col: str | None = None,
    time_unit: str | None = None,
    tiebreak: str | None = None,
    lateness: str = "0 s",
) -> DataFrame:
    """A streaming DataFrame of (kind, payload) rows for `query` over `sdf`.

    `payload` is the JSON of a match (or AGG) row, of a late event or of a rejected row.
    `sparkcep.runners.streaming.write_batches` writes them to files, exactly once.
    """
    sdf, step = prepare_stream(
        sdf, query, time_col=time_col, type_col=type_col, id_col=id_col,
        time_unit=time_unit, tiebreak=tiebreak, lateness=lateness,
    )  # fmt: skip
    # An event-time timeout wakes every key with state when the watermark moves, to
    # release what it has passed.
    return sdf.groupBy(KEY).applyInPandasWithState(
        step, OUTPUT, STATE, "append", "EventTimeTimeout"
    )


def prepare_stream(sdf, query, *, time_col, type_col, id_col, time_unit, tiebreak, lateness):
    from sparkcep.language.parser import parse_file
    from sparkcep.runners.local import jobs_for

    columns = sdf.columns
    if id_col is None:
        raise SparkcepError(
            "a stream has no row numbers: give the id column of the events (--id COL)"
        )
    for role, col in (("time", time_col), ("type", type_col), ("id", id_col)):
        if col not in columns:
            raise DataError(
                f"the {role} column '{col}' is not in the input (columns: {', '.join(columns)})"
            )
    time_type = sdf.schema[time_col].dataType
    time_kind = kind_of_spark(time_type)
    if time_kind == "string":
        sdf = sdf.withColumn(time_col, F.expr(f"try_cast(`{time_col}` AS TIMESTAMP)"))
        time_kind = "timestamp"
    elif time_kind == "float":
        sdf = sdf.withColumn(time_col, F.col(f"`{time_col}`").cast("long"))
        time_kind = "int"
    nanos = _nanos_per_tick(time_kind, time_unit)
    options = Options(time_col, type_col, id_col, time_unit, tiebreak)
    schema = schema_of(sdf)
    schema[time_col] = time_kind
    queries = parse_file(query)
    aggregate = any(q.aggregates for q in queries)
    plans = [analyze(q, schema, options) for q in queries]
    names = [q.name for q in queries]
    if not aggregate and len(plans) > 1:
        raise SparkcepError("a stream runs one pattern query (or several AGG queries)")
    if aggregate:
        jobs = jobs_for(plans, names, "aseq", "prefix")
        if len(jobs) > 1:
            raise SparkcepError("AGG queries streamed together must partition the stream alike")
        group_cols = list(plans[0].group_by)
        comps = jobs[0].components()
        mask = mask_column(plans[0], comps)
        keep = filter_column(plans[0], comps)
    else:
        group_cols = list(plans[0].key)
        mask = mask_column(plans[0])
        keep = filter_column(plans[0]) if plans[0].strategy != "STRICT_CONTIGUITY" else F.lit(True)
    raw = F.col(f"`{time_col}`")
    ticks = F.unix_micros(raw) if time_kind == "timestamp" else raw.cast("long")
    type_missing = F.col(f"`{type_col}`").isNull() | (
        F.trim(F.col(f"`{type_col}`").cast("string")) == ""
    )
    far = F.lit(False)
    if time_kind == "int":  # the watermark needs the time in microseconds too
        limit = float(TIME_LIMIT // max(1, nanos // 1000))
        far = F.coalesce(F.abs(raw.cast("double")) >= F.lit(limit), F.lit(False))
    reason = (
        F.when(raw.isNull(), F.lit(f"{time_col} is missing or not a time"))
        .when(far, F.lit(OUT_OF_RANGE.format(time_col=time_col)))
        .when(type_missing, F.lit(f"{type_col} is missing"))
    )
    sdf = sdf.withColumn(REASON, reason).withColumn(TICKS, ticks).withColumn(MASK, mask)
    # Event time in microseconds, for Spark's watermark (integer arithmetic: exact).
    if nanos >= 1000:
        micros_expr = F.col(TICKS) * F.lit(nanos // 1000)
    else:
        micros_expr = F.floor(F.col(TICKS) / F.lit(1000 // nanos)).cast("long")
    sdf = sdf.withColumn(WATERMARK, F.timestamp_micros(F.coalesce(micros_expr, F.lit(0))))
    # Every event moves event time on, even one no component wants.
    sdf = sdf.withWatermark(WATERMARK, f"{parse_duration(lateness)} microseconds")
    # (Naming the event-time column keeps Spark from moving the filter before the
    # watermark, which would then not see the events filtered out.)
    never = F.col(WATERMARK) < F.timestamp_micros(F.lit(-(2**62)))
    sdf = sdf.filter(F.col(REASON).isNotNull() | keep | never)
    if group_cols:
        key = F.to_json(F.array(*[F.col(f"`{c}`").cast("string") for c in group_cols]))
    else:
        key = F.lit("[]")
    sdf = sdf.withColumn(KEY, F.when(F.col(REASON).isNull(), key).otherwise(F.lit("rejected")))
    # The stateful operator would drop late events itself (by the event-time column of
    # its input) before the step could report them. It needs an event-time column for
    # its event-time timeout, so it gets one no event is ever late by; the watermark is
    # still that of the real times above.
    never_late = F.timestamp_micros(F.lit(9 * 10**15)).alias(  # year 2255, within pandas
        WATERMARK, metadata={"spark.watermarkDelayMs": parse_duration(lateness) // 1000}
    )
    sdf = sdf.select(*[F.col(f"`{c}`") for c in sdf.columns if c != WATERMARK], never_late)
    info = StreamPlan(plans, names, aggregate, id_col, group_cols, nanos, list(columns))
    return sdf, StreamStep(info)


class StreamStep:
    """The function applyInPandasWithState runs per key and micro-batch (in the package,
    so that workers can unpickle it and the state it pickles)."""

    def __init__(self, info: StreamPlan):
        self.info = info

    def _new_operator(self):
        from sparkcep.aggregate_job import AggregateOperator
        from sparkcep.engines.operator import PatternOperator

        info = self.info
        if info.aggregate:
            return AggregateOperator(info.plans, id_col=info.id_col, names=info.names)
        return PatternOperator(info.plans[0], id_col=info.id_col)

    def __call__(self, key, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        info = self.info
        frames = [b for b in batches if len(b)]
        if key[0] == "rejected":
            for frame in frames:
                yield _payload("rejected", frame[[*info.columns, REASON]], info)
            return
        if state.exists:
            pending, operator = pickle.loads(state.get[0])
        else:
            pending, operator = None, self._new_operator()
        # The watermark the previous micro-batch set, in ticks.
        watermark = state.getCurrentWatermarkMs() * 1_000_000 // info.nanos_per_tick
        has_watermark = state.getCurrentWatermarkMs() > 0
        out: list[pd.DataFrame] = []
        if frames:
            new = pd.concat(frames, ignore_index=True).drop(columns=[KEY, WATERMARK, REASON])
            ticks = new[TICKS].to_numpy()
            late = (ticks < watermark) if has_watermark else np.zeros(len(new), dtype=bool)
            if late.any():
                bad = new[late].copy()
                bad[REASON] = [
                    f"event time {t} is before the watermark {watermark} (allowed lateness passed)"
                    for t in ticks[late]
                ]
                out.append(_payload("late", bad[[*info.columns, REASON]], info))
            new = new[~late]
            pending = new if pending is None else pd.concat([pending, new], ignore_index=True)
        # Release, in time order, what the watermark has passed.
        if pending is not None and len(pending):
            cols = [
                TICKS,
                *([info.plans[0].tiebreak] if info.plans[0].tiebreak else []),
                info.id_col,
            ]
            pending = pending.sort_values(cols, kind="stable").reset_index(drop=True)
            ready = (
                pending[TICKS].to_numpy() < watermark
                if has_watermark
                else np.zeros(len(pending), bool)
            )
            if state.hasTimedOut or ready.any():
                released = pending[ready].drop(columns=[TICKS])
                pending = pending[~ready].reset_index(drop=True)
                if len(released):
                    out.append(_payload("match", operator.process(released), info))
        if has_watermark:
            out.append(_payload("match", operator.advance(watermark), info))
        waiting = pending is not None and len(pending)
        if not waiting and operator.is_empty():
            state.remove()
        else:
            state.update((pickle.dumps((pending, operator)),))
            # Be called again as soon as the watermark moves.
            state.setTimeoutTimestamp(state.getCurrentWatermarkMs() + 1)
        for frame in out:
            if len(frame):
                yield frame


def _payload(kind: str, frame: pd.DataFrame, info: StreamPlan) -> pd.DataFrame:
    if frame is None or not len(frame):
        return pd.DataFrame({"kind": [], "payload": []})
    return pd.DataFrame({"kind": kind, "payload": json_lines(frame)})


# ---- exactly-once file output ------------------------------------------------------------


class BatchWriter:
    """foreachBatch: the batch's rows of each kind to `<folder>/batch-<id>.jsonl` (or
    `.parquet`), or to the console.

    A file is written under a temporary name and renamed, so it is either whole or
    absent; a re-run of the same batch id (after a crash) replaces it with the same
    rows.
    """

    FORMATS = ("jsonl", "parquet", "console")

    def __init__(self, output: str, late: str, rejected: str, fmt: str = "jsonl"):
        if fmt not in self.FORMATS:
            raise SparkcepError(f"unknown output format '{fmt}' (one of {', '.join(self.FORMATS)})")
        self.folders = {"match": output, "late": late, "rejected": rejected}
        self.format = fmt
        self.totals = {"match": 0, "late": 0, "rejected": 0, "batches": 0}

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        by_kind: dict[str, list[str]] = {}
        for row in df.collect():
            by_kind.setdefault(row["kind"], []).append(row["payload"])
        for kind, folder in self.folders.items():
            lines = sorted(by_kind.get(kind, []))
            self.totals[kind] += len(lines)
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
            else:
                pd.read_json(
                    io.StringIO("\n".join(lines)), lines=True, precise_float=True
                ).to_parquet(tmp)
            os.replace(tmp, path)
        self.totals["batches"] += 1


# ---- sources and running ----------------------------------------------------------------


def read_stream(spark, path: str, *, sep: str = ",", max_files: int | None = None,
                rows_per_second: int = 100):  # fmt: skip
    """A streaming DataFrame over a folder of event files (new files are picked up), or
    Spark's rate source when `path` is 'rate' (types A, B, C in turn, for demos)."""
    from sparkcep.files import input_files

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
    files, fmt = input_files(path)
    reader = spark.read
    if fmt == "csv":
        schema = (
            reader.option("header", True)
            .option("inferSchema", True)
            .option("sep", sep)
            .csv(files)
            .schema
        )
    elif fmt == "json":
        schema = reader.json(files).schema
    else:
        schema = reader.parquet(*files).schema
    stream_reader = spark.readStream.schema(schema)
    if max_files:
        stream_reader = stream_reader.option("maxFilesPerTrigger", max_files)
    suffix = {"csv": "csv", "json": "json", "parquet": "parquet"}[fmt]
    if fmt == "csv":
        return (
            stream_reader.option("header", True)
            .option("sep", sep)
            .csv(path, pathGlobFilter=f"*.{suffix}*")
        )
    if fmt == "json":
        return stream_reader.json(path)
    return stream_reader.parquet(path)


def start(rows: DataFrame, *, output: str, late: str, rejected: str, checkpoint: str,
          trigger: str, fmt: str = "jsonl"):  # fmt: skip
    """Start writing a stream of rows; returns (StreamingQuery, BatchWriter)."""
    writer = BatchWriter(output, late, rejected, fmt)
    query = rows.writeStream.foreachBatch(writer).option("checkpointLocation", checkpoint)
    if trigger == "available-now":
        query = query.trigger(availableNow=True)
    elif trigger == "once":
        query = query.trigger(once=True)
    else:
        query = query.trigger(processingTime=trigger)
    return query.start(), writer
