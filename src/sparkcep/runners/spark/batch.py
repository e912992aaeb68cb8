"""The Spark batch runner: Spark reads, checks, filters and partitions; programs match.

    events ──check rows──▶ valid ──mask + filter (JVM)──▶ layout ──sort──▶ program per
                └─▶ rejected (with a reason)               by key, or time ranges        Spark partition
                                                           that overlap by the window

One pipeline for every engine: each program (one per engine and way of partitioning the
stream) declares the events it wants (signatures), how the stream may be split and its
output columns; `prep.layout` decides the split. A keyed program's Spark partitions hold
whole keys (a segment each); an unkeyed one with a window gets time ranges that also
receive the events its reach needs before and after them, and reports only what its own
events anchor, so no row is lost or reported twice.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from pyspark import Accumulator
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcep.engines.base import Program
from sparkcep.engines.output import QUERY, tie_warning
from sparkcep.engines.registry import compile_jobs
from sparkcep.inputs import ORDER_COL, REASON, ROW, duplicate_warning, text_warning
from sparkcep.plan import Options, Plan, plan_queries
from sparkcep.plan.columns import named_columns
from sparkcep.plan.intervals import needs_data_width, with_data_widths
from sparkcep.plan.model import takes_options
from sparkcep.prep.layout import RANGE, Layout, choose_layout, owned
from sparkcep.prep.table import MASK, TICKS
from sparkcep.runners.local import order_by_options, type_column, unknown_types
from sparkcep.runners.spark import files as spark_files
from sparkcep.runners.spark.expr import filter_column, mask_column, to_column
from sparkcep.runners.spark.one_pass import GuessWrong, check_on_the_way, takes
from sparkcep.runners.spark.one_read import check_rows_once, one_read
from sparkcep.runners.spark.query_first import kept_columns, raise_sure_error
from sparkcep.runners.spark.rows import (
    AS_READ,
    Checked,
    check_rows,
    reject_bad_cells,
    schema_of,
    spark_type,
)
from sparkcep.runners.spark.session import default_parallelism, is_connect, spark_session
from sparkcep.runners.spark.workers import check_worker_python
from sparkcep.timeunits import implausible_times

__all__ = ["SparkRun", "aggregate", "match", "run", "spark_session"]


@dataclass
class SparkRun:
    plans: list[Plan]
    unordered: DataFrame  # the rows, in no particular order
    rejected: DataFrame
    checked: Checked
    partitions: int
    layout: str  # how the work was split, in words
    order: list[str] = field(default_factory=list)
    max_matches: int | None = None
    programs: list[Program] = field(default_factory=list)
    # events sharing an instant, counted as the rows are made (`.value` after the job)
    tied: Accumulator | ObservedTies | None = None
    # The rejected rows in pandas when the input was checked in the driver (then
    # `rejected` is None): runners/spark/driver_check.py.
    rejected_rows: pd.DataFrame | None = None
    driver_checked: str | None = None  # the size under which inputs are checked so, in words

    def settle(self) -> None:
        """Take the counts of the job that computed the rows, when the rows were checked
        on their way to the matcher (`one_pass`); call it after that job, before the
        rows are used (it raises `GuessWrong` when the counts do not confirm the types
        the first rows suggested)."""
        self.checked.settle()

    def warnings(self) -> list[str]:
        """What the user should know of the run (after the rows were computed)."""
        out = [w for p in self.plans for w in p.warnings]
        tied = self.tied.value if self.tied is not None else 0
        if tied and not any(p.tiebreak for p in self.plans):
            out.append(tie_warning(tied))
        if self.checked.types is not None:
            out += unknown_types(self.plans, self.checked.types)
        read = {c for p in self.programs for c in p.columns()}
        mostly = self.checked.mostly_text
        out += [text_warning(c, *mostly[c]) for c in mostly if c in read]
        if self.checked.time_kind == "int":
            options = self.plans[0].options
            first, last = self.checked.min_tick, self.checked.max_tick
            out += filter(
                None, [implausible_times(first, last, options.time_unit, options.time_col)]
            )
        return out + duplicate_warning(self.checked.duplicate_ids(), self.checked.id_col)

    @property
    def plan(self) -> Plan:
        return self.plans[0]

    @property
    def label(self) -> str:
        return self.programs[0].label

    @property
    def rows(self) -> DataFrame:
        """The rows in output order (a global sort)."""
        ordered = self.unordered.orderBy(*[F.col(f"`{c}`") for c in self.order])
        return ordered if self.max_matches is None else ordered.limit(self.max_matches)

    matches = rows


def execute(
    df: DataFrame,
    queries,
    options: Options,
    *,
    split_cols: list[Column] | None = None,
    infer_types: bool = False,
    partitions: int | None = None,
    source: spark_files.SparkInput | None = None,
    one_pass: bool = False,
) -> SparkRun:
    """Run queries on a Spark DataFrame; returns the rows and rejected rows (lazy).

    `source` (the files `df` reads): a CSV input's first cells (`SparkInput.head`) let
    the checking pass read the input once (`one_read`, under
    `spark_files.ONE_READ_BYTES`); the run's `checked.release()` then drops the rows
    Spark keeps for it. With `one_pass` (a caller that calls `SparkRun.settle()` after
    the job that reads the rows, before it uses them), a run of one keyed program checks
    its rows on their way to the matcher (`one_pass`): nothing is kept."""
    check_worker_python(df.sparkSession)  # (once a session)
    options = order_by_options(queries, options)  # MATCH_RECOGNIZE: ORDER BY's time
    head = source.head if source is not None else None
    if options.time_col == ORDER_COL:  # MATCH_RECOGNIZE without ORDER BY: the row order
        df = df.withColumn(ORDER_COL, F.monotonically_increasing_id())
    roles = {
        "time_col": options.time_col,
        "type_col": type_column(df.columns, queries, options),
        "id_col": options.id_col,
    }
    read = named_columns(queries, df.columns, options) if infer_types else None
    inferred = (set(df.columns) if read is None else read) if infer_types else None
    guessed = raise_sure_error(df.schema, queries, options, roles, inferred, head)  # no job yet
    checked = None
    if infer_types and head is not None and split_cols is not None:
        keep = kept_columns(guessed, roles, read)  # read None: all
        if one_pass and guessed and takes(guessed, needs_data_width(_plans(guessed))):
            read_later = None if keep is None else {c for p in guessed for c in p.columns()}
            checked = check_on_the_way(
                df, split_cols=split_cols, read=read, source=source, keep=keep,
                later_cols=read_later, **roles,
            )  # fmt: skip
        elif one_read() and source.size < spark_files.ONE_READ_BYTES:
            checked = check_rows_once(
                df, split_cols=split_cols, read=read, head=head, keep=keep, **roles
            )  # fmt: skip
    if checked is None:
        checked = check_rows(df, split_cols=split_cols, infer_types=infer_types, read=read, **roles)
    ignored = (TICKS, ROW, AS_READ, *checked.coerced.values())
    schema = schema_of(checked.valid, ignore=ignored)
    schema[options.time_col] = checked.time_kind
    try:
        plans, names = plan_queries(queries, schema, options)
        programs = compile_jobs(plans, names, replace(options, id_col=checked.id_col))
        checked = reject_bad_cells(checked, {c for p in programs for c in p.columns()})
        checked = _apply_row_checks(checked, [c for p in programs for c in p.row_checks()])
        if checked.pending is not None:  # checked on the way: the same programs as guessed
            if not takes(programs, needs_data_width(plans)):
                raise GuessWrong("the queries planned otherwise than against the first rows")
            checked = checked.pending.watch(checked, programs)
        if needs_data_width(plans):  # U_max of interval times: the widest of the rows kept
            plans = with_data_widths(plans, lambda spec: _widest(checked.valid, spec, options))
            programs = compile_jobs(plans, names, replace(options, id_col=checked.id_col))
        return matched(checked, plans, programs, options, partitions)
    except BaseException:  # a query error: the rows kept for the run are not needed
        checked.release()
        raise


def _plans(programs: list[Program]) -> list[Plan]:
    return [plan for program in programs for plan in program.plans]


def matched(
    checked: Checked, plans: list[Plan], programs: list[Program], options: Options,
    partitions: int | None = None,
) -> SparkRun:  # fmt: skip
    """The matching of checked rows: each program over its events, laid out by key or
    time range into Spark partitions (the rows, lazy)."""
    spark = checked.valid.sparkSession
    if partitions is None:  # (rows checked on their way to the matcher: not counted yet)
        counted = checked.pending is None or checked.events_read
        events = checked.events_read - checked.first_rejected if counted else None
        partitions = matching_partitions(spark, events)
    outs, texts, parts = [], [], 0
    tied = ObservedTies() if is_connect(spark) else spark.sparkContext.accumulator(0)
    for program in programs:
        events, layout = _laid_out(program, checked, partitions)
        schema_out = output_schema(program, checked.valid.schema)
        if isinstance(tied, ObservedTies):
            schema_out = schema_out.add(TIED, T.LongType())
        events, names = pandas_ready(events)
        outs.append(events.mapInPandas(ProgramMapper(program, layout, tied, names), schema_out))
        texts.append(layout.text)
        parts += layout.parts
    rows = outs[0]
    for other in outs[1:]:
        rows = rows.unionByName(other, allowMissingColumns=True)
    if isinstance(tied, ObservedTies):
        rows = tied.observed(rows)
    order = [QUERY] if len(programs) > 1 else list(programs[0].order)
    rejected = checked.rejected  # None: checked in the driver (its rows: rejected_rows)
    if rejected is not None:
        rejected = rejected.drop(ORDER_COL)  # the run's own column, not the user's
    return SparkRun(
        plans, rows, rejected, checked, parts, "; ".join(texts), order,
        options.max_matches, programs, tied,
    )  # fmt: skip


# The matching stage's partitions: two a core, so that a partition slower than the others
# does not leave cores idle; a small input fewer, down to MIN_PARTITIONS (a task has a
# fixed cost: a session's default 200 shuffle partitions took 18 s on 20 rows, 2 took 3 s).
EVENTS_PER_PARTITION = 100_000
MIN_PARTITIONS = 4


TIED = "__sparkcep_tied"  # the column of a Connect run's tie counts (ObservedTies)


class ObservedTies:
    """The tie count of a run on a Spark Connect session, which has no accumulators: each
    task's mapper adds a row of its own holding its count in the column TIED (null in
    every match); the rows are summed by an observation as the job runs, then dropped.
    `value` reads the sum once an action has run the rows."""

    def __init__(self):
        from pyspark.sql import Observation

        self.observation = Observation("sparkcep_tied")

    def observed(self, rows: DataFrame) -> DataFrame:
        tied = F.coalesce(F.sum(F.col(TIED)), F.lit(0)).alias("tied")
        rows = rows.observe(self.observation, tied)
        return rows.filter(F.col(TIED).isNull()).drop(TIED)

    @property
    def value(self) -> int:
        return int(self.observation.get.get("tied") or 0)


def matching_partitions(spark, events: int | None = None) -> int:
    """Spark partitions of the matching stage: two per core (Spark's default
    parallelism), fewer for an input of under EVENTS_PER_PARTITION events a partition
    (not under MIN_PARTITIONS). `spark.sql.shuffle.partitions` does not count: its default
    of 200 is a setting for joins of large tables. The shuffle by key names its number
    of partitions, so adaptive execution keeps them all."""
    most = 2 * max(1, default_parallelism(spark))
    if events is None:
        return most
    return min(most, max(MIN_PARTITIONS, -(-events // EVENTS_PER_PARTITION)))


def _widest(valid: DataFrame, spec, options: Options) -> int | None:
    """The largest upper - lower of the rows whose interval the row checks keep (one
    aggregate job over the input: a batch has an end, so U_max is read, not asked)."""
    lo, hi, ts = (to_column(e) for e in (spec.lower, spec.upper, spec.time_expr(options.time_col)))
    usable = lo.isNotNull() & hi.isNotNull() & (lo <= ts) & (ts <= hi)
    widest = valid.select(F.max(F.when(usable, hi - lo)).alias("w")).first()
    return None if widest is None or widest["w"] is None else int(widest["w"])


def _apply_row_checks(checked: Checked, checks) -> Checked:
    """Rows that fail a program's checks leave the valid rows for the rejected ones."""
    if not checks:
        return checked
    reason = F.lit(None).cast("string")
    for check in reversed(checks):
        reason = F.when(~F.coalesce(to_column(check.holds), F.lit(False)), check.reason).otherwise(
            reason
        )
    staged = checked.valid.withColumn(REASON, reason)
    failing = staged.filter(F.col(REASON).isNotNull()).drop(TICKS)
    return checked.rejecting(staged.filter(F.col(REASON).isNull()).drop(REASON), failing)


