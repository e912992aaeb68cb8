"""Fast start: the JVM class archive is recorded by the first Spark run and
used from the next one on, without a separate command (runners/spark/cds.py); so is the
compiled Python archive (runners/spark/compiled_home.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkcep.runners.spark import cds, compiled_home

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


def _recorder(target: Path) -> int:
    """The process the recording lock names: a live recorder of `target`, at low priority
    in a process group of its own, running warmup's job into the lock's file."""
    pid, recording = target.with_suffix(".recording").read_text().split()
    pid = int(pid)
    assert pid != os.getpid() and cds.process_alive(pid)
    deadline = time.monotonic() + 60
    while os.getpriority(os.PRIO_PROCESS, pid) < 10:  # it lowers its priority as it starts
        assert time.monotonic() < deadline
        time.sleep(0.05)
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"sparkcep.runners.jobs.warmup" in command and recording.encode() in command
    assert os.getpgid(pid) == pid
    return pid


def _stop(pid: int) -> None:
    os.killpg(pid, signal.SIGKILL)  # the recorder and its JVM
    while cds.process_alive(pid):
        time.sleep(0.05)


def test_no_archive_means_a_recorder_in_the_background(archive_dir):
    """This JVM runs without archive (a JVM that records runs slower throughout) and a
    recorder starts; while it works, no other run starts one, and none uses a half file."""
    assert cds.archive_options() == []
    pid = _recorder(cds.archive_path())
    try:
        assert cds.archive_options() == []
        assert _recorder(cds.archive_path()) == pid
        assert not cds.archive_path().exists()
    finally:
        _stop(pid)


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
    recording = target.with_suffix(".tmp1")  # the recorder was killed before it wrote it
    target.with_suffix(".recording").write_text(f"{_dead_pid()} {recording}\n")
    assert cds.archive_options() == []
    assert not target.exists()
    _stop(_recorder(target))


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
    # A recorder outlives this process: do not wait on pipes it might hold.
    with open(out.with_suffix(".out"), "w") as stdout, open(out.with_suffix(".err"), "w") as err:
        done = subprocess.run(args, env=env, stdout=stdout, stderr=err, timeout=600)
    return subprocess.CompletedProcess(
        args,
        done.returncode,
        out.with_suffix(".out").read_text(),
        out.with_suffix(".err").read_text(),
    )


def test_the_first_spark_run_has_the_archive_recorded_the_second_uses_it(archive_dir, tmp_path):
    """Two fresh processes run the demo through Spark local mode, as `make demo` does. The
    first starts Spark before its heavy imports (sparkcep._early: importtime lists the
    session's module before pandas), gives the demo's rows (checked in the driver) and
    leaves a recorder of the archive at work; the second, once the recorder is done,
    puts the archive in place and uses it, with the same rows. (Without the compiled
    Python archive, which has tests of its own below.)"""
    from test_cli import check_the_demo_through_spark

    env = {k: v for k, v in os.environ.items() if k != "SPARKCEP_EARLY_START"}
    env["SPARKCEP_COMPILED_HOME"] = "0"
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
    while cds.process_alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.5)  # its JVM writes the archive as it exits
    assert Path(recording).stat().st_size > 1_000_000
    second = tmp_path / "second" / "matches.jsonl"
    check_the_demo_through_spark(_demo(second, env), second, in_driver=True)
    assert target.exists() and not lock.exists() and not Path(recording).exists()
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


# ---- the compiled Python archive (runners/spark/compiled_home.py) ------------------------


def test_the_compiled_home_holds_bytecode_under_the_real_names(archive_dir):
    """Built from PySpark's own Spark home: the same zips with bytecode beside each
    module. A Python with only those zips on its path imports the bytecode, and a module's
    code still names the real zip's file (tracebacks read as before) with its source."""
    real = compiled_home.real_home()
    assert compiled_home.compiled_home(build_if_missing=False) is None
    home = compiled_home.build()
    assert home == compiled_home.compiled_home(build_if_missing=False)
    assert (home / "jars").resolve() == (real / "jars").resolve()
    lib, real_lib = home / "python" / "lib", real / "python" / "lib"
    code = (
        "import inspect, pyspark, pyspark.sql.functions.builtin as F\n"
        "print(pyspark.__file__)\n"
        "print(F._invoke_function.__code__.co_filename)\n"
        "print(len(inspect.getsource(F._invoke_function)))\n"
    )
    path = os.pathsep.join(str(z) for z in sorted(lib.glob("*.zip")))
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path[:0] = {path.split(os.pathsep)!r}\n"
         + code], capture_output=True, text=True, check=True,
    )  # fmt: skip
    module, filename, source = done.stdout.split()
    assert module == f"{lib / 'pyspark.zip'}/pyspark/__init__.pyc"
    assert filename.startswith(f"{real_lib / 'pyspark.zip'}/pyspark/sql/functions/")
    assert int(source) > 100


def test_no_builder_for_a_folder_it_cannot_write(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SPARKCEP_CDS_DIR", str(blocker / "cds"))  # under a file
    assert not compiled_home._writable(blocker / "cds")
    assert compiled_home._writable(tmp_path / "new" / "folder")
    assert compiled_home.compiled_home() is None


def test_no_compiled_home_when_asked_not_to(archive_dir, monkeypatch):
    built = compiled_home.home_path(compiled_home.real_home()) / "python" / "lib" / "pyspark.zip"
    built.parent.mkdir(parents=True)
    built.write_bytes(b"")
    assert compiled_home.compiled_home(build_if_missing=False) == built.parent.parent.parent
    monkeypatch.setenv("SPARKCEP_COMPILED_HOME", "0")
    assert compiled_home.compiled_home() is None


def test_a_python_process_spark_starts_imports_the_compiled_pyspark(spark):
    """The session the tests share was started from the compiled home (conftest builds
    it first, as `sparkcep warmup` does). A Python process Spark starts on its own (here a
    data source's planner, as a stream's folder reader is) imports PySpark's bytecode from
    it; this process's SPARK_HOME is what it was."""
    from pyspark.sql.datasource import DataSource

    class Where(DataSource):  # defined here: pickled by value for the planner process
        @classmethod
        def name(cls):
            return "sparkcep_where"

        def schema(self):
            import pyspark

            return f"`{pyspark.__file__}` int"

    spark.dataSource.register(Where)
    found = spark.read.format("sparkcep_where").load().columns
    home = compiled_home.compiled_home(build_if_missing=False)
    assert found == [f"{home}/python/lib/pyspark.zip/pyspark/__init__.pyc"]
    assert os.environ.get("SPARK_HOME") != str(home)


def test_warmup_into_a_folder_it_cannot_write_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    from test_bad_inputs import one_line, sparkcep

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SPARKCEP_CDS_DIR", str(blocker / "cds"))  # under a file
    code, _, err = sparkcep(capsys, "warmup")
    line = one_line(code, err)
    assert f"cannot write to '{blocker / 'cds'}'" in line and "SPARKCEP_CDS_DIR" in line
