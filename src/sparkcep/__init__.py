"""sparkcep: complex event processing for Python, with its data pipeline on Apache Spark.

>>> import sparkcep
>>> events = [{"type": "A", "ts": 1}, {"type": "B", "ts": 2}]
>>> sparkcep.match_local(events, "PATTERN SEQ(A a, B b) WITHIN 10")[["a", "b"]].values.tolist()
[[0, 1]]

`sparkcep.match(spark_df, query)` runs the same query through Spark.
"""

from __future__ import annotations

from sparkcep.errors import DataError, QueryError, SparkcepError
from sparkcep.language.parser import parse, parse_file
from sparkcep.plan import Options, Plan, analyze
from sparkcep.runners.local import match_local, run_local

__version__ = "0.1.0"

__all__ = [
    "DataError",
    "Options",
    "Plan",
    "QueryError",
    "SparkcepError",
    "analyze",
    "explain",
    "match",
    "match_local",
    "parse",
    "parse_file",
    "run_local",
]


def match(df, query: str, **options):
    """Run `query` on a Spark DataFrame; returns a Spark DataFrame of matches.

    See `sparkcep.runners.spark.match` for the options.
    """
    from sparkcep.runners.spark import match as spark_match

    return spark_match(df, query, **options)


def explain(query: str, schema=None, **options) -> str:
    """The plan of `query` in words: engine, key, pushed-down filter, conditions."""
    from sparkcep.explain import explain_plan

    return explain_plan(analyze(query, schema, Options(**options)))
