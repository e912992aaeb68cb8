"""What a Python process Spark starts costs, from Spark's own home and from the compiled
home sparkcep builds (runners/spark/compiled_home.py).

Spark puts its `pyspark.zip` first on the path of the Python processes it starts, and
Python compiles a zip's modules at each import. Measured, the two homes interleaved:

- a fresh Python importing what a stream's folder reader imports (PySpark's stream source
  runner and sparkcep's folder source), with the path Spark gives it;
- a whole `sparkcep stream` process over a folder of the first 500 real trades (JVM start,
  one micro-batch and the end), with SPARKCEP_COMPILED_HOME=0 and =1.

Writes benchmarks/results/python_starts.md. Nothing here is asserted by the tests.

    python -m benchmarks.python_starts [--rounds 5] [--streams 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.small_runs import QUERY, trades

RESULTS = Path(__file__).parent / "results"
READER = "import pyspark.sql.streaming.python_streaming_source_runner, "
READER += "sparkcep.runners.streaming.folder_source"


def zips(home: Path) -> str:
    return os.pathsep.join(str(z) for z in sorted((home / "python" / "lib").glob("*.zip")))


def timed(args: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--streams", type=int, default=3)
    given = parser.parse_args()
    from sparkcep.runners.spark.compiled_home import build, real_home

    real, compiled = real_home(), build()
    homes = {"Spark's home (pyspark.zip compiled at each start)": real, "compiled home": compiled}
    imports: dict[str, list[float]] = {name: [] for name in homes}
    for _ in range(given.rounds):
        for name, home in homes.items():
            env = dict(
                os.environ, PYTHONPATH=zips(home) + os.pathsep + os.environ.get("PYTHONPATH", "")
            )
            imports[name].append(timed([sys.executable, "-c", READER], env))
    work = Path(tempfile.mkdtemp(prefix="python-starts-"))
    (work / "in").mkdir()
    trades(500).to_csv(work / "in" / "part-0.csv", index=False)
    streams: dict[str, list[float]] = {name: [] for name in homes}
    for i in range(given.streams):
        for name, flag in zip(homes, ("0", "1")):
            out = work / f"{i}-{flag}"
            args = [sys.executable, "-m", "sparkcep.cli", "stream", QUERY, "--input",
                    str(work / "in"), "--output", str(out / "out"), "--checkpoint",
                    str(out / "ckpt"), "--id", "id", "--time-unit", "ms",
                    "--trigger", "available-now", "--master", "local[2]"]  # fmt: skip
            env = dict(os.environ, SPARKCEP_COMPILED_HOME=flag)
            streams[name].append(timed(args, env))
    lines = [
        "# A Python process Spark starts: from Spark's home and from the compiled home",
        "",
        f"`python -m benchmarks.python_starts --rounds {given.rounds} --streams "
        f"{given.streams}`: the two homes interleaved, medians (all times in seconds).",
        "",
        "| what | Spark's home | compiled home | ratio |",
        "|---|---:|---:|---:|",
    ]
    for what, seen in (
        ("a fresh Python importing a stream reader's modules", imports),
        ("a whole `sparkcep stream` process, 500 trades, available-now", streams),
    ):
        before, after = (statistics.median(v) for v in seen.values())
        lines.append(f"| {what} | {before:.2f} | {after:.2f} | {before / after:.2f}x |")
    lines += [
        "",
        f"Query: `{QUERY}`, the first 500 trades of `stocks/trades.csv.gz`. A stream starts "
        "one reader process of its own; the worker daemons import the installed PySpark "
        "either way (runners/spark/daemon.py).",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "python_starts.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
