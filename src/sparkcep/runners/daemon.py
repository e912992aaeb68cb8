"""The Python worker daemon for local masters: pyspark's own daemon, started faster.

Spark starts Python workers with its pyspark.zip first on the path, and Python compiles
every module of a zip from source at each start (zips carry no byte code). In local
mode the driver's environment is the workers', so the installed pyspark (same version,
compiled) can be imported instead. Set by `spark_session` for local masters only.
"""

import sys

_zips = [p for p in sys.path if p.endswith(".zip") and ("pyspark" in p or "py4j" in p)]
sys.path[:] = [p for p in sys.path if p not in _zips] + _zips

from pyspark import daemon  # noqa: E402

if __name__ == "__main__":
    daemon.manager()
