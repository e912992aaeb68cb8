"""The query parser under fuzzing, at scale (issue 10.4): 100,000 mutated queries (the
mutations of tests/query_fuzz.py, which the CI test runs 20,000 of), planned with and
without a schema; prints the count of each outcome, the queries that raised anything
else than a positioned QueryError, and the slowest plan.

    python -m benchmarks.fuzz_queries [--count 100000] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import query_fuzz  # a helper module of the tests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    start = time.perf_counter()
    counts, crashes, (seconds, text) = query_fuzz.run(args.count, args.seed)
    elapsed = time.perf_counter() - start
    print(f"{args.count:,} queries (seed {args.seed}) in {elapsed:.1f} s")
    for name, n in counts.most_common():
        print(f"  {name}: {n:,}")
    print(f"slowest: {seconds:.3f} s for {text[:120]!r}{'...' if len(text) > 120 else ''}")
    for query, error in crashes[:20]:
        print(f"CRASH {error[:200]}\n  {query[:200]!r}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
