"""A-Seq's memory does not follow the matches (aseq-online-aggregation.md §3): peak
resident memory of a length-3 AGG query over dense events, whose matches grow much
faster than the events, through `sparkcep run --local` and through the Python API, each
in a process of its own. Also the same query with float SUM/AVG (added up exactly) and
with MIN/MAX (kept as each START's records). Writes benchmarks/results/aseq_memory.md.

    python -m benchmarks.aseq_memory [--events N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.targets import target_row, write_targets

RESULTS = Path(__file__).parent / "results"
QUERY = "PATTERN SEQ(A a, B b, C c) AGG {aggs} WITHIN {window}"
RUNS = [  # (aggregates, their query text, whether the file has the value column v)
    ("COUNT", "COUNT", False),
    ("COUNT (file with v)", "COUNT", True),
    ("float SUM, AVG", "COUNT, SUM(b.v) AS s, AVG(a.v) AS av", True),
    ("MIN, MAX", "MIN(a.v) AS lo, MAX(c.v) AS hi", True),
]

API_RUN = """
import sys, resource, time
import pandas as pd
from sparkcep.engines.registry import compile_jobs
from sparkcep.inputs import ROW, schema_of, split_valid
from sparkcep.plan import Options, analyze
frame = pd.read_csv(sys.argv[1])
valid, _ = split_valid(frame, time_col="ts", type_col="type", id_col=None)
options = Options(id_col=ROW, algorithm="aseq")
(program,) = compile_jobs([analyze(sys.argv[2], schema_of(valid), options)], [None], options)
state = program.new_state()
start = time.process_time()
rows = program.process(state, program.in_order(valid))
cpu = time.process_time() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(cpu, state.stats["matches"], len(rows), peak)
"""


def dense(n: int, path: Path, values: bool) -> None:
    """n events of three types, one per millisecond (with a float value `v`)."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"type": np.array(list("ABC"))[rng.integers(0, 3, n)], "ts": np.arange(n)})
    if values:
        frame["v"] = rng.uniform(0, 100, n).round(2)
    frame.to_csv(path, index=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        files = {False: Path(folder) / "dense.csv", True: Path(folder) / "dense_v.csv"}
        for values, path in files.items():
            dense(args.events, path, values)
        for label, aggs, values in RUNS:
            query = QUERY.format(aggs=aggs, window=args.window)
            data = files[values]
            api = subprocess.run(
                [sys.executable, "-c", API_RUN, str(data), query],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            cpu, matches, count, api_mib = api.stdout.split()
            out = Path(folder) / "rows.csv"
            cli = subprocess.run(
                ["/usr/bin/time", "-f", "%M", str(Path(sys.executable).parent / "sparkcep"),
                 "run", query, "-i", str(data), "-o", str(out), "--local"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            cli_mib = int(cli.stderr.strip().splitlines()[-1]) / 1024
            rows.append(
                {
                    "aggregates": label,
                    "matches": int(matches),
                    "rows": int(count),
                    "engine_cpu_s": float(cpu),
                    "api_mib": float(api_mib),
                    "cli_mib": cli_mib,
                }
            )
            print(rows[-1], flush=True)
    write(rows, args.events, args.window)


def write(rows: list[dict], events: int, window: int) -> None:
    lines = [
        "# A-Seq's memory (aseq-online-aggregation.md §3)",
        "",
        f"`SEQ(A a, B b, C c) ... WITHIN {window}` over {events:,} events of three types, one"
        " per millisecond: the matches grow with the window cubed, the counters with the"
        " events. Peak resident memory (MiB) of the whole process: the Python API (the rows"
        " read by pandas, checked, then the program) and `sparkcep run --local` (which also"
        " reads the file and writes the rows). Engine CPU seconds: the program alone. The"
        " file has the columns type and ts, and a float v where the row says so. COUNT and"
        " SUM cost a few numbers per event; a float sum is added up exactly (each float's"
        " mantissa as three amounts added to 32-bit limbs of int64 arrays, per START and"
        " end event; handed to combine as a few floats each, whose window totals are"
        " taken over limbs too and rounded once); MIN and MAX keep each START's records"
        " (where its running extreme changes), and a sparse table of the triggers gives"
        " each trigger the extreme of the records alive at it.",
        "",
        "| aggregates | matches | rows | engine CPU s | API peak MiB | run --local peak MiB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['aggregates']} | {r['matches']:,} | {r['rows']:,} | {r['engine_cpu_s']:.1f} "
            f"| {r['api_mib']:.0f} | {r['cli_mib']:.0f} |"
        )
    (RESULTS / "aseq_memory.md").write_text("\n".join(lines) + "\n")
    count = rows[0]
    write_targets(
        "aseq_memory",
        [
            target_row(
                "A-Seq memory independent of matches: length 3, 1M dense events, peak MiB",
                "< 400",
                count["cli_mib"],
                "sparkcep run --local, whole process",
                f"{count['matches']:,} matches; {count['api_mib']:.0f} MiB through the API",
            )
        ],
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
