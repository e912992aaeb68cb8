"""Imprecise timestamps at the paper's scale: the cluster-monitoring case study
(imprecise-timestamps.md §5.2, Fig. 4(f)) on a generated log of over a million events.

The paper's trace is a Hadoop job (about 6,800 map and 40 reduce tasks on 10 nodes,
150 minutes, 7 million log events) merged with Ganglia load measurements (every 15 s per
node). Its two clocks: Hadoop times in tenths of a second with δ_H = 0.5 s, Ganglia's
with δ_G = 7.5 s. The generator here follows that shape (seeded, numpy):

- 10 nodes with 3 task slots each run 6,800 map tasks (5-40 s) and 40 reduce tasks
  (5-15 minutes), one after another in each slot, over about 150 minutes;
- the log's events in ticks of 0.1 s, each [ts - 5, ts + 5]: `TaskStart` and `TaskEnd`
  of each task (with `task`, `node`), and a `Progress` report of each running task about
  every 0.16 s (the bulk of the log, as in a Hadoop log; no component matches it);
- `Load` every 15 s per node, [ts - 75, ts + 75] (the peak may lie anywhere in the
  period): `value` the node's CPU load in %, the sum of its running tasks' loads
  (reduces and some maps are heavy) plus noise, capped at 100.

The query is Query 1 of the paper (§2): per node, a task's start, a load above 95 %,
the task's end, then a load of at most 70 %, within 15 s, skip-till-any. Every
event-based method runs it over the same events (`Program.run`, CPU time, best of 3,
each in a forked child whose peak RSS is reported); the default method also runs through
the Python API (`match_local`) and the command line (`sparkcep run --local`). Writes
benchmarks/results/imprecise_case.md.

    python -m benchmarks.imprecise_case [--nodes N] [--maps N] [--quick]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

RESULTS = Path(__file__).parent / "results"
TASK_DELTA, LOAD_DELTA, PERIOD = 5, 75, 150  # ticks of 0.1 s
QUERY = (
    "PATTERN SEQ(TaskStart a, Load b, TaskEnd c, Load d) "
    "WHERE [node] AND a.task = c.task AND b.value > 95 AND d.value <= 70 "
    "STRATEGY SKIP_TILL_ANY_MATCH "
    "TIME BETWEEN ts - delta AND ts + delta WIDTH AT MOST 150 "
    "WITHIN 150 "
    "RETURN a.task AS task, b.value AS peak"
)
METHODS = {
    "imprecise-anystate": "any-state",
    "imprecise-sorted": "sorting (one at a time)",
    "imprecise-selectivity": "selectivity order",
    "imprecise": "query order, set at a time (default)",
}
TARGET = 50_000  # events/s of engine time


def cluster_log(nodes: int = 10, slots: int = 3, maps: int = 6800, reduces: int = 40,
                progress_every: float = 1.6, seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """The merged trace: task events and progress reports (0.1 s, ± 0.5 s) and load
    measurements (every 15 s per node, ± 7.5 s), sorted by time."""
    rng = np.random.default_rng(seed)
    n_slots = nodes * slots
    dur = np.r_[rng.integers(50, 400, maps), rng.integers(3000, 9000, reduces)]
    heavy = np.r_[rng.random(maps) < 0.25, np.ones(reduces, bool)]
    cpu = np.where(heavy, rng.uniform(30, 60, len(dur)), rng.uniform(5, 20, len(dur)))
    order = np.r_[np.arange(maps), rng.permutation(np.arange(maps, maps + reduces))]
    slot = np.arange(len(order)) % n_slots  # round robin over the slots
    start = np.zeros(len(dur), np.int64)
    end = np.zeros(len(dur), np.int64)
    free = rng.integers(0, 100, n_slots)  # when each slot is free
    for i, s in zip(order.tolist(), slot.tolist()):
        start[i] = free[s] + rng.integers(5, 30)  # scheduling gap
        end[i] = start[i] + dur[i]
        free[s] = end[i]
    node = slot[np.argsort(order)] // slots  # node of task i
    horizon = int(end.max()) + PERIOD
    # progress reports: every ~progress_every ticks of each task's run
    reports = np.maximum(1, (dur / progress_every).astype(np.int64))
    task_of = np.repeat(np.arange(len(dur)), reports)
    offset = rng.random(len(task_of)) * np.repeat(dur, reports)
    p_ts = start[task_of] + offset.astype(np.int64)
    # load per node every 15 s: the running tasks' cpu, plus noise
    l_ts = np.arange(PERIOD // 2, horizon, PERIOD)
    load = np.zeros((nodes, len(l_ts)))
    for i in range(len(dur)):
        a, b = np.searchsorted(l_ts, [start[i], end[i]])
        load[node[i], a:b] += cpu[i]
    load = np.clip(load + rng.normal(0, 8, load.shape), 0, 100).round(1)
    names = np.array([f"{'m' if i < maps else 'r'}_{i:06d}" for i in range(len(dur))])
    parts = [
        pd.DataFrame({"type": "TaskStart", "ts": start, "delta": TASK_DELTA, "node": node,
                      "task": names, "value": np.nan}),
        pd.DataFrame({"type": "TaskEnd", "ts": end, "delta": TASK_DELTA, "node": node,
                      "task": names, "value": np.nan}),
        pd.DataFrame({"type": "Progress", "ts": p_ts, "delta": TASK_DELTA,
                      "node": node[task_of], "task": names[task_of], "value": np.nan}),
        pd.DataFrame({"type": "Load", "ts": np.tile(l_ts, nodes), "delta": LOAD_DELTA,
                      "node": np.repeat(np.arange(nodes), len(l_ts)), "task": "",
                      "value": load.ravel()}),
    ]  # fmt: skip
    events = pd.concat(parts, ignore_index=True).sort_values("ts", kind="stable")
    events["node"] = "node" + events["node"].astype(str).str.zfill(2)
    events.insert(0, "id", np.arange(len(events), dtype=np.int64))
    return events.reset_index(drop=True)


def _engine(conn, events: pd.DataFrame, method: str, repeat: int) -> None:
    from sparkcep.checks import compile_one
    from sparkcep.plan import Options

    program = compile_one(QUERY, events.iloc[:50], Options(id_col="id", algorithm=method))
    frame = program.in_order(events)
    best, out = None, None
    for _ in range(repeat):
        cpu = time.process_time()
        out = program.run(frame)
        seconds = time.process_time() - cpu
        best = seconds if best is None else min(best, seconds)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send((best, len(out), float((out["confidence"] == 1).mean()) if len(out) else 0, rss))
    conn.close()


def _api(conn, events: pd.DataFrame, repeat: int) -> None:
    from sparkcep import match_local

    best = None
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        out = match_local(events, QUERY, time_col="ts", id_col="id")
        now = (time.process_time() - cpu, time.perf_counter() - wall)
        best = now if best is None else min(best, now)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    conn.send((*best, len(out), rss))
    conn.close()


def in_child(target, *args):
    """Run `target(conn, *args)` in a forked child: what it sends."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(child, *args))
    proc.start()
    child.close()
    got = parent.recv()
    proc.join()
    return got


