"""A Spark standalone cluster on loopback for the tests and benchmarks/cluster.py: a
master and workers started with the `spark-class` script pip's pyspark ships, stopped
(their whole process groups) when the `with` block ends, also on failure.

    with standalone(workers=2, cores=1, folder=tmp, env={"PYTHONPATH": src}) as cluster:
        ...  # `sparkcep run --master {cluster.url} ...`; cluster.pids: master, workers

`env` is added to the workers' environment, which their executors and the executors'
Python workers inherit: that is how the workers find this sparkcep (docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Cluster:
    url: str  # the master's, spark://127.0.0.1:port
    pids: list[int] = field(default_factory=list)  # the master's and the workers' JVMs


def spark_class() -> Path:
    """The `spark-class` script of the installed pyspark."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def java_missing() -> str | None:
    """Why a cluster cannot start here (no Java on PATH), else None."""
    return None if shutil.which("java") else "no Java on PATH: Spark needs a JVM"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            [str(spark_class()), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # its own process group: stopped with everything it starts
        )  # fmt: skip


def _wait_for(process: subprocess.Popen, log: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"{log.name}: no '{text}' after {timeout:.0f} s\n{tail}")


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in reversed(processes):  # workers first (their executors), then the master
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextlib.contextmanager
def standalone(
    *, workers: int, cores: int, folder: Path, memory: str = "2g", env: dict | None = None,
    timeout: float = 90,
):  # fmt: skip
    """A master and `workers` workers of `cores` cores each on 127.0.0.1; yields the
    `Cluster`. Logs and the workers' folders go under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    base = dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
    )
    processes: list[subprocess.Popen] = []
    try:
        port = free_port()
        master = f"spark://127.0.0.1:{port}"
        log = folder / "master.log"
        args = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                "--port", str(port), "--webui-port", str(free_port())]  # fmt: skip
        processes.append(_start(args, log, base))
        _wait_for(processes[-1], log, "I have been elected leader", timeout)
        logs = []
        for i in range(workers):
            work = folder / f"worker{i}"
            work.mkdir(exist_ok=True)
            logs.append(folder / f"worker{i}.log")
            args = ["org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1",
                    "--cores", str(cores), "--memory", memory, "--work-dir", str(work),
                    "--webui-port", str(free_port())]  # fmt: skip
            processes.append(_start(args, logs[-1], {**base, **(env or {})}))
        for process, log in zip(processes[1:], logs, strict=True):
            _wait_for(process, log, "Successfully registered with master", timeout)
        yield Cluster(master, [p.pid for p in processes])
    finally:
        _stop(processes)
