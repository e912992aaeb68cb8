"""`sparkcep run --master spark://...` on a real standalone cluster (issue 16 §7): a master
and one worker of one core on loopback, the demo query run as a whole process, its
matches equal to the local run's and to the example's hand-worked expected output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from standalone import java_missing, standalone

import sparkcep

ROOT = Path(__file__).parent.parent
DEMO = ROOT / "examples" / "cpu_overload"
SRC = str(Path(sparkcep.__file__).parent.parent)  # the sparkcep these tests run


def _run(where: list[str], output: Path, env: dict) -> subprocess.Popen:
    """`sparkcep run` of the demo, as a process (Spark's event log in `env`, if set)."""
    args = [sys.executable, "-m", "sparkcep.cli", "run", str(DEMO / "query.cep"),
            "-i", str(DEMO / "events.csv"), "-o", str(output), *where]  # fmt: skip
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _finish(process: subprocess.Popen) -> str:
    try:
        out, err = process.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    assert process.returncode == 0, err[-3000:]
    return out


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# covered by: test_executors_on_a_cluster_* (its settings), test_cli's fresh-process Spark run
@pytest.mark.slow
@pytest.mark.skipif(java_missing() is not None, reason=str(java_missing()))
def test_demo_on_a_standalone_cluster_equals_the_local_run(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    log = tmp_path / "eventlog"
    log.mkdir()
    submit = ("--conf spark.eventLog.enabled=true --conf spark.eventLog.compress=false "
              f"--conf spark.eventLog.dir={log.as_uri()} pyspark-shell")  # fmt: skip
    workers = {"PYTHONPATH": SRC}  # this sparkcep on the workers (docs/cluster.md)
    # the local run (pandas, no Spark) goes on while the cluster starts
    local = _run(["--local"], tmp_path / "local.jsonl", env)
    try:
        with standalone(workers=1, cores=1, folder=tmp_path / "cluster", env=workers) as cluster:
            cluster_env = {**env, "PYSPARK_SUBMIT_ARGS": submit}
            out = _finish(_run(["--master", cluster.url], tmp_path / "cluster.jsonl", cluster_env))
    finally:
        _finish(local)
    assert f"Spark ({cluster.url})" in out
    events = [json.loads(line) for f in log.glob("*/events_*") for line in f.open()]
    tasks = [e["Task Info"] for e in events if e["Event"] == "SparkListenerTaskEnd"]
    assert tasks and {t["Executor ID"] for t in tasks} == {"0"}  # all on the worker's executor
    (environment,) = [e for e in events if e["Event"] == "SparkListenerEnvironmentUpdate"]
    # the executors start their Python workers with sparkcep's daemon (runners/spark/daemon.py)
    assert (
        environment["Spark Properties"]["spark.python.daemon.module"]
        == "sparkcep.runners.spark.daemon"
    )
    expected = _rows(DEMO / "expected.jsonl")
    assert _rows(tmp_path / "cluster.jsonl") == _rows(tmp_path / "local.jsonl") == expected


def _pyspark_tree(tmp_path: Path, version: str) -> tuple[str, str, str]:
    """Spark's pyspark.zip and py4j zip at 4.3.0, and an installed pyspark at `version`."""
    lib, site = tmp_path / "lib", tmp_path / f"site-{version}"
    lib.mkdir(exist_ok=True)
    (site / "pyspark").mkdir(parents=True)
    (site / "pyspark" / "version.py").write_text(f"__version__ = '{version}'\n")
    bundled, py4j = lib / "pyspark.zip", lib / "py4j-0.10.9.9-src.zip"
    with zipfile.ZipFile(bundled, "w") as z:
        z.writestr("pyspark/version.py", "__version__ = '4.3.0'\n")
    with zipfile.ZipFile(py4j, "w") as z:
        z.writestr("py4j/__init__.py", "")
    return str(bundled), str(py4j), str(site)


def test_the_daemon_imports_the_installed_pyspark_only_when_it_is_the_zips_version(tmp_path):
    from sparkcep.runners.spark.daemon import prefer_installed

    bundled, py4j, same = _pyspark_tree(tmp_path, "4.3.0")
    assert prefer_installed([bundled, py4j, same, "/x"]) == [same, "/x", bundled, py4j]
    _, _, other = _pyspark_tree(tmp_path, "3.5.1")
    assert prefer_installed([bundled, py4j, other]) == [bundled, py4j, other]
    assert prefer_installed([bundled, py4j, "/x"]) == [bundled, py4j, "/x"]  # none installed


@pytest.mark.spark
def test_the_workers_come_from_a_daemon_that_imported_the_tasks_modules_and_froze_them(spark):
    """A worker forked by sparkcep's daemon has pandas and sparkcep's steps imported before
    its first task, and those objects out of the collector's reach: PySpark's full
    collection after each task skips them."""

    def seen(batches):
        import gc

        for _ in batches:
            pass
        before = {"pandas", "sparkcep.runners.streaming.pipeline"} & set(sys.modules)
        yield pd.DataFrame({"frozen": [gc.get_freeze_count()], "had": [",".join(sorted(before))]})

    import pandas as pd

    row = spark.range(1).mapInPandas(seen, "frozen long, had string").first()
    assert row.frozen > 50_000
    assert row.had == "pandas,sparkcep.runners.streaming.pipeline"


def test_preload_skips_a_module_it_cannot_import():
    import gc

    from sparkcep.runners.spark.daemon import preload

    try:
        assert preload(("json", "no_such_module_here")) == ["no_such_module_here"]
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # this test process keeps its collector as it was


def test_executors_on_a_cluster_get_the_drivers_class_archive():
    from sparkcep.runners.spark.session import worker_conf

    archive = ["-XX:SharedArchiveFile=/venv/share/sparkcep/spark-x.jsa", "-Xlog:cds=off"]
    daemon = {"spark.python.daemon.module": "sparkcep.runners.spark.daemon"}
    executor = "-XX:SharedArchiveFile=/venv/share/sparkcep/spark-x.jsa -Xlog:cds=off"
    cluster = worker_conf("spark://127.0.0.1:7077", archive, {})
    assert cluster == {**daemon, "spark.executor.extraJavaOptions": executor}
    conf = {"spark.executor.extraJavaOptions": "-Dx=1", "spark.sql.shuffle.partitions": "3"}
    mine = worker_conf("spark://h:7077", archive, conf)["spark.executor.extraJavaOptions"]
    assert mine == executor + " -Dx=1"
    assert conf == {"spark.sql.shuffle.partitions": "3"}  # the rest is set as given
    assert worker_conf("local[2]", archive, {}) == daemon  # the driver is the executor
    assert worker_conf(None, archive, {}) == daemon
    assert worker_conf("spark://h:7077", [], {}) == daemon  # no archive recorded
    recording = ["-XX:ArchiveClassesAtExit=/venv/share/sparkcep/spark-x.jsa.tmp1", "-Xlog:cds=off"]
    assert worker_conf("spark://h:7077", recording, {}) == daemon  # the driver records it


def test_executors_on_a_cluster_start_as_light_as_the_driver():
    """A short run's executors get the driver's light JVM options (light_driver); in
    local mode the driver is the executor and has them already."""
    from sparkcep.runners.spark.session import light_driver, worker_conf

    light, _ = light_driver(25 * 2**20)  # G2's CSV
    assert light == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    executor = worker_conf("spark://h:7077", [], {}, light)["spark.executor.extraJavaOptions"]
    assert executor == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    assert "spark.executor.extraJavaOptions" not in worker_conf("local[2]", [], {}, light)
    assert light_driver(2**30) == ([], {})  # a large input: the JVMs' defaults
