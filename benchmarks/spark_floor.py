"""Issue 16: the Spark path against Spark's own floor, and the local path, in one run.

Whole processes, timed side by side (interleaved rounds, medians), so each ratio compares
figures measured under the same load:

- G2 (1M events, 100 keys, `SEQ(A a, B b, C c) WHERE [k] STRATEGY SKIP_TILL_NEXT_MATCH
  WITHIN 5 s`), CSV and Parquet: `sparkcep run` against two floors, a JVM-only job (read
  + groupBy(k).count() + write) and a plain Python job (read + groupBy(k).applyInPandas
  of a light function + write); the floors read the CSV with its schema given (no type
  inference), which no tool reading unknown files can do.
- G1 W=101 (495,423 matches): `sparkcep run --local` counting (`--count`) and writing
  JSON lines and Parquet; the Java SASE process (0.41 s, the issue's figure on this
  machine) is the reference.

Writes benchmarks/results/spark_floor.md. Nothing here is asserted by the tests.

    python -m benchmarks.spark_floor [--quick] [--baseline-src DIR] [--no-spark]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.generators import g1, g2_files
from benchmarks.targets import target_row, write_targets
from sparkcep.runners.jobs.warmup import archive_path, record

RESULTS = Path(__file__).parent / "results"
G1_QUERY = "PATTERN SEQ(A a, B b, C c) WITHIN 101"
SASE_G1_W101_SECONDS = 0.41  # the Java SASE process, counting its matches (issue 16)
G2_SCHEMA = "type string, k long, v double, ts long"
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---- the floors, each run as its own process (`--job`) -------------------------------


def floor_job(job: str, source: str, output: str) -> None:
    from sparkcep.runners.spark.session import spark_session

    # The same driver as `sparkcep run` starts for this input (spark_session.light_driver):
    # the floor is Spark's own, not a JVM setting we chose and it did not.
    spark = spark_session(None, input_bytes=os.path.getsize(source))
    if source.endswith(".csv"):
        df = spark.read.option("header", True).schema(G2_SCHEMA).csv(source)
    else:
        df = spark.read.parquet(source)
    if job == "jvm":
        rows = df.groupBy("k").count()
    else:

        def light(frame):  # one row per key: the key and its number of events
            import pandas as pd

            return pd.DataFrame({"k": [frame["k"].iloc[0]], "n": [len(frame)]})

        rows = df.groupBy("k").applyInPandas(light, schema="k long, n long")
    rows.write.mode("overwrite").json(output)
    spark.stop()


# ---- timing whole processes ----------------------------------------------------------


def _env(src: str | None = None) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its bytecode cached
    if src is not None:
        env["PYTHONPATH"] = src
    return env


def timed(args: list[str], env: dict, python: str | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one process and every process it
    starts, the JVM too: `timed_peak` without the memory."""
    return timed_peak(args, env, python)[:2]


def timed_peak(args: list[str], env: dict, python: str | None = None) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak resident MiB of one process and
    every process it starts, the JVM too (sampled from /proc every 0.1 s while they run,
    and the process itself once more when it has ended: a started process's last moments
    before exiting may be missed; the peak is the largest sum of their resident memory
    in one sample). The wall time ends when the process does, not at the next sample.
    `python`: the interpreter (default: this one)."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [python or sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    seen: dict[int, float] = {}
    sampled, peak = 0.0, 0.0
    while not _ended(child.pid):
        if time.perf_counter() - sampled >= 0.1:
            rss: dict[int, float] = {}
            seen.update(_tree_cpu(child.pid, rss))
            peak = max(peak, sum(rss.values()))
            sampled = time.perf_counter()
        time.sleep(0.002)
    seconds = time.perf_counter() - start
    seen.update(_tree_cpu(child.pid))  # ended, not yet reaped: its CPU is final
    _, stderr = child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"{args}: {stderr[-2000:]}")
    return seconds, sum(seen.values()), peak / 2**20


def _ended(pid: int) -> bool:
    """Whether the process has ended (it is left unreaped, so /proc still shows it)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _tree_cpu(root: int, rss: dict[int, float] | None = None) -> dict[int, float]:
    """CPU seconds so far of `root` and its descendants, by process id (and, into `rss`
    when given, their resident bytes)."""
    parents, cpu, resident = {}, {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
        resident[pid] = int(fields[21]) * PAGE
    tree = {root}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                changed = True
    if rss is not None:
        rss.update({pid: resident[pid] for pid in tree if pid in resident})
    return {pid: cpu[pid] for pid in tree if pid in cpu}


def interleaved(jobs: dict[str, tuple], repeat: int) -> dict[str, tuple]:
    """Median (wall, CPU) seconds of each job, the jobs taking turns in each round. A job
    is (args, env) or (args, env, python): see `timed`."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}
    for job in jobs.values():  # warm-up: caches, bytecode, the JVM archive
        timed(*job)
    for _ in range(repeat):
        for name, job in jobs.items():
            times[name].append(timed(*job))
    return {
        name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
        for name, t in times.items()
    }


