"""The SparkSession sparkcep runs in: local mode by default, UTC, UI off, quiet logs, the
JVM class archive when it was recorded (`cds`), the compiled Python archive when it was
built (`compiled_home`)."""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from sparkcep.runners.spark.cds import archive_options
from sparkcep.runners.spark.compiled_home import compiled_home
from sparkcep.runners.spark.workers import is_connect, mark_checked

SMALL_INPUT_BYTES = 40 * 2**20
TINY_INPUT_BYTES = 2**20


def light_driver(input_bytes: int | None) -> tuple[list[str], dict[str, str]]:
    """Java options and Spark settings for a run over `input_bytes` of input.

    A short run spends more CPU compiling Java than running it. Below SMALL_INPUT_BYTES
    the driver uses the quick compiler only and one collector thread (G2, 1M events,
    25 MB: 29.3 -> 22.5 CPU seconds; whole runs 10.4 against 9.0 s). From about 40 MB
    the full compiler pays for itself (G2's CSV, whole runs, interleaved: 2M events,
    51 MB: 12.6 against 13.6 s; 4M, 103 MB: 15.5 against 20.5 s). Below
    TINY_INPUT_BYTES whole-stage code generation
    is off too (the demo: 20.7 -> 10.1 CPU seconds; G2 is slower without it), and so are
    the code generation of single expressions and adaptive execution. Without the first
    (`factoryMode`, an internal setting: Spark's own tests run every expression both
    ways) Spark interprets expressions, as it does wherever generated code fails to
    compile: compiling the checking pass's projections with Janino cost more than
    evaluating them on a few rows. Without the second, a query's stages run as one
    Spark job instead of one job per shuffle, with no re-planning between them (the
    demo, each measured interleaved: benchmarks/results/demo_timeline.md)."""
    if input_bytes is None or input_bytes >= SMALL_INPUT_BYTES:
        return [], {}
    options = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    if input_bytes >= TINY_INPUT_BYTES:
        return options, {}
    return options, {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        "spark.sql.adaptive.enabled": "false",
    }


def spark_session(
    master: str | None = None,
    *,
    app_name: str = "sparkcep",
    input_bytes: int | None = None,
    **conf,
) -> SparkSession:
    """A SparkSession set up for sparkcep: local mode by default, UTC, UI off.

    `input_bytes` (the size of the input unpacked, when known before the start:
    files.data_bytes) picks a lighter driver for short runs: see `light_driver`."""
    if master is not None and master.startswith("sc://"):
        return connect_session(master, conf)
    from pyspark import SparkContext

    fresh = SparkContext._active_spark_context is None
    if master is None or master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "spark.master": master or "local[*]",
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
        # PySpark's DataFrame debugging sends each function call's Python call site to the
        # JVM (six more py4j round trips per F.col, F.when...): building a run's Spark
        # expressions took 3 of a small run's 4 seconds. sparkcep reports a failed Spark
        # job in one line of its own (sparkcep.failures), without that call site.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # The JVM and its Python workers talk over a Unix domain socket, not TCP: over TCP
        # each Python task waited about 40 ms before its function ran (small writes held
        # back until the other side acknowledged the last: a stream's micro-batch of G2
        # starts three such tasks one after the other; its reading tasks 50 -> 12 ms to
        # the function, the micro-batch 0.57-0.67 -> 0.53-0.60 s). Where Python has them.
        "spark.python.unix.domain.socket.enabled": str(hasattr(socket, "AF_UNIX")).lower(),
    }
    if master is None or master.startswith("local"):
        # Local files without Hadoop's .crc file beside each: a stream's checkpoint
        # writes several small files a micro-batch (offsets, commits, state deltas), each
        # twice over (G2, one 50k-event file a micro-batch, loaded machine, two pairs of
        # runs: 38.9k -> 42.8k events/s; the offsets' and commits' writes 60 -> 42 ms).
        # Renames stay atomic; a checkpoint written either way reads either way.
        settings["spark.hadoop.fs.file.impl"] = "org.apache.hadoop.fs.RawLocalFileSystem"
        settings["spark.hadoop.fs.AbstractFileSystem.file.impl"] = (
            "org.apache.hadoop.fs.local.RawLocalFs"
        )
    archive = archive_options() if fresh else []
    light_options, light_conf = light_driver(input_bytes)
    settings.update(worker_conf(master, archive, conf, light_options))
    java_options = [f"-Dlog4j2.configurationFile={_log4j_config()}", *archive]
    java_options += light_options
    settings.update(light_conf)
    extra = conf.pop("spark.driver.extraJavaOptions", None)
    if extra:
        java_options.append(extra)
    settings["spark.driver.extraJavaOptions"] = " ".join(java_options)
    settings.update({key: str(value) for key, value in conf.items()})
    if fresh:  # the compiled home in local mode only: a cluster's Spark home is its own
        local = master is None or master.startswith("local")
        launch_quietly(settings, compiled_home() if local else None)
    builder = SparkSession.builder.config(map=settings)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if fresh:  # its workers run this Python (PYSPARK_PYTHON above): nothing to check
        mark_checked(spark)
    # PySpark logs a failed query's error with its Java trace (JSON, to stderr); sparkcep
    # reports it in one line itself (sparkcep.failures).
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return spark


