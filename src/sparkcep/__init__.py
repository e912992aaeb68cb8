"""sparkcep: complex event processing for Python, with its data pipeline on Apache Spark.

>>> import sparkcep
>>> events = [{"type": "A", "ts": 1}, {"type": "B", "ts": 2}]
>>> sparkcep.match_local(events, "PATTERN SEQ(A a, B b) WITHIN 10")[["a", "b"]].values.tolist()
[[0, 1]]

`sparkcep.match(spark_df, query)` runs the same query through Spark,
`sparkcep.aggregate(spark_df, [q1, q2])` runs AGG queries (A-Seq) and
`sparkcep.stream(streaming_df, query, id_col=...)` runs queries on a live stream, and
`sparkcep.match_recognize(spark_df, "SELECT * FROM t MATCH_RECOGNIZE (...)")` runs SQL's row
pattern recognition (docs/match_recognize.md).
"""

from __future__ import annotations

# first: `sparkcep run` through Spark starts its JVM there, before anything heavy is imported
from sparkcep import _early  # noqa: F401

__version__ = "0.1.0"

__all__ = [
    "DataError",
    "Options",
    "Plan",
    "QueryError",
    "RunResult",
    "SparkcepError",
    "aggregate",
    "aggregate_local",
    "analyze",
    "explain",
    "funnel",
    "funnel_local",
    "match",
    "match_local",
    "match_recognize",
    "match_recognize_local",
    "parse",
    "parse_file",
    "run_local",
    "stream",
    "stream_rules",
    "why",
]


def __getattr__(name: str):
    """The public names are imported when first asked for (PEP 562): a process that only
    needs one module of sparkcep (a Spark worker reading a stream's files) does not pay
    for pandas, the parser and the planner."""
    if name not in __all__:
        return _submodule(name)
    from sparkcep import api

    value = getattr(api, name)
    globals()[name] = value
    return value


def _submodule(name: str):
    """`sparkcep.runners` and the like, as before the package imported lazily."""
    import importlib

    missing = AttributeError(f"module 'sparkcep' has no attribute '{name}'")
    if name.startswith("__"):
        raise missing
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
        raise missing from None


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
