"""Fast start: the JVM class archive is recorded by the first Spark run and
used from the next one on, without a separate command (runners/spark/cds.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkcep.runners.spark import cds

ROOT = Path(__file__).parent.parent
DEMO = ROOT / "examples" / "cpu_overload"


@pytest.fixture
def archive_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cds"
    monkeypatch.setenv("SPARKCEP_CDS_DIR", str(folder))
    monkeypatch.delenv("SPARKCEP_CDS", raising=False)
    return folder


def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_no_archive_means_this_jvm_records_it(archive_dir):
    options = cds.archive_options()
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in options)
    assert "-Xlog:cds=off" in options  # a JVM that outlives the run prints nothing
    # While that recording is under way no other JVM records, and none uses a half file.
    assert cds.archive_options() == []


def test_a_finished_recording_becomes_the_archive(archive_dir):
    target = cds.archive_path()
    target.parent.mkdir(parents=True)
    recording = target.with_suffix(".tmp1")
    recording.write_bytes(b"x" * 100)
    target.with_suffix(".recording").write_text(f"{_dead_pid()} {recording}\n")
    assert cds.archive_options()[0] == f"-XX:SharedArchiveFile={target}"
    assert target.read_bytes() == b"x" * 100
    assert not recording.exists()
    assert not target.with_suffix(".recording").exists()


def test_a_recording_still_running_is_left_alone(archive_dir):
    target = cds.archive_path()
    target.parent.mkdir(parents=True)
    recording = target.with_suffix(".tmp1")
    recording.write_bytes(b"x")
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        target.with_suffix(".recording").write_text(f"{running.pid} {recording}\n")
        assert cds.archive_options() == []
        assert not target.exists()
    finally:
        running.kill()
        running.wait()


def test_a_killed_recording_is_dropped_and_recorded_again(archive_dir):
    target = cds.archive_path()
    target.parent.mkdir(parents=True)
    recording = target.with_suffix(".tmp1")  # the JVM was killed before it wrote it
    target.with_suffix(".recording").write_text(f"{_dead_pid()} {recording}\n")
    options = cds.archive_options()
    assert not target.exists()
    assert any(o.startswith("-XX:ArchiveClassesAtExit=") for o in options)


def test_an_unwritable_folder_runs_without_archive(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SPARKCEP_CDS_DIR", str(blocker / "cds"))  # under a file
    monkeypatch.delenv("SPARKCEP_CDS", raising=False)
    assert cds.archive_options() == []


def _demo(out: Path, env: dict, *python: str) -> subprocess.CompletedProcess:
    """The demo's `sparkcep run` through Spark in a process of its own (`python` options
    before `-m`), its stdout and stderr in files beside `out`."""
    args = [sys.executable, *python, "-m", "sparkcep.cli", "run", str(DEMO / "query.cep")]
    args += ["--input", str(DEMO / "events.csv"), "--output", str(out), "--master", "local[2]"]
    # The JVM outlives this process while it writes the archive: do not wait on its pipes.
    with open(out.with_suffix(".out"), "w") as stdout, open(out.with_suffix(".err"), "w") as err:
        done = subprocess.run(args, env=env, stdout=stdout, stderr=err, timeout=600)
    return subprocess.CompletedProcess(
        args,
        done.returncode,
        out.with_suffix(".out").read_text(),
        out.with_suffix(".err").read_text(),
    )


def test_the_first_spark_run_records_the_archive_the_second_uses_it(archive_dir, tmp_path):
    """Two fresh processes run the demo through Spark local mode, as `make demo` does. The
    first starts Spark before its heavy imports (sparkcep._early: importtime lists the
    session's module before pandas), gives the demo's rows (checked in the driver) and
    records the archive as its JVM exits; the second puts the archive in place and uses
    it, with the same rows."""
    from test_cli import check_the_demo_through_spark

    env = {k: v for k, v in os.environ.items() if k != "SPARKCEP_EARLY_START"}
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = tmp_path / "first" / "matches.jsonl"
    done = _demo(first, env, "-X", "importtime")
    check_the_demo_through_spark(done, first, in_driver=True)
    imported = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    assert imported.index("sparkcep.runners.spark.session") < imported.index("pandas")
    target = cds.archive_path()
    lock = target.with_suffix(".recording")
    pid, recording = lock.read_text().split()
    deadline = time.monotonic() + 300
    while cds._alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.5)  # the JVM writes the archive as it exits
    assert Path(recording).stat().st_size > 1_000_000
    second = tmp_path / "second" / "matches.jsonl"
    check_the_demo_through_spark(_demo(second, env), second, in_driver=True)
    assert target.exists() and not lock.exists()
    assert first.read_text() == second.read_text()


@pytest.mark.spark
def test_a_jvm_that_cannot_start_still_says_why_on_stderr(tmp_path):
    """The JVM's stderr passes through sparkcep's filter (which drops only the
    incubator-modules notice): the launcher's own reason for refusing to start reaches
    stderr, before Python's error."""
    code = (
        "from sparkcep.runners.spark.session import spark_session\n"
        "spark_session(**{'spark.driver.extraJavaOptions': '-Xmx1k'})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode != 0
    said = done.stderr.find("Not allowed to specify max heap")
    assert said != -1, done.stderr
    assert said < done.stderr.find("JAVA_GATEWAY_EXITED")