def connect_session(url: str, conf: dict) -> SparkSession:
    """A Spark Connect session on the server at `url` (`sc://host:port`): the server
    has the JVM, the executors and the files; this process sends it plans. Settings
    sparkcep gives its own sessions that a client may set are set on it (UTC above all:
    times in output are written in the session's time zone)."""
    _reachable(url)
    spark = SparkSession.builder.remote(url).getOrCreate()
    for key, value in {"spark.sql.session.timeZone": "UTC", **conf}.items():
        spark.conf.set(key, str(value))
    return spark


def _reachable(url: str, timeout: float = 5.0) -> None:
    """Raise a one-line error when nothing answers at the server's address: the Spark
    Connect client would retry for minutes before it gives up."""
    from sparkcep.errors import SparkcepError

    address = url[len("sc://") :].split("/", 1)[0].split(";", 1)[0]
    host, _, port = address.rpartition(":") if ":" in address else (address, "", "15002")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise SparkcepError(f"no Spark Connect server answers at {url} ({reason})") from None


def default_parallelism(spark) -> int:
    """Spark's default parallelism: the cores of a local master, the executors' cores on a
    cluster. A Spark Connect session has no SparkContext to ask: there it is the number
    of partitions Spark plans for a range of numbers (one call to the server, no job)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    given = spark.conf.get("spark.default.parallelism", None)
    if given:
        return int(given)
    try:
        plan = spark.range(1)._explain_string(extended=False)
    except AttributeError:  # a later client without it: its output, printed
        import contextlib
        import io

        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            spark.range(1).explain()
        plan = printed.getvalue()
    found = re.search(r"splits=(\d+)", plan)
    return int(found.group(1)) if found else os.cpu_count() or 1


def master_of(spark) -> str:
    """The session's master (`local[2]`, `spark://...`, `yarn`)."""
    if not is_connect(spark):
        return spark.sparkContext.master
    return f"{spark.conf.get('spark.master', None) or 'a server'}, through Spark Connect"


JVM_NOTICES = (b"WARNING: Using incubator modules",)


def launch_quietly(settings: dict[str, str], home: Path | None = None) -> None:
    """Launch Spark's JVM (the py4j gateway) as PySpark would, with `settings`, but with
    its stderr passed on through a filter that drops JVM_NOTICES: Spark's launcher adds
    `--add-modules=jdk.incubator.vector` to every JVM, and Java then prints a warning
    line on every run that tells a user nothing. Every other line the JVM writes
    (errors included) reaches stderr as before. Nothing is done when the gateway exists
    already or is given (PYSPARK_GATEWAY_PORT). `home`: the Spark home the JVM starts
    from (`compiled_home`), for its launch only: this process's environment is kept."""
    import threading

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf()
    for key, value in settings.items():
        conf.set(key, value)
    # popen_kwargs is PySpark's documented hook for capturing the JVM's output.
    reading, writing = os.pipe()
    forward = threading.Thread(
        target=_pass_on, args=(reading,), daemon=True, name="sparkcep-jvm-stderr"
    )
    forward.start()
    before = os.environ.get("SPARK_HOME")
    if home is not None:
        os.environ["SPARK_HOME"] = str(home)
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": writing})
    except BaseException:
        os.close(writing)
        forward.join(timeout=5)  # the JVM's last words (why it did not start) first
        raise
    finally:
        if before is None:
            os.environ.pop("SPARK_HOME", None)
        else:
            os.environ["SPARK_HOME"] = before
    os.close(writing)  # the JVM holds its own end
    with SparkContext._lock:
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm


def _pass_on(reading: int) -> None:
    """Copy the JVM's stderr to this process's, line by line, without JVM_NOTICES."""
    with os.fdopen(reading, "rb") as pipe:
        for line in iter(pipe.readline, b""):
            if not line.startswith(JVM_NOTICES):
                os.write(2, line)