def cli(events: pd.DataFrame) -> tuple[float, float, float, int]:
    """`sparkcep run --local` on a CSV of the events: (wall s, CPU s, peak RSS MiB,
    rows), the child process's own usage."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out, query = Path(tmp, "log.csv"), Path(tmp, "m.jsonl"), Path(tmp, "q.cep")
        events.to_csv(src, index=False)
        query.write_text(QUERY + "\n")
        args = [sys.executable, "-m", "sparkcep.cli", "run", str(query), "-i", str(src),
                "-o", str(out), "--id", "id", "--local"]  # fmt: skip
        wall = time.perf_counter()
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - wall
        err = proc.stderr.read().decode() if proc.stderr else ""
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise RuntimeError(f"sparkcep run failed: {err}")
        rows = sum(1 for _ in out.open())
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--maps", type=int, default=6800)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a tenth of the job, 1 run")
    args = parser.parse_args()
    if args.quick:
        args.maps, args.repeat = args.maps // 10, 1
    events = cluster_log(nodes=args.nodes, maps=args.maps)
    n = len(events)
    counts = events["type"].value_counts()
    span_s = (events["ts"].max() - events["ts"].min()) / 10
    print(f"{n:,} events over {span_s / 60:.0f} min: {counts.to_dict()}", flush=True)
    rows = []
    for method, label in METHODS.items():
        seconds, matches, certain, rss = in_child(_engine, events, method, args.repeat)
        rows.append((label, seconds, matches, certain, rss))
        print(f"{label}: {n / seconds:,.0f} events/s, {matches:,} signatures, "
              f"RSS {rss:,.0f} MiB", flush=True)  # fmt: skip
    api_cpu, api_wall, api_rows, api_rss = in_child(_api, events, args.repeat)
    print(f"match_local: {api_cpu:.2f} s CPU, {api_wall:.2f} s wall, RSS {api_rss:,.0f} MiB")
    cli_wall, cli_cpu, cli_rss, cli_rows = cli(events)
    print(f"sparkcep run --local: {cli_wall:.2f} s wall, RSS {cli_rss:,.0f} MiB")
    default = next(r for r in rows if r[0] == METHODS["imprecise"])
    assert api_rows == cli_rows == default[2], (api_rows, cli_rows, default[2])
    write(args, events, counts, span_s, rows, (api_cpu, api_wall, api_rss),
          (cli_wall, cli_cpu, cli_rss))  # fmt: skip


def write(args, events, counts, span_s, rows, api, cli_run) -> None:
    n = len(events)
    base = next(r[1] for r in rows if r[0] == METHODS["imprecise-anystate"])
    lines = [
        "# Imprecise timestamps: the cluster-monitoring case study at scale",
        "",
        "`python -m benchmarks.imprecise_case" + (" --quick" if args.quick else "") + "`. "
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared), load average at the "
        f"end {os.getloadavg()[0]:.1f}. Generated log (seeded; see the module docstring): "
        f"{n:,} events over {span_s / 60:.0f} minutes — "
        + ", ".join(f"{k} {v:,}" for k, v in counts.items())
        + f"; {args.nodes} nodes. Hadoop events at 0.1 s ± 0.5 s, Load every 15 s ± 7.5 s.",
        "",
        "Query 1 of the paper, per node, skip-till-any:",
        "",
        "```",
        QUERY.replace(" WHERE", "\nWHERE")
        .replace(" STRATEGY", "\nSTRATEGY")
        .replace(" TIME", "\nTIME")
        .replace(" WITHIN", "\nWITHIN")
        .replace(" RETURN", "\nRETURN"),
        "```",
        "",
        "## Engine time (`Program.run`, CPU, best of "
        f"{args.repeat}; each method in its own forked process)",
        "",
        f"Target: {TARGET:,} events/s. The paper (Fig. 4(f), its engine on its 7 M-event "
        "trace) gives the figure's values only in words: the sorting and selectivity "
        "methods improve much on any-state, selectivity outperforms sorting (Hadoop events "
        "are many, high-load measurements rare), both far above the trace's average "
        "arrival rate of 778 events/s; its best methods reach \"thousands to 10's of "
        'thousands of events per second" in the case study (§1, §7). Ours, same order:',
        "",
        "| method | events/s (CPU) | × any-state | × arrival rate (778/s) | signatures | "
        "certain | peak RSS (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, seconds, matches, certain, rss in rows:
        lines.append(
            f"| {label} | {n / seconds:,.0f} | {base / seconds:.2f} | {n / seconds / 778:,.0f} | "
            f"{matches:,} | {certain:.0%} | {rss:,.0f} |"
        )
    api_cpu, api_wall, api_rss = api
    cli_wall, cli_cpu, cli_rss = cli_run
    lines += [
        "",
        "## End to end (default method)",
        "",
        "| how | wall s | CPU s | events/s (wall) | peak RSS (MiB) |",
        "|---|---:|---:|---:|---:|",
        f"| Python API `match_local` (best of {args.repeat}) | {api_wall:.2f} | {api_cpu:.2f} | "
        f"{n / api_wall:,.0f} | {api_rss:,.0f} |",
        f"| `sparkcep run --local` on the CSV (one run, a new process) | {cli_wall:.2f} | "
        f"{cli_cpu:.2f} | {n / cli_wall:,.0f} | {cli_rss:,.0f} |",
        "",
        "The peak RSS of a method is that of its forked process, which holds the generated "
        "events (a pandas frame) before it starts; the command line's is its own process "
        "(reading the CSV, Python and pandas included).",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "imprecise_case.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / 'imprecise_case.md'}")


if __name__ == "__main__":
    main()
