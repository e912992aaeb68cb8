"""What a small run through Spark costs in Python-to-JVM round trips, with PySpark's
DataFrame debugging on (PySpark's default) and off (the sessions sparkcep starts).

With debugging on, PySpark sends the Python call site of every Spark function call
(`F.col`, `F.when`, ...) to the JVM: about six more py4j round trips each. A small run
builds a few thousand Spark expressions, so on a machine where a round trip is slow
they can outweigh the Spark jobs themselves. Measured in one session, on the same file
(the first 500 real trades), the two settings interleaved:

- a `sparkcep run` of the file through Spark's checking pass (what the CLI does with an
  input over its driver-check size);
- a stream's set-up (`sparkcep.stream` on a folder of the same trades, no micro-batch).

Writes benchmarks/results/small_runs.md. Nothing here is asserted by the tests.

    python -m benchmarks.small_runs [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from contextlib import contextmanager, redirect_stdout
from io import StringIO
from pathlib import Path

import pandas as pd

RESULTS = Path(__file__).parent / "results"
DATA = Path(__file__).parent.parent.parent / "shared" / "data" / "stocks" / "trades.csv.gz"
# a buy, then a sale of the same stock 1% dearer within 2 s
QUERY = "PATTERN SEQ(B a, S b) WHERE [stock] AND b.price > a.price * 1.01 WITHIN 2 s"


def trades(n: int) -> pd.DataFrame:
    names = ["type", "id", "stock", "volume", "price", "ts"]
    return pd.read_csv(DATA, header=None, names=names, nrows=n)


@contextmanager
def counted_round_trips():
    """Counts py4j's commands to the JVM (each one round trip) while the block runs."""
    import py4j.clientserver as cs

    count = [0]
    send = cs.ClientServerConnection.send_command

    def counting(self, command):
        count[0] += 1
        return send(self, command)

    cs.ClientServerConnection.send_command = counting
    try:
        yield count
    finally:
        cs.ClientServerConnection.send_command = send


def set_debugging(on: bool) -> None:
    """The setting is static (fixed when the session starts), and PySpark reads it once per
    process into this cache, which every Spark function call then consults: set the cache."""
    import pyspark.errors.utils as utils

    utils._enable_debugging_cache = on


def checked_run(path: Path, out: Path) -> None:
    from sparkcep.cli import main

    with redirect_stdout(StringIO()):
        try:
            main(["run", QUERY, "-i", str(path), "-o", str(out), "--time-unit", "ms"])
        except SystemExit as done:
            if done.code:
                raise


def stream_setup(spark, folder: Path) -> None:
    import sparkcep
    from sparkcep.runners.streaming.pipeline import read_stream

    source = read_stream(spark, str(folder))
    sparkcep.stream(source, QUERY, id_col="id", time_unit="ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    from sparkcep.runners.spark.driver_check import ENV as DRIVER_CHECK_BYTES
    from sparkcep.runners.spark.session import spark_session

    os.environ[DRIVER_CHECK_BYTES] = "0"  # the checking pass in Spark, as for a larger file
    spark = spark_session("local[2]", app_name="small-runs", input_bytes=0)
    work = Path(tempfile.mkdtemp(prefix="small-runs-"))
    frame = trades(500)
    frame.to_csv(work / "trades.csv", index=False)
    (work / "folder").mkdir()
    frame.to_csv(work / "folder" / "part-0.csv", index=False)
    cases = {
        "sparkcep run, checking pass in Spark": lambda i: checked_run(
            work / "trades.csv", work / f"m{i}.jsonl"
        ),
        "stream set-up": lambda i: stream_setup(spark, work / "folder"),
    }
    seen: dict[tuple[str, bool], list[tuple[float, int]]] = {}
    for case, run in cases.items():
        for on in (True, False):  # once each, unmeasured: the first run loads classes
            set_debugging(on)
            run(-1)
        for i in range(rounds):
            for on in (True, False):
                set_debugging(on)
                with counted_round_trips() as count:
                    started = time.perf_counter()
                    run(i * 2 + on)
                    seconds = time.perf_counter() - started
                seen.setdefault((case, on), []).append((seconds, count[0]))
    spark.stop()
    lines = [
        "# A small run's Python-to-JVM round trips, PySpark's DataFrame debugging on and off",
        "",
        f"`python -m benchmarks.small_runs --rounds {rounds}`: one Spark session (local[2], "
        "the settings of a short run), the first 500 trades of "
        "`stocks/trades.csv.gz`, the two settings interleaved; medians of "
        f"{rounds} rounds. Query: `{QUERY}`.",
        "",
        "| what | debugging | seconds | py4j round trips | ratio (on / off) |",
        "|---|---|---:|---:|---:|",
    ]
    for case in cases:
        on = [statistics.median(x) for x in zip(*seen[(case, True)])]
        off = [statistics.median(x) for x in zip(*seen[(case, False)])]
        for label, (seconds, trips) in (("on (PySpark's default)", on), ("off (sparkcep)", off)):
            ratio = f"{on[0] / off[0]:.2f}x" if label.startswith("off") else ""
            lines.append(f"| {case} | {label} | {seconds:.2f} | {trips:,.0f} | {ratio} |")
    lines += [
        "",
        "One round trip costs about 0.2 ms of waiting here (a 2-core virtual machine); the "
        "seconds above include the Spark jobs, which the setting does not change.",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "small_runs.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
