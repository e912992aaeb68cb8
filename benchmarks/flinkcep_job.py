"""G2's query on FlinkCEP: Flink SQL's MATCH_RECOGNIZE through PyFlink, the peer that
benchmarks/flinkcep.py times against `sparkcep run`.

Run by the Python of a venv that has apache-flink (never sparkcep's: apache-flink pins
its own pandas, pyarrow and numpy), as its own process; it imports nothing of sparkcep:

    ../flink-venv/bin/python benchmarks/flinkcep_job.py g2.csv out/ [--mode batch|streaming]

It reads the CSV `benchmarks.generators.g2_files` writes (header `type,k,v,ts`, ts in
epoch milliseconds) with the filesystem connector and writes one CSV line per match,
`k,a_ts,b_ts,c_ts`, into the folder `out/`. The pattern is G2's
`SEQ(A a, B b, C c) WHERE [k] STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 5 s`:

- PARTITION BY k, ORDER BY the event time `rt` (ts as a rowtime attribute);
- every A starts its own match: AFTER MATCH SKIP TO NEXT ROW;
- the next B after the A, then the next C after that B: the fillers X (any row but a B)
  and Y (any row but a C) skip the other rows, so no later B or C can stand in for the
  next one (a run whose next B or C falls outside the window is dead, as in sparkcep);
- WITHIN INTERVAL '5' SECOND: last.ts - first.ts < 5 s, as sparkcep's WITHIN.

The header line is read as a row of nulls (`csv.ignore-parse-errors`) and filtered out:
Flink's CSV format has no option to skip it.
"""

from __future__ import annotations

import argparse


def match_recognize_sql(table: str = "events", order_by: str = "rt") -> str:
    """The MATCH_RECOGNIZE query (sparkcep's MATCH_RECOGNIZE reads the same text, with
    `order_by="ts"`: tests/test_flinkcep_sql.py runs it)."""
    return f"""SELECT k, a_ts, b_ts, c_ts FROM {table} MATCH_RECOGNIZE (
  PARTITION BY k ORDER BY {order_by}
  MEASURES A.ts AS a_ts, B.ts AS b_ts, C.ts AS c_ts
  ONE ROW PER MATCH
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN (A X*? B Y*? C) WITHIN INTERVAL '5' SECOND
  DEFINE A AS A.type = 'A', X AS X.type <> 'B', B AS B.type = 'B',
         Y AS Y.type <> 'C', C AS C.type = 'C'
)"""


def statements(source: str, output: str) -> list[str]:
    """The SQL statements of the job, in order: source table, view without the header
    row, sink table, and the INSERT that runs the pattern."""
    return [
        f"""CREATE TABLE g2 (
  type STRING, k BIGINT, v DOUBLE, ts BIGINT,
  rt AS TO_TIMESTAMP_LTZ(COALESCE(ts, 0), 3),
  WATERMARK FOR rt AS rt
) WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv',
        'csv.ignore-parse-errors' = 'true')""",
        "CREATE TEMPORARY VIEW events AS SELECT * FROM g2 WHERE ts IS NOT NULL",
        f"""CREATE TABLE g2_matches (k BIGINT, a_ts BIGINT, b_ts BIGINT, c_ts BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{output}', 'format' = 'csv')""",
        "INSERT INTO g2_matches " + match_recognize_sql(),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("source", help="G2's CSV file")
    parser.add_argument("output", help="folder for the matches (CSV)")
    parser.add_argument("--mode", choices=["batch", "streaming"], default="batch")
    parser.add_argument("--parallelism", type=int, default=None, help="default: every core")
    args = parser.parse_args()

    import os
    import shutil

    from pyflink.table import EnvironmentSettings, TableEnvironment

    settings = (
        EnvironmentSettings.in_batch_mode()
        if args.mode == "batch"
        else EnvironmentSettings.in_streaming_mode()
    )
    env = TableEnvironment.create(settings)
    env.get_config().set("parallelism.default", str(args.parallelism or os.cpu_count()))
    shutil.rmtree(args.output, ignore_errors=True)  # the sink adds files to a folder
    *setup, insert = statements(os.path.abspath(args.source), os.path.abspath(args.output))
    for statement in setup:
        env.execute_sql(statement)
    env.execute_sql(insert).wait()


if __name__ == "__main__":
    main()
