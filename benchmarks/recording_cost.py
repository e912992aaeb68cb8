"""What recording the JVM class archive costs the session that records it.

Java writes a dynamic class archive (`-XX:ArchiveClassesAtExit`) when the JVM exits, and
a JVM that records runs slower all through, not only while it starts. So a sparkcep run
never records itself (runners/spark/cds.py): the first one starts a recorder in the
background. Measured here, in one run, three fresh sessions of each kind interleaved:

- recording: the session's JVM records the archive as it exits (what the first run did);
- no archive: SPARKCEP_CDS=0;
- with the archive (recorded first by `sparkcep warmup`'s job into a folder of its own).

Each session starts (its start timed), then does three rounds of four small checked runs
(the first 60 real trades, Spark's checking pass) and one stream of three micro-batches.

Writes benchmarks/results/recording_cost.md. Nothing here is asserted by the tests.

    python -m benchmarks.recording_cost [--sessions 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).parent.parent


def session(record_to: str | None) -> dict:
    """One session's start and work, in this (fresh) process; returns the seconds."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_streaming as streams

    from benchmarks.small_runs import checked_run, trades
    from sparkcep.runners.spark.session import spark_session

    started = time.perf_counter()
    conf = {"spark.sql.shuffle.partitions": "3", "spark.default.parallelism": "2"}
    if record_to:
        conf["spark.driver.extraJavaOptions"] = f"-XX:ArchiveClassesAtExit={record_to}"
    spark = spark_session("local[2]", app_name="recording-cost", input_bytes=0, **conf)
    start = time.perf_counter() - started
    os.environ["SPARKCEP_DRIVER_CHECK_BYTES"] = "0"  # Spark's checking pass
    work = Path(tempfile.mkdtemp(prefix="recording-cost-"))
    trades(60).to_csv(work / "t.csv", index=False)
    for round_ in range(3):
        for i in range(4):
            checked_run(work / "t.csv", work / f"m{round_}-{i}.jsonl")
        folder = work / f"s{round_}"
        streams.write_files(streams.events(), folder / "in", parts=3)
        streams.run_stream(spark, folder / "in", streams.QUERIES[0], folder)
    total = time.perf_counter() - started
    spark.stop()
    return {"start": start, "total": total}


def fresh_session(env: dict, record_to: str | None = None) -> dict:
    code = "import json; from benchmarks.recording_cost import session; "
    code += f"print('seconds:', json.dumps(session({record_to!r})))"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    said = [line for line in done.stdout.splitlines() if line.startswith("seconds: ")]
    return json.loads(said[-1].removeprefix("seconds: "))


def wait_for(archive: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    size = -1
    while time.monotonic() < deadline:
        now = archive.stat().st_size if archive.exists() else -1
        if now > 0 and now == size:
            return
        size = now
        time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3)
    given = parser.parse_args()
    from sparkcep.runners.jobs.warmup import record

    folder = Path(tempfile.mkdtemp(prefix="recording-cost-cds-"))
    base = dict(os.environ, SPARKCEP_CDS_DIR=str(folder), PYTHONPATH=str(ROOT))
    os.environ["SPARKCEP_CDS_DIR"] = str(folder)
    record(verbose=False)  # the archive the third kind maps
    kinds = {
        "recording (the session's JVM writes the archive as it exits)": "record",
        "no archive (SPARKCEP_CDS=0)": "none",
        "with the archive": "archive",
    }
    seen: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for i in range(given.sessions):
        for kind, how in kinds.items():
            env = dict(base, SPARKCEP_CDS="1" if how == "archive" else "0")
            target = str(folder / f"own-{i}.jsa") if how == "record" else None
            seen[kind].append(fresh_session(env, target))
            if target:  # its JVM writes the archive as it exits: not during the next one
                wait_for(Path(target))
    none = statistics.median(s["total"] for s in seen["no archive (SPARKCEP_CDS=0)"])
    lines = [
        "# What recording the JVM class archive costs the session that records it",
        "",
        f"`python -m benchmarks.recording_cost --sessions {given.sessions}`: fresh sessions "
        "of each kind interleaved (local[2], the tests' settings), medians in seconds. "
        "Each session: its start, then three rounds of four small checked runs and a "
        "stream of three micro-batches.",
        "",
        "| session | start | start and work | ratio to no archive |",
        "|---|---:|---:|---:|",
    ]
    for kind in kinds:
        start = statistics.median(s["start"] for s in seen[kind])
        total = statistics.median(s["total"] for s in seen[kind])
        lines.append(f"| {kind} | {start:.1f} | {total:.1f} | {total / none:.2f} |")
    lines += [
        "",
        "A JVM that records is slower all through, so no run records itself: the first run "
        "without an archive starts a recorder in the background (runners/spark/cds.py).",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "recording_cost.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
