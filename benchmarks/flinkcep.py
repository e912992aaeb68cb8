"""Issue 16 §3: G2 on FlinkCEP (Flink SQL's MATCH_RECOGNIZE through PyFlink) as a measured
peer of `sparkcep run` (Spark, CSV) and `sparkcep run --local`, in one run.

Whole processes on the same G2 CSV (1M events, 100 keys, `SEQ(A a, B b, C c) WHERE [k]
STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 5 s`), timed side by side (interleaved rounds,
medians, wall and CPU seconds of each process tree, as benchmarks/spark_floor.py does).
FlinkCEP runs benchmarks/flinkcep_job.py with the Python of its own venv: apache-flink
pins its own pandas, pyarrow and numpy, so it is a peer here, never a sparkcep dependency.
That Python is $SPARKCEP_FLINK_PYTHON, else `flink-venv/bin/python` next to the checkout:

    python3.11 -m venv ../flink-venv && ../flink-venv/bin/pip install apache-flink

Without it the results say "not measured" and this exits 0.

The semantics are checked, not assumed: on a small file whose matches were worked out by
hand (HAND_ROWS, HAND_MATCHES) and on G2, every match (k and the times of a, b and c) of
FlinkCEP, in batch and streaming mode, must equal `sparkcep run --local`'s and
`sparkcep run`'s. Writes benchmarks/results/flinkcep.md and flinkcep.targets.json.

    python -m benchmarks.flinkcep [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from benchmarks.generators import G2_QUERY, g2_files
from benchmarks.spark_floor import _env, interleaved
from benchmarks.targets import target_row, write_targets

RESULTS = Path(__file__).parent / "results"
JOB = Path(__file__).with_name("flinkcep_job.py")
ENV_VAR = "SPARKCEP_FLINK_PYTHON"
DEFAULT_VENV = Path(__file__).resolve().parent.parent.parent / "flink-venv"
INSTALL = (
    f"`python3.11 -m venv {DEFAULT_VENV} && {DEFAULT_VENV}/bin/pip install apache-flink`,"
    f" or set {ENV_VAR} to a Python that has apache-flink"
)
MODES = ("batch", "streaming")
SPARK_RATIO = "§3 G2 CSV: sparkcep run / FlinkCEP"
LOCAL_RATIO = "G2: sparkcep run --local / FlinkCEP"

# A file small enough to check by hand: (ms after the base time, k, type), in time order;
# the row's id is its position.
HAND_ROWS = [
    (0, 1, "A"), (1000, 1, "A"), (1500, 2, "B"), (2000, 1, "D"), (2500, 1, "B"),
    (3000, 1, "B"), (3100, 2, "A"), (4000, 1, "C"), (6000, 1, "A"), (6500, 2, "B"),
    (8000, 1, "B"), (8099, 2, "C"), (9500, 1, "A"), (11000, 1, "C"), (12000, 1, "B"),
    (13000, 2, "A"), (14000, 1, "C"), (15000, 2, "B"), (16000, 3, "A"), (19000, 2, "A"),
    (20000, 2, "C"), (21000, 3, "A"), (21500, 3, "B"), (21600, 3, "C"),
]  # fmt: skip
# Worked out by hand (ids of a, b, c): each A starts a run; it takes the next B of its key
# (4, not 5, for A0 and A1; B2 of key 2 comes before any A), then the next C; c.ts - a.ts
# must be < 5 s: A6 -> C11 is 4999 ms (in), A8 -> B10 -> C13 is 5000 ms (out, and the run
# is dead: no later C stands in), A15 -> C20 is 7 s, A18's next B (22) is 5.5 s later, A19
# has no B after it.
HAND_MATCHES = {(0, 4, 7), (1, 4, 7), (6, 9, 11), (12, 14, 16), (21, 22, 23)}
HAND_BASE = 1_700_000_000_000


def flink_python() -> str | None:
    """The Python that runs FlinkCEP, or None where there is none."""
    given = os.environ.get(ENV_VAR)
    candidate = Path(given) if given else DEFAULT_VENV / "bin" / "python"
    return str(candidate) if candidate.exists() else None


def hand_frame() -> pd.DataFrame:
    """HAND_ROWS as G2's columns (type, k, v, ts in epoch ms)."""
    return pd.DataFrame(
        {
            "type": [t for _, _, t in HAND_ROWS],
            "k": [k for _, k, _ in HAND_ROWS],
            "v": [1.5 * i for i in range(len(HAND_ROWS))],
            "ts": [HAND_BASE + ms for ms, _, _ in HAND_ROWS],
        }
    )


def by_times(frame: pd.DataFrame, ids) -> set[tuple[int, int, int, int]]:
    """Matches given by row ids (a, b, c) as (k, a.ts, b.ts, c.ts)."""
    ts, k = frame["ts"].to_numpy(), frame["k"].to_numpy()
    return {(int(k[a]), int(ts[a]), int(ts[b]), int(ts[c])) for a, b, c in ids}


