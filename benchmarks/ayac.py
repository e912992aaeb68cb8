"""AYAC (probabilistic detection over lossy streams), side by side in one run:

1. `rfid`: recall and precision of `ayac` and of the precise engine that ignores losses,
   on the real RFID reads with sightings dropped at known rates
   (examples/lossy_rfid/evaluate.py; skipped when ../shared/data is absent);
2. throughput and memory against the window, the pattern's length and the threshold, on
   synthetic RFID streams (10% of the reads lost, fixed seeds), each next to the precise
   `nfa` engine on the same pattern without the probabilistic clauses, in the same
   process on the same events (the ratio is ayac's time over nfa's):
   - `shop`: each tag passes the shelves (A), the checkout (B, 70% of them) and the exit
     (C) once, arriving at 200 tags/s: a key holds 3 events whatever the window;
   - `loop`: 2,000 tags walk A → B → C → A ... for ever: a key's events within the window
     grow with it;
   - `chain`: each tag passes readers R1 .. R6 once (pattern lengths 2 to 6).

Events/s count every input event (those no component wants are filtered first, as
everywhere); each time is the best of three runs over the whole stream in one batch;
memory is the largest state (events kept and bytes, by tracemalloc) when the stream is fed
in batches of 20,000 events, as a stream would, and the events/s of that batched run
(each batch is processed with the state's window of events, so a batch costs its events
plus the window's). Writes benchmarks/results/ayac.md,
ayac.csv, ayac.png and ayac_rfid.png.

    python -m benchmarks.ayac [--quick]
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import itertools
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

from sparkcep.engines.registry import compile_jobs
from sparkcep.plan import Options, analyze

RESULTS = Path(__file__).parent / "results"
EXAMPLE = Path(__file__).parent.parent / "examples" / "lossy_rfid" / "evaluate.py"
OPTIONS = Options(id_col="id", time_unit="ms")
SCHEMA = {"type": "string", "reader": "string", "tag": "int", "ts": "int", "id": "int"}
LOSS = 0.1
MIN = 60_000  # ms


# ---- streams ----------------------------------------------------------------------------


def _frame(parts: list[tuple[str, np.ndarray, np.ndarray]], seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.concat(
        [pd.DataFrame({"reader": r, "tag": tags, "ts": ts}) for r, tags, ts in parts],
        ignore_index=True,
    )
    frame = frame[rng.random(len(frame)) >= LOSS]  # the readers' losses
    frame = frame.assign(ts=frame["ts"].round().astype(np.int64), type="read")
    frame = frame.sort_values("ts", kind="stable").reset_index(drop=True)
    return frame.assign(id=np.arange(len(frame)))


def shop(tags: int, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t0 = np.cumsum(rng.exponential(1000 / 200, tags))  # 200 tags per second
    ids = np.arange(tags)
    paid = rng.random(tags) < 0.7
    return _frame(
        [
            ("A", ids, t0),
            ("B", ids[paid], (t0 + rng.exponential(MIN, tags))[paid]),
            ("C", ids, t0 + rng.exponential(2 * MIN, tags)),
        ],
        seed,
    )


def loop(tags: int, events: int, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    per_tag = events // tags
    gaps = rng.exponential(30_000, (tags, per_tag))
    ts = np.cumsum(gaps, axis=1) + rng.uniform(0, 30_000, (tags, 1))
    readers = np.array(["A", "B", "C"])[np.arange(per_tag) % 3]
    skip = rng.random((tags, per_tag)) < 0.2  # some checkouts never happen
    keep = ~(skip & (readers == "B"))
    parts = []
    for r in "ABC":
        mask = keep & (readers == r)
        parts.append((r, np.nonzero(mask)[0], ts[mask]))
    return _frame(parts, seed)


def chain(tags: int, length: int = 6, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1000 / 200, tags))
    ids = np.arange(tags)
    parts = []
    for i in range(length):
        if i:
            t = t + rng.exponential(MIN, tags)
        parts.append((f"R{i + 1}", ids, t.copy()))
    return _frame(parts, seed)


# ---- queries ----------------------------------------------------------------------------


def shoplifting(window_min: float, threshold: float = 0.3, lossy: bool = True) -> str:
    text = (
        "PATTERN SEQ(ANY x, !ANY y, ANY z) WHERE x.reader = 'A' AND y.reader = 'B' "
        f"AND z.reader = 'C' AND [tag] WITHIN {window_min:g} min"
    )
    if lossy:
        text += (
            f" MISSING RATE {LOSS} DELAY y EXPONENTIAL(1 min), z EXPONENTIAL(2 min) "
            f"THRESHOLD {threshold}"
        )
    return text


def readers(length: int, threshold: float, lossy: bool = True) -> str:
    comps = ", ".join(f"ANY r{i}" for i in range(1, length + 1))
    conds = " AND ".join(f"r{i}.reader = 'R{i}'" for i in range(1, length + 1))
    text = f"PATTERN SEQ({comps}) WHERE {conds} AND [tag] WITHIN 10 min"
    if lossy:
        delays = ", ".join(f"r{i} EXPONENTIAL(1 min)" for i in range(2, length + 1))
        text += f" MISSING RATE {LOSS} DELAY {delays} THRESHOLD {threshold}"
    return text


# ---- measuring ----------------------------------------------------------------------------


def program_for(query: str, frame: pd.DataFrame):
    plan = analyze(query, SCHEMA, OPTIONS)
    (program,) = compile_jobs([plan], [None], OPTIONS)
    return program, program.in_order(frame)


def timed(query: str, frame: pd.DataFrame, repeat: int = 3) -> tuple[float, int]:
    program, ordered = program_for(query, frame)
    best, rows = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        rows = len(program.run(ordered))
        best = min(best, time.perf_counter() - start)
    return best, rows


def batches(frame: pd.DataFrame, size: int) -> list[pd.DataFrame]:
    """The stream (in time order) cut into batches of about `size` events, between
    instants."""
    ts = frame["ts"].to_numpy()
    cuts = [0]
    for lo in range(size, len(frame), size):
        lo = int(np.searchsorted(ts, ts[lo], side="right"))
        if lo > cuts[-1]:
            cuts.append(lo)
    cuts.append(len(frame))
    return [frame.iloc[lo:hi] for lo, hi in itertools.pairwise(cuts)]


def memory(query: str, frame: pd.DataFrame, size: int = 20_000) -> tuple[int, float, float]:
    """The largest state (events kept), the peak of traced memory (MB) and the events
    per second when the stream comes in batches, as a stream would."""
    program, _ = program_for(query, frame)
    parts = [program.in_order(b) for b in batches(frame, size)]
    state = program.new_state()
    start = time.perf_counter()
    for part in parts:
        program.process(state, part)
    rate = len(frame) / (time.perf_counter() - start)
    state = program.new_state()
    kept = 0
    tracemalloc.start()
    for part in parts:
        program.process(state, part)
        kept = max(kept, 0 if state.buffer is None else len(state.buffer))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return kept, peak / 2**20, rate


def measure(experiment, stream, param, frame, lossy_query, precise_query, rows_out, mem=False):
    t, n_rows = timed(lossy_query, frame)
    t_nfa, n_nfa = timed(precise_query, frame)
    row = {
        "experiment": experiment,
        "stream": stream,
        "param": param,
        "events": len(frame),
        "rows": n_rows,
        "ayac_s": round(t, 4),
        "ayac_events_per_s": round(len(frame) / t),
        "us_per_event": round(1e6 * t / len(frame), 3),
        "nfa_rows": n_nfa,
        "nfa_s": round(t_nfa, 4),
        "ratio": round(t / t_nfa, 2),
        "state_events": "",
        "peak_mb": "",
        "batched_events_per_s": "",
    }
    if mem:
        kept, peak, rate = memory(lossy_query, frame)
        row["state_events"], row["peak_mb"] = kept, round(peak, 1)
        row["batched_events_per_s"] = round(rate)
    rows_out.append(row)
    print({k: row[k] for k in ("experiment", "stream", "param", "ayac_events_per_s", "ratio")})


def rfid_results(quick: bool):
    if not EXAMPLE.exists():
        return None
    spec = importlib.util.spec_from_file_location("lossy_rfid_evaluate", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not module.DATA.exists():
        return None
    results = module.evaluate(module.zone_sightings())
    module.plot(results, RESULTS / "ayac_rfid.png")
    return module.table(results), results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller streams")
    args = parser.parse_args()
    scale = 0.2 if args.quick else 1.0
    RESULTS.mkdir(exist_ok=True)
    rows: list[dict] = []
    shop_events = shop(int(130_000 * scale))
    loop_events = loop(2_000, int(300_000 * scale))
    for w in (1, 2, 5, 10, 20):
        for name, frame in (("shop", shop_events), ("loop", loop_events)):
            measure("window (min)", name, w, frame, shoplifting(w), shoplifting(w, lossy=False),
                    rows, mem=True)  # fmt: skip
    chain_events = chain(int(50_000 * scale))
    for k in range(2, 7):
        measure("length", "chain", k, chain_events, readers(k, 0.05), readers(k, 0.05, False),
                rows)  # fmt: skip
    for theta in (0.001, 0.01, 0.05, 0.1, 0.3, 0.9):
        measure("threshold (length 4)", "chain", theta, chain_events, readers(4, theta),
                readers(4, theta, False), rows)  # fmt: skip
    rfid = rfid_results(args.quick)
    write(rows, rfid)
    plot(rows)


def write(rows: list[dict], rfid) -> None:
    with open(RESULTS / "ayac.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# AYAC: probabilistic detection over lossy streams",
        "",
        "`python -m benchmarks.ayac` (see its docstring for the streams). Times are the best "
        "of three runs in one process; `ratio` is ayac's time over the precise `nfa` "
        "engine's on the same events and pattern without the probabilistic clauses.",
        "",
        "| experiment | stream | param | events | rows | ayac s | events/s | µs/event | "
        "nfa rows | nfa s | ratio | state events | peak MB | events/s in 20k batches |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['experiment']} | {r['stream']} | {r['param']:g} | {r['events']:,} | "
            f"{r['rows']:,} | {r['ayac_s']:.3f} | {r['ayac_events_per_s']:,} | "
            f"{r['us_per_event']:.2f} | {r['nfa_rows']:,} | {r['nfa_s']:.3f} | "
            f"{r['ratio']:.2f} | {r['state_events']} | {r['peak_mb']} | "
            f"{r['batched_events_per_s']} |"
        )
    lines += ["", "## RFID reads with sightings dropped (examples/lossy_rfid)", ""]
    if rfid is None:
        lines.append("(skipped: ../shared/data/rfid/reads.csv.gz is not here)")
    else:
        lines += [rfid[0], "", "![recall and precision](ayac_rfid.png)"]
    lines += ["", "![throughput](ayac.png)", ""]
    (RESULTS / "ayac.md").write_text("\n".join(lines))


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    win = frame[frame["experiment"] == "window (min)"]
    for stream, part in win.groupby("stream"):
        axes[0].plot(part["param"], part["us_per_event"], marker="o", label=f"ayac {stream}")
        axes[0].plot(part["param"], 1e6 * part["nfa_s"] / part["events"], ls="--",
                     marker="x", label=f"nfa {stream}")  # fmt: skip
    axes[0].set(xscale="log", xlabel="window (min)", ylabel="µs per event", title="window")
    length = frame[frame["experiment"] == "length"]
    axes[1].plot(length["param"], length["us_per_event"], marker="o", label="ayac")
    axes[1].plot(length["param"], 1e6 * length["nfa_s"] / length["events"], ls="--",
                 marker="x", label="nfa")  # fmt: skip
    axes[1].set(xlabel="positive components", ylabel="µs per event", title="pattern length")
    theta = frame[frame["experiment"].str.startswith("threshold")]
    axes[2].plot(theta["param"], theta["us_per_event"], marker="o", label="ayac")
    axes[2].set(xscale="log", xlabel="THRESHOLD", ylabel="µs per event", title="threshold")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "ayac.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
