"""The public functions `sparkcep` gives (`sparkcep.match`, `sparkcep.stream`, ...), imported
by the package when first asked for (`sparkcep/__init__`)."""

from __future__ import annotations

import pandas as pd

from sparkcep.errors import DataError, QueryError, SparkcepError  # noqa: F401
from sparkcep.language.parser import parse, parse_file  # noqa: F401
from sparkcep.plan import Options, Plan, analyze  # noqa: F401
from sparkcep.plan.model import MATCH_RECOGNIZE_OPTIONS, STREAM_OPTIONS, takes_options
from sparkcep.runners.local import RunResult, aggregate_local, match_local, run_local  # noqa: F401


@takes_options()
def match(df, queries, *, options: Options | None = None, partitions: int | None = None):
    """Run queries on a Spark DataFrame; returns a Spark DataFrame of their rows.

    Without `id_col`, ids are 0-based row numbers in the DataFrame's order; rejected
    rows are counted in a warning (`sparkcep.runners.spark.run` returns them).
    """
    from sparkcep.runners.spark.batch import match as spark_match

    return spark_match(df, queries, options=options, partitions=partitions)


@takes_options()
def aggregate(df, queries, *, options: Options | None = None, partitions: int | None = None):
    """Run AGG queries (a text, a list, or a file's named queries) on a Spark DataFrame;
    returns a Spark DataFrame with one row per trigger event (docs/aggregation.md)."""
    from sparkcep.runners.spark.batch import aggregate as spark_aggregate

    return spark_aggregate(df, queries, options=options, partitions=partitions)


@takes_options(*STREAM_OPTIONS, required=("id_col",))
def stream(streaming_df, queries, *, options: Options | None = None, lateness: str = "0"):
    """Run queries on a streaming DataFrame (docs/streaming.md). Returns a `Stream`:
    `.matches` (the columns a batch run returns), `.late` and `.rejected` (the input's
    columns and a `reason`) are typed streaming DataFrames (but the rejected rows of a
    folder of CSV files, which hold the cells as read);
    `sparkcep.runners.streaming.start` writes all three to files, exactly once."""
    from sparkcep.runners.streaming.pipeline import stream as spark_stream

    return spark_stream(streaming_df, queries, options=options, lateness=lateness)


@takes_options(*STREAM_OPTIONS, required=("id_col",))
def stream_rules(  # noqa: PLR0913 (the folders and settings of `sparkcep stream --rules`)
    spark, rules: str, input: str, output: str, checkpoint: str, *,
    options: Options | None = None, lateness: str = "0", trigger: str = "available-now",
    timeout: float | None = None, max_files: int | None = None,
):  # fmt: skip
    """Run the queries of the folder `rules` (one `.cep` file each) over the folder of
    event files `input`, each as a stream of its own, and keep them in step with the
    folder while they run: a rule added starts at the files that arrive after it, a
    removed one stops, a changed one is both (docs/streaming.md). Each rule's rows go to
    `output/NAME/HASH`. Returns when the streams end (available-now), after `timeout`
    seconds; `.history` says what was added and removed, and when, `.writers()` each
    rule's counts. `max_files`: files per micro-batch."""
    from sparkcep.runners.streaming.rules import rule_streams, run_rules

    streams = rule_streams(
        spark, rules, input, output, checkpoint, options=options, lateness=lateness,
        trigger=trigger, max_files=max_files,
    )  # fmt: skip
    return run_rules(streams, timeout=timeout)


@takes_options()
def explain(queries, data=None, *, options: Options | None = None) -> str:
    """The plan of queries in words: engine, key, pushed-down filter, conditions.

    `data` (optional) is what the query will run on — a Spark DataFrame, its schema
    (`StructType`), a pandas DataFrame, or a dict of column kinds — so that names and
    types are checked against its columns.
    """
    from sparkcep.explanation import explain_queries
    from sparkcep.plan.match_recognize import query_options

    return explain_queries(queries, _schema(data), query_options(queries, options))


@takes_options()
def why(  # noqa: PLR0913 (the options of `sparkcep why`)
    data, query: str, *, options: Options | None = None, key=None, start=None, end=None,
    near: int = 5, plot: str | None = None, match=None,
):  # fmt: skip
    """Why a pattern query did not match (docs/why.md): a pandas DataFrame of the `near`
    partial matches that got furthest, with the events each bound and why the next
    component was not bound. `data` is a pandas DataFrame, or a Spark DataFrame (classic
    or Spark Connect) whose events of `key` (and the time range, when given) are
    brought to this process: at most WHY_MAX_ROWS of them. `plot`: a picture of the
    key's events and near misses written to that file (.png, .svg; needs matplotlib).
    `match`: an event id; instead, why each match that starts with that event bound the
    events it did (the strategy's choice among those that fitted, and the window)."""
    from sparkcep.why_not import near_misses

    if not isinstance(data, pd.DataFrame) and hasattr(data, "sparkSession"):
        data, options = _spark_slice(data, query, options, key)
    return near_misses(
        data, query, options, key=key, start=start, end=end, near=near, plot=plot, match=match
    )


