"""The stateful step's own Python work per micro-batch on G2, outside Spark: before/after.

`benchmarks/streaming.py` times whole micro-batches, where Spark's share (reading,
shuffle, state store, output) and the machine's load weigh as much as the step. This
times only `StreamStep`, fed as Spark's applyInPandasWithState feeds it: 20 batches of
G2's A/B/C events (one 50,000-event file each; the first 8 run), one call per group
(per key before, per bucket after), with the state kept between calls as the store would.

    python -m benchmarks.stream_step --before /work/main/src   # each version in turn, twice
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

RESULTS = Path(__file__).parent / "results"
BATCHES = 8


class GroupState:
    """What applyInPandasWithState gives the step: the stored value and the watermark."""

    def __init__(self):
        self.value, self.watermark_ms = None, 0

    exists = property(lambda self: self.value is not None)
    get = property(lambda self: self.value)

    def update(self, value):
        self.value = value

    def remove(self):
        self.value = None

    def setTimeoutTimestamp(self, ms):
        pass

    def getCurrentWatermarkMs(self):
        return self.watermark_ms


def one_version(folder: str) -> dict:
    """Seconds of step work per batch, for the sparkcep on the path."""
    from benchmarks.generators import G2_QUERY, g2
    from sparkcep.inputs import REASON
    from sparkcep.plan import Options
    from sparkcep.prep.table import MASK, TICKS
    from sparkcep.runners.spark.session import spark_session
    from sparkcep.runners.streaming import pipeline as streaming

    spark = spark_session("local[1]")
    source = streaming.read_stream(spark, folder, max_files=1)
    sdf, step, _ = streaming.prepare_stream(
        source, G2_QUERY, Options(id_col="id", time_unit="ms"), "0"
    )
    fed = set(sdf.columns)
    spark.stop()
    frame = g2()
    frame.insert(0, "id", np.arange(len(frame)))
    for col, raw in step.raw.items():
        if raw in fed:  # the cells as read, where the version gives them to the step
            frame[raw] = frame[col].astype(str)
    frame = frame[frame["type"].isin(list("ABC"))].reset_index(drop=True)
    frame[TICKS] = frame["ts"]
    frame[MASK] = step.program.mask(frame)
    frame[REASON] = None
    frame[streaming.KEY] = [json.dumps([str(k)]) for k in frame["k"]]
    buckets = getattr(streaming, "BUCKETS", None)
    if buckets is not None:  # the stream's bucket of each key is a hash; any split will do
        frame[streaming.BUCKET] = frame["k"] % buckets
        group = streaming.BUCKET
    else:
        group = "k"
    frame[streaming.WATERMARK] = pd.Timestamp("2255-01-01")
    states: dict = {}
    watermark, calls, seconds = 0, 0, 0.0
    for rows in np.array_split(np.arange(len(frame)), 20)[:BATCHES]:
        batch = frame.iloc[rows]
        started = time.perf_counter()
        for g, part in batch.groupby(group):
            state = states.setdefault(g, GroupState())
            state.watermark_ms = watermark
            for _ in step((g,), iter([part]), state):
                pass
            calls += 1
        seconds += time.perf_counter() - started
        watermark = int(batch["ts"].max())
    return {"calls_per_batch": calls / BATCHES, "seconds_per_batch": seconds / BATCHES}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="the src folder to compare against")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_version(args.one)))
        return
    from benchmarks.streaming import write_files

    root = Path(__file__).resolve().parent.parent
    folder = Path("/tmp") / f"sparkcep-step-bench-{os.getpid()}"
    if not folder.exists():
        write_files(folder, parts=20)
    rows = []
    for round_ in (1, 2):
        for version, src in (("before", args.before), ("after", str(root / "src"))):
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, str(root)]))
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.stream_step", "--before", args.before,
                 "--one", str(folder)],
                capture_output=True, text=True, env=env,
            )  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(done.stderr[-3000:])
            result = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append({"round": round_, "version": version, **result})
            print(rows[-1], flush=True)
    lines = [
        "# The stateful step's Python work per micro-batch (G2, outside Spark)",
        "",
        f"`python -m benchmarks.stream_step --before {args.before}`: {BATCHES} batches of",
        "50,000 G2 events (their A/B/C events reach the step), one call per group as",
        "applyInPandasWithState makes them; `before`: one group per key (100 keys);",
        "`after`: one per bucket of keys. Versions in turn, twice, one process each.",
        "",
        "| round | code | calls per batch | seconds per batch |",
        "|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['round']} | {r['version']} | {r['calls_per_batch']:.0f} | "
            f"{r['seconds_per_batch']:.3f} |"
        )
    for round_ in (1, 2):
        b, a = (next(r for r in rows if r["round"] == round_ and r["version"] == v)
                for v in ("before", "after"))  # fmt: skip
        lines.append(
            f"\nRound {round_}: after / before = {a['seconds_per_batch'] / b['seconds_per_batch']:.2f}"
        )
    (RESULTS / "stream_step.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