def sparkcep_matches(path: Path) -> list[tuple[int, int, int]]:
    """The (a, b, c) ids of `sparkcep run`'s JSON lines."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [(row["a"], row["b"], row["c"]) for row in rows]


def flink_matches(folder: Path) -> list[tuple[int, int, int, int]]:
    """The (k, a.ts, b.ts, c.ts) rows of the job's CSV sink (every part file)."""
    rows = []
    for part in sorted(folder.rglob("*")):
        if part.is_file() and not part.name.startswith((".", "_")):
            rows += [tuple(int(x) for x in line.split(",")) for line in part.read_text().split()]
    return rows


def _flink_job(python: str, source: Path, output: Path, mode: str) -> tuple:
    env = {k: v for k, v in _env(None).items() if k != "PYTHONPATH"}  # nothing of sparkcep
    return ([str(JOB), str(source), str(output), "--mode", mode], env, python)


def _run_job(args: list[str], env: dict, python: str | None = None) -> None:
    done = subprocess.run([python or sys.executable, *args], env=env, capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{args}: {done.stderr[-2000:]}")


def jobs(python: str, tmp: Path, csv: Path, query: Path) -> dict[str, tuple]:
    """The timed processes: sparkcep on Spark and locally, FlinkCEP in each mode."""
    src = os.environ.get("PYTHONPATH")
    run = ["-m", "sparkcep.cli", "run", str(query), "-i", str(csv), "--time-unit", "ms"]
    found = {
        "sparkcep run": ([*run, "-o", str(tmp / "spark.jsonl")], _env(src)),
        "sparkcep run --local": ([*run, "--local", "-o", str(tmp / "local.jsonl")], _env(src)),
    }
    for mode in MODES:
        found[f"FlinkCEP {mode}"] = _flink_job(python, csv, tmp / f"flink-{mode}", mode)
    return found


def check_hand(python: str, tmp: Path) -> dict[str, bool]:
    """Each tool's matches on the hand-checked file equal HAND_MATCHES (not timed)."""
    folder = tmp / "hand"
    folder.mkdir()
    frame = hand_frame()
    csv, query = folder / "hand.csv", folder / "g2.cep"
    frame.to_csv(csv, index=False)
    query.write_text(G2_QUERY)
    expected = by_times(frame, HAND_MATCHES)
    found = {}
    for name, job in jobs(python, folder, csv, query).items():
        if name != "sparkcep run":  # Spark: checked on G2 below, one JVM less here
            _run_job(*job)
    found["sparkcep run --local"] = by_times(frame, sparkcep_matches(folder / "local.jsonl"))
    for mode in MODES:
        found[f"FlinkCEP {mode}"] = set(flink_matches(folder / f"flink-{mode}"))
    return {name: rows == expected for name, rows in found.items()}


def check_g2(frame: pd.DataFrame, tmp: Path) -> dict[str, tuple]:
    """(matches, the set of (k, a.ts, b.ts, c.ts)) of each tool's last timed run on G2."""
    found = {}
    for name, path in (("sparkcep run", "spark.jsonl"), ("sparkcep run --local", "local.jsonl")):
        ids = sparkcep_matches(tmp / path)
        found[name] = (len(ids), by_times(frame, ids))
    for mode in MODES:
        rows = flink_matches(tmp / f"flink-{mode}")
        found[f"FlinkCEP {mode}"] = (len(rows), set(rows))
    return found


def sample_ids(frame: pd.DataFrame, rows: set, n: int = 3) -> list[tuple[int, int, int]]:
    """The (a, b, c) ids of the first `n` matches (by a.ts) of a set of (k, a.ts, b.ts,
    c.ts): the times identify the rows, G2's times being distinct."""
    position = {int(t): i for i, t in enumerate(frame["ts"].to_numpy())}
    first = sorted(rows, key=lambda row: row[1:])[:n]
    return [(position[a], position[b], position[c]) for _, a, b, c in first]


def _flink_version(python: str) -> str:
    done = subprocess.run(
        [python, "-c", "from pyflink.version import __version__; print(__version__)"],
        capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip() or "?"


def _header(load: tuple) -> list[str]:
    return [
        "# Issue 16 §3: G2 on FlinkCEP (Flink SQL MATCH_RECOGNIZE through PyFlink)",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}; load average {load[0]:.1f} before, {load[1]:.1f} after"
        " (other jobs share the machine: compare the figures of one run, not seconds across"
        " runs). Whole processes on the same G2 CSV (1M events, 100 keys), medians of"
        " interleaved rounds after one warm-up round; CPU = user + system seconds of the"
        " process and every process it started (the JVMs, Python workers), sampled from"
        " /proc every 0.1 s. `python -m benchmarks.flinkcep` writes this file.",
        "",
    ]


def not_measured(load: tuple, results: Path = RESULTS) -> str:
    reason = f"not measured: apache-flink not installed (install: {INSTALL})"
    lines = [*_header(load), reason, ""]
    results.mkdir(parents=True, exist_ok=True)
    (results / "flinkcep.md").write_text("\n".join(lines))
    write_targets("flinkcep", [target_row(SPARK_RATIO, "≤ 0.6", None, reason),
                               target_row(LOCAL_RATIO, "report", None, reason)],
                  results)  # fmt: skip
    return "\n".join(lines)


def write(t: dict, hand: dict, g2: dict, samples: dict, meta: dict) -> str:
    """The results file and the targets (judged on wall time, against FlinkCEP's faster
    mode)."""
    peer = min(MODES, key=lambda mode: t[f"FlinkCEP {mode}"][0])
    flink = t[f"FlinkCEP {peer}"]
    rows = [(SPARK_RATIO, "≤ 0.6", t["sparkcep run"]), (LOCAL_RATIO, "report",
            t["sparkcep run --local"])]  # fmt: skip
    lines = [
        *_header(meta["load"]),
        f"FlinkCEP: apache-flink {meta['version']} ({meta['python']}), its {peer} mode as the"
        " peer (the faster of batch and streaming in this run), parallelism = cores. Each"
        " writes every match: sparkcep JSON lines (one file), FlinkCEP CSV (its filesystem"
        " sink); FlinkCEP reads the CSV with its schema given, sparkcep infers it.",
        "",
        "| measure | target | wall | CPU | sparkcep (wall, CPU) | FlinkCEP (wall, CPU) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    targets = []
    for name, target, ours in rows:
        wall, cpu = ours[0] / flink[0], ours[1] / flink[1]
        lines.append(f"| {name} | {target} | {wall:.2f} | {cpu:.2f} | {ours[0]:.2f}, "
                     f"{ours[1]:.2f} | {flink[0]:.2f}, {flink[1]:.2f} |")  # fmt: skip
        targets.append(target_row(name, target, round(wall, 3),
                                  f"FlinkCEP ({peer}) {flink[0]:.2f} s wall", f"CPU: {cpu:.2f}"))  # fmt: skip
    reference = g2["sparkcep run --local"][1]
    lines += ["", "| job | wall s | CPU s | matches | same matches as `run --local` |",
              "|---|---:|---:|---:|---|"]  # fmt: skip
    for name, (wall, cpu) in t.items():
        count, found = g2[name]
        lines.append(f"| {name} | {wall:.2f} | {cpu:.2f} | {count:,} | "
                     f"{'yes' if found == reference else 'NO'} |")  # fmt: skip
    lines += ["", *semantics_note(hand, g2, samples), ""]
    text = "\n".join(lines)
    meta["results"].mkdir(parents=True, exist_ok=True)
    (meta["results"] / "flinkcep.md").write_text(text)
    write_targets("flinkcep", targets, meta["results"])
    return text


def semantics_note(hand: dict, g2: dict, samples: dict) -> list[str]:
    from benchmarks.flinkcep_job import match_recognize_sql

    reference = g2["sparkcep run --local"][1]
    same = all(found == reference for _, found in g2.values())
    counts = {count for count, _ in g2.values()}
    hand_ok = all(hand.values())
    return [
        "## Semantics",
        "",
        f"G2's query `{G2_QUERY}` is, in Flink SQL (benchmarks/flinkcep_job.py, ORDER BY the"
        " rowtime `rt` = ts in ms):",
        "",
        "```sql",
        match_recognize_sql(),
        "```",
        "",
        "Every A starts its own match (SKIP TO NEXT ROW); the fillers X (not B) and Y (not C)"
        " make B the next B of the key after the A and C the next C after that B, as"
        " skip-till-next-match does; a run whose next C is 5 s or more after its A is dead in"
        " both (no later B or C stands in). Flink's WITHIN and sparkcep's are both"
        " `last.ts - first.ts < w`.",
        "",
        f"- Hand-checked file ({len(HAND_ROWS)} rows, {len(HAND_MATCHES)} matches worked out"
        " by hand, benchmarks/flinkcep.py HAND_ROWS): "
        + ", ".join(f"{name} {'equal' if ok else 'DIFFERENT'}" for name, ok in hand.items())
        + ("." if hand_ok else " — see the job table."),
        f"- G2: {' / '.join(f'{n} {c:,}' for n, (c, _) in g2.items())} matches;"
        f" the sets of (k, a.ts, b.ts, c.ts) are {'all equal' if same else 'NOT equal'}"
        f"{'' if len(counts) == 1 else ' (the counts differ)'}.",
        "- First matches by a's time, as (a, b, c) row ids: "
        + "; ".join(f"{name} {ids}" for name, ids in samples.items())
        + ".",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one round")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the results")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    python = flink_python()
    if python is None:
        print(not_measured((load_before, os.getloadavg()[0]), args.results))
        return
    from sparkcep.runners.jobs.warmup import archive_path, record

    if not archive_path().exists():
        record(verbose=False)  # what the first Spark run does, done before the timing
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        hand = check_hand(python, tmp)
        frame, csv, _, query = g2_files(tmp)
        times = interleaved(jobs(python, tmp, csv, query), repeat=1 if args.quick else 3)
        g2 = check_g2(frame, tmp)
        samples = {name: sample_ids(frame, found) for name, (_, found) in g2.items()}
    meta = {"load": (load_before, os.getloadavg()[0]), "version": _flink_version(python),
            "python": python, "results": args.results}  # fmt: skip
    print(write(times, hand, g2, samples, meta))


if __name__ == "__main__":
    main()