def floor_jobs(source: Path, tmp: Path) -> dict[str, tuple[list[str], dict]]:
    """The two floors over `source` as processes to time: (args, env) by job name."""
    here = str(Path(__file__).parent.parent)
    src = os.environ.get("PYTHONPATH")
    jobs = {}
    for job in ("jvm", "python"):
        args = ["-m", "benchmarks.spark_floor", "--job", job, "--input", str(source)]
        args += ["--output", str(tmp / f"floor-{job}")]
        jobs[job] = (args, {**_env(src), "PYTHONPATH": _path(here, src)})
    return jobs


def spark_jobs(tmp: Path, baseline_src: str | None) -> dict[str, tuple[list[str], dict]]:
    _, csv, parquet, query = g2_files(tmp)
    here = str(Path(__file__).parent.parent)
    src = os.environ.get("PYTHONPATH")
    jobs = {}
    for source in (csv, parquet):
        fmt = source.suffix[1:].upper()
        for job, timed_job in floor_jobs(source, tmp).items():
            jobs[f"{job} floor {fmt}"] = timed_job
        run = ["-m", "sparkcep.cli", "run", str(query), "-i", str(source), "--time-unit", "ms"]
        jobs[f"sparkcep {fmt}"] = ([*run, "-o", str(tmp / "g2.jsonl")], _env(src))
        if fmt == "CSV":  # the checking pass reading the file twice (before the one read)
            two = {**_env(src), "SPARKCEP_ONE_PASS": "0", "SPARKCEP_ONE_READ": "0"}
            jobs["sparkcep CSV, two reads"] = ([*run, "-o", str(tmp / "g2two.jsonl")], two)
        if baseline_src:
            jobs[f"baseline {fmt}"] = (
                [*run, "-o", str(tmp / "g2b.jsonl")],
                _baseline(baseline_src),
            )
    demo = Path(here) / "examples" / "cpu_overload"
    run = ["-m", "sparkcep.cli", "run", str(demo / "query.cep"), "-i", str(demo / "events.csv")]
    jobs["demo"] = ([*run, "-o", str(tmp / "demo.jsonl")], _env(src))
    if baseline_src:
        jobs["demo before"] = ([*run, "-o", str(tmp / "demob.jsonl")], _baseline(baseline_src))
    return jobs


def _baseline(src: str) -> dict:
    # The code before had the class archive only after `sparkcep warmup`, which no
    # command ran: its runs started without it.
    return {**_env(src), "SPARKCEP_CDS": "0"}


def _path(*parts: str | None) -> str:
    return os.pathsep.join(p for p in parts if p)


def local_jobs(tmp: Path) -> dict[str, tuple[list[str], dict]]:
    csv = tmp / "g1.csv"
    g1().to_csv(csv, index=False)
    query = tmp / "g1.cep"
    query.write_text(G1_QUERY)
    env = _env(os.environ.get("PYTHONPATH"))
    run = ["-m", "sparkcep.cli", "run", str(query), "-i", str(csv), "--local"]
    return {
        "python start": (["-c", "pass"], env),
        "imports of run --local": (
            ["-c", "import sparkcep.cli, sparkcep.runners.local, sparkcep.files"],
            env,
        ),
        "count": ([*run, "--count"], env),
        "write JSON lines": ([*run, "-o", str(tmp / "g1.jsonl")], env),
        "write Parquet": ([*run, "-o", str(tmp / "g1.parquet")], env),
    }


# ---- the table -----------------------------------------------------------------------


def spark_rows(t: dict[str, tuple]) -> list[tuple]:
    """(measure, target, ours, floor, ratio kind) for the Spark path."""
    rows = []
    for fmt in ("CSV", "PARQUET"):
        ours = t[f"sparkcep {fmt}"]
        target = "≤ 1.1" if fmt == "CSV" else "≤ 0.9"
        rows.append((f"G2 {fmt}: sparkcep run / JVM-only job", target, ours, t[f"jvm floor {fmt}"]))
        py = t[f"python floor {fmt}"]
        rows.append((f"G2 {fmt}: sparkcep run / plain Python job", "≤ 0.8", ours, py))
        if f"baseline {fmt}" in t:
            rows.append((f"G2 {fmt}: sparkcep run / before", "< 1", ours, t[f"baseline {fmt}"]))
        if f"sparkcep {fmt}, two reads" in t:
            two = t[f"sparkcep {fmt}, two reads"]
            rows.append((f"G2 {fmt}: one pass / two reads (SPARKCEP_ONE_PASS=0, _ONE_READ=0)", "",
                         ours, two))  # fmt: skip
    rows = [(name, target, ours, floor, "ratio") for name, target, ours, floor in rows]
    before = t.get("demo before", (None, None))
    rows.append(("demo (12 events): sparkcep run, seconds (peer: before)", "≤ 5", t["demo"],
                 before, "seconds"))  # fmt: skip
    return rows