def _laid_out(program: Program, checked: Checked, partitions: int) -> tuple[DataFrame, Layout]:
    """The program's events: tagged with their components, filtered, spread and sorted."""
    type_col = program.options.type_col
    events = checked.valid.withColumn(MASK, mask_column(program.signatures, type_col))
    if not program.keep_unmatched:
        events = events.filter(filter_column(program.signatures, type_col))
    for k in dict.fromkeys([*program.partition_cols, *program.segment_cols]):
        events = events.filter(F.col(f"`{k}`").isNotNull())
    read = program.attributes()  # the type column too, when the engine reads it
    needed = [c for c in program.columns() if c != type_col or c in read] + [TICKS, MASK]
    events = events.select(*[F.col(f"`{c}`") for c in dict.fromkeys(needed)])
    before, after = program.reach
    layout = choose_layout(
        program.partition_cols,
        before=before,
        after=after,
        min_tick=checked.min_tick,
        max_tick=checked.max_tick,
        events=checked.events_read - checked.first_rejected,  # an estimate: no Spark job
        parts=partitions,
    )
    if layout.key:
        events = events.repartition(partitions, *[F.col(f"`{k}`") for k in layout.key])
    elif layout.ranged:
        events = _explode_ranges(events, layout)
        events = events.repartition(layout.parts, F.col(RANGE))
    else:
        # (a MATCH_RECOGNIZE plan without PARTITION BY says so itself, as --local does)
        said = any(
            "the whole input is one partition" in w for p in program.plans for w in p.warnings
        )
        if (before is None or after is None) and not said:
            warnings.warn(
                "the query has neither a key nor a window: all events are matched in one partition",
                stacklevel=4,
            )
        events = events.repartition(1)
    segments = [RANGE] if layout.ranged else []
    sort_cols = program.sort_columns([*segments, *program.segment_cols])
    sort_cols = [TICKS if c == program.options.time_col else c for c in sort_cols]
    return events.sortWithinPartitions(*[F.col(f"`{c}`") for c in sort_cols]), layout


