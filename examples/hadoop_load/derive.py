"""Derive the case study's events from a Hadoop MapReduce log (Loghub's Hadoop_2k.log).

    python examples/hadoop_load/derive.py [LOG] --output events.csv

Like the paper's §5.2, the events merge two sources of different clocks and granularity:

- task events from the log, at 0.1 s (times are in tenths of a second since the log's
  first line): `TaskStart` when an attempt goes from ASSIGNED to RUNNING, `TaskEnd` when
  it leaves RUNNING (succeeded or failed), each with its attempt (`task`) and the node
  its container ran on (`node`, from the "using containerId ... on NM" line), with an
  uncertainty of delta = 0.5 s (5 ticks) either side;
- `Load` measurements every 15 s per node, as Ganglia takes them. The log has no load
  figures, so the load is derived from the log's own activity: `value` is the number
  of progress reports (the "Progress of TaskAttempt" lines) of attempts running on the
  node during the 15 s; the measurement is stamped at the middle of its period, with
  delta = 7.5 s (75 ticks): the peak may lie anywhere in the period.

Columns: id, type, ts, delta, node, task, value (task empty for Load, value empty for
task events). The interval of an event is [ts - delta, ts + delta].
"""

from __future__ import annotations

import argparse
import csv
import re
from datetime import datetime
from pathlib import Path

LOG = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "logs" / "Hadoop_2k.log"
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
ATTEMPT = r"(attempt_\d+_\d+_[mr]_\d+_\d+)"
NODE = re.compile(r"TaskAttempt: \[" + ATTEMPT + r"\] using containerId: \[\S+ on NM: \[([^:\]]+)")
START = re.compile(ATTEMPT + r" TaskAttempt Transitioned from ASSIGNED to RUNNING")
END = re.compile(ATTEMPT + r" TaskAttempt Transitioned from RUNNING to (\w+)")
PROGRESS = re.compile(r"Progress of TaskAttempt " + ATTEMPT)
TICK = 0.1  # seconds
TASK_DELTA = 5  # ticks: 0.5 s
PERIOD = 150  # ticks: 15 s between load measurements
LOAD_DELTA = 75  # ticks: 7.5 s


def read(path: Path) -> list[tuple[int, str]]:
    """(time in ticks since the first line, text) of each line."""
    out, first = [], None
    for line in path.read_text(errors="replace").splitlines():
        m = LINE.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        first = t if first is None else first
        out.append((round((t - first) / TICK), line))
    return out


def derive(path: Path) -> list[dict]:
    lines = read(path)
    node_of: dict[str, str] = {}
    tasks, reports = [], []
    for t, text in lines:
        if m := NODE.search(text):
            node_of[m.group(1)] = m.group(2).split(".")[0]
        if m := START.search(text):
            tasks.append(("TaskStart", t, m.group(1)))
        elif m := END.search(text):
            tasks.append(("TaskEnd", t, m.group(1)))
        elif m := PROGRESS.search(text):
            reports.append((t, m.group(1)))
    events = [
        {"type": kind, "ts": t, "delta": TASK_DELTA, "node": node_of[a], "task": a[-13:],
         "value": ""}
        for kind, t, a in tasks
        if a in node_of
    ]  # fmt: skip
    last = lines[-1][0]
    for node in sorted(set(node_of.values())):
        for start in range(0, last + 1, PERIOD):
            count = sum(
                1 for t, a in reports if start <= t < start + PERIOD and node_of.get(a) == node
            )
            events.append(
                {"type": "Load", "ts": start + PERIOD // 2, "delta": LOAD_DELTA, "node": node,
                 "task": "", "value": count}
            )  # fmt: skip
    events.sort(key=lambda e: (e["ts"], e["type"], e["node"]))
    for i, e in enumerate(events):
        e["id"] = i
    return events


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", nargs="?", default=str(LOG))
    parser.add_argument("--output", "-o", required=True)
    args = parser.parse_args()
    events = derive(Path(args.log))
    with open(args.output, "w", newline="") as f:
        writer = csv.DictWriter(f, ["id", "type", "ts", "delta", "node", "task", "value"])
        writer.writeheader()
        writer.writerows(events)
    print(f"{len(events)} events -> {args.output}")


if __name__ == "__main__":
    main()