def local_rows(t: dict[str, tuple]) -> list[tuple]:
    """(measure, target, ours, floor, kind) for the local path."""
    sase = (SASE_G1_W101_SECONDS, SASE_G1_W101_SECONDS)  # its wall time, as the CPU figure too
    return [
        ("G1 W=101 run --local --count / Java SASE (issue figure)", "≤ 1.2", t["count"], sase,
         "ratio"),
        ("G1 W=101: writing JSON lines, seconds over --count", "≤ 0.15", t["write JSON lines"],
         t["count"], "difference"),
        ("G1 W=101: writing Parquet, seconds over --count", "< JSON", t["write Parquet"],
         t["count"], "difference"),
        ("imports of run --local, seconds over `python -c pass`", "", t["imports of run --local"],
         t["python start"], "difference"),
    ]  # fmt: skip


def _figure(ours, floor, kind, i: int) -> str:
    if kind == "seconds":
        return f"{ours[i]:.2f}"
    if floor[i] is None or ours[i] is None:
        return ""
    return f"{ours[i] / floor[i]:.2f}" if kind == "ratio" else f"{ours[i] - floor[i]:+.2f}"


def write(spark: dict | None, local: dict, load: tuple) -> str:
    lines = [
        "# Issue 16: the Spark path at Spark's floor, the local path",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}; load average {load[0]:.1f} before, {load[1]:.1f} after"
        " (other jobs share the machine: compare the figures measured in the same rounds,"
        " not the seconds across runs). Whole processes, medians of interleaved rounds; CPU"
        " = user + system seconds of the process and every process it started (the JVM,"
        " Python workers), sampled from /proc every 0.1 s.",
        "",
        "| measure | target | wall | CPU | seconds (wall, CPU) | floor or peer (wall, CPU) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    rows = (spark_rows(spark) if spark else []) + local_rows(local)
    for name, target, ours, floor, kind in rows:
        peer = ", ".join("" if x is None else f"{x:.2f}" for x in floor)
        lines.append(
            f"| {name} | {target} | {_figure(ours, floor, kind, 0)} | "
            f"{_figure(ours, floor, kind, 1)} | {ours[0]:.2f}, {ours[1]:.2f} | {peer} |"
        )
    lines += ["", "| job | wall s | CPU s |", "|---|---:|---:|"]
    for name, (wall, cpu) in {**(spark or {}), **local}.items():
        lines.append(f"| {name} | {wall:.2f} | {cpu:.2f} |")
    lines.append("")
    text = "\n".join(lines)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "spark_floor.md").write_text(text)
    write_targets("spark_floor", [_target(*row) for row in rows])
    return text


def _target(name, target, ours, floor, kind) -> dict:
    """The row for the table of targets (benchmarks.targets), judged on wall time."""
    figure = _figure(ours, floor, kind, 0)
    peer = "" if floor[0] is None else f"{floor[0]:.2f} s wall"
    note = f"CPU: {_figure(ours, floor, kind, 1)}" if kind != "seconds" else f"CPU s: {ours[1]:.2f}"
    return target_row(name, target, float(figure) if figure else None,
                      peer, note)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one round")
    parser.add_argument("--no-spark", action="store_true", help="the local path only")
    parser.add_argument("--baseline-src", help="also time `sparkcep run` from this src folder")
    parser.add_argument("--job", choices=["jvm", "python"], help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        floor_job(args.job, args.input, args.output)
        return
    repeat = 1 if args.quick else 3
    if not args.no_spark and not archive_path().exists():
        record(verbose=False)  # what the first Spark run does, done before the timing
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        local = interleaved(local_jobs(Path(tmp)), repeat=2 * repeat + 1)
        spark = None
        if not args.no_spark:
            spark = interleaved(spark_jobs(Path(tmp), args.baseline_src), repeat=repeat)
            same_rows(Path(tmp), ["g2.jsonl", "g2two.jsonl", "g2b.jsonl"])
    print(write(spark, local, (load_before, os.getloadavg()[0])))


def same_rows(folder: Path, names: list[str]) -> None:
    """The G2 runs (the last written: Parquet) gave the same rows, each way and version."""
    rows = {
        n: sorted((folder / n).read_text().splitlines()) for n in names if (folder / n).exists()
    }
    first = next(iter(rows.values()))
    different = [n for n, r in rows.items() if r != first]
    if different:
        raise SystemExit(f"G2's rows differ: {', '.join(different)} against {names[0]}")
    print(f"G2: {len(first):,} rows, the same in {', '.join(rows)}")


if __name__ == "__main__":
    main()