WHY_MAX_ROWS = 1_000_000


WHY_ROW = "__why_row"  # a Spark DataFrame's row numbers, taken before a key's rows are


def _spark_slice(df, query: str, options: Options, key):
    """The events of a Spark DataFrame that `why` looks at, as pandas, and the options
    to read them with: the key's rows only, when a key is given (filtered in Spark),
    named without an id column by their row numbers in the whole DataFrame, as `match`
    names them."""
    from dataclasses import replace

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from sparkcep.plan.analyzer import plan_queries

    if options.id_col is None and key is not None:
        order = Window.orderBy(F.monotonically_increasing_id())
        df = df.withColumn(WHY_ROW, F.row_number().over(order) - 1)
        options = replace(options, id_col=WHY_ROW)
    if key is not None:
        from sparkcep.plan.match_recognize import query_options

        schema = _schema(df)
        plans, _ = plan_queries(query, schema, query_options(query, options))
        wanted = key if isinstance(key, tuple) else (key,)
        for col, value in zip(plans[0].key, wanted, strict=False):
            df = df.filter(F.col(f"`{col}`").cast("string") == str(value))
    rows = df.limit(WHY_MAX_ROWS + 1).toPandas()
    if len(rows) > WHY_MAX_ROWS:
        raise SparkcepError(f"why looks at more than {WHY_MAX_ROWS:,} events: give a key (key=...)")
    return rows, options


@takes_options()
def funnel_local(events, query: str, *, options: Options | None = None):
    """A FUNNEL query over a pandas DataFrame: (per key, its furthest step; per step, the
    number of keys that reached it)."""
    from sparkcep.funnels import funnel_tables

    run = run_local(events, query, options=options)
    return funnel_tables(run.matches, run.programs[0])


@takes_options()
def funnel(df, query: str, *, options: Options | None = None, partitions: int | None = None):
    """A FUNNEL query over a Spark DataFrame: (per key, its furthest step; per step, the
    number of keys that reached it), as Spark DataFrames."""
    from sparkcep.funnels import funnel_tables_spark
    from sparkcep.runners.spark.batch import run

    result = run(df, query, options=options, partitions=partitions)
    return funnel_tables_spark(result.unordered, result.programs[0])


@takes_options(*MATCH_RECOGNIZE_OPTIONS)
def match_recognize(
    df, query: str, *, options: Options | None = None, partitions: int | None = None
):
    """Run a `SELECT ... MATCH_RECOGNIZE (...)` query on a Spark DataFrame; returns a
    Spark DataFrame with the columns the standard gives its ROWS PER MATCH mode
    (docs/match_recognize.md). ORDER BY names the time column (integers or timestamps,
    `time_unit` for integers when WITHIN has a unit) and an optional tie-break."""
    from sparkcep.plan.match_recognize import query_options
    from sparkcep.runners.spark.batch import execute

    options = query_options(query, options)
    result = execute(df, query, options, partitions=partitions)
    if result.checked.rejected_count:
        import warnings

        warnings.warn(
            f"{result.checked.rejected_count} of {result.checked.events_read} rows were "
            "rejected (a time or PARTITION BY value missing or unreadable); "
            "sparkcep.runners.spark.execute(...).rejected has them",
            stacklevel=2,
        )
    return result.rows


@takes_options(*MATCH_RECOGNIZE_OPTIONS)
def match_recognize_local(events, query: str, *, options: Options | None = None):
    """`match_recognize` over a pandas DataFrame (or an iterable of dicts), in this process.

    >>> rows = [{"t": i, "price": p} for i, p in enumerate([5, 4, 3, 4, 6])]
    >>> match_recognize_local(rows, "SELECT * FROM trades MATCH_RECOGNIZE (ORDER BY t "
    ...   "MEASURES FIRST(A.price) AS top, LAST(B.price) AS bottom, LAST(C.price) AS back "
    ...   "PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price))")
       top  bottom  back
    0    5       3     6
    """
    from sparkcep.plan.match_recognize import query_options
    from sparkcep.runners.local import _warn_rejected, execute_local

    options = query_options(query, options)
    return _warn_rejected(execute_local(events, query, options), "run_local")


def _schema(data):
    """Column kinds of whatever describes the input."""
    if data is None or isinstance(data, dict):
        return data
    import pandas as pd

    if isinstance(data, pd.DataFrame):
        from sparkcep.inputs import schema_of

        return schema_of(data)
    from pyspark.sql.types import StructType

    from sparkcep.runners.spark.rows import kind_of_spark

    # (a Spark Connect DataFrame gives a Column for any attribute it does not have)
    schema = data if isinstance(data, StructType) else getattr(data, "schema", None)
    if not isinstance(schema, StructType):
        raise TypeError(
            "explain(query, data): data is a Spark DataFrame, a StructType, a pandas "
            "DataFrame or a dict of column kinds"
        )
    return {f.name: kind_of_spark(f.dataType) for f in schema.fields}
