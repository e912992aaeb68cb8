"""The Spark path's cost per event at scale, against the plain PySpark jobs, in one run.

G2 (`SEQ(A a, B b, C c) WHERE [k] STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 5 s`, 100 keys) at
4M and 16M events, CSV and Parquet. Whole processes, timed side by side in interleaved
rounds (medians), each with its peak memory (the sum of the resident memory of the
process and every process it started: the JVM, Spark's Python workers):

- `sparkcep run` through Spark (local mode, every core), and `sparkcep run --local`;
- the two floors of `benchmarks.spark_floor`: a plain Python job (read + groupBy(k).
  applyInPandas of a light function + write) and a JVM-only job (read + groupBy(k).count()
  + write), the CSV read with its schema given;
- the cost per added event: (seconds at the larger size - seconds at the smaller) /
  (events added), for sparkcep and the plain Python job;
- a skewed input (half of the events on one key) through Spark with the Python workers
  capped at 2 GB (`spark.executor.pyspark.memory`), its matches against `--local`'s.

Every sparkcep output is compared with `--local`'s (the same rows). Writes
benchmarks/results/spark_scale.md. Nothing here is asserted by the tests.

    python -m benchmarks.spark_scale [--sizes 4M,16M] [--rounds 2] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from benchmarks.generators import G2_QUERY
from benchmarks.spark_floor import _env, floor_jobs, timed_peak
from benchmarks.targets import target_row, write_targets

RESULTS = Path(__file__).parent / "results"
SKEW_CAP = "2g"
CHUNK = 2_000_000


def g2_table(n: int, seed: int, hot_share: float = 0.0):
    """Chunks of G2 (`generators.g2`'s distributions) as Arrow tables; `hot_share` of the
    events on key 0 (the rest spread over 0..99)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("ABCDEFGHIJ"))
    t0 = 1_700_000_000_000
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        gaps = rng.integers(1, 21, m)
        k = rng.integers(0, 100, m)
        if hot_share:
            k[rng.random(m) < hot_share] = 0
        ts = t0 + np.cumsum(gaps)
        t0 = int(ts[-1])
        yield pa.table({
            "type": letters[rng.integers(0, 10, m)],
            "k": k,
            "v": np.round(rng.uniform(0, 100, m), 3),
            "ts": ts,
        })  # fmt: skip


def write_g2(folder: Path, name: str, n: int, hot_share: float = 0.0) -> tuple[Path, Path]:
    """G2 of `n` events as `name`.csv and `name`.parquet in `folder`."""
    csv, parquet = folder / f"{name}.csv", folder / f"{name}.parquet"
    csv_writer = parquet_writer = None
    for table in g2_table(n, seed=42, hot_share=hot_share):
        if csv_writer is None:
            csv_writer = pa_csv.CSVWriter(
                str(csv), table.schema, write_options=pa_csv.WriteOptions(quoting_style="none")
            )
            parquet_writer = pq.ParquetWriter(str(parquet), table.schema)
        csv_writer.write_table(table)
        parquet_writer.write_table(table)
    csv_writer.close()
    parquet_writer.close()
    return csv, parquet


def jobs_for(tmp: Path, label: str, csv: Path, parquet: Path, query: Path) -> dict:
    """The timed jobs over one input: (args, env) by name."""
    env = _env(os.environ.get("PYTHONPATH"))
    jobs = {}
    for source in (csv, parquet):
        fmt = source.suffix[1:].upper()
        for job, timed_job in floor_jobs(source, tmp).items():
            jobs[f"{label} {fmt} {job} floor"] = timed_job
        run = ["-m", "sparkcep.cli", "run", str(query), "-i", str(source), "--time-unit", "ms"]
        out = tmp / f"{label}-{fmt}.jsonl"
        jobs[f"{label} {fmt} sparkcep"] = ([*run, "-o", str(out)], env)
        if fmt == "CSV":
            jobs[f"{label} CSV --local"] = ([*run, "--local", "-o", str(tmp / f"{label}-local.jsonl")],
                                            env)  # fmt: skip
    return jobs


