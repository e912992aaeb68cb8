"""The SparkSession sparkcep runs in: local mode by default, UTC, UI off, quiet logs, the
JVM class archive when it was recorded (`warmup`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from sparkcep.runners.warmup import archive_options


def spark_session(master: str | None = None, *, app_name: str = "sparkcep", **conf) -> SparkSession:
    """A SparkSession set up for sparkcep: local mode by default, UTC, UI off."""
    if master is None or master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master or "local[*]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.adaptive.enabled", "true")
    )
    if master is None or master.startswith("local"):
        builder = builder.config("spark.python.daemon.module", "sparkcep.runners.daemon")
    java_options = [f"-Dlog4j2.configurationFile={_log4j_config()}", *archive_options()]
    extra = conf.pop("spark.driver.extraJavaOptions", None)
    if extra:
        java_options.append(extra)
    builder = builder.config("spark.driver.extraJavaOptions", " ".join(java_options))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _log4j_config() -> str:
    from importlib.resources import files

    return Path(str(files("sparkcep").joinpath("log4j2.properties"))).as_uri()