def _explode_ranges(events: DataFrame, layout: Layout) -> DataFrame:
    """Each event goes to every range [lo, lo + L) with lo - before < t < lo + L + after
    (prep.layout.assign_ranges in Spark)."""
    t = F.col(TICKS)
    own = F.expr(f"(`{TICKS}` - {layout.t0}) div {layout.range_len}")  # exact: integers
    events = events.withColumn(RANGE, F.explode(F.array(own - 1, own, own + 1)))
    lo = F.lit(layout.t0) + F.col(RANGE) * F.lit(layout.range_len)
    keep = (
        (F.col(RANGE) >= 0)
        & (F.col(RANGE) < layout.n_ranges)
        & (t > lo - F.lit(layout.before))
        & (t < lo + F.lit(layout.range_len) + F.lit(layout.after))
    )
    return events.filter(keep)


def output_schema(program: Program, input_schema: T.StructType) -> T.StructType:
    """The program's output columns as a Spark schema."""
    fields = []
    for col in program.output:
        dtype = input_schema[col.like].dataType if col.like else spark_type(col.kind)
        fields.append(T.StructField(col.name, T.ArrayType(dtype) if col.is_list else dtype))
    return T.StructType(fields)


def pandas_ready(df: DataFrame) -> tuple[DataFrame, list[str]]:
    """`df` as mapInPandas and applyInPandas(WithState) can take it, and its column names.
    PySpark looks each column up there by its name (`df[name]`), which reads `a.b` as the
    field b of a column a, and fails: a name with a dot goes under a stand-in, and the
    pandas function gives each frame its names back (`named`)."""
    names = df.columns
    if not any("." in c for c in names):
        return df, names
    return df.toDF(*[f"__col{i}" if "." in c else c for i, c in enumerate(names)]), names


