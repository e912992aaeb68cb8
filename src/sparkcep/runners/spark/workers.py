"""Check, before sparkcep's first Spark job on a session, that Spark's Python workers can
import sparkcep.

Spark runs a Python function in the interpreter the session names: PYSPARK_PYTHON as
the driver's environment had it when the session started, else `python3` on PATH (a
classic session; a Spark Connect server uses its own setting). sparkcep's own sessions
set it to the Python running sparkcep (`session.spark_session`); a session the user
started without it runs whatever `python3` is first on PATH, and the first sparkcep job
then failed after tens of seconds with pages of Java and Python traces ending in
`No module named 'sparkcep'`. `check_worker_python` runs one tiny job first (a plain
Python UDF over one row: no pandas or pyarrow needed on the worker) and turns a worker
that cannot import sparkcep, or cannot run Python functions at all, into one line.

Only the DataFrame API and `spark.conf`, so that it works on a classic and on a Spark
Connect session alike. Once per session: a runtime setting on the session itself
(CHECKED) says it was done, so later calls cost one setting read.
"""

from __future__ import annotations

import os
import re
import shutil
import sys

from sparkcep.errors import SparkcepError

CHECKED = "sparkcep.workers.checked"

# The probe runs in the worker's Python, which may lack sparkcep: it must travel by value.
# cloudpickle pickles a function of an importable module by reference (the module's name
# and the function's), so the probe is defined from source in a namespace whose module
# name is in no sys.modules: cloudpickle then pickles its code. It imports only `sys`.
_PROBE_SOURCE = """
def probe(_):
    import sys
    try:
        import sparkcep
    except BaseException as error:
        lines = str(error).strip().splitlines() or [""]
        return sys.executable + "\\n" + type(error).__name__ + ": " + lines[-1][:200]
    return sys.executable + "\\n" + "ok " + str(getattr(sparkcep, "__version__", "?"))
"""
_PROBE_MODULE = "sparkcep_worker_probe"  # (not a module: see above)


def _probe():
    namespace = {"__name__": _PROBE_MODULE}
    exec(compile(_PROBE_SOURCE, f"<{_PROBE_MODULE}>", "exec"), namespace)
    return namespace["probe"]


def is_checked(spark) -> bool:
    """Whether this session's workers were checked (or need not be: `mark_checked`)."""
    return spark.conf.get(CHECKED, "false") == "true"


def mark_checked(spark) -> None:
    """Record that this session's workers can import sparkcep: `check_worker_python`
    runs no job on it. For the sessions sparkcep starts, whose workers run its own Python
    (session.spark_session sets PYSPARK_PYTHON)."""
    spark.conf.set(CHECKED, "true")


def check_worker_python(spark) -> None:
    """Raise SparkcepError (one line) unless Spark's Python workers of this session can
    import sparkcep. Runs one one-row Spark job the first time for a session; after
    that, or after `mark_checked`, only reads a setting.

    >>> class Conf(dict):
    ...     def get(self, key, default=None):
    ...         return dict.get(self, key, default)
    ...     def set(self, key, value):
    ...         self[key] = value
    >>> class Session:
    ...     conf = Conf()
    >>> spark = Session()
    >>> mark_checked(spark)
    >>> check_worker_python(spark)  # no job
    """
    if is_checked(spark):
        return
    from pyspark.sql import functions as F

    probe = F.udf(_probe(), "string", useArrow=False)
    try:
        rows = spark.range(1, numPartitions=1).select(probe("id").alias("probe")).collect()
    except Exception as error:
        raise SparkcepError(_failed_message(spark, error)) from None
    executable, _, result = (rows[0]["probe"] or "").partition("\n")
    if not result.startswith("ok"):
        raise SparkcepError(_cannot_import_message(spark, executable, result))
    mark_checked(spark)


def is_connect(spark) -> bool:
    """Whether `spark` is a Spark Connect session (a client of a Spark server: no
    SparkContext, no JVM in this process; its workers are the server's)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def configured_python(spark) -> str:
    """The worker Python this session names, as written. A classic session takes the
    driver's PYSPARK_PYTHON when it starts, else `python3` (spark.pyspark.python is read
    by spark-submit only, which sets PYSPARK_PYTHON from it: set on the builder of a
    running Python, it is not used). A Spark Connect server takes its own PYSPARK_PYTHON,
    then PYSPARK_DRIVER_PYTHON, else `python3`: the driver's, as a local server has them."""
    name = os.environ.get("PYSPARK_PYTHON")
    if not name and is_connect(spark):
        name = os.environ.get("PYSPARK_DRIVER_PYTHON")
    return name or "python3"


def _named(name: str, executable: str | None = None) -> str:
    """`python3 (/usr/bin/python3)`: the name as configured and the file it is; the
    worker's own `executable` alone when the name is not that file here."""
    path = shutil.which(name)
    if executable and not (path and _same_file(path, executable)):
        return executable
    path = executable or path
    if not path or path == name:
        return name
    return f"{name} ({path})"


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _fixes(spark) -> str:
    where = "the Spark Connect server's environment" if is_connect(spark) else "the environment"
    return (
        f"set PYSPARK_PYTHON={sys.executable} in {where} before the session starts "
        "(spark-submit: spark.pyspark.python), or ship this environment to the workers "
        "with spark.archives (docs/spark.md)"
    )


def _cannot_import_message(spark, executable: str, result: str) -> str:
    name = _named(configured_python(spark), executable or None)
    why = f" ({result.strip()})" if result.strip() else ""
    return f"Spark's Python workers run {name}, which cannot import sparkcep{why}: {_fixes(spark)}"


# Why a failed probe job's worker did not run it, in the error that reached the driver:
# what the worker's Python wrote before it died (Spark quotes it), a program that could
# not start, another Python version, else the last exception's line.
_WORKER_SAID = re.compile(r"Error from python worker:\n((?:[ \t]+[^\n]*\n)+)")
_REASONS = (
    re.compile(r'Cannot run program "[^"]*"[^\n]*'),
    re.compile(r"\[PYTHON_VERSION_MISMATCH\][^\n]*"),
)
_EXCEPTION = re.compile(r"^\s*(?:[\w.]+Error|[\w.]+Exception): [^\n]*", re.MULTILINE)


def _reason(error: BaseException) -> str:
    """A short line of a failed probe job's error, without its Java or Python trace."""
    text = str(error).replace("\\n", "\n")
    said = _WORKER_SAID.search(text)
    if said:
        lines = [line.strip() for line in said.group(1).splitlines() if line.strip()]
        if lines:
            return f"it wrote: {lines[-1][:200]}"
    for pattern in _REASONS:
        found = pattern.search(text)
        if found:
            return found.group(0).strip()[:200]
    found = _EXCEPTION.findall(text)
    return found[-1].strip()[:200] if found else ""


def _failed_message(spark, error: BaseException) -> str:
    name = _named(configured_python(spark))
    reason = _reason(error)
    why = f" ({reason})" if reason else ""
    return (
        f"Spark's Python workers could not run a Python function with {name}{why}: {_fixes(spark)}"
    )