def skew_jobs(tmp: Path, query: Path, n: int) -> dict:
    csv, _ = write_g2(tmp, "skew", n, hot_share=0.5)
    env = _env(os.environ.get("PYTHONPATH"))
    capped = {**env, "PYSPARK_SUBMIT_ARGS":
              f"--conf spark.executor.pyspark.memory={SKEW_CAP} pyspark-shell"}  # fmt: skip
    run = ["-m", "sparkcep.cli", "run", str(query), "-i", str(csv), "--time-unit", "ms"]
    return {
        "skew CSV sparkcep": ([*run, "-o", str(tmp / "skew-CSV.jsonl")], capped),
        "skew CSV --local": ([*run, "--local", "-o", str(tmp / "skew-local.jsonl")], env),
    }


def rounds(jobs: dict, repeat: int) -> dict[str, tuple]:
    """Median (wall, CPU, peak MiB) of each job (None: it failed, with its error), the
    jobs taking turns; no warm-up round at these sizes (a run takes seconds to minutes:
    the first round's page cache and bytecode matter little), but the first job of all
    runs once before the rounds."""
    times: dict[str, list] = {name: [] for name in jobs}
    errors: dict[str, str] = {}
    first = next(iter(jobs.values()))
    timed_peak(*first)
    for _ in range(repeat):
        for name, job in jobs.items():
            if name in errors:
                continue
            try:
                times[name].append(timed_peak(*job))
            except RuntimeError as e:
                errors[name] = str(e).strip().splitlines()[-1][:200]
            print(name, times[name][-1] if times[name] else errors[name], flush=True)
    out = {}
    for name, t in times.items():
        out[name] = (
            tuple(statistics.median(x[i] for x in t) for i in range(3)) if t else errors[name]
        )
    return out


def same_rows(a: Path, b: Path) -> str:
    """Whether two JSON-lines outputs hold the same rows (in any order)."""
    if not a.exists() or not b.exists():
        return "no output"

    def rows(p: Path) -> list[str]:
        files = sorted(p.glob("*.json*")) if p.is_dir() else [p]
        return sorted(line for f in files for line in f.read_text().splitlines() if line)

    ra, rb = rows(a), rows(b)
    return f"yes ({len(ra):,} rows)" if ra == rb else f"NO ({len(ra):,} against {len(rb):,})"


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * scale)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="4M,16M", help="two sizes, smaller first")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skew", default="4M", help="the skewed input's size (0: none)")
    parser.add_argument("--quick", action="store_true", help="1M and 2M, one round, no skew")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.rounds, args.skew = "1M,2M", 1, "0"
    sizes = [_size(s) for s in args.sizes.split(",")]
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="sparkcep-scale-") as tmp:
        tmp = Path(tmp)
        query = tmp / "g2.cep"
        query.write_text(G2_QUERY)
        jobs, labels = {}, []
        for n in sizes:
            label = f"{n // 1_000_000}M"
            labels.append((label, n))
            csv, parquet = write_g2(tmp, f"g2-{label}", n)
            jobs.update(jobs_for(tmp, label, csv, parquet, query))
        skew = _size(args.skew)
        if skew:
            jobs.update(skew_jobs(tmp, query, skew))
        t = rounds(jobs, args.rounds)
        checks = {}
        for label, _ in labels:
            local = tmp / f"{label}-local.jsonl"
            for fmt in ("CSV", "PARQUET"):
                checks[f"{label} {fmt}"] = same_rows(tmp / f"{label}-{fmt}.jsonl", local)
        if skew:
            checks["skew CSV"] = same_rows(tmp / "skew-CSV.jsonl", tmp / "skew-local.jsonl")
        sizes_text = {label: tmp.joinpath(f"g2-{label}.csv").stat().st_size for label, _ in labels}
    load.append(os.getloadavg()[0])
    print(write(t, labels, checks, sizes_text, skew, load, args.rounds))


def _seconds(x) -> str:
    return f"{x[0]:.1f}" if isinstance(x, tuple) else "failed"


