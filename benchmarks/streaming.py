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


def write_files(folder: Path, parts: int = 20, repeats: int = 1) -> int:
    """G2 in `parts` files, `repeats` times over (each time later by G2's span and a
    minute, new ids: no match spans two, each has G2's matches), and the heartbeat."""
    one = g2()
    span = int(one["ts"].iloc[-1] - one["ts"].iloc[0]) + 60_000
    frame = pd.concat(
        [one.assign(ts=one["ts"] + r * span) for r in range(repeats)], ignore_index=True
    )
    frame.insert(0, "id", np.arange(len(frame)))
    folder.mkdir(parents=True)
    for i, rows in enumerate(np.array_split(np.arange(len(frame)), parts * repeats)):
        frame.iloc[rows].to_csv(folder / f"part-{i:03d}.csv", index=False)
    parts *= repeats
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


def in_process(
    spark, folder: Path, tmp: Path, files_per_batch: int, expected: int = EXPECTED_MATCHES
) -> dict:
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
    matches = count_rows(out)
    return {
        "run": f"in-process, {files_per_batch} file(s) per micro-batch",
        "matches": matches,
        "correct": matches == expected,
        **timed(running, wall),
    }


def timed(running, wall: float) -> dict:
    """A finished stream's events/s (over every micro-batch with events, all but the
    first, the second half) and latencies, from Spark's progress reports."""
    progress = [p for p in running.recentProgress if p["numInputRows"] > 0]
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    rows = [p["numInputRows"] for p in progress]
    half = len(progress) // 2  # by the second half the JVM's compiler has caught up

    def rate(start: int) -> float | None:
        return sum(rows[start:]) / sum(durations[start:]) if durations[start:] else None

    return {
        "micro_batches": len(running.recentProgress),
        "batches_with_data": len(progress),
        "events": sum(rows),
        "seconds": wall,
        "events_per_s": rate(0),
        "events_per_s_after_first": rate(1),  # (the first: Python workers start, JIT)
        "events_per_s_second_half": rate(half),
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


def floor_in_process(spark, folder: Path, tmp: Path, files_per_batch: int, source: str) -> dict:
    """The floor: the stateful stream a PySpark user would write on the same files, with
    none of sparkcep's work. The CSV read with its schema given (Spark's file source, or
    sparkcep's folder source: `source`), event time as the watermark,
    groupBy(k).applyInPandasWithState of a light function (each key's event count kept
    in the state, one row per key and micro-batch) with an event-time timeout, rows
    written as JSON lines by Spark's file sink. Timed as `in_process` times sparkcep."""
    import pandas as pd
    from pyspark.sql import functions as F

    def light(key, frames, state):  # the key's events counted, kept in the state
        n = (state.get[0] if state.exists else 0) + sum(len(f) for f in frames)
        state.update((n,))
        yield pd.DataFrame({"k": [key[0]], "n": [n]})

    if source == "spark":
        df = (
            spark.readStream.schema("id long, type string, k long, v double, ts long")
            .option("header", True).option("maxFilesPerTrigger", files_per_batch)
            .csv(str(folder))
        )  # fmt: skip
    else:  # sparkcep's folder source (text cells, cast here as the schema above)
        from sparkcep.runners.streaming.pipeline import read_stream

        text = read_stream(spark, str(folder), max_files=files_per_batch).df
        types = {"id": "long", "type": "string", "k": "long", "v": "double", "ts": "long"}
        df = text.select(*[F.col(c).cast(t).alias(c) for c, t in types.items()])
    df = df.withColumn("t", F.timestamp_millis("ts")).withWatermark("t", "0 seconds")
    rows = df.groupBy("k").applyInPandasWithState(
        light, "k long, n long", "n long", "append", "EventTimeTimeout"
    )
    out = tmp / f"floor-{source}-{files_per_batch}"
    started = time.perf_counter()
    running = (
        rows.writeStream.format("json").option("path", str(out))
        .option("checkpointLocation", str(tmp / f"floor-ckpt-{source}-{files_per_batch}"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    running.awaitTermination()
    wall = time.perf_counter() - started
    return {
        "run": f"floor ({source} file source + applyInPandasWithState, light), "
        f"{files_per_batch} file(s) per micro-batch",
        "matches": 0,
        "correct": "–",
        **timed(running, wall),
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


def one_version(
    folder: Path, tmp: Path, src: str, version: str, files: int, what: str = "sparkcep",
    expected: int = EXPECTED_MATCHES,
) -> dict:  # fmt: skip
    """`in_process` (or a floor: `what`) in a process of its own (a JVM of its own) that
    imports sparkcep from `src`."""
    args = [sys.executable, "-m", "benchmarks.streaming", "--one", str(files),
            "--folder", str(folder), "--tmp", str(tmp / f"{version}-{what}-{files}"),
            "--what", what, "--expected", str(expected)]  # fmt: skip
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
    parser.add_argument("--what", default="sparkcep", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, default=EXPECTED_MATCHES, help=argparse.SUPPRESS)
    parser.add_argument(
        "--sustained-only", action="store_true",
        help="only the long stream (100 files) and its floors, added to the last run's table",
    )  # fmt: skip
    args = parser.parse_args()
    if args.one is not None:
        from sparkcep.runners.spark.session import spark_session

        tmp = Path(args.tmp)
        tmp.mkdir(parents=True)
        spark = spark_session(**{"spark.sql.streaming.numRecentProgressUpdates": "10000"})
        folder = Path(args.folder)
        if args.what == "sparkcep":
            row = in_process(spark, folder, tmp, args.one, args.expected)
        else:
            row = floor_in_process(spark, folder, tmp, args.one, args.what)
        print(json.dumps(row))
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
        if not args.sustained_only:
            for files in (1, 5, 21):
                for version, src in versions:
                    rows.append(one_version(folder, tmp, src, version, files))
                    print(rows[-1], flush=True)
        rows += sustained(tmp, after)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.sustained_only:  # beside the last run's other rows
        last = pd.read_csv(RESULTS / "streaming.csv").to_dict("records")
        rows = [r for r in last if r["version"] != "long"] + [
            r for r in rows if r["version"] == "long"
        ]
        rows = [_from_csv(r) for r in rows]
    write(rows, args.before)


def _from_csv(row: dict) -> dict:
    """A row as streaming.csv holds it, as the run made it: no NaN cells, whole numbers
    as integers, the parts a dict."""
    out = {}
    for key, value in row.items():
        if isinstance(value, float) and value != value:
            continue
        if isinstance(value, float) and value.is_integer() and key != "seconds":
            value = int(value)
        if key == "parts" and isinstance(value, str):
            value = json.loads(value.replace("'", '"'))
        out[key] = value
    return out


LONG_REPEATS = 5  # the long stream: G2 five times over, 100 files of 50,000 events


def sustained(tmp: Path, src: str) -> list[dict]:
    """One 50k-event file per micro-batch over 100 files (5M events), so that the JVM's
    compiler has caught up in the second half: sparkcep and the two floors, each in a
    JVM of its own, one after the other."""
    folder = tmp / "long"
    write_files(folder, repeats=LONG_REPEATS)
    rows = []
    for what in ("sparkcep", "folder", "spark"):
        row = one_version(folder, tmp, src, "long", 1, what, EXPECTED_MATCHES * LONG_REPEATS)
        row["run"] = row["run"].replace("in-process", "long stream (100 files), in-process")
        rows.append(row)
        print(row, flush=True)
    return rows


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
        *_long_target(rows),
    ]  # fmt: skip


def _long_target(rows: list[dict]) -> list[dict]:
    """The long stream's sustained events/s (its second half), the floors beside it."""
    long = {r["run"]: r for r in rows if r["version"] == "long"}
    ours = next((r for run, r in long.items() if run.startswith("long stream")), None)
    if ours is None:
        return []
    floors = "; ".join(
        f"{run.split(' + ')[0]}): {r['events_per_s_second_half']:,.0f} ev/s"
        for run, r in long.items() if run.startswith("floor")
    )  # fmt: skip
    return [
        target_row("4 · streaming G2, 1 file per micro-batch, 100 files: events/s over the "
                   "second half", "≥ 100000", ours["events_per_s_second_half"],
                   f"same run, {floors}", f"output equal to batch: {ours['correct']}"),
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
        + " | first micro-batch s | events/s after the first | events/s, second half |",
        "|---|---|---:|" + "---:|" * len(PARTS) + "---:|---:|---:|",
    ]  # fmt: skip
    for r in rows:
        if not isinstance(r.get("parts"), dict):  # (a whole process; NaN read from the csv)
            continue
        parts = " | ".join(f"{r['parts'][p] * 1000:.0f}" for p in PARTS)
        after, half = r.get("events_per_s_after_first"), r.get("events_per_s_second_half")
        lines.append(
            f"| {r['version']} | {r['run']} | {r.get('state_partitions', '–')} | {parts} | "
            f"{r.get('first_batch_s', float('nan')):.2f} | "
            + (f"{after:,.0f} |" if after == after and after else "– |")
            + (f" {half:,.0f} |" if half == half and half else " – |")
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
            b = next((x for x in rows if x["version"] == "before" and x["run"] == r["run"]), None)
            if b is None:
                continue
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
