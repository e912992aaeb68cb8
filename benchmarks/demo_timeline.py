"""Issue 16 §3: where the demo's seconds go (`make demo`: 12 events through Spark local).

One demo process is traced: its own steps (imports, the JVM's launch, the session, each
step of `sparkcep run`, the exit) as marks written by the process, the processes it
starts (the JVM, the Python worker daemon and its workers: first seen in /proc), and
each Spark job and stage from Spark's event log, with its tasks' run and CPU time. Then
the demo runs interleaved with the code of another src folder (`--baseline-src`, e.g. a
checkout of main), medians of wall and CPU seconds of the whole process tree.

Writes benchmarks/results/demo_timeline.md. Nothing here is asserted by the tests.

    python -m benchmarks.demo_timeline [--rounds 5] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
DEMO = Path(__file__).parent.parent / "examples" / "cpu_overload"
MARKS = "SPARKCEP_DEMO_MARKS"  # the file the traced process writes its marks to

# ---- the traced process (`--trace`): `sparkcep run` with marks at its steps ----------


def _mark(text: str) -> None:
    with open(os.environ[MARKS], "a") as f:
        f.write(f"{time.time():.3f} {text}\n")


def _wrap(module, name: str, label: str) -> None:
    inner = getattr(module, name)
    if getattr(inner, "marked", False):
        return

    @functools.wraps(inner)
    def marked(*args, **kwargs):
        _mark(f"{label} starts")
        try:
            return inner(*args, **kwargs)
        finally:
            _mark(f"{label} ends")

    marked.marked = True
    setattr(module, name, marked)


def traced_run(args: list[str]) -> None:
    _mark("Python runs")
    sys.argv = ["sparkcep", *args]  # the command's (sparkcep._early reads them)
    _trace_early()
    import sparkcep.cli as cli

    _mark("sparkcep.cli imported")
    from pyspark import java_gateway

    import sparkcep._early as early
    import sparkcep.runners.spark.batch as spark
    import sparkcep.runners.spark.driver_check as driver_check
    import sparkcep.runners.spark.files as files
    import sparkcep.runners.spark.session as session

    _wrap(java_gateway, "launch_gateway", "JVM launch (spark-submit, until its gateway answers)")
    _wrap(session, "spark_session", "Spark session")
    _wrap(files, "read_spark", "read_spark (the CSV's header, the DataFrame)")
    _wrap(spark, "execute", "execute (the checking pass, plan, compile)")
    _wrap(driver_check, "check_in_driver", "check_in_driver (read, check, plan, compile)")
    _wrap(
        driver_check, "execute_driver_checked", "execute_driver_checked (the valid rows to Spark)"
    )
    _wrap(spark, "plan_queries", "plan")
    _wrap(spark, "compile_jobs", "compile")
    _wrap(files, "write_spark", "write_spark")
    _wrap(early, "taken", "waiting for the session started early")
    _wrap(cli, "main", "sparkcep's main")
    cli.command()  # ends the process (os._exit)


def _trace_early() -> None:
    """A mark for the JVM's launch when `sparkcep._early` starts it, at the top of `import
    sparkcep` (pyspark, which it imports first anyway, is imported here first;
    spark_session.launch_quietly imports `launch_gateway` from its module when called)."""
    from pyspark import java_gateway

    _wrap(java_gateway, "launch_gateway", "JVM launch (spark-submit, until its gateway answers)")


# ---- the timeline of one process -----------------------------------------------------


def _kind(pid: int) -> str | None:
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    if comm == "java" or "org.apache.spark" in cmdline:
        return "a java process (spark-submit's launcher, then Spark's JVM)"
    if "-m sparkcep.runners.spark.daemon" in cmdline:
        return "Python worker daemon (or a worker it forked)"
    return None


def traced(src: str, tmp: Path) -> tuple[list[tuple[float, str]], dict, Path]:
    """(marks as (seconds since the start, text), CPU seconds, the event log folder)."""
    from benchmarks.spark_floor import _env, _tree_cpu

    marks, events = tmp / "marks.txt", tmp / "events"
    events.mkdir()
    conf = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
        "spark.eventLog.dir": events.as_uri(),
    }
    submit = " ".join(f"--conf {k}={v}" for k, v in conf.items()) + " pyspark-shell"
    env = {**_env(src), MARKS: str(marks), "PYSPARK_SUBMIT_ARGS": submit}
    env["PYTHONPATH"] = os.pathsep.join([src, str(Path(__file__).parent.parent)])
    run = ["run", str(DEMO / "query.cep"), "-i", str(DEMO / "events.csv")]
    run += ["-o", str(tmp / "matches.jsonl")]
    start = time.time()
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.demo_timeline", "--trace", *run],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    seen: dict[str, float] = {}
    cpu: dict[int, float] = {}
    while child.poll() is None:
        for pid, seconds in _tree_cpu(child.pid).items():
            cpu[pid] = seconds
            kind = _kind(pid)
            if kind and kind not in seen:
                seen[kind] = time.time()
        time.sleep(0.05)
    out = [(seen[k] - start, f"first seen: {k}") for k in seen]
    out.append((time.time() - start, "the process has exited"))
    for line in marks.read_text().splitlines():
        stamp, text = line.split(" ", 1)
        out.append((float(stamp) - start, text))
    out += _spark_events(events, start)
    return sorted(out), {"CPU s of the process tree": sum(cpu.values())}, events


def _spark_events(folder: Path, start: float) -> list[tuple[float, str]]:
    log = max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    out, stages = [], {}
    runs: dict[int, list[float]] = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerApplicationStart":
            out.append((event["Timestamp"] / 1000 - start, "Spark application starts"))
        elif kind == "SparkListenerJobStart":
            out.append((event["Submission Time"] / 1000 - start,
                        f"Spark job {event['Job ID']} starts (stages {event['Stage IDs']})"))  # fmt: skip
        elif kind == "SparkListenerJobEnd":
            out.append((event["Completion Time"] / 1000 - start, f"job {event['Job ID']} ends"))
        elif kind == "SparkListenerStageCompleted":
            stages[event["Stage Info"]["Stage ID"]] = event["Stage Info"]
        elif kind == "SparkListenerTaskEnd" and event.get("Task Metrics"):
            m = event["Task Metrics"]
            task = runs.setdefault(event["Stage ID"], [0, 0.0, 0.0])
            task[0] += 1
            task[1] += m["Executor Run Time"] / 1000
            task[2] += (m["Executor CPU Time"] + m["Executor Deserialize CPU Time"]) / 1e9
    for sid, info in stages.items():
        n, run, cpu = runs.get(sid, [0, 0.0, 0.0])
        wall = (info["Completion Time"] - info["Submission Time"]) / 1000
        out.append((info["Submission Time"] / 1000 - start,
                    f"stage {sid} ({info['Stage Name'].split(' at ')[0]}): {wall:.2f} s, {n} "
                    f"tasks, task run {run:.2f} s, JVM task CPU {cpu:.2f} s"))  # fmt: skip
    return out


# ---- interleaved whole processes -----------------------------------------------------


def timed(src: str, tmp: Path) -> tuple[float, float]:
    from benchmarks.spark_floor import _env, _tree_cpu

    run = ["-m", "sparkcep.cli", "run", str(DEMO / "query.cep"), "-i", str(DEMO / "events.csv")]
    run += ["-o", str(tmp / f"m{abs(hash(src))}.jsonl")]
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, *run], env=_env(src),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    cpu: dict[int, float] = {}
    while child.poll() is None:
        cpu.update(_tree_cpu(child.pid))
        time.sleep(0.05)
    if child.returncode:
        raise RuntimeError(f"the demo failed with {src}")
    return time.perf_counter() - start, sum(cpu.values())


def interleaved(sources: dict[str, str], rounds: int, tmp: Path) -> dict[str, list]:
    times: dict[str, list] = {name: [] for name in sources}
    for src in sources.values():
        timed(src, tmp)  # warm-up: bytecode, page cache
    for _ in range(rounds):
        for name, src in sources.items():
            times[name].append(timed(src, tmp))
    return times


NOTES = """\
## What was cut, what was tried (each measured interleaved, 2026-11-26, load 2-9)

| change | wall median, CPU median: without -> with | kept |
|---|---|---|
| a tiny input's expressions interpreted (`spark.sql.codegen.factoryMode` NO_CODEGEN: Janino compiled the checking pass's projections for 12 rows) | 16.03 -> 14.31 s, 10.10 -> 8.42 CPU s (3 rounds, load about 6) | yes |
| a tiny input without adaptive execution: 3 Spark jobs instead of 7, no re-planning between stages | 7.82 -> 6.96 s, 7.61 -> 7.34 CPU s (3 rounds) | yes |
| the command ends with `os._exit` once its output is out (Python's teardown of pyarrow and pandas) | exit after main 0.39-0.80 s -> 0.03 s (traced runs); 0.25-0.30 s in isolation | yes |
| the worker daemon imports the workers' modules before forking | 9.04 -> 9.18 s, 8.29 -> 8.20 CPU s (4 rounds): the daemon imports sparkcep, and with it pandas and pyarrow, already | no |
| `-Xint` | 16.0 -> 82.7 s | no |
| C1 compiling later (Tier3 thresholds x10) | 8.81 -> 9.79 s | no |
| `-Xms1g -Xmn600m -XX:-UsePerfData` | 8.81 -> 8.58 s, 7.82 -> 7.68 CPU s: within the noise | no |
| `sparkcep warmup`'s job once more with a tiny input's settings (their classes archived too) | 5.65 -> 5.64 s, 6.77 -> 6.67 CPU s (4 rounds) | no |
| CSV under 1 MiB checked in the driver with the local runner's checks while the JVM starts (`runners/spark/driver_check.py`): no checking pass, one Spark job (the matching and writing), the rejected rows written by pandas | 7.93 -> 5.46 s, 7.26 -> 4.84 CPU s (5 rounds, load 6.3 -> 3.5; main's code in the same rounds 8.13 s, 7.38 CPU s); 6.54 -> 4.13 s, 7.88 -> 4.87 CPU s (5 rounds, load 1.4 -> 2.2; main's code 6.60 s, 7.87 CPU s) | yes |
| the session started before the command's imports (`sparkcep._early`, from the top of `import sparkcep`): the JVM's launch at 0.10 s instead of about 0.55 s, but on 2 cores the launch and the imports share the CPU | 5.46 -> 5.11 s, 4.84 -> 4.74 CPU s (the first 5 rounds); 4.13 -> 4.05 s, 4.87 -> 5.14 CPU s (the second); 3.99 -> 3.85 s, 4.77 -> 4.94 CPU s (8 rounds of these two alone, load 2.2 -> 2.0; faster in 6 of 8 pairs) | yes: 0.1-0.35 s of wall for 0.1-0.2 CPU s |

The class archive matters as much as any of these: the one in this venv, recorded hours
earlier by older code, gave the demo 6.33 s against 5.87 s with an archive recorded by
the demo's own first run, and 5.65 s with one recorded by `sparkcep warmup` (either
version of its job) minutes before. An archive is matched to Java, PySpark and the venv,
not to sparkcep's code: classes that newer code loads come from the jars. The table of
rounds above was measured with `SPARKCEP_CDS_DIR` naming an archive just recorded by
main's `sparkcep warmup`, the same for both codes.

G2 CSV (1M events, 25 MB) is over 1 MiB: its rows are checked by Spark's checking pass
as before; only its session starts earlier. Interleaved (3 rounds, load 3.0 -> 3.5, the
same archive): main's code 20.05 s, 19.39 CPU s; this code 19.30 s, 19.15 CPU s (rounds
20.05/16.39/20.59 and 19.98/16.44/19.30: within the noise); the 8,438 matches written are
byte for byte the same.

## What is left (sizes from the traced process above, load 1.5)

- Python before the JVM's launch, 0.10 s (the session's module and pyspark are imported
  first); pandas, pyarrow, typer, rich and the parser are imported while the JVM starts
  (0.5 s), then the driver checks the 12 rows (0.03 s) and waits for the session.
- The JVM's launch (spark-submit's scripts, a launcher JVM, Spark's JVM until its
  gateway answers), 0.94 s, and the session, 0.93 s.
- The valid rows to Spark and the query's DataFrame (`execute_driver_checked`), 0.58 s:
  about 1,100 py4j calls, the JVM's first analysis of each kind of expression, and the
  Arrow batch of the rows (`createDataFrame`, about 0.4 s of it when cold).
- Matching and writing, one Spark job, 1.27 s: the Python worker daemon and its workers
  start (0.66 s of the middle stage); the rejected rows (pandas), under 0.01 s; the
  exit, 0.01 s.
- Through Spark's checking pass (`SPARKCEP_DRIVER_CHECK_BYTES=0`, and every input over
  1 MiB of data or not CSV) the demo takes what main's code takes (6.54 against 6.60 s).
"""


def write(marks, cpu: dict, times: dict[str, list], load: tuple) -> str:
    lines = [
        "# The demo's timeline (issue 16 §3: `make demo` ≤ 5 s)",
        "",
        f"{os.cpu_count()} cores, load average {load[0]:.1f} before, {load[1]:.1f} after (other"
        " jobs share the machine: compare figures of the same rounds). Written by"
        " `python -m benchmarks.demo_timeline`.",
        "",
        "## One demo process (seconds since it was started)",
        "",
        "| s | event |",
        "|---:|---|",
        *[f"| {t:.2f} | {text} |" for t, text in marks],
        "",
        *[f"{k}: {v:.2f}" for k, v in cpu.items()],
        "",
        "## Whole processes, interleaved rounds",
        "",
        "| code | wall median | CPU median | wall of each round | CPU of each round |",
        "|---|---:|---:|---|---|",
    ]
    for name, t in times.items():
        walls, cpus = [w for w, _ in t], [c for _, c in t]
        lines.append(
            f"| {name} | {statistics.median(walls):.2f} | {statistics.median(cpus):.2f} | "
            f"{', '.join(f'{w:.2f}' for w in walls)} | {', '.join(f'{c:.2f}' for c in cpus)} |"
        )
    lines += ["", NOTES]
    text = "\n".join(lines)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "demo_timeline.md").write_text(text)
    return text


def main() -> None:
    if sys.argv[1:2] == ["--trace"]:
        traced_run(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-src", help="also time the demo with this src folder")
    args = parser.parse_args()
    here = os.environ.get("PYTHONPATH") or str(Path(__file__).parent.parent / "src")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        marks, cpu, _ = traced(here, Path(tmp))
        sources = {"this code": here}
        if args.baseline_src:
            sources["baseline"] = args.baseline_src
        times = interleaved(sources, args.rounds, Path(tmp))
    print(write(marks, cpu, times, (load, os.getloadavg()[0])))


if __name__ == "__main__":
    main()
