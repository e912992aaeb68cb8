"""Peak memory of the blow-up cases of issue 10.2, each run as `sparkcep run --local` in
a child process (peak RSS from the child's resource usage), under an address-space
limit of 12 GB: with --max-matches 1000, under the default memory budget (2 GiB) and
under --memory-budget 500MB. Writes benchmarks/results/blowups.md.

- kleene-n: `SEQ(A+ a[], B b) WITHIN 1000` over n A's then one B (2^n - 1 matches);
- cubic-n: `SEQ(A a, B b, C c)` over n A's, n B's, n C's (n^3 matches: 3.4 M for 150,
  which fits the default budget, 27 M for 300);
- unkeyed-1M: `SEQ(A a, B b) WITHIN 1 days` over 1,000,000 events of types A and B,
  one per 50 ms (about 1.25e11 matches);
- hospital-ses: the event set pattern `SEQ({c, p+}, {b}) ... WITHIN 15 days INCLUSIVE
  SELECT ALL` over the hospital log (150,291 events; one window alone has 3.5 M
  matches, another 32 M), by the ses engine: counted before enumerating (docs/ses.md).

    python -m benchmarks.blowups [--quick]   (--quick: without unkeyed-1M)
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

RESULTS = Path(__file__).parent / "results"
LIMIT = 12 * 2**30
KLEENE = "PATTERN SEQ(A+ a[], B b) WITHIN 1000"


def kleene(n: int) -> pd.DataFrame:
    return pd.DataFrame({"ts": range(1, n + 2), "type": ["A"] * n + ["B"]})


def cubic(n: int) -> pd.DataFrame:
    return pd.DataFrame({"ts": range(3 * n), "type": ["A"] * n + ["B"] * n + ["C"] * n})


HOSPITAL = Path(__file__).parent.parent.parent / "shared" / "data" / "medical" / "hospital.csv.gz"
HOSPITAL_SES = (
    "PATTERN SEQ({c, p+}, {b}) WHERE [case_id] AND c.activity='vervolgconsult poliklinisch' "
    "AND p.activity='aanname laboratoriumonderzoek' AND b.activity='ordertarief' "
    "WITHIN 15 days INCLUSIVE SELECT ALL"
)


def unkeyed(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame({"ts": np.arange(n) * 50, "type": rng.choice(["A", "B"], n)})


CASES = {
    "kleene-24": (KLEENE, lambda: kleene(24), 2**24 - 1, []),
    "kleene-25": (KLEENE, lambda: kleene(25), 2**25 - 1, []),
    "kleene-60": (KLEENE, lambda: kleene(60), 2**60 - 1, []),
    "cubic-150": ("PATTERN SEQ(A a, B b, C c) WITHIN 10000", lambda: cubic(150), 150**3, []),
    "cubic-300": ("PATTERN SEQ(A a, B b, C c) WITHIN 10000", lambda: cubic(300), 300**3, []),
    "unkeyed-1M": (
        "PATTERN SEQ(A a, B b) WITHIN 1 days",
        lambda: unkeyed(1_000_000),
        None,
        ["--time-unit", "ms"],
    ),
    "hospital-ses": (
        HOSPITAL_SES,
        lambda: HOSPITAL,  # the file as it is (its zero-padded case ids kept)
        None,
        ["--time", "timestamp", "--type", "activity"],
    ),
}
MODES = {
    "--max-matches 1000": ["--max-matches", "1000"],
    "default budget (2 GiB)": [],
    "--memory-budget 500MB": ["--memory-budget", "500MB"],
}


def run_case(query: str, source: Path, out: Path, args: list[str]) -> dict:
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    command = [sys.executable, "-m", "sparkcep.cli", "run", query, "-i", str(source)]
    command += ["-o", str(out), "--local", *args]
    start = time.perf_counter()
    child = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=cap
    )
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    lines = stderr.strip().splitlines()
    rows = len(out.read_text().splitlines()) if out.exists() and status == 0 else 0
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "rows": rows,
        "peak_mb": usage.ru_maxrss / 1024,
        "seconds": seconds,
        "stderr_lines": len(lines),
        "last": lines[-1] if lines else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (query, events, expected, extra) in CASES.items():
            if args.quick and name == "unkeyed-1M":
                continue
            if name == "hospital-ses" and not HOSPITAL.exists():
                continue
            made = events()
            source = made if isinstance(made, Path) else Path(tmp) / f"{name}.csv"
            if not isinstance(made, Path):
                made.to_csv(source, index=False)
            for mode, mode_args in MODES.items():
                out = Path(tmp) / f"{name}.jsonl"
                out.unlink(missing_ok=True)
                result = run_case(query, source, out, [*extra, *mode_args])
                result.update(case=name, mode=mode, expected=expected)
                print(result, flush=True)
                rows.append(result)
    write(rows)


def write(rows: list[dict]) -> None:
    lines = [
        "# Blow-ups under a memory budget (issue 10.2)",
        "",
        "`sparkcep run --local` in a child process under an address-space limit of 12 GB;",
        "peak RSS is the child's (`os.wait4`). Written by `python -m benchmarks.blowups`.",
        "",
        "Before (issue 10.2): kleene-24 died of MemoryError at 5.5 GB, kleene-25, kleene-60",
        "and cubic-300 stopped with 'more than 20,000,000 partial matches' even with",
        "--max-matches 1000, and unkeyed-1M failed allocating 13.4 GiB in `nfa._bind`.",
        "The budget counts what the matches found will take as output rows, so a run",
        "stops well under it; one that fits (cubic-150) completes.",
        "",
        "| case | matches (by hand) | mode | exit | rows written | peak RSS | seconds "
        "| stderr lines | last line of stderr |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        expected = "—" if r["expected"] is None else f"{r['expected']:,}"
        last = r["last"].replace("|", "\\|")
        lines.append(
            f"| {r['case']} | {expected} | {r['mode']} | {r['exit']} | {r['rows']:,} "
            f"| {r['peak_mb']:,.0f} MB | {r['seconds']:.1f} | {r['stderr_lines']} | {last} |"
        )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "blowups.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
