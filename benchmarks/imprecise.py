"""Imprecise timestamps: point-based against event-based evaluation and each
optimisation, side by side in one run (imprecise-timestamps.md §5.1, Fig. 4 and 5).

Synthetic streams as §5.1: one event per time unit t, one type, one attribute v that
runs 1..1000 and wraps around; each event's interval is [t - δ, t + δ]. Queries

    SEQ(E a1, ..., E aℓ) WHERE a1.v % v1 = 0 AND ... AND aℓ.v % vℓ = 0 WITHIN W

with defaults δ = 5, W = 100, ℓ = 3 (v = 10, 15, 20, 25, 30, 35 for the components, as
many as ℓ), under skip-till-any and skip-till-next. Methods (`--algorithm` names):

- imprecise-points       point-based: stream expansion, point matches (the baseline)
- imprecise-anystate     event-based, any-state evaluation with run pruning
- imprecise-sorted       event-based, sorting for query order, one event at a time
- imprecise-selectivity  event-based, any-state fed in selectivity order
- imprecise              event-based, query-order evaluation of sorted events, set at a time

Throughput is events read per second of `Program.run` over a prefix of the stream (the
prefix grows until a run takes a second, or a method's time cap is hit: then the figure
is that of the last prefix that finished, or none). Every method runs on the same
events; each measurement is a forked child, so a method that exceeds its cap is
stopped. The machine is shared (2 cores, several engineers): throughput is given per
second of the process's CPU time (`time.process_time`), which other processes disturb
far less than the wall clock; wall-clock figures are in the CSV. Writes
benchmarks/results/imprecise.md, .csv, .png.

    python -m benchmarks.imprecise [--quick] [--cap SECONDS]
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sparkcep.checks import compile_one
from sparkcep.plan import Options

RESULTS = Path(__file__).parent / "results"
METHODS = [
    "imprecise-points",
    "imprecise-anystate",
    "imprecise-sorted",
    "imprecise-selectivity",
    "imprecise",
]
LABELS = {
    "imprecise-points": "point-based",
    "imprecise-anystate": "any-state",
    "imprecise-sorted": "sorting (one at a time)",
    "imprecise-selectivity": "selectivity order",
    "imprecise": "query order, set at a time (default)",
}
MODULI = [10, 15, 20, 25, 30, 35]
DEFAULTS = {"delta": 5, "window": 100, "length": 3}
N_MAX = 200_000


def stream(n: int) -> pd.DataFrame:
    t = np.arange(n, dtype=np.int64)
    return pd.DataFrame({"id": t, "type": "E", "ts": t, "v": t % 1000 + 1})


def query(delta: int, window: int, length: int, strategy: str, moduli=None) -> str:
    moduli = moduli or MODULI[:length]
    names = [f"a{i + 1}" for i in range(length)]
    where = " AND ".join(f"{v}.v % {m} = 0" for v, m in zip(names, moduli))
    return (
        f"PATTERN SEQ({', '.join(f'E {v}' for v in names)}) WHERE {where} "
        f"STRATEGY {strategy} TIME BETWEEN ts - {delta} AND ts + {delta} WITHIN {window}"
    )


def _measure(conn, text: str, method: str, n0: int, target: float):
    events = stream(N_MAX)
    program = compile_one(text, events.iloc[:10], Options(id_col="id", algorithm=method))
    n, best = n0, None
    while True:
        frame = program.in_order(events.iloc[:n])
        start, cpu = time.perf_counter(), time.process_time()
        out = program.run(frame)
        seconds = time.process_time() - cpu
        best = (n, seconds, len(out), time.perf_counter() - start)
        conn.send(best)  # what finished so far, in case the cap stops the next
        if best[3] >= target or n >= N_MAX:
            break
        n = min(N_MAX, n * 4)
    conn.close()


def measure(text: str, method: str, cap: float, n0: int = 2000, target: float = 1.0):
    """(events, CPU seconds, matches, wall seconds) of the longest prefix run within
    `cap` (wall clock), or None."""
    parent, child = mp.get_context("fork").Pipe(duplex=False)
    proc = mp.get_context("fork").Process(target=_measure, args=(child, text, method, n0, target))
    proc.start()
    child.close()
    deadline = time.monotonic() + cap
    last = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not parent.poll(left):
            break
        try:
            last = parent.recv()
        except EOFError:
            break
    if proc.is_alive():
        proc.kill()
    proc.join()
    return last


def sweep(args) -> list[dict]:
    rows = []
    strategies = ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH")
    deltas = [1, 5, 20, 50] if args.quick else [1, 5, 10, 20, 30, 50]
    windows = [10, 100, 200] if args.quick else [10, 50, 100, 150, 200]
    lengths = [2, 3, 4] if args.quick else [2, 3, 4, 5, 6]
    frequencies = [(10, 20), (5, 40), (2, 100)] if args.quick else [
        (20, 10), (10, 20), (5, 40), (4, 50), (2, 100)
    ]  # fmt: skip
    plan = []
    for strategy in strategies:
        plan += [("delta", d, dict(DEFAULTS, delta=d), strategy, None) for d in deltas]
        plan += [("length", n, dict(DEFAULTS, length=n), strategy, None) for n in lengths]
    plan += [("window", w, dict(DEFAULTS, window=w), strategies[0], None) for w in windows]
    for first, last in frequencies:
        moduli = [first, *MODULI[1 : DEFAULTS["length"] - 1], last]
        share = round(100 / first, 1)
        plan.append(("frequency", share, DEFAULTS, strategies[0], moduli))
    # E1 50 %, E_l rarer than one event a window: out-of-date events leave E1's buffer
    for last in [100, 500] if args.quick else [100, 250, 500]:
        moduli = [2, *MODULI[1 : DEFAULTS["length"] - 1], last]
        plan.append(("rare_last", round(DEFAULTS["window"] / last, 1), DEFAULTS, strategies[0],
                     moduli))  # fmt: skip
    for experiment, value, params, strategy, moduli in plan:
        text = query(params["delta"], params["window"], params["length"], strategy, moduli)
        for method in METHODS:
            points = method == "imprecise-points"
            got = measure(
                text, method, args.cap if points else args.cap * 2, n0=500 if points else 2000
            )
            row = {
                "experiment": experiment, "value": value, "strategy": strategy,
                "method": method, "events": None, "seconds": None, "matches": None,
                "events_per_s": None, "wall_seconds": None,
            }  # fmt: skip
            if got is not None:
                n, seconds, matches, wall = got
                row.update(events=n, seconds=round(seconds, 4), matches=matches,
                           events_per_s=round(n / max(seconds, 1e-9)),
                           wall_seconds=round(wall, 4))  # fmt: skip
            rows.append(row)
            print(experiment, value, strategy[10:14], method, row["events_per_s"], flush=True)
    return rows


def defaults(repeat: int, cap: float) -> list[dict]:
    """The defaults (δ 5, W 100, ℓ 3), each method `repeat` times on one prefix size."""
    out = []
    for strategy in ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"):
        text = query(**DEFAULTS, strategy=strategy)
        for method in METHODS:
            n0 = 500 if method == "imprecise-points" else 2000
            runs = [measure(text, method, cap, n0=n0, target=2.0) for _ in range(repeat)]
            runs = [r for r in runs if r is not None]
            if not runs:
                out.append({"strategy": strategy, "method": method, "events_per_s": None})
                continue
            runs.sort(key=lambda r: r[0] / max(r[1], 1e-9))
            n, seconds, matches, wall = runs[len(runs) // 2]  # the median run
            out.append({
                "strategy": strategy, "method": method, "events": n, "matches": matches,
                "events_per_s": round(n / max(seconds, 1e-9)),
                "wall_events_per_s": round(n / max(wall, 1e-9)),
            })  # fmt: skip
    return out


def write(rows: list[dict], best: list[dict], args) -> None:
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "imprecise.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# Imprecise timestamps: point-based vs event-based evaluation",
        "",
        "`python -m benchmarks.imprecise` ("
        + ("quick, " if args.quick else "")
        + f"cap {args.cap:g} s per point-based run). Machine: {platform.machine()}, "
        f"{os.cpu_count()} cores (shared), load average at the start "
        f"{os.getloadavg()[0]:.1f}. Synthetic streams of §5.1 (one event per tick, v = "
        "1..1000 repeating, interval [t - δ, t + δ]); throughput = events read per second "
        "of `Program.run`'s CPU time (the machine is shared: wall-clock rates are lower by "
        "the load factor, and in the CSV), one core, a forked child per measurement.",
        "",
        f"## At the paper's defaults (δ 5, W 100, ℓ 3), median of {args.repeat} runs",
        "",
        "| strategy | method | events/s (CPU) | events/s (wall) | × point-based | events | matches |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for strategy in ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"):
        group = [r for r in best if r["strategy"] == strategy]
        base = next((r["events_per_s"] for r in group if r["method"] == "imprecise-points"), None)
        for r in group:
            rate = r["events_per_s"]
            ratio = f"{rate / base:.1f}" if rate and base else "—"
            lines.append(
                f"| {strategy} | {LABELS[r['method']]} | {rate:,} | {r['wall_events_per_s']:,} | "
                f"{ratio} | {r['events']:,} | {r['matches']:,} |"
                if rate
                else f"| {strategy} | {LABELS[r['method']]} | over the cap | — | — | — | — |"
            )
    lines += ["", "## Sweeps (events/s; — : over the cap)", ""]
    for experiment, title in (
        ("delta", "half interval δ (W 100, ℓ 3)"),
        ("window", "window W (δ 5, ℓ 3), skip-till-any"),
        ("length", "pattern length ℓ (δ 5, W 100)"),
        ("frequency", "% of events matching E1, E_ℓ rarer (δ 5, W 100, ℓ 3), skip-till-any"),
        ("rare_last", "E1 50 %, events matching E_ℓ per window (δ 5, W 100, ℓ 3), skip-till-any"),
    ):
        part = [r for r in rows if r["experiment"] == experiment]
        for strategy in dict.fromkeys(r["strategy"] for r in part):
            sub = [r for r in part if r["strategy"] == strategy]
            values = list(dict.fromkeys(r["value"] for r in sub))
            lines += [f"### {title}, {strategy}", "",
                      "| method | " + " | ".join(str(v) for v in values) + " |",
                      "|---|" + "---:|" * len(values)]  # fmt: skip
            for method in METHODS:
                cells = []
                for v in values:
                    r = next(x for x in sub if x["value"] == v and x["method"] == method)
                    cells.append(f"{r['events_per_s']:,}" if r["events_per_s"] else "—")
                lines.append(f"| {LABELS[method]} | " + " | ".join(cells) + " |")
            lines.append("")
    (RESULTS / "imprecise.md").write_text("\n".join(lines) + "\n")
    plot(rows)


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("delta", "SKIP_TILL_ANY_MATCH", "4(a)/(b) δ, skip-till-any"),
        ("length", "SKIP_TILL_ANY_MATCH", "4(c)/5(b) ℓ, skip-till-any"),
        ("frequency", "SKIP_TILL_ANY_MATCH", "4(d) % events matching E1"),
        ("delta", "SKIP_TILL_NEXT_MATCH", "4(e) δ, skip-till-next"),
        ("window", "SKIP_TILL_ANY_MATCH", "5(a) W, skip-till-any"),
        ("length", "SKIP_TILL_NEXT_MATCH", "5(c) ℓ, skip-till-next"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, (experiment, strategy, title) in zip(axes.flat, panels):
        sub = [r for r in rows if r["experiment"] == experiment and r["strategy"] == strategy]
        for method in METHODS:
            pts = [(r["value"], r["events_per_s"]) for r in sub
                   if r["method"] == method and r["events_per_s"]]  # fmt: skip
            if pts:
                ax.plot(*zip(*pts), marker="o", label=LABELS[method])
        ax.set_yscale("log")
        ax.set_title(title)
        ax.set_ylabel("events/s")
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "imprecise.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer points per sweep")
    parser.add_argument("--cap", type=float, default=20.0, help="point-based cap, seconds")
    parser.add_argument("--repeat", type=int, default=3, help="runs at the defaults")
    args = parser.parse_args()
    best = defaults(args.repeat, args.cap * 3)
    for r in best:
        print("defaults", r, flush=True)
    rows = sweep(args)
    write(rows, best, args)
    print(f"wrote {RESULTS / 'imprecise.md'}")


if __name__ == "__main__":
    main()
