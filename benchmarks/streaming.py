"""`sparkcep stream` on G2: sustained events/s and micro-batch latency, before and after.

G2 of the foundation issue (1,000,000 events, gaps 1..20 ms) gets an `id` column and is
split into 20 CSV files, plus one heartbeat file (an event a day later, of a type the
query does not name) so that the watermark passes the last events and the output is
complete. The query is skip-till-next `SEQ(A a, B b, C c)` with `[k]` WITHIN 5 s; its
batch answer has 8,438 matches and the stream's is checked against that count.

Measured for each code version (this tree's `src`, and `--before SRC`, e.g. a checkout of
main's `src`), each run in its own process, the versions in turn:
- files per micro-batch 1, 5 and 21 (trigger available-now): sustained events/s = events
  / the sum of the micro-batches' durations, and the median and 95th percentile of a
  micro-batch's duration (its latency: from the trigger to the rows written);
- the whole `sparkcep stream` process (JVM start to the summary) for 1 file per batch;
- where a micro-batch's time goes: the medians of Spark's durationMs parts, the first
  micro-batch's duration and the events/s of the others.

    python -m benchmarks.streaming [--before /work/main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.generators import G2_QUERY, g2
from benchmarks.targets import target_row, write_targets

RESULTS = Path(__file__).parent / "results"
EXPECTED_MATCHES = 8_438
LOAD = [0.0]  # the load average when the run started
# Spark's stages of a trigger (durationMs): addBatch runs the micro-batch's job.
PARTS = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def write_files(folder: Path, parts: int = 20) -> int:
    frame = g2()
    frame.insert(0, "id", np.arange(len(frame)))
    folder.mkdir(parents=True)
    for i, rows in enumerate(np.array_split(np.arange(len(frame)), parts)):
        frame.iloc[rows].to_csv(folder / f"part-{i:03d}.csv", index=False)
    beat = frame.iloc[[-1]].assign(id=len(frame), type="END", k=-1)
    beat["ts"] = int(frame["ts"].iloc[-1]) + 86_400_000
    beat.to_csv(folder / f"part-{parts:03d}.csv", index=False)
    # Spark picks files up in modification-time order: make it the name order.
    base = time.time() - 1000
    for i, path in enumerate(sorted(folder.glob("part-*"))):
        os.utime(path, (base + i, base + i))
    return len(frame) + 1


def count_rows(folder: Path) -> int:
    return sum(
        sum(1 for line in p.read_text().splitlines() if line) for p in folder.glob("batch-*.jsonl")
    )


def in_process(spark, folder: Path, tmp: Path, files_per_batch: int) -> dict:
    from sparkcep.runners.streaming.pipeline import read_stream, start, stream

    out = tmp / f"out-{files_per_batch}"
    source = read_stream(spark, str(folder), max_files=files_per_batch)
    rows = stream(source, G2_QUERY, id_col="id", time_unit="ms")
    started = time.perf_counter()
    running, _ = start(
        rows, output=str(out), late=str(out / "late"), rejected=str(out / "rejected"),
        checkpoint=str(tmp / f"ckpt-{files_per_batch}"), trigger="available-now",
    )  # fmt: skip
    running.awaitTermination()
    wall = time.perf_counter() - started
    progress = [p for p in running.recentProgress if p["numInputRows"] > 0]
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    events = sum(p["numInputRows"] for p in progress)
    later = progress[1:]  # without the first micro-batch (Python workers start, JIT)
    later_events = sum(p["numInputRows"] for p in later)
    matches = count_rows(out)
    return {
        "run": f"in-process, {files_per_batch} file(s) per micro-batch",
        "micro_batches": len(running.recentProgress),
        "batches_with_data": len(progress),
        "events": events,
        "matches": matches,
        "correct": matches == EXPECTED_MATCHES,
        "seconds": wall,
        "events_per_s": events / sum(durations),
        "events_per_s_after_first": later_events / sum(durations[1:]) if later else None,
        "first_batch_s": durations[0],
        "state_partitions": progress[0]["stateOperators"][0]["numShufflePartitions"],
        "latency_median_s": statistics.median(durations),
        "latency_p95_s": float(np.percentile(durations, 95)),
        # where a micro-batch's time goes (medians, s): Spark's stages of a trigger
        "parts": {
            part: statistics.median(p["durationMs"].get(part, 0) / 1000 for p in progress)
            for part in PARTS
        },
    }


def whole_process(folder: Path, tmp: Path, src: str, version: str) -> dict:
    out = tmp / f"cli-out-{version}"
    query = tmp / "g2.cep"
    query.write_text(G2_QUERY)
    args = [
        sys.executable, "-m", "sparkcep.cli", "stream", str(query), "--input", str(folder),
        "--output", str(out), "--checkpoint", str(tmp / f"cli-ckpt-{version}"), "--id", "id",
        "--time-unit", "ms", "--max-files-per-trigger", "1",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=_env(src))
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    matches = count_rows(out)
    return {
        "version": version,
        "run": "`sparkcep stream` process, 1 file per micro-batch",
        "events": 1_000_001,
        "matches": matches,
        "correct": matches == EXPECTED_MATCHES,
        "seconds": wall,
        "events_per_s": 1_000_001 / wall,
    }


def _env(src: str) -> dict:
    root = str(Path(__file__).resolve().parent.parent)
    return dict(os.environ, PYTHONPATH=os.pathsep.join([src, root]))


def one_version(folder: Path, tmp: Path, src: str, version: str, files: int) -> dict:
    """`in_process` in a process of its own that imports sparkcep from `src`."""
    args = [sys.executable, "-m", "benchmarks.streaming", "--one", str(files),
            "--folder", str(folder), "--tmp", str(tmp / f"{version}-{files}")]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, env=_env(src))
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return {"version": version, **json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", help="the src folder of the code to compare against")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        from sparkcep.runners.spark.session import spark_session

        tmp = Path(args.tmp)
        tmp.mkdir(parents=True)
        spark = spark_session()
        print(json.dumps(in_process(spark, Path(args.folder), tmp, args.one)))
        spark.stop()
        return
    after = str(Path(__file__).resolve().parent.parent / "src")
    versions = [("before", args.before)] if args.before else []
    versions.append(("after", after))
    tmp = Path(tempfile.mkdtemp(prefix="sparkcep-stream-bench-"))
    LOAD[0] = os.getloadavg()[0]
    rows = []
    try:
        folder = tmp / "in"
        write_files(folder)
        for version, src in versions:
            rows.append(whole_process(folder, tmp, src, version))
            print(rows[-1], flush=True)
        for files in (1, 5, 21):
            for version, src in versions:
                rows.append(one_version(folder, tmp, src, version, files))
                print(rows[-1], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write(rows, args.before)


def targets(rows: list[dict]) -> list[dict]:
    """Issue 16 §4's rows for benchmarks.targets: one 50k-event file per micro-batch."""
    run = "in-process, 1 file(s) per micro-batch"
    after = next((r for r in rows if r["version"] == "after" and r["run"] == run), None)
    if after is None:
        return []
    before = next((r for r in rows if r["version"] == "before" and r["run"] == run), None)

    def peer(key: str, unit: str) -> str:
        return (
            f"the --before code, same run: {before[key]:,.{0 if unit == 'ev/s' else 2}f} {unit}"
            if before
            else ""
        )

    return [
        target_row("4 · streaming G2, 1 file (50k events) per micro-batch, events/s", "≥ 100000",
                   after["events_per_s"], peer("events_per_s", "ev/s"),
                   f"output equal to batch: {after['correct']}"),
        target_row("4 · the same, median micro-batch latency, s", "≤ 1",
                   after["latency_median_s"], peer("latency_median_s", "s")),
    ]  # fmt: skip


