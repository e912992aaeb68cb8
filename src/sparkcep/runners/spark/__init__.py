"""Spark batch: `batch` (run, match, aggregate, execute), the session and its daemon,
reading files (`files`, `rows`, `one_read`), the checks before a job (`driver_check`,
`query_first`), Spark expressions (`expr`) and the JVM archive (`cds`).

`sparkcep.runners.spark.run` (and the rest of `batch`) is imported when first asked for:
a worker importing `daemon` or `rows` needs none of it.
"""

from importlib import import_module


def __getattr__(name: str):
    batch = import_module("sparkcep.runners.spark.batch")
    try:
        return getattr(batch, name)
    except AttributeError:
        raise AttributeError(f"module 'sparkcep.runners.spark' has no attribute '{name}'") from None