def write(t, labels, checks, sizes_text, skew, load, repeat) -> str:
    lines = [
        "# The Spark path at scale: G2, 4M and 16M events, against the plain PySpark jobs",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}; load average {load[0]:.1f} before, {load[1]:.1f} after."
        f" Whole processes, median of {repeat} interleaved rounds; CPU = user + system seconds"
        " of the process and every process it started; peak = the largest sum of their"
        " resident memory, sampled every 0.1 s. `python -m benchmarks.spark_scale`.",
        "",
        "| events | format | input MB | sparkcep s | applyInPandas job s | JVM count job s |"
        " ratio to applyInPandas | `--local` s | peak MiB (sparkcep, applyInPandas, --local) |"
        " same rows as --local |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    targets = []
    for label, _ in labels:
        for fmt in ("CSV", "PARQUET"):
            ours, py, jvm = (t[f"{label} {fmt} {j}"] for j in ("sparkcep", "python floor",
                                                               "jvm floor"))  # fmt: skip
            local = t.get(f"{label} CSV --local") if fmt == "CSV" else None
            ratio = ours[0] / py[0] if isinstance(ours, tuple) and isinstance(py, tuple) else None
            peaks = ", ".join(f"{x[2]:,.0f}" if isinstance(x, tuple) else "–"
                              for x in (ours, py, local))  # fmt: skip
            lines.append(
                f"| {label} | {fmt} | {sizes_text[label] / 1e6:,.0f} | {_seconds(ours)} | "
                f"{_seconds(py)} | {_seconds(jvm)} | "
                f"{'' if ratio is None else f'{ratio:.2f}'} | "
                f"{_seconds(local) if local else ''} | {peaks} | {checks[f'{label} {fmt}']} |"
            )
            targets.append(target_row(f"G2 {label} {fmt}: sparkcep run / applyInPandas job",
                                      "≤ 1.1", ratio, f"{_seconds(py)} s wall"))  # fmt: skip
    (small, n0), (large, n1) = labels[0], labels[-1]
    lines += ["", f"Cost per added event, {small} → {large} (µs of wall per event):", "",
              "| format | sparkcep | applyInPandas job | JVM count job | sparkcep / applyInPandas |",
              "|---|---:|---:|---:|---:|"]  # fmt: skip
    for fmt in ("CSV", "PARQUET"):
        slopes = []
        for job in ("sparkcep", "python floor", "jvm floor"):
            a, b = t[f"{small} {fmt} {job}"], t[f"{large} {fmt} {job}"]
            ok = isinstance(a, tuple) and isinstance(b, tuple)
            slopes.append((b[0] - a[0]) / (n1 - n0) * 1e6 if ok else None)
        ratio = slopes[0] / slopes[1] if None not in slopes[:2] else None
        lines.append(f"| {fmt} | " + " | ".join("–" if s is None else f"{s:.2f}" for s in slopes)
                     + f" | {'–' if ratio is None else f'{ratio:.2f}'} |")  # fmt: skip
        targets.append(target_row(f"G2 {fmt}: cost per added event, sparkcep / applyInPandas",
                                  "≤ 1.3", ratio, f"{small} → {large}"))  # fmt: skip
    if skew:
        ours, local = t["skew CSV sparkcep"], t["skew CSV --local"]
        lines += ["", f"Skew: {skew:,} events, half on one key, Python workers capped at"
                  f" {SKEW_CAP} (`spark.executor.pyspark.memory`):", "",
                  "| job | wall s | CPU s | peak MiB |", "|---|---:|---:|---:|"]  # fmt: skip
        for name, x in (("sparkcep (Spark)", ours), ("--local", local)):
            if isinstance(x, tuple):
                lines.append(f"| {name} | {x[0]:.1f} | {x[1]:.1f} | {x[2]:,.0f} |")
            else:
                lines.append(f"| {name} | failed: {x} | | |")
        lines.append(f"\nSame rows as `--local`: {checks['skew CSV']}.")
        targets.append(target_row("G2 skewed (half on one key) within the 2 GB Python cap",
                                  "completes, same rows", None, checks["skew CSV"]))  # fmt: skip
    lines += ["", "| job | wall s | CPU s | peak MiB |", "|---|---:|---:|---:|"]
    for name, x in t.items():
        row = (
            f"{x[0]:.1f} | {x[1]:.1f} | {x[2]:,.0f}" if isinstance(x, tuple) else f"failed: {x} | |"
        )
        lines.append(f"| {name} | {row} |")
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "spark_scale.md").write_text(text)
    write_targets("spark_scale", targets)
    return text


if __name__ == "__main__":
    main()
