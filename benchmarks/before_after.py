"""Before and after a refactor, in one run (issue 9: "G1/G2 and A-Seq, before and after,
measured in one run: no slower").

The code as of `--before` (a commit; default: the last commit before the engine
interface) is extracted with `git archive` into a temporary folder, and each job runs as
a whole `sparkcep` process with that code and with this checkout's, alternately (so load
on the shared machine falls on both alike), `--repeat` times each. The table gives the
medians and after / before; outputs are compared too (the same matches or rows).

    python -m benchmarks.before_after [--before COMMIT] [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import pandas as pd

from benchmarks.generators import G2_QUERY, g1, g2
from benchmarks.spark_floor import _env

ROOT = Path(__file__).parent.parent
RESULTS = Path(__file__).parent / "results"
BEFORE = "bb4258d"  # the last commit before the engine interface (issue 9)
# What a reader of a comparison must know, by the commit compared against.
NOTES = {
    "34ea600": (
        "The `--local` G2 row is the one issue 26 names (0.95 s at 34ea600 on a machine of the "
        "same kind): the bar is this ratio, both versions on this machine in one run. A-Seq's "
        "rows differ by design: since 34ea600 a trigger that ends no new match gives no row "
        "unless the query says `EMIT EVERY TRIGGER` (docs/aggregation.md), and float sums "
        "are exact and printed shortest (97.44, where 34ea600 printed 97.4399999999, within "
        "1.5e-8 of each other); the rows with a count above 0 have the same times and counts."
    ),
}
STOCKS = Path(os.environ.get("SPARKCEP_DATA", ROOT.parent / "shared" / "data")) / "stocks"


def extract(commit: str, into: Path) -> Path:
    """The `src/` of a commit, as files in `into`."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "src"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def compiled(src: Path) -> Path:
    """`src` with its modules compiled to bytecode, as an installed package has them: a
    process that compiles its sources at every start (PYTHONDONTWRITEBYTECODE) pays for
    each line of code, which would weigh the version with more code."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True,
                   env=_env())  # fmt: skip
    return src


def run(src: Path, args: list[str]) -> float:
    env = _env(str(src))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", "run", *args],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{src}: {done.stderr[-2000:]}")
    return seconds


def digest(path: Path) -> str:
    """The output's rows, order and float formatting aside."""
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        frame = pd.read_json(path, lines=True, dtype=False)
    frame = frame.sort_values(list(frame.columns)).reset_index(drop=True)
    return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()[:12]


def jobs(tmp: Path, quick: bool) -> list[tuple[str, list[str]]]:
    g1_csv, g2_csv = tmp / "g1.csv", tmp / "g2.csv"
    g1().to_csv(g1_csv, index=False)
    (g2().head(200_000) if quick else g2()).to_csv(g2_csv, index=False)
    out = []
    for window in (11, 101):
        query = tmp / f"g1_{window}.cep"
        query.write_text(f"PATTERN SEQ(A a, B b, C c) WITHIN {window}")
        out.append((f"G1 W={window}, --local", [str(query), "-i", str(g1_csv), "--local"]))
    q2 = tmp / "g2.cep"
    q2.write_text(G2_QUERY)
    g2_args = [str(q2), "-i", str(g2_csv), "--time-unit", "ms"]
    out.append(("G2, --local", [*g2_args, "--local"]))
    out.append(("G2, Spark local[*]", g2_args))
    if (STOCKS / "trades.csv.gz").exists():  # headerless: side, tx, stock, volume, price, ts
        names = ["side", "tx", "stock", "volume", "price", "ts"]
        trades = pd.read_csv(STOCKS / "trades.csv.gz", header=None, names=names)
        trades["type"] = "S" + trades["stock"].astype(str)
        trades[["type", "ts", "price"]].to_csv(tmp / "trades.csv", index=False)
        agg = tmp / "aseq.cep"
        agg.write_text(
            "PATTERN SEQ(S6 a, S3 b, S7 c, S5 d) WITHIN 10 s AGG COUNT AS n, SUM(a.price) AS s"
        )
        args = [str(agg), "-i", str(tmp / "trades.csv"), "--time-unit", "ms", "--local"]
        out.append(("A-Seq, 4 stocks in sequence on the trades, --local", args))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default=BEFORE)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run each, smaller G2")
    args = parser.parse_args()
    repeat = 1 if args.quick else args.repeat
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        versions = {"before": extract(args.before, tmp / "before"), "after": ROOT / "src"}
        versions = {name: compiled(src) for name, src in versions.items()}
        for label, job in jobs(tmp, args.quick):
            times: dict[str, list[float]] = {"before": [], "after": []}
            digests = {}
            for _ in range(repeat):
                for name, src in versions.items():
                    output = tmp / f"{name}.jsonl"
                    times[name].append(run(src, [*job, "-o", str(output)]))
                    digests[name] = digest(output)
            before, after = (statistics.median(times[n]) for n in ("before", "after"))
            same = "yes" if digests["before"] == digests["after"] else "NO"
            rows.append((label, before, after, after / before, same))
            print(f"{label}: before {before:.2f} s, after {after:.2f} s, same rows: {same}")
    write(rows, args.before, repeat)


def write(rows, before: str, repeat: int) -> None:
    # the default commit's table is the engine interface's (issue 9); another commit's is
    # a file of its own, so that one run does not replace the other's record
    title = "the engine interface (issue 9)" if before == BEFORE else f"commit `{before}`"
    name = "before_after.md" if before == BEFORE else f"before_after_{before}.md"
    lines = [
        f"# Before and after {title}",
        "",
        f"`python -m benchmarks.before_after` on {platform.machine()}, Python "
        f"{platform.python_version()}: whole `sparkcep run` processes (start-up included), "
        f"the code of commit `{before}` and of this checkout run alternately, median of "
        f"{repeat}, both compiled to bytecode first (as installed); after/before < 1 is "
        "faster. 'same rows': the outputs hold the same rows.",
        "",
        "| job | before (s) | after (s) | after / before | same rows |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [f"| {j} | {b:.2f} | {a:.2f} | {r:.2f} | {s} |" for j, b, a, r, s in rows]
    load = os.getloadavg()
    lines += [
        "",
        f"Load average at the end (1, 5, 15 min): {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}.",
    ]
    if before in NOTES:
        lines += ["", NOTES[before]]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
