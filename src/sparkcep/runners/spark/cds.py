"""A class-data-sharing archive of the JVM classes a sparkcep run loads.

A cold Spark driver spends most of its first seconds loading and verifying classes from
Spark's 280 jars. Java's AppCDS can record them in an archive that later JVMs map
directly (the demo: 26 -> 21 CPU seconds). The first Spark run records it on its own:
its JVM writes the archive when it exits (after the run's answer is out), and the next
run that finds that JVM gone puts the archive in place and uses it. `sparkcep warmup`
(`runners.jobs.warmup`) records it at once with a small representative job. The archive
matches this Java, this PySpark and this Python environment (otherwise the JVM ignores it
silently); it lives under `sys.prefix`/share/sparkcep, or SPARKCEP_CDS_DIR. SPARKCEP_CDS=0 runs without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path


def archive_path() -> Path:
    """Where the archive of this Python environment, Java and PySpark lives."""
    import pyspark

    java = shutil.which("java") or ""
    real = os.path.realpath(java) if java else ""
    stamp = f"{real}:{os.path.getmtime(real) if real else 0}:{pyspark.__version__}:{sys.prefix}"
    digest = hashlib.sha1(stamp.encode()).hexdigest()[:12]
    return archive_folder() / f"spark-{digest}.jsa"


def archive_folder() -> Path:
    """Where sparkcep keeps what makes Spark start faster (this archive, `compiled_home`)."""
    return Path(os.environ.get("SPARKCEP_CDS_DIR") or Path(sys.prefix) / "share" / "sparkcep")


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
    if process_alive(pid):
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


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
