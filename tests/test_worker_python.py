"""`check_worker_python`: a session whose Python workers cannot import sparkcep fails in one
line before sparkcep's first job, and the check runs once per session. Each test starts
its own process (its own JVM, `local[1]`): a session of the user's, built without
PYSPARK_PYTHON, with `python3` on PATH a Python that lacks sparkcep."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from sparkcep.runners.spark.workers import _reason

SCRIPT = r"""
import json, sys
from pyspark.sql import SparkSession
import sparkcep
from sparkcep.errors import SparkcepError
from sparkcep.runners.spark import workers

builder = SparkSession.builder.config("spark.ui.enabled", "false")
if sys.argv[1] == "connect":
    builder = builder.remote("local[1]")
else:
    builder = builder.master("local[1]")
spark = builder.getOrCreate()

probes = []  # one per probe job: the check builds its probe function for each job
made = workers._probe
workers._probe = lambda: probes.append(1) or made()


def check():
    try:
        workers.check_worker_python(spark)
    except SparkcepError as error:
        return str(error)
    return None


events = spark.createDataFrame([{"type": "A", "ts": 1}, {"type": "B", "ts": 2}])
query = "PATTERN SEQ(A a, B b) WITHIN 10"
try:  # what a user calls first: the check runs inside it
    out = {"rows": len(sparkcep.match(events, query).collect()), "match_message": None}
except SparkcepError as error:
    out = {"match_message": str(error)}
out.update(session=type(spark).__module__, message=check(), probes=len(probes))
out["checked"] = spark.conf.get(workers.CHECKED, None)
if out["message"] is None:
    out["again"] = check()
else:
    workers.mark_checked(spark)  # (as sparkcep's own session does): no job after it
    out["after_mark"] = check()
out["probes_after"] = len(probes)
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """A folder with the script and a `bin` whose `python3` cannot import sparkcep: a venv
    without pip of this Python's base interpreter (same version as the driver's, as
    Spark requires, and no site-packages of its own)."""
    folder = tmp_path_factory.mktemp("workers")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder / "bare")
    bare = folder / "bare" / "bin" / "python3"
    lacks = subprocess.run([bare, "-c", "import sparkcep"], capture_output=True, timeout=60)
    assert lacks.returncode != 0, "the bare venv's python3 imports sparkcep"
    (folder / "probe_script.py").write_text(SCRIPT)
    return folder


def run(layout: Path, mode: str, worker_python: str | None) -> tuple[dict, str]:
    """Run the script in a fresh process (and JVM); its RESULT and all its output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "PYTHONPATH"))}
    env["PATH"] = f"{layout / 'bare' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    if worker_python:
        env["PYSPARK_PYTHON"] = worker_python
    process = subprocess.Popen(
        [sys.executable, str(layout / "probe_script.py"), mode],
        cwd=layout,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the JVM with it
    )
    try:
        stdout, stderr = process.communicate(timeout=180)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    output = stdout + stderr
    results = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert results, output[-3000:]
    return json.loads(results[-1][len("RESULT ") :]), output


def assert_one_line_naming_the_fixes(message: str, python3: Path):
    assert message and "\n" not in message, message
    assert f"python3 ({python3})" in message, message
    assert "cannot import sparkcep" in message and "No module named 'sparkcep'" in message
    assert f"PYSPARK_PYTHON={sys.executable}" in message and "spark.archives" in message
    assert not any(noise in message for noise in ("Traceback", "py4j", "java", "at org."))


def test_workers_without_sparkcep_fail_in_one_line(layout):
    out, output = run(layout, "classic", None)
    assert out["session"] == "pyspark.sql.session"
    assert_one_line_naming_the_fixes(out["message"], layout / "bare" / "bin" / "python3")
    assert "Traceback" not in output  # no Python trace, in the driver's output either
    assert out["match_message"] == out["message"]  # sparkcep.match says it so, first
    assert out["checked"] is None  # failed: checked again at the next call
    assert (out["probes"], out["after_mark"], out["probes_after"]) == (2, None, 2)


def test_workers_with_sparkcep_pass_once_and_match(layout):
    out, output = run(layout, "classic", sys.executable)
    assert out["message"] is None, out["message"]
    assert out["checked"] == "true"
    assert out["again"] is None and out["probes_after"] == 1  # later calls: no job
    assert out["rows"] == 1
    assert "Traceback" not in output


@pytest.mark.slow  # covered by: test_workers_without_sparkcep_fail_in_one_line (classic)
def test_spark_connect_session(layout):
    out, output = run(layout, "connect", None)
    assert out["session"] == "pyspark.sql.connect.session"
    assert_one_line_naming_the_fixes(out["message"], layout / "bare" / "bin" / "python3")
    assert "Spark Connect server's environment" in out["message"]
    assert out["match_message"] == out["message"]
    assert (out["probes"], out["after_mark"], out["probes_after"]) == (2, None, 2)
    assert "Traceback" not in output


def test_reason_of_a_probe_job_that_failed():
    said = (
        "org.apache.spark.SparkException: \nError from python worker:\n"
        '  File "<string>", line 1\n    print "x"\n  SyntaxError: invalid syntax\n'
        "PYTHONPATH was:\n  /x/pyspark.zip\norg.apache.spark.SparkException: EOFException"
    )
    assert _reason(RuntimeError(said)) == "it wrote: SyntaxError: invalid syntax"
    missing = (
        'java.io.IOException: Cannot run program "/no/python": error=2, No such file or '
        "directory\n\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)"
    )
    assert _reason(RuntimeError(missing)) == (
        'Cannot run program "/no/python": error=2, No such file or directory'
    )
    assert _reason(RuntimeError("something else")) == ""
