"""A class-data-sharing archive of the JVM classes a sparkcep run loads.

A cold Spark driver spends most of its first seconds loading and verifying classes from
Spark's 280 jars. Java's AppCDS can record them once in an archive that later JVMs map
directly. `sparkcep warmup` (run by `make` after installing) records the archive by
running a small representative job; `spark_session` uses it when it exists and matches
this Java and this PySpark (otherwise the JVM ignores it silently). Set SPARKCEP_CDS=0
to run without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def archive_path() -> Path:
    """Where the archive of this Python environment, Java and PySpark lives."""
    import pyspark

    java = shutil.which("java") or ""
    real = os.path.realpath(java) if java else ""
    stamp = f"{real}:{os.path.getmtime(real) if real else 0}:{pyspark.__version__}:{sys.prefix}"
    digest = hashlib.sha1(stamp.encode()).hexdigest()[:12]
    return Path(sys.prefix) / "share" / "sparkcep" / f"spark-{digest}.jsa"


def archive_options() -> list[str]:
    if os.environ.get("SPARKCEP_CDS", "1") == "0":
        return []
    path = archive_path()
    if not path.exists():
        return []
    return [f"-XX:SharedArchiveFile={path}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def record(verbose: bool = True) -> Path:
    """Run a representative job in a fresh JVM that writes the archive when it exits."""
    target = archive_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob("*.tmp*"):
        stale.unlink(missing_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    env = dict(os.environ, SPARKCEP_CDS="0")
    subprocess.run(
        [sys.executable, "-m", "sparkcep.runners.warmup", str(tmp)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL if not verbose else None,
    )
    if not tmp.exists():
        raise RuntimeError("the JVM wrote no class archive")
    os.replace(tmp, target)
    return target


def _representative_job(archive: str) -> None:
    import pandas as pd

    from sparkcep.plan import Options
    from sparkcep.runners.spark import execute
    from sparkcep.runners.spark_files import read_spark, write_spark
    from sparkcep.runners.spark_session import spark_session

    spark = spark_session(
        "local[2]", **{"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive}"}
    )
    with tempfile.TemporaryDirectory() as tmp:
        events = pd.DataFrame(
            {
                "type": list("ABCABCABCX") * 20,
                "ts": range(200),
                "k": [i % 3 for i in range(200)],
                "v": [float(i % 7) for i in range(200)],
            }
        )
        events.to_csv(f"{tmp}/events.csv", index=False)
        events.to_parquet(f"{tmp}/events.parquet", index=False)
        events.to_json(f"{tmp}/events.jsonl", orient="records", lines=True)
        jobs = [
            ("events.csv", "PATTERN SEQ(A a, B b, C c) WHERE [k] AND a.v < c.v WITHIN 10"),
            ("events.parquet", "PATTERN SEQ(A a, !X x, B+ b[]) WHERE prev(b.v) <= b.v WITHIN 6"),
            ("events.jsonl", "PATTERN SEQ(A a, B b) STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 5"),
        ]
        for (name, query), out in zip(jobs, ("m.jsonl", "m.csv", "m.parquet")):
            source = read_spark(spark, f"{tmp}/{name}")
            result = execute(source.df, query, Options(), **source.options())
            write_spark(result.unordered, f"{tmp}/{out}", order=result.order)
            write_spark(result.rejected, f"{tmp}/r.jsonl")
    # The archive is written when the JVM exits: close its stdin (the gateway then
    # exits normally) and wait for it.
    jvm = spark.sparkContext._gateway.proc
    spark.stop()
    jvm.stdin.close()
    jvm.wait(timeout=300)


if __name__ == "__main__":
    _representative_job(sys.argv[1])
