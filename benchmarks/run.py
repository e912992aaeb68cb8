"""`make bench`: the foundation issue's benchmarks, side by side in one run.

Writes benchmarks/results/foundation.md (table) and foundation.csv. Figures are medians
of several runs on this machine; nothing here is asserted by the tests.

    python -m benchmarks.run [--quick]
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.generators import G2_QUERY, g1, g2_files
from sparkcep.checks import compile_one
from sparkcep.inputs import ROW
from sparkcep.runners.local import run_local

RESULTS = Path(__file__).parent / "results"

# Reference figures measured on this machine for the same streams (from the issue).
REFERENCES = {
    "java_sase_w11_events": (2.0e6, 3.6e6),
    "java_sase_w101_events": (0.3e6, 0.7e6),
    "java_sase_w101_matches": (1.4e6, 3.4e6),
    "opencep_w11_events": 101e3,
    "opencep_w101_events": 11.6e3,
    "flinkcep_g2_seconds": 18.4,
}


def median_time(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def bench_g1(repeat: int) -> list[dict]:
    frame = g1()
    frame[ROW] = np.arange(len(frame))
    rows = []
    for window in (11, 101):
        for predicate in ("", "WHERE a.v < b.v AND b.v < c.v"):
            query = f"PATTERN SEQ(A a, B b, C c) {predicate} WITHIN {window}"
            program = compile_one(query, frame.rename(columns={ROW: "id"}))
            events = frame.rename(columns={ROW: "id"})

            def engine(program=program, events=events):
                return program.run(events)  # the stream is in time order already

            seconds, matches = median_time(engine, repeat)
            whole, result = median_time(
                lambda q=query: run_local(frame.drop(columns=[ROW]), q), repeat
            )
            rows.append(
                {
                    "stream": "G1 (100,000 events)",
                    "query": f"SEQ(A,B,C) W={window}" + (" a.v<b.v<c.v" if predicate else ""),
                    "matches": len(matches),
                    "engine s": seconds,
                    "events/s": len(frame) / seconds,
                    "matches/s": len(matches) / seconds,
                    "run_local s": whole,
                }
            )
            assert len(result.matches) == len(matches)
    return rows


def cli(args: list[str], env: dict | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return seconds


def bench_processes(repeat: int, tmp: Path) -> list[dict]:
    rows = []
    g1_csv = tmp / "g1.csv"
    g1().to_csv(g1_csv, index=False)
    query = tmp / "g1.cep"
    query.write_text("PATTERN SEQ(A a, B b, C c) WITHIN 101")
    seconds = statistics.median(
        cli(["run", str(query), "-i", str(g1_csv), "-o", str(tmp / "g1.jsonl"), "--local"])
        for _ in range(repeat)
    )
    rows.append(
        {
            "job": "sparkcep run --local, G1 W=101 (495,423 matches)",
            "input": "CSV",
            "seconds": seconds,
        }
    )

    frame, g2_csv, g2_parquet, q2 = g2_files(tmp)
    seconds, result = median_time(lambda: run_local(frame, G2_QUERY, time_unit="ms"), repeat)
    rows.append(
        {
            "job": f"G2 local engine ({len(result.matches):,} matches)",
            "input": "pandas",
            "seconds": seconds,
        }
    )

    from sparkcep.runners.jobs.warmup import archive_path, record

    if not archive_path().exists():
        record(verbose=False)
    for source in (g2_csv, g2_parquet):
        for archive in ("1", "0"):
            seconds = statistics.median(
                cli(
                    [
                        "run",
                        str(q2),
                        "-i",
                        str(source),
                        "-o",
                        str(tmp / "g2.jsonl"),
                        "--time-unit",
                        "ms",
                    ],
                    env={"SPARKCEP_CDS": archive},
                )
                for _ in range(repeat)
            )
            label = "with" if archive == "1" else "without"
            rows.append(
                {
                    "job": f"sparkcep run (Spark local[*]), G2, {label} the JVM class archive",
                    "input": source.suffix[1:].upper(),
                    "seconds": seconds,
                }
            )
    return rows


def write(g1_rows: list[dict], process_rows: list[dict]) -> str:
    RESULTS.mkdir(parents=True, exist_ok=True)
    ref = REFERENCES
    lines = [
        "# Foundation benchmarks (nfa engine, Spark batch runner)",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}."
        " Medians of repeated runs in one `make bench` process; engine time = building the"
        " event table (bitmask, order) + matching, not reading files.",
        "",
        "## G1: engine throughput",
        "",
        "| stream | query | matches | engine s | events/s | matches/s | run_local s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in g1_rows:
        lines.append(
            f"| {r['stream']} | {r['query']} | {r['matches']:,} | {r['engine s']:.4f} | "
            f"{r['events/s']:,.0f} | {r['matches/s']:,.0f} | {r['run_local s']:.3f} |"
        )
    w11 = next(r for r in g1_rows if r["query"] == "SEQ(A,B,C) W=11")
    w101 = next(r for r in g1_rows if r["query"] == "SEQ(A,B,C) W=101")
    lines += [
        "",
        "Targets: W=11 ≥ 1,000,000 events/s; W=101 ≥ 300,000 events/s and ≥ 1,500,000 matches/s.",
        "",
        "As ratios to the engines measured on this machine for the same streams (issue figures):",
        "",
        "| | sparkcep | compiled Java SASE | pure-Python OpenCEP |",
        "|---|---:|---:|---:|",
        f"| W=11 events/s | {w11['events/s']:,.0f} | {w11['events/s'] / ref['java_sase_w11_events'][1]:.2f}–"
        f"{w11['events/s'] / ref['java_sase_w11_events'][0]:.2f}× | "
        f"{w11['events/s'] / ref['opencep_w11_events']:.0f}× |",
        f"| W=101 events/s | {w101['events/s']:,.0f} | {w101['events/s'] / ref['java_sase_w101_events'][1]:.2f}–"
        f"{w101['events/s'] / ref['java_sase_w101_events'][0]:.2f}× | "
        f"{w101['events/s'] / ref['opencep_w101_events']:.0f}× |",
        f"| W=101 matches/s | {w101['matches/s']:,.0f} | {w101['matches/s'] / ref['java_sase_w101_matches'][1]:.2f}–"
        f"{w101['matches/s'] / ref['java_sase_w101_matches'][0]:.2f}× | |",
        "",
        "## Whole processes",
        "",
        "| job | input | wall seconds |",
        "|---|---|---:|",
    ]
    for r in process_rows:
        lines.append(f"| {r['job']} | {r['input']} | {r['seconds']:.2f} |")
    lines += [
        "",
        f"Target: G2 through `sparkcep run` ≤ 15 s; FlinkCEP (PyFlink MATCH_RECOGNIZE) took a"
        f" median {ref['flinkcep_g2_seconds']} s for the same job on this machine.",
        "The JVM class archive is recorded once by `sparkcep warmup` (see README).",
        "",
    ]
    text = "\n".join(lines)
    (RESULTS / "foundation.md").write_text(text)
    with open(RESULTS / "foundation.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["section", "name", "matches", "seconds", "events_per_s", "matches_per_s"])
        for r in g1_rows:
            writer.writerow(
                [
                    "G1",
                    r["query"],
                    r["matches"],
                    f"{r['engine s']:.5f}",
                    f"{r['events/s']:.0f}",
                    f"{r['matches/s']:.0f}",
                ]
            )
        for r in process_rows:
            writer.writerow(
                ["process", f"{r['job']} [{r['input']}]", "", f"{r['seconds']:.3f}", "", ""]
            )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one repetition each")
    args = parser.parse_args()
    repeat = 1 if args.quick else 3
    g1_rows = bench_g1(repeat=5 if not args.quick else 1)
    with tempfile.TemporaryDirectory() as tmp:
        process_rows = bench_processes(repeat, Path(tmp))
    print(write(g1_rows, process_rows))


if __name__ == "__main__":
    main()
