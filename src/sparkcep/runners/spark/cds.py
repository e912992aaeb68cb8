"""A class-data-sharing archive of the JVM classes a sparkcep run loads.

A cold Spark driver spends most of its first seconds loading and verifying classes from
Spark's 280 jars. Java's AppCDS can record them in an archive that later JVMs map
directly (the demo: 26 -> 21 CPU seconds). A JVM that records runs slower throughout
(a session with small runs and streams: 1.50x the time without archive, its start 19.8 s
against 8.5 s; benchmarks/results/recording_cost.md), so a run never records itself: the first Spark run that
finds no archive starts a recorder in the background (a process of its own, at low
priority, that runs `sparkcep warmup`'s small representative job in a JVM that writes
the archive as it exits) and goes on without one; the next run that finds the recorder
gone puts the archive in place and uses it. `sparkcep warmup` records it at once. The
archive matches this Java, this PySpark and this Python environment (otherwise the JVM
ignores it silently); it lives under `sys.prefix`/share/sparkcep, or SPARKCEP_CDS_DIR.
SPARKCEP_CDS=0 runs without it (and starts no recorder).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
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
STALE_SECONDS = 600  # a lock whose recorder never started (it names no process)


def archive_options() -> list[str]:
    """Java options for a new driver JVM: use the archive; when there is none and no
    recorder is at work, start one in the background (for the next run)."""
    if os.environ.get("SPARKCEP_CDS", "1") == "0":
        return []
    path = archive_path()
    try:
        if not path.exists():
            _adopt_recording(path)
        if path.exists():
            return [f"-XX:SharedArchiveFile={path}", *QUIET]
        recording = _start_recording(path)
        if recording is not None:
            _record_in_background(path, recording)
    except OSError:  # a folder we cannot write: run without the archive
        pass
    return []


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
    """Take the lock (one recording at a time); where the recorder is to write the archive."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(_lock(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return None
    os.close(fd)
    return path.with_suffix(f".tmp{os.getpid()}")


def _record_in_background(path: Path, recording: Path) -> None:
    """The recorder: a process of its own, at low priority, that outlives this one; the
    lock names it (the recording is complete once it has exited)."""
    env = dict(os.environ, SPARKCEP_CDS="0")  # its JVM records, with no recorder of its own
    try:
        recorder = subprocess.Popen(
            [sys.executable, "-m", "sparkcep.runners.jobs.warmup", str(recording), "--nice"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )  # fmt: skip
    except OSError:  # no process to spare: a later run records
        _lock(path).unlink(missing_ok=True)
        return
    _lock(path).write_text(f"{recorder.pid} {recording}\n")


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs. A child of this process that has exited (a recorder or
    a builder it started) is reaped here: a long-lived process (a notebook) would
    otherwise keep it as a zombie that looks alive to every later run."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:  # not a child of this process
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
