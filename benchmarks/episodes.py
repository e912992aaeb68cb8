"""CBS-Tree vs ToFel vs DirectMatch, side by side in one run (cbs-tree-episode-prediction.md §4).

Streams (time = record number, as in the paper):
- `traffic`: the Minnesota freeway detectors (../shared/data/traffic), every reading one
  event, its symbol the detector and its value's quintile ("occupancy_6005:3"), from the
  time all seven detectors report: 35 symbols, the 5 most frequent a quarter of the events,
  dense like the paper's traffic data (26%);
- `sparse`: uniform over 300 symbols (the 5 most frequent: under 2% of the events), sparse
  like the paper's Intel lab data.

Predicate episodes are generated as §4 says: a window ω from a normal law around AveW
(standard deviation AveW/4, at least 2), AveV vertices (normal around AveV, sd 1) picked
among the symbols of AveW consecutive records, each vertex's direct successors (normal
around AveE, sd 1) picked among the later vertices and AveE dummies, then the fewest
edges that connect the pieces. Each is run as a rule predicting one more symbol.

Every algorithm runs the same compiled rules over the same events in this process; the
tables give seconds, the ratio to the CBS-Tree, and the rows (equal for all three: the
min-latest occurrences). Memory is what the state holds after the stream: the CBS-Tree
and DirectMatch hold the events of the largest window (and the tree's sets), ToFel one
queue per vertex of each rule; all three hold each predicate's rejected instances.

    python -m benchmarks.episodes [--episodes 2000] [--events 4000] [--quick]

Writes benchmarks/results/episodes.md, episodes.csv and episodes.png.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import random
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sparkcep.engines.registry import engines
from sparkcep.plan import Options, plan_queries

RESULTS = Path(__file__).parent / "results"
DATA = Path(__file__).parent.parent.parent / "shared" / "data" / "traffic"
ALGORITHMS = ("episodes", "tofel", "directmatch")
LABEL = {"episodes": "CBS-Tree", "tofel": "ToFel", "directmatch": "DirectMatch"}
OPTIONS = Options(id_col="id")


# ---- streams ---------------------------------------------------------------------------


def traffic(n: int) -> pd.DataFrame:
    """The first n readings of the span every detector covers, in time order."""
    frames = []
    for path in sorted(DATA.glob("*.csv")):
        frame = pd.read_csv(path, parse_dates=["timestamp"])
        level = pd.qcut(frame["value"], 5, labels=False, duplicates="drop").astype(str)
        frames.append(pd.DataFrame({"ts": frame["timestamp"], "type": path.stem + ":" + level}))
    start = max(f["ts"].min() for f in frames)
    stream = pd.concat(frames)
    stream = stream[stream["ts"] >= start].sort_values("ts", kind="stable").head(n)
    return _numbered(stream["type"].to_numpy())


def sparse(n: int, symbols: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return _numbered(np.array([f"e{i}" for i in rng.integers(0, symbols, n)], dtype=object))


def _numbered(types) -> pd.DataFrame:
    n = len(types)
    return pd.DataFrame({"type": types, "ts": np.arange(n), "id": np.arange(n)})


# ---- episodes as §4 generates them ---------------------------------------------------------


def episodes(stream: pd.DataFrame, n: int, avev: float, avee: float, avew: float, seed: int):
    rng = random.Random(seed)
    types = stream["type"].tolist()
    rules = []
    while len(rules) < n:
        window = max(2, round(rng.gauss(avew, avew / 4)))
        start = rng.randrange(max(1, len(types) - int(avew)))
        pool = list(dict.fromkeys(types[start : start + int(avew)]))
        k = min(len(pool), max(1, round(rng.gauss(avev, 1))))
        vertices = rng.sample(pool, k)
        edges = _edges(k, avee, rng)
        consequent = rng.choice(types)
        rules.append(_rule(f"e{len(rules)}", vertices, edges, window, consequent))
    return rules


def _edges(k: int, avee: float, rng: random.Random) -> list[tuple[int, int]]:
    dummies = round(avee)
    edges = set()
    for v in range(k):
        later = list(range(v + 1, k + dummies))
        want = min(len(later), max(0, round(rng.gauss(avee, 1))))
        for w in rng.sample(later, want):
            if w < k:  # an edge to a dummy vertex is dropped
                edges.add((v, w))
    # Connect the pieces with the fewest edges (forward edges keep the graph acyclic).
    piece = list(range(k))

    def find(x):
        while piece[x] != x:
            x = piece[x]
        return x

    for u, w in edges:
        piece[find(u)] = find(w)
    roots = sorted(
        {find(v) for v in range(k)}, key=lambda r: min(v for v in range(k) if find(v) == r)
    )
    for a, b in itertools.pairwise(roots):
        u = min(v for v in range(k) if find(v) == a)
        w = max(v for v in range(k) if find(v) == b)
        u, w = min(u, w), max(u, w)
        edges.add((u, w))
        piece[find(a)] = find(b)
    return sorted(edges)


def _rule(name, vertices, edges, window, consequent) -> str:
    def q(s):
        return "'" + s.replace("'", "\\'") + "'"

    vs = ", ".join(f"{q(s)} v{i}" for i, s in enumerate(vertices))
    es = ", ".join(f"v{u} -> v{w}" for u, w in edges)
    return (
        f"RULE {name}: EPISODE ({vs}{'; ' + es if es else ''}) WITHIN {window} "
        f"PREDICT {q(consequent)} WITHIN {window}"
    )


# ---- measuring ------------------------------------------------------------------------------


def measure(stream: pd.DataFrame, rules: list[str]) -> dict:
    ENGINES = engines()
    plans, names = plan_queries(rules, {"type": "string", "ts": "int", "id": "int"}, OPTIONS)
    out = {}
    for algorithm in ALGORITHMS:
        program = ENGINES[algorithm].compile(plans, names, OPTIONS)
        events = program.in_order(stream)
        state = program.new_state()
        started = time.process_time()  # CPU time: the machine is shared
        rows = program.process(state, events)
        seconds = time.process_time() - started
        out[algorithm] = {"seconds": seconds, "rows": len(rows), **held(state)}
    return out


def held(state) -> dict:
    """What the state holds: event slots, tree set entries, queue entries, rejected."""
    events = tree = queues = rejected = 0
    for seg in state.segments.values():
        events += seg.capacity
        t = getattr(seg, "_tree", None)
        if t is not None:
            tree += sum(len(d) for d in t.events) + 4 * len(t.lat)  # sets, lat/smt/pos/sym
        queues += sum(len(q) for qs in seg.kept.values() for q in qs)
        rejected += sum(len(r) for r in seg.rejected.values())
    return {"slots": events, "tree": tree, "queues": queues, "rejected": rejected}


# ---- the experiments ------------------------------------------------------------------------


def experiments(n_episodes: int, quick: bool):
    windows = [50, 200, 500] if quick else [50, 100, 200, 300, 500]
    yield (
        "AveW",
        "AveV=5 AveE=2",
        [(w, dict(avev=5, avee=2, avew=w, n=n_episodes)) for w in windows],
    )
    vs = [3, 8, 14] if quick else [3, 5, 8, 11, 14]
    yield "AveV", "AveW=500 AveE=2", [(v, dict(avev=v, avee=2, avew=500, n=n_episodes)) for v in vs]
    es = [1, 3] if quick else [1, 2, 3, 4]
    yield (
        "AveE",
        "AveV=14 AveW=500",
        [(e, dict(avev=14, avee=e, avew=500, n=n_episodes)) for e in es],
    )
    counts = sorted({max(1, n_episodes // d) for d in ((4, 1) if quick else (8, 4, 2, 1))})
    yield (
        "episodes",
        "AveV=5 AveE=2 AveW=500",
        [(c, dict(avev=5, avee=2, avew=500, n=c)) for c in counts],
    )


def main():
    parser = argparse.ArgumentParser(description="CBS-Tree vs ToFel vs DirectMatch")
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--streams", default="traffic,sparse")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the table and plot from episodes.csv"
    )
    args = parser.parse_args()
    if args.report_only:
        frame = pd.read_csv(RESULTS / "episodes.csv")
        args.episodes = int(frame["episodes"].max())
        write(frame.to_dict("records"), args)
        return
    streams = {"traffic": traffic, "sparse": sparse}
    rows = []
    for name in args.streams.split(","):
        if name == "traffic" and not DATA.exists():
            print(f"skipping traffic: {DATA} is not here")
            continue
        stream = streams[name](args.events)
        for param, fixed, settings in experiments(args.episodes, args.quick):
            for value, s in settings:
                rules = episodes(stream, s["n"], s["avev"], s["avee"], s["avew"], seed=value)
                result = measure(stream, rules)
                row = {"stream": name, "experiment": param, "fixed": fixed, "value": value,
                       "episodes": s["n"]}  # fmt: skip
                for alg, r in result.items():
                    for k, v in r.items():
                        row[f"{alg}_{k}"] = v
                rows.append(row)
                print(_line(row), flush=True)
    write(rows, args)


def _line(row) -> str:
    times = "  ".join(f"{LABEL[a]} {row[f'{a}_seconds']:.2f}s" for a in ALGORITHMS)
    return f"{row['stream']:8} {row['experiment']:8} {row['value']:>6}  {times}  rows {row['episodes_rows']}"


def write(rows: list[dict], args) -> None:
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "episodes.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# Episode rules: CBS-Tree vs ToFel vs DirectMatch (cbs-tree-episode-prediction.md §4)",
        "",
        f"{args.events:,} events per stream (time = record number); episodes generated as §4 "
        f"says, {args.episodes:,} by default (the paper: 10,000 — `--episodes 10000` runs "
        "them, about five times longer than this). Seconds of matching only (rules parsed and "
        "compiled before), in one process on the same events, as CPU time (the machine is "
        "shared); ratio = the algorithm's time "
        "/ the CBS-Tree's (above 1: the CBS-Tree is faster). `rows` (min-latest "
        "occurrences) are the same for the three algorithms in every run.",
        "",
        *_reading(rows),
        "",
        "| stream | varied | fixed | value | episodes | rows | CBS-Tree s | ToFel s | "
        "DirectMatch s | ToFel / CBS-Tree | DirectMatch / CBS-Tree |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        same = r["episodes_rows"] == r["tofel_rows"] == r["directmatch_rows"]
        lines.append(
            f"| {r['stream']} | {r['experiment']} | {r['fixed']} | {r['value']} | "
            f"{r['episodes']:,} | {r['episodes_rows']:,}{'' if same else ' (differ!)'} | "
            f"{r['episodes_seconds']:.2f} | {r['tofel_seconds']:.2f} | "
            f"{r['directmatch_seconds']:.2f} | "
            f"{r['tofel_seconds'] / r['episodes_seconds']:.2f}× | "
            f"{r['directmatch_seconds'] / r['episodes_seconds']:.2f}× |"
        )
    lines += [
        "",
        "## Memory against the number of rules",
        "",
        "What the state holds after the stream (AveW=500): event slots (L, the largest "
        "window in events), the CBS-Tree's node sets (symbol counts and times), ToFel's "
        "queue entries, and the rejected instances every algorithm keeps per predicate "
        "(rules that differ only in what they predict share them; the episodes drawn here "
        "hardly ever do).",
        "",
        "L follows the largest window drawn (more episodes, a longer longest window), not the "
        "number of rules.",
        "",
        "| stream | episodes | CBS-Tree slots + tree | ToFel queue entries | DirectMatch slots | "
        "rejected (each) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r["experiment"] != "episodes":
            continue
        lines.append(
            f"| {r['stream']} | {r['value']:,} | "
            f"{r['episodes_slots']:,} + {r['episodes_tree']:,} | {r['tofel_queues']:,} | "
            f"{r['directmatch_slots']:,} | {r['episodes_rejected']:,} |"
        )
    (RESULTS / "episodes.md").write_text("\n".join(lines) + "\n")
    plot(rows)


def _reading(rows: list[dict]) -> list[str]:
    """What the table shows, counted from it."""
    out = []
    for stream in dict.fromkeys(r["stream"] for r in rows):
        mine = [r for r in rows if r["stream"] == stream]
        ahead = sum(r["episodes_seconds"] < r["tofel_seconds"] for r in mine)
        scan = sum(r["directmatch_seconds"] < r["episodes_seconds"] for r in mine)
        ratios = [r["tofel_seconds"] / r["episodes_seconds"] for r in mine]
        out.append(
            f"- {stream}: the CBS-Tree is ahead of ToFel in {ahead} of {len(mine)} settings "
            f"(ToFel / CBS-Tree from {min(ratios):.2f}× to {max(ratios):.2f}×); DirectMatch, "
            f"whose scan is numpy and shares the same per-instant answers, is ahead of the "
            f"CBS-Tree in {scan}."
        )
    return out


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = pd.DataFrame(rows)
    experiments_ = list(dict.fromkeys(frame["experiment"]))
    streams_ = list(dict.fromkeys(frame["stream"]))
    fig, axes = plt.subplots(
        len(streams_), len(experiments_), figsize=(4 * len(experiments_), 3.2 * len(streams_)),
        squeeze=False,
    )  # fmt: skip
    for i, stream in enumerate(streams_):
        for j, exp in enumerate(experiments_):
            ax = axes[i][j]
            part = frame[(frame["stream"] == stream) & (frame["experiment"] == exp)]
            for alg in ALGORITHMS:
                ax.plot(part["value"], part[f"{alg}_seconds"], marker="o", label=LABEL[alg])
            ax.set_xlabel(exp)
            ax.set_ylabel("seconds")
            ax.set_title(stream)
            ax.set_ylim(bottom=0)
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "episodes.png", dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
