"""Issue 16 §3, fast start: the JVM class archive is recorded by the first Spark run and
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


def _demo(out: Path, env: dict) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "sparkcep.cli", "run", str(DEMO / "query.cep")]
    args += ["--input", str(DEMO / "events.csv"), "--output", str(out)]
    # The JVM outlives this process while it writes the archive: do not wait on its pipes.
    return subprocess.run(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600
    )


def test_the_first_spark_run_records_the_archive_the_second_uses_it(archive_dir, tmp_path):
    env = dict(os.environ)
    local = tmp_path / "local.jsonl"
    subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", "run", str(DEMO / "query.cep"), "--local",
         "--input", str(DEMO / "events.csv"), "--output", str(local)],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    assert _demo(tmp_path / "first.jsonl", env).returncode == 0
    target = cds.archive_path()
    lock = target.with_suffix(".recording")
    pid, recording = lock.read_text().split()
    deadline = time.monotonic() + 300
    while cds._alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.5)  # the JVM writes the archive as it exits
    assert Path(recording).stat().st_size > 1_000_000
    assert _demo(tmp_path / "second.jsonl", env).returncode == 0
    assert target.exists() and not lock.exists()
    first = (tmp_path / "first.jsonl").read_text()
    assert first == (tmp_path / "second.jsonl").read_text() == local.read_text()
    assert len(first.splitlines()) == 2


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
