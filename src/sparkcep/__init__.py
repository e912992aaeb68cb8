"""sparkcep: complex event processing for Python, with its data pipeline on Apache Spark.

>>> import sparkcep
>>> events = [{"type": "A", "ts": 1}, {"type": "B", "ts": 2}]
>>> sparkcep.match_local(events, "PATTERN SEQ(A a, B b) WITHIN 10")[["a", "b"]].values.tolist()
[[0, 1]]

`sparkcep.match(spark_df, query)` runs the same query through Spark,
`sparkcep.aggregate(spark_df, [q1, q2])` runs AGG queries (A-Seq) and
`sparkcep.stream(streaming_df, query, id_col=...)` runs a query on a live stream.
"""

from __future__ import annotations

from sparkcep.errors import DataError, QueryError, SparkcepError
from sparkcep.language.parser import parse, parse_file
from sparkcep.plan import Options, Plan, analyze
from sparkcep.runners.local import aggregate_local, match_local, run_local

__version__ = "0.1.0"

__all__ = [
    "DataError",
    "Options",
    "Plan",
    "QueryError",
    "SparkcepError",
    "aggregate",
    "aggregate_local",
    "analyze",
    "explain",
    "match",
    "match_local",
    "parse",
    "parse_file",
    "run_local",
    "stream",
]


def match(df, query: str, **options):
    """Run `query` on a Spark DataFrame; returns a Spark DataFrame of matches.

    See `sparkcep.runners.spark.match` for the options.
    """
    from sparkcep.runners.spark import match as spark_match

    return spark_match(df, query, **options)


def aggregate(df, queries, **options):
    """Run AGG queries (a text, a list, or a file's named queries) on a Spark DataFrame;
    returns a Spark DataFrame with one row per trigger event (docs/aggregation.md).

    See `sparkcep.runners.spark.aggregate` for the options.
    """
    from sparkcep.runners.spark import aggregate as spark_aggregate

    return spark_aggregate(df, queries, **options)


def stream(streaming_df, query: str, **options):
    """Run `query` on a streaming DataFrame; returns a streaming DataFrame of
    (kind, payload) rows (docs/streaming.md). `sparkcep.runners.streaming.start` writes
    them to files exactly once.
    """
    from sparkcep.runners.streaming import stream as spark_stream

    return spark_stream(streaming_df, query, **options)


def explain(query: str, schema=None, **options) -> str:
    """The plan of `query` in words: engine, key, pushed-down filter, conditions."""
    from sparkcep.explain import explain_plan

    return explain_plan(analyze(query, schema, Options(**options)))