def named(frame: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """A pandas frame of `pandas_ready(df)` with the names of `df`'s columns."""
    frame.columns = names
    return frame


class ProgramMapper:
    """The function mapInPandas runs on each Spark partition (pickled to the workers).

    It gathers the partition's batches into chunks of whole units (keys or time
    ranges) and runs the program once over each chunk. A unit of one segment larger than
    CHUNK_ROWS (a key that holds a large share of the events) runs in bounded parts
    instead: whole instants at a time through `process`, its state carried from part to
    part, then `flush` (what `run` does in one call), so a worker holds one part of it
    at a time. `names`: the columns' names (`pandas_ready`).
    """

    CHUNK_ROWS = 500_000

    def __init__(
        self, program: Program, layout: Layout, tied: Accumulator | ObservedTies | None = None,
        names: list[str] | None = None,
    ):  # fmt: skip
        self.program = program
        self.layout = layout
        self.tied = tied if isinstance(tied, Accumulator) else None
        # Connect: the ties counted here, handed to Spark as a row of their own (ObservedTies)
        self.tie_rows = isinstance(tied, ObservedTies)
        self.ties = 0
        self.names = names
        # The rows are cut between units the program's answer does not join: time ranges
        # and partitions (not segments: a count over every key's matches joins its
        # keys), when the processing order keeps each unit's rows together.
        together = program.segment_cols[: len(program.partition_cols)] == program.partition_cols
        cut = [*([RANGE] if layout.ranged else []), *program.partition_cols]
        self.unit_cols = cut if together else []
        # A unit is one segment (in time order): it may run in parts.
        self.in_parts = together and set(program.segment_cols) <= set(cut)
        self._like: pd.DataFrame | None = None  # the columns of a large segment's parts
        self.chunk_rows = self.CHUNK_ROWS  # taken here: the workers get it with the mapper

    def __call__(self, batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        pending: list[pd.DataFrame] = []
        rows = 0
        state = None  # the state of a large segment run in parts (None: none open)
        for batch in batches:
            if not len(batch):
                continue
            if self.names is not None:
                batch = named(batch, self.names)
            pending.append(batch)
            rows += len(batch)
            if rows >= self.chunk_rows and (self.unit_cols or self.in_parts):
                frame = pd.concat(pending, ignore_index=True)
                cut = self._last_segment_start(frame)
                if cut > 0:  # whole segments before the cut (an open one first)
                    start = 0
                    if state is not None:  # the open segment's last part
                        start = self._segment_end(frame, 0)
                        yield from self._part(state, frame.iloc[:start], last=True)
                        state = None
                    if start < cut:
                        yield from self._run(frame.iloc[start:cut].reset_index(drop=True))
                    frame = frame.iloc[cut:].reset_index(drop=True)
                elif self.in_parts:  # one segment fills the chunk: whole instants, a part
                    cut = self._last_instant_start(frame)
                    if cut > 0:
                        state = self.program.new_state() if state is None else state
                        yield from self._part(state, frame.iloc[:cut].reset_index(drop=True))
                        frame = frame.iloc[cut:].reset_index(drop=True)
                pending, rows = [frame], len(frame)
        frame = pd.concat(pending, ignore_index=True) if pending else None
        if state is not None:
            start = self._segment_end(frame, 0) if frame is not None else 0
            yield from self._part(state, None if frame is None else frame.iloc[:start], last=True)
            frame = None if frame is None else frame.iloc[start:].reset_index(drop=True)
        if frame is not None and len(frame):
            yield from self._run(frame)
        yield from self._tie_row()

    def _same_segment(self, frame: pd.DataFrame, at: int) -> np.ndarray:
        row = frame.iloc[at]
        same = pd.Series(True, index=frame.index)
        for c in self.unit_cols:
            same &= frame[c] == row[c]
        return same.to_numpy()

    def _last_segment_start(self, frame: pd.DataFrame) -> int:
        differing = (~self._same_segment(frame, len(frame) - 1)).nonzero()[0]
        return int(differing[-1]) + 1 if len(differing) else 0

    def _segment_end(self, frame: pd.DataFrame, at: int) -> int:
        """Where the segment of row `at` ends (the frame in processing order)."""
        differing = (~self._same_segment(frame, at)[at:]).nonzero()[0]
        return at + int(differing[0]) if len(differing) else len(frame)

    @staticmethod
    def _last_instant_start(frame: pd.DataFrame) -> int:
        """Where the frame's last instant starts (the frame holds one segment, in time
        order): a part must hold whole instants."""
        ticks = frame[TICKS].to_numpy()
        return int(np.searchsorted(ticks, ticks[-1], side="left"))

    def _owned(self, frame: pd.DataFrame) -> np.ndarray | None:
        if not self.layout.ranged:
            return None
        ticks = frame[TICKS].to_numpy()
        return owned(self.layout, ticks, frame[RANGE].to_numpy(dtype=np.int64))

    def _run(self, frame: pd.DataFrame) -> Iterator[pd.DataFrame]:
        mine = self._owned(frame)
        out = self.program.run(frame, owned=mine)
        self._count_ties(frame, mine)
        if len(out):
            yield self._with_ties(out)

    def _count_ties(self, frame: pd.DataFrame, mine) -> None:
        if self.tied is not None:
            self.tied.add(self.program.tied_events(frame, owned=mine))
        elif self.tie_rows:
            self.ties += self.program.tied_events(frame, owned=mine)

    def _with_ties(self, out: pd.DataFrame, ties: int | None = None) -> pd.DataFrame:
        """`out` with the column TIED when the ties go to Spark as a row (null: a match)."""
        if self.tie_rows:
            out = out.assign(**{TIED: pd.array([ties] * len(out), dtype="Int64")})
        return out

    def _tie_row(self) -> Iterator[pd.DataFrame]:
        if self.tie_rows and self.ties:
            columns = [c.name for c in self.program.output]
            yield self._with_ties(pd.DataFrame({c: [None] for c in columns}), self.ties)

    def _part(self, state, frame: pd.DataFrame | None, last: bool = False):
        """A part of a large segment through `process` (and, for the `last`, `flush`),
        its rows with every output column (as `run` gives them)."""
        outs = []
        if frame is not None and len(frame):
            self._like = frame.iloc[:0]
            mine = self._owned(frame)
            outs.append(self.program.process(state, frame, owned=mine))
            self._count_ties(frame, mine)
        if last:
            outs.append(self.program.flush(state))
        out = self.program.concat(outs, self._like)
        if len(out):
            yield self._with_ties(out)


@takes_options()
def run(
    df: DataFrame,
    queries,
    *,
    options: Options | None = None,
    partitions: int | None = None,
    split_cols: list[Column] | None = None,
    infer_types: bool = False,
) -> SparkRun:
    """Run pattern or AGG queries on a Spark DataFrame; returns the rows and the
    rejected rows (lazy). The options are those of `sparkcep.Options`; `split_cols` and
    `infer_types` come with a file source (`spark_files.read_spark(...).options()`)."""
    return execute(
        df, queries, options, partitions=partitions, split_cols=split_cols,
        infer_types=infer_types,
    )  # fmt: skip


@takes_options()
def match(
    df: DataFrame, queries, *, options: Options | None = None, partitions: int | None = None
) -> DataFrame:
    """The matches of `query` in the Spark DataFrame `df`, as a Spark DataFrame.

    Without `id_col`, ids are 0-based row numbers in the DataFrame's order. Rejected rows
    are counted in a warning; `sparkcep.runners.spark.run` returns them.
    """
    return _warn_rejected(execute(df, queries, options, partitions=partitions))


@takes_options()
def aggregate(
    df: DataFrame, queries, *, options: Options | None = None, partitions: int | None = None
) -> DataFrame:
    """Rows of AGG queries (one text, a list, or a file's named queries) over `df`, one
    per trigger event (docs/aggregation.md); with several queries a `query` column."""
    return _warn_rejected(execute(df, queries, options, partitions=partitions))


run_aggregate = run  # AGG queries run through the same path


def _warn_rejected(result: SparkRun) -> DataFrame:
    if result.checked.rejected_count:
        warnings.warn(
            f"{result.checked.rejected_count} of {result.checked.events_read} rows were "
            "rejected (time or type missing or unreadable); "
            "sparkcep.runners.spark.run(...).rejected has them",
            stacklevel=3,
        )
    return result.rows
