"""The Python worker daemon: pyspark's own daemon, started faster.

Spark starts Python workers with its pyspark.zip first on the path, and Python compiles
every module of a zip from source at each start (zips carry no byte code): about 0.5 s
of CPU for each daemon, one per executor. When the worker's Python has the same pyspark
installed (in local mode the driver's environment is the workers'; on a cluster, the
same venv on every worker, docs/cluster.md), that compiled copy is imported instead.
A different installed version is left behind the zip: the executors' Spark decides.
Set by `spark_session` as `spark.python.daemon.module`.

The daemon also imports what every sparkcep task imports (pandas, pyarrow, PySpark's
worker, the steps Spark runs) once, before it forks the workers, and freezes those
objects out of the garbage collector: PySpark's daemon runs a full `gc.collect()` after
each task of a reused worker, which walked all of pandas and pyarrow again (about 25 ms
a task, four tasks per micro-batch of a stream), and each worker forked after an idle
timeout imported them again (0.7 s of CPU).
"""

import gc
import importlib
import os
import sys
import zipfile

_VERSION = "pyspark/version.py"


def prefer_installed(path: list[str]) -> list[str]:
    """`path` with Spark's pyspark and py4j zips moved behind the installed pyspark when
    that one is the same version (the same `pyspark/version.py`), else unchanged."""
    zips = [p for p in path if p.endswith(".zip") and ("pyspark" in p or "py4j" in p)]
    bundled = next((p for p in zips if os.path.basename(p) == "pyspark.zip"), None)
    candidates = (os.path.join(p or ".", _VERSION) for p in path if p not in zips)
    installed = next((c for c in candidates if os.path.isfile(c)), None)
    if bundled is None or installed is None:
        return path
    try:
        with zipfile.ZipFile(bundled) as z, open(installed, "rb") as f:
            same = z.read(_VERSION) == f.read()
    except (OSError, KeyError, zipfile.BadZipFile):
        return path
    return [p for p in path if p not in zips] + zips if same else path


# What a task of a sparkcep job imports: PySpark's worker and its Arrow serializers, and
# the modules of the functions Spark runs (the batch mapper, the stream's step).
TASK_MODULES = (
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pandas",
    "pyarrow",
    "sparkcep.runners.spark.batch",
    "sparkcep.runners.streaming.pipeline",
)


def preload(modules=TASK_MODULES) -> list[str]:
    """Imports `modules` (those importable: a worker without sparkcep still runs PySpark's
    tasks) and moves every object alive into the collector's permanent generation, so the
    forked workers share them and their collections skip them. Returns the ones missing."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    gc.collect()
    gc.freeze()
    return missing


sys.path[:] = prefer_installed(sys.path)

from pyspark import daemon  # noqa: E402

if __name__ == "__main__":
    preload()
    daemon.manager()