def _parts_table(rows: list[dict]) -> list[str]:
    """Where a micro-batch's time goes (medians of Spark's durationMs parts, ms), and the
    events/s without the first micro-batch."""
    lines = [
        "",
        "Where a micro-batch's time goes (medians over the micro-batches with events, ms;"
        " addBatch runs the micro-batch's Spark job and the writer), the first micro-batch"
        " (Python workers start, the JVM compiles) and the events/s of the others:",
        "",
        "| code | run | state partitions | " + " | ".join(PARTS)
        + " | first micro-batch s | events/s after the first |",
        "|---|---|---:|" + "---:|" * len(PARTS) + "---:|---:|",
    ]  # fmt: skip
    for r in rows:
        if "parts" not in r:
            continue
        parts = " | ".join(f"{r['parts'][p] * 1000:.0f}" for p in PARTS)
        after = r.get("events_per_s_after_first")
        lines.append(
            f"| {r['version']} | {r['run']} | {r.get('state_partitions', '–')} | {parts} | "
            f"{r.get('first_batch_s', float('nan')):.2f} | "
            + (f"{after:,.0f} |" if after else "– |")
        )
    return lines


def write(rows: list[dict], before: str | None) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(RESULTS / "streaming.csv", index=False)
    lines = [
        "# `sparkcep stream` on G2 (1,000,000 events in 20 CSV files + a heartbeat file)",
        "",
        f"Query: `{G2_QUERY}` (`--time-unit ms`), Spark local[*] on 2 cores, trigger",
        "available-now. Sustained events/s = events / the sum of micro-batch durations;",
        "latency = a micro-batch's duration (trigger to rows written). `correct`: the",
        f"stream's rows number the batch answer's {EXPECTED_MATCHES:,}. `after`: this tree"
        + (f"; `before`: the code in `{before}`; the versions run in turn, each run a"
           " process of its own." if before else "."),
        "",
        f"Load average (1 min) at the start and end of the run: {LOAD[0]:.1f}, "
        f"{os.getloadavg()[0]:.1f} (on {os.cpu_count()} cores).",
        "",
        "| code | run | micro-batches | matches | correct | seconds | events/s | latency median s | latency p95 s |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]  # fmt: skip
    for r in rows:
        lat = (
            f"{r['latency_median_s']:.2f} | {r['latency_p95_s']:.2f}"
            if "latency_median_s" in r
            else "– | –"
        )
        lines.append(
            f"| {r['version']} | {r['run']} | {r.get('micro_batches', '–')} | {r['matches']:,} | "
            f"{r['correct']} | {r['seconds']:.1f} | {r['events_per_s']:,.0f} | {lat} |"
        )
    lines += _parts_table(rows)
    if before:
        lines += ["", "| run | events/s after / before | latency median after / before |",
                  "|---|---:|---:|"]  # fmt: skip
        for r in rows:
            if r["version"] != "after":
                continue
            b = next(x for x in rows if x["version"] == "before" and x["run"] == r["run"])
            lat = (
                f"{r['latency_median_s'] / b['latency_median_s']:.2f}"
                if "latency_median_s" in r
                else "–"
            )
            lines.append(f"| {r['run']} | {r['events_per_s'] / b['events_per_s']:.2f} | {lat} |")
    (RESULTS / "streaming.md").write_text("\n".join(lines) + "\n")
    write_targets("streaming", targets(rows))
    print("\n".join(lines))
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
