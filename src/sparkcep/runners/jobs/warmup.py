"""`sparkcep warmup`: record the JVM class archive (`runners.spark.cds`) at once, with a
small representative job in a fresh JVM that writes the archive when it exits. The
first Spark run without an archive runs the same job in the background."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sparkcep.runners.spark.cds import archive_path


def record(verbose: bool = True) -> Path:
    """Run a representative job in a fresh JVM that writes the archive when it exits."""
    target = archive_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob("*.tmp*"):
        stale.unlink(missing_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    env = dict(os.environ, SPARKCEP_CDS="0")
    subprocess.run(
        [sys.executable, "-m", "sparkcep.runners.jobs.warmup", str(tmp)],
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

    from sparkcep.files import InputSource
    from sparkcep.plan import Options
    from sparkcep.runners.spark.files import write_spark
    from sparkcep.runners.spark.run_file import run_file
    from sparkcep.runners.spark.session import spark_session

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
            # Spark's checking pass: the classes of a large input's run (a file this
            # small is otherwise checked in the driver)
            source = InputSource.of(f"{tmp}/{name}")
            result = run_file(spark, source, query, Options(), driver_check=False, one_pass=True)
            write_spark(
                result.unordered, f"{tmp}/{out}", order=result.order, before_move=result.settle
            )  # fmt: skip
            write_spark(result.rejected, f"{tmp}/r.jsonl")
            result.checked.release()
    # The archive is written when the JVM exits: close its stdin (the gateway then
    # exits normally) and wait for it.
    jvm = spark.sparkContext._gateway.proc
    spark.stop()
    jvm.stdin.close()
    jvm.wait(timeout=300)


if __name__ == "__main__":
    if "--nice" in sys.argv:  # a recorder in the background (cds.py): behind the run
        os.nice(10)
    _representative_job(sys.argv[1])