def worker_conf(
    master: str | None, archive: list[str], conf: dict, light: list[str] = ()
) -> dict[str, str]:
    """How executors start (docs/cluster.md). On any master, their Python workers come
    from sparkcep's daemon, which imports the workers' compiled pyspark instead of
    compiling Spark's pyspark.zip at each start (runners/spark/daemon.py); the workers need
    sparkcep anyway, the matching functions Spark ships to them live in its modules. On
    a cluster, their JVMs map the driver's class archive too (`archive`: its options,
    from `warmup`) once it is recorded: an executor on this machine loads most of Spark's
    classes from it, and a JVM that lacks the file or has another class path ignores it.
    Their JVMs take the driver's `light` options too (a short run: `light_driver`). A
    caller's `spark.executor.extraJavaOptions` (taken out of `conf`) comes after."""
    settings = {"spark.python.daemon.module": "sparkcep.runners.spark.daemon"}
    local = master is None or master.startswith("local")
    recorded = any(o.startswith("-XX:SharedArchiveFile=") for o in archive)
    options = [] if local or not recorded else list(archive)  # one JVM records it, no more
    options += [] if local else list(light)
    extra = conf.pop("spark.executor.extraJavaOptions", None)
    if extra:
        options.append(extra)
    if options:
        settings["spark.executor.extraJavaOptions"] = " ".join(options)
    return settings


def _log4j_config() -> str:
    from importlib.resources import files

    # the package itself, not its name: a session started while `sparkcep` is still
    # being imported (`sparkcep._early`) does not wait for its import to end
    package = sys.modules[__name__.split(".")[0]]
    return Path(str(files(package).joinpath("log4j2.properties"))).as_uri()


class SparkProgress:
    """A progress line fed by Spark's status tracker: the stage running and its tasks
    done, shown through `show(text)` once the run has lasted `after` seconds.

    Use as a context manager around the Spark jobs; `step(text)` sets what the run is
    doing (the line's start). Polls from a daemon thread every `every` seconds.
    """

    def __init__(
        self, spark, show, *, after: float = 2.0, every: float = 0.5, show_steps: bool = True,
        on_step=None,
    ):  # fmt: skip
        import threading

        self.connect = is_connect(spark)
        self.spark = spark
        # A Spark Connect session has no status tracker: the server reports its stages
        # to a handler while an operation runs.
        self.tracker = None if self.connect else spark.sparkContext.statusTracker()
        self._reported: list = []  # the stages the server reported last (Connect)
        self.show = show
        # show_steps False: a step is shown with the stage only (plain lines: not each)
        self.show_steps, self.on_step = show_steps, on_step
        self.after, self.every = after, every
        self.text = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="sparkcep-progress", daemon=True)

    def step(self, text: str) -> None:
        self.text = text
        if self.on_step is not None:
            self.on_step(text)
        if self.show_steps:
            self.show(text)

    def line(self) -> str | None:
        """The progress line now: the step, then the active stage and its tasks."""
        if self.connect:
            stages = [(s.stage_id, s.num_completed_tasks, s.num_tasks) for s in self._reported
                      if not s.done]  # fmt: skip
        else:
            infos = [self.tracker.getStageInfo(i) for i in self.tracker.getActiveStageIds()]
            stages = [(s.stageId, s.numCompletedTasks, s.numTasks) for s in infos if s]
        if not stages:
            return None
        stage, done, total = max(stages)
        return f"{self.text} · Spark stage {stage}: {done}/{total} tasks"

    def _report(self, stages, inflight_tasks, operation_id, done) -> None:
        self._reported = [] if done or stages is None else list(stages)

    def _poll(self) -> None:
        import time

        start = time.monotonic()
        while not self._stop.wait(self.every):
            if time.monotonic() - start < self.after:
                continue
            try:
                text = self.line()
            except Exception:  # the session is stopping: no more progress to show
                return
            if text is not None:
                self.show(text)

    def __enter__(self) -> SparkProgress:
        if self.connect:
            self.spark.registerProgressHandler(self._report)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.connect:
            self.spark.removeProgressHandler(self._report)
        self._stop.set()
        self._thread.join(timeout=2 * self.every)


@contextmanager
def setting(spark, key: str, value: str):
    """The session's `key` set to `value` meanwhile, then as it was (for a setting Spark
    reads when a query starts or a cache is declared)."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
