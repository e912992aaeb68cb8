"""A Spark home whose Python archive is compiled, so Spark's Python processes start faster.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` first on the path of every Python process
it starts (the worker daemons, a stream's folder reader, a data source's planner), and
Python never caches what it compiles from a zip: each such process compiled PySpark from
source again, 1.7 of its 2.5 seconds before it did any work (this machine, importing
pyspark.sql and the stream source runner: 2.5 s from Spark's zip, 0.85 s from the
compiled one). A stream starts a reader process of its own, so each stream paid it.

The compiled home is a folder of links to the real Spark home with one difference:
`python/lib` holds the same zips with each module's bytecode beside its source (unchecked
hash-based .pyc, which the zip importer reads as it is). It is built once per Spark home
and Python, in the background after the first Spark session without it
(`python -m sparkcep.runners.spark.compiled_home`), or at once by `sparkcep warmup`;
local-mode sessions sparkcep starts point their JVM at it (a cluster keeps its own home).
A Python of another version, which cannot read the bytecode, imports the sources as
before. It lives beside the JVM class archive (`cds.archive_folder`);
SPARKCEP_COMPILED_HOME=0 runs without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sparkcep.runners.spark.cds import archive_folder, process_alive

TESTS = re.compile(r"[/\\]tests[/\\]")  # PySpark's own tests: never imported by a run


def real_home() -> Path | None:
    """The Spark home PySpark launches from (SPARK_HOME, or the installed package's)."""
    from pyspark.find_spark_home import _find_spark_home

    try:
        home = Path(_find_spark_home())
    except SystemExit:  # PySpark's way to say it found none
        return None
    return home if (home / "python" / "lib" / "pyspark.zip").is_file() else None


def home_path(real: Path) -> Path:
    """Where the compiled home of `real` and of this Python lives."""
    zips = sorted((real / "python" / "lib").glob("*.zip"))
    stamp = ":".join(
        [str(real.resolve()), importlib.util.MAGIC_NUMBER.hex(), sys.implementation.cache_tag]
        + [f"{z.name}:{z.stat().st_size}:{z.stat().st_mtime_ns}" for z in zips]
    )
    digest = hashlib.sha1(stamp.encode()).hexdigest()[:12]
    return archive_folder() / f"spark-home-{digest}"


def compiled_home(*, build_if_missing: bool = True) -> Path | None:
    """The compiled home to start the JVM from, or None (not built yet: then a builder
    starts in the background, for the next session, unless `build_if_missing` is off)."""
    if os.environ.get("SPARKCEP_COMPILED_HOME", "1") == "0":
        return None
    real = real_home()
    if real is None:
        return None
    target = home_path(real)
    if _built(target):
        return target
    if build_if_missing and not _building(target) and _writable(target.parent):
        _build_in_background(real)
    return None


def _writable(folder: Path) -> bool:
    """Whether a builder could write `folder` (or create it): else none is started."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder.is_dir() and os.access(folder, os.W_OK)


def _built(target: Path) -> bool:
    return (target / "python" / "lib" / "pyspark.zip").is_file()


def _lock(target: Path) -> Path:
    return target.with_name(target.name + ".building")


def _building(target: Path) -> bool:
    """A builder is at work (its lock names a live process)."""
    try:
        return process_alive(int(_lock(target).read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        return False


def build(real: Path | None = None) -> Path | None:
    """Build the compiled home of `real` (default: PySpark's) now; returns its path."""
    real = real or real_home()
    if real is None:
        return None
    target = home_path(real)
    if _built(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock(target)
    lock.write_text(f"{os.getpid()}\n")
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    work.chmod(0o755)  # mkdtemp makes it private; the home serves every user of this Python
    try:
        for entry in real.iterdir():
            if entry.name != "python":
                (work / entry.name).symlink_to(entry.resolve())
        lib = work / "python" / "lib"
        lib.mkdir(parents=True)
        for original in sorted((real / "python" / "lib").iterdir()):
            if original.suffix == ".zip":
                _compile_zip(original, lib / original.name, work)
            else:
                (lib / original.name).symlink_to(original.resolve())
        try:
            os.rename(work, target)  # whole or absent; another builder may have won
        except OSError:
            if not _built(target):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
        lock.unlink(missing_ok=True)
    return target


def _compile_zip(original: Path, compiled: Path, work: Path) -> None:
    """`original` again, each module's bytecode beside its source (named as the original
    zip's modules are, so a traceback reads the same)."""
    import compileall
    import py_compile
    import zipfile

    unpacked = work / f"unpacked-{original.stem}"
    with zipfile.ZipFile(original) as zin:
        zin.extractall(unpacked)
        names = [info.filename for info in zin.infolist() if not info.is_dir()]
    compileall.compile_dir(
        unpacked, ddir=str(original), rx=TESTS, quiet=2, legacy=True, workers=1,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )  # fmt: skip
    with zipfile.ZipFile(compiled, "w", zipfile.ZIP_STORED) as zout:
        for name in names:
            zout.write(unpacked / name, name)
            if name.endswith(".py"):
                pyc = unpacked / (name[:-3] + ".pyc")
                if pyc.is_file():
                    zout.write(pyc, name[:-3] + ".pyc")
    shutil.rmtree(unpacked)


def _build_in_background(real: Path) -> None:
    """A builder process of its own, at low priority, that outlives this one."""
    with contextlib.suppress(OSError):  # no process to spare: the run keeps the real home
        subprocess.Popen(
            [sys.executable, "-m", "sparkcep.runners.spark.compiled_home", str(real)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip


if __name__ == "__main__":
    os.nice(10)  # behind the run that started it
    try:
        build(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
    except OSError:
        sys.exit(1)  # a folder we cannot write: sessions keep the real home
