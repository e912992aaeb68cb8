"""Issue 16 §7: G2 through a Spark standalone cluster against local mode, same cores.

Starts a master and two workers of one core each on 127.0.0.1 (tests/standalone.py),
then times whole `sparkcep run` processes of G2 (the 1M-event CSV of
benchmarks/spark_floor.py) with `--master spark://...` and with `--master local[2]`,
interleaved rounds, medians; checks that both wrote the same matches; and reads Spark's
event log of each mode's last run to say where the time goes. Stops the cluster at the
end, also on failure. Writes benchmarks/results/cluster.md; nothing here is asserted by
the tests.

    python -m benchmarks.cluster [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.generators import G2_QUERY, g2
from benchmarks.spark_floor import _env, _tree_cpu
from benchmarks.targets import target_row, write_targets

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from standalone import standalone  # a helper module of the tests

RESULTS = Path(__file__).parent / "results"
MODES = ("cluster", "local[2]")


def _job(master: str, tmp: Path, mode: str) -> tuple[list[str], dict]:
    logs = tmp / "eventlog" / mode.replace("[", "").replace("]", "")
    logs.mkdir(parents=True, exist_ok=True)
    submit = (f"--conf spark.eventLog.enabled=true --conf spark.eventLog.compress=false "
              f"--conf spark.eventLog.dir={logs.as_uri()} pyspark-shell")  # fmt: skip
    env = {**_env(os.environ.get("PYTHONPATH")), "PYSPARK_SUBMIT_ARGS": submit}
    out = tmp / f"{mode}.jsonl"
    args = ["-m", "sparkcep.cli", "run", str(tmp / "g2.cep"), "-i", str(tmp / "g2.csv"),
            "--time-unit", "ms", "-o", str(out), "--master", master]  # fmt: skip
    return args, env


def timed(args: list[str], env: dict, cluster: list[int]) -> tuple[float, float, float, float]:
    """Wall seconds, CPU seconds, start epoch and the cluster's share of the CPU seconds,
    of one `sparkcep run` process. The CPU is that of the process and every process it
    starts, plus what the cluster's processes (`cluster`: the master, the workers, their
    executors and Python workers) spent while it ran: sampled from /proc every 0.1 s (a
    process's last moments may be missed)."""
    before = {pid: cpu for root in cluster for pid, cpu in _tree_cpu(root).items()}
    start, clock = time.time(), time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    seen: dict[int, float] = {}
    on_cluster: set[int] = set()
    while child.poll() is None:
        seen.update(_tree_cpu(child.pid))
        for root in cluster:
            tree = _tree_cpu(root)
            seen.update(tree)
            on_cluster.update(tree)
        time.sleep(0.1)
    _, stderr = child.communicate()
    wall = time.perf_counter() - clock
    if child.returncode != 0:
        raise RuntimeError(f"{args}: {stderr[-2000:]}")
    spent = {pid: cpu - before.get(pid, 0.0) for pid, cpu in seen.items()}
    return wall, sum(spent.values()), start, sum(spent[pid] for pid in on_cluster)


def rounds(jobs: dict, repeat: int, cluster: list[int]) -> dict[str, list[tuple]]:
    """(wall, CPU, start epoch) of each run, the modes taking turns; the first round is
    a warm-up (caches, byte code) and is not kept."""
    times: dict[str, list[tuple]] = {name: [] for name in jobs}
    for i in range(repeat + 1):
        for name, (args, env) in jobs.items():
            result = timed(args, env, cluster if name == "cluster" else [])
            if i:
                times[name].append(result)
    return times


# ---- Spark's event log: where the time goes ------------------------------------------


def read_log(folder: Path) -> list[dict]:
    """The events of the newest application logged in `folder`."""
    files = sorted(folder.glob("*/events_*"), key=lambda p: p.stat().st_mtime)
    return [json.loads(line) for line in files[-1].read_text().splitlines()]


def _first(events: list[dict], kind: str) -> dict:
    return next(e for e in events if e["Event"] == kind)


def _all(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["Event"] == kind]


def breakdown(events: list[dict], start: float, wall: float) -> dict[str, float]:
    """Seconds of each part of one run, from its event log and its process start."""
    app = _first(events, "SparkListenerApplicationStart")["Timestamp"] / 1000
    added = [e["Timestamp"] / 1000 for e in _all(events, "SparkListenerExecutorAdded")]
    jobs = [(s["Submission Time"] / 1000, e["Completion Time"] / 1000)
            for s, e in zip(_all(events, "SparkListenerJobStart"),
                            _all(events, "SparkListenerJobEnd"), strict=True)]  # fmt: skip
    tasks = _all(events, "SparkListenerTaskEnd")
    first_task = min(t["Task Info"]["Launch Time"] for t in tasks) / 1000
    first_on = {}  # each executor's first task: class loading, Python worker start
    for t in sorted(tasks, key=lambda t: t["Task Info"]["Launch Time"]):
        first_on.setdefault(t["Task Info"]["Executor ID"], t["Task Metrics"])
    in_jobs = sum(e - s for s, e in jobs)
    task_cpu = sum(t["Task Metrics"]["Executor CPU Time"] for t in tasks) / 1e9
    parts = {
        "process start → Spark application start (driver JVM)": app - start,
        "application start → last executor registered": max(added) - app,
        "application start → first job": jobs[0][0] - app,
        "first job → its first task launched": first_task - jobs[0][0],
        "Spark jobs (sum of their durations)": in_jobs,
        "driver between jobs (planning, Python)": jobs[-1][1] - jobs[0][0] - in_jobs,
        "last job → process end (stop, exit)": start + wall - jobs[-1][1],
        "tasks: JVM CPU of the executors' task threads (sum)": task_cpu,
        "first task per executor: deserialize (max)": max(
            m["Executor Deserialize Time"] for m in first_on.values()
        )
        / 1000,
        "first task per executor: run (max)": max(m["Executor Run Time"] for m in first_on.values())
        / 1000,
    }
    for i, (s, e) in enumerate(jobs):
        parts[f"job {i}"] = e - s
    return parts


# ---- the table -----------------------------------------------------------------------


def _median(runs: list[tuple], i: int) -> float:
    return statistics.median(r[i] for r in runs)


def _archive() -> str:
    from sparkcep.runners.jobs.warmup import archive_path

    if archive_path().exists():
        return "recorded (the driver maps it, and on the cluster the executors too)"
    return "none (every JVM loads its classes from the jars)"


def write(times: dict, parts: dict, same: bool, load: tuple, repeat: int) -> str:
    cluster, local = times["cluster"], times["local[2]"]
    ratio = _median(cluster, 0) / _median(local, 0)
    cpu_ratio = _median(cluster, 1) / _median(local, 1)
    lines = [
        "# Issue 16 §7: G2 on a standalone cluster against local mode, same cores",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}; load average {load[0]:.1f} before, {load[1]:.1f} after"
        " (other jobs share the machine: compare the figures of one run, not seconds across"
        " runs). A master and two workers (`--cores 1 --memory 2g`) on 127.0.0.1 against"
        f" `--master local[2]`; whole `sparkcep run` processes, {repeat} interleaved rounds"
        " after a warm-up round, medians; CPU = user + system seconds of the process, every"
        " process it started, and what the master, the workers and their executors (with"
        " their Python workers) spent meanwhile. Spark's event log on in both. JVM class"
        f" archive: {_archive()}.",
        "",
        "| run | wall s (median) | CPU s | of which the cluster's | each round, wall s |",
        "|---|---:|---:|---:|---|",
    ]
    for name, runs in times.items():
        each = ", ".join(f"{r[0]:.2f}" for r in runs)
        lines.append(
            f"| {name} | {_median(runs, 0):.2f} | {_median(runs, 1):.2f} | "
            f"{_median(runs, 3):.2f} | {each} |"
        )
    lines += [
        "",
        f"**cluster / local[2]: {ratio:.2f}** wall (target ≤ 1.5), {cpu_ratio:.2f} CPU; the"
        f" same matches: {'yes' if same else 'NO'}. Under load the cluster's extra processes"
        " get a larger share of the cores, so its wall ratio flatters it; on a quiet machine,"
        " where the run keeps the cores busy, the wall ratio would lie nearer the CPU ratio.",
        "",
        "Where the time goes (the last round of each, from Spark's event log; seconds):",
        "",
        "| part | " + " | ".join(MODES) + " |",
        "|---|" + "---:|" * len(MODES),
    ]
    names = list(dict.fromkeys(name for mode in MODES for name in parts[mode]))
    for name in names:
        cells = [f"{parts[m][name]:.2f}" if name in parts[m] else "" for m in MODES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    text = "\n".join(lines)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cluster.md").write_text(text)
    peer = f"`--master local[2]`, {_median(local, 0):.2f} s"
    note = f"CPU {cpu_ratio:.2f}x (cluster's processes included); same matches: {same}"
    write_targets(
        "cluster",
        [target_row("7 · G2 on 2 one-core workers / local[2], wall", "≤ 1.5", ratio, peer, note)],
    )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one round")
    args = parser.parse_args()
    repeat = 1 if args.quick else 3
    load_before = os.getloadavg()[0]
    src = str(Path(__import__("sparkcep").__file__).parent.parent)
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        g2().to_csv(tmp / "g2.csv", index=False)
        (tmp / "g2.cep").write_text(G2_QUERY)
        workers = {"PYTHONPATH": src}  # the workers run this sparkcep (docs/cluster.md)
        with standalone(workers=2, cores=1, folder=tmp / "cluster", env=workers) as cluster:
            jobs = {m: _job(cluster.url if m == "cluster" else m, tmp, m) for m in MODES}
            times = rounds(jobs, repeat, cluster.pids)
        parts = {}
        for mode in MODES:
            start, wall = times[mode][-1][2], times[mode][-1][0]
            log = tmp / "eventlog" / mode.replace("[", "").replace("]", "")
            parts[mode] = breakdown(read_log(log), start, wall)
        outputs = [(tmp / f"{mode}.jsonl").read_text() for mode in MODES]
    text = write(times, parts, outputs[0] == outputs[1], (load_before, os.getloadavg()[0]), repeat)
    print(text)


if __name__ == "__main__":
    main()
