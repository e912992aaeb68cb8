"""A class-data-sharing archive of the JVM classes a sparkcep run loads.

A cold Spark driver spends most of its first seconds loading and verifying classes from
Spark's 280 jars. Java's AppCDS can record them in an archive that later JVMs map
directly (the demo: 26 -> 21 CPU seconds). The first Spark run records it on its own:
its JVM writes the archive when it exits (after the run's answer is out), and the next
run that finds that JVM gone puts the archive in place and uses it. `sparkcep warmup`
records it at once with a small representative job. The archive matches this Java, this
PySpark and this Python environment (otherwise the JVM ignores it silently); it lives
under `sys.prefix`/share/sparkcep, or SPARKCEP_CDS_DIR. SPARKCEP_CDS=0 runs without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def archive_path() -> Path:
    """Where the archive of this Python environment, Java and PySpark lives."""
    import pyspark

    java = shutil.which("java") or ""
    real = os.path.realpath(java) if java else ""
    stamp = f"{real}:{os.path.getmtime(real) if real else 0}:{pyspark.__version__}:{sys.prefix}"
    digest = hashlib.sha1(stamp.encode()).hexdigest()[:12]
    folder = os.environ.get("SPARKCEP_CDS_DIR") or Path(sys.prefix) / "share" / "sparkcep"
    return Path(folder) / f"spark-{digest}.jsa"


QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]  # a JVM that outlives us prints nothing
STALE_SECONDS = 600  # a recording whose JVM never started (its lock names no process)


def archive_options() -> list[str]:
    """Java options for a new driver JVM: use the archive, or record it as this JVM
    exits when no archive is there and no other JVM is recording it."""
    if os.environ.get("SPARKCEP_CDS", "1") == "0":
        return []
    path = archive_path()
    try:
        if not path.exists():
            _adopt_recording(path)
        if path.exists():
            return [f"-XX:SharedArchiveFile={path}", *QUIET]
        recording = _start_recording(path)
    except OSError:  # a folder we cannot write: run without the archive
        return []
    return [f"-XX:ArchiveClassesAtExit={recording}", *QUIET] if recording else []


def _lock(path: Path) -> Path:
    return path.with_suffix(".recording")


def _adopt_recording(path: Path) -> None:
    """A recording whose JVM has exited becomes the archive (an empty or missing file:
    the JVM was killed; the lock is dropped and a later run records again)."""
    lock = _lock(path)
    try:
        text = lock.read_text().split()
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return
    if len(text) < 2:
        if age > STALE_SECONDS:
            lock.unlink(missing_ok=True)
        return
    pid, recording = int(text[0]), Path(text[1])
    if _alive(pid):
        return
    if recording.exists() and recording.stat().st_size > 0:
        os.replace(recording, path)
    else:
        recording.unlink(missing_ok=True)
    lock.unlink(missing_ok=True)


def _start_recording(path: Path) -> Path | None:
    """Take the lock (one recording at a time); where this JVM is to write the archive."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(_lock(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return None
    os.close(fd)
    return path.with_suffix(f".tmp{os.getpid()}")


def recording_started(jvm_pid: int, options: list[str]) -> None:
    """Name the JVM that records the archive (`options` are those it started with) in
    the lock: the archive is complete once that process has exited."""
    for option in options:
        if option.startswith("-XX:ArchiveClassesAtExit="):
            recording = option.split("=", 1)[1]
            _lock(archive_path()).write_text(f"{jvm_pid} {recording}\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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

    from sparkcep.files import InputSource
    from sparkcep.plan import Options
    from sparkcep.runners.spark_file import run_file
    from sparkcep.runners.spark_files import write_spark
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
            # Spark's checking pass: the classes of a large input's run (a file this
            # small is otherwise checked in the driver)
            source = InputSource.of(f"{tmp}/{name}")
            result = run_file(spark, source, query, Options(), driver_check=False)
            write_spark(result.unordered, f"{tmp}/{out}", order=result.order)
            write_spark(result.rejected, f"{tmp}/r.jsonl")
            result.checked.release()
    # The archive is written when the JVM exits: close its stdin (the gateway then
    # exits normally) and wait for it.
    jvm = spark.sparkContext._gateway.proc
    spark.stop()
    jvm.stdin.close()
    jvm.wait(timeout=300)


if __name__ == "__main__":
    _representative_job(sys.argv[1])
