"""Mined episode rules on the NAB traffic detectors: the engine's speed on a real rule set.

The workload, built at run time from ../shared/data/traffic (nothing of it is copied into
the repository):

- events: detectors 6005 and t4013 over the span all seven detector files cover, speed
  and occupancy joined per reading, each cut at the terciles of its first 70% (3 x 3
  states a detector: `S0O2` is slow and busy); one event per reading, its symbol
  `detector:state` (18 symbols). The first 70% of the span is the history (2,258 events),
  the rest the held-out events (1,323);
- rules: `mine-rules` on the history (predicate and rule window 2 h, min support 48, up
  to 3 events a predicate): 2,522 rules, one per consequent, over 183 distinct predicates.

Each algorithm runs the rules over the held-out events in this process; engine time is
the CPU time of the program's `process` (rules parsed and compiled before), the best of
`--repeat` runs. The local run is `run_local`'s whole CPU time in the same process
(checks, parsing and compiling the rules, the engine, the rows sorted). The rows are
compared as CSV bytes: the same for the three algorithms, and before and after.

The CBS-Tree's first batch is also run in fresh processes, the rules parsed and compiled
just before, with Python's garbage collector paused during the batch (as the engine
does) and left running: what the pause buys, where a run meets it.

`--before COMMIT` (default: the last commit before the engine shared CBR across the rules
of a predicate) measures the code of that commit too, in a subprocess on the same events
and rules (its `src/` extracted with `git archive`, as benchmarks.before_after does);
`--before none` skips it.

    python -m benchmarks.episodes_nab [--repeat 3] [--before COMMIT]

Writes benchmarks/results/episodes_nab.md.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).parent.parent
RESULTS = Path(__file__).parent / "results"
DATA = Path(os.environ.get("SPARKCEP_DATA", ROOT.parent / "shared" / "data")) / "traffic"
BEFORE = "20b8229"  # the last commit before CBR ran once per predicate
ALGORITHMS = ("episodes", "tofel", "directmatch")
LABEL = {"episodes": "CBS-Tree", "tofel": "ToFel", "directmatch": "DirectMatch"}
DETECTORS = ("6005", "t4013")
TRAIN = 0.7
MINING = {"window": "2 h", "rule_window": "2 h", "min_support": 48, "max_length": 3}
SYMBOL = "concat(detector, ':', state)"
ID = "event"
# Before the change, as first reported, and as measured on this machine (engine time).
REPORTED_BEFORE = "51–60 events/s as first reported; 440–600 events/s of engine time here"


# ---- the workload --------------------------------------------------------------------------


def workload(data: Path = DATA) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(history, held-out): one event per reading of the two detectors, its state."""
    spans = [pd.read_csv(p, parse_dates=["timestamp"])["timestamp"] for p in data.glob("*.csv")]
    start, end = max(s.min() for s in spans), min(s.max() for s in spans)
    frames = []
    for detector in DETECTORS:
        speed = pd.read_csv(data / f"speed_{detector}.csv", parse_dates=["timestamp"])
        occupancy = pd.read_csv(data / f"occupancy_{detector}.csv", parse_dates=["timestamp"])
        both = speed.merge(occupancy, on="timestamp", suffixes=("_s", "_o"))
        both = both.rename(columns={"timestamp": "ts", "value_s": "speed", "value_o": "occ"})
        frames.append(both.assign(detector="d" + detector))
    reads = pd.concat(frames)
    reads = reads[(reads["ts"] >= start) & (reads["ts"] <= end)]
    reads = reads.sort_values(["ts", "detector"], kind="stable")
    split = reads["ts"].min() + TRAIN * (reads["ts"].max() - reads["ts"].min())
    out = []
    for _, g in reads.groupby("detector"):
        train = g[g["ts"] < split]
        terciles = [1 / 3, 2 / 3]
        speed = np.searchsorted(np.quantile(train["speed"], terciles), g["speed"])
        occ = np.searchsorted(np.quantile(train["occ"], terciles), g["occ"])
        out.append(g.assign(state="S" + speed.astype(str) + "O" + occ.astype(str)))
    events = pd.concat(out).sort_values(["ts", "detector"], kind="stable").reset_index(drop=True)
    events[ID] = np.arange(len(events))
    events = events[[ID, "ts", "detector", "state", "speed", "occ"]]
    return events[events["ts"] < split], events[events["ts"] >= split].reset_index(drop=True)


def mined_rules(history: pd.DataFrame) -> str:
    """The rule file `sparkcep mine-rules --local` writes for the history."""
    from sparkcep.plan import Options
    from sparkcep.runners.jobs.mining import MiningSettings, mine_rules, rules_file

    settings = MiningSettings(symbol=SYMBOL, **MINING)
    rules, settings = mine_rules(history, settings, Options(time_col="ts"))
    return rules_file(rules, settings)


# ---- measuring ----------------------------------------------------------------------------------


def measure(held_out: pd.DataFrame, text: str, repeat: int) -> dict:
    """Per algorithm: engine seconds (best of `repeat`), the local run's seconds, the
    rows and their digest. The algorithms take turns in each round, each run from a
    collected heap (what one leaves in memory falls on none of the others)."""
    from sparkcep.plan import Options
    from sparkcep.runners.local import _seen, check_events, run_local

    runs = {}
    for algorithm in ALGORITHMS:
        checked = check_events(held_out, text, Options(id_col=ID, algorithm=algorithm))
        (program,) = checked.programs
        runs[algorithm] = (program, program.in_order(_seen(program, checked.valid)))
    out = {a: {"events": len(e), "seconds": [], "local_run": []} for a, (_, e) in runs.items()}
    for _ in range(repeat):
        for algorithm, (program, events) in runs.items():
            gc.collect()
            started = time.process_time()  # CPU time: the machine is shared
            rows = program.process(program.new_state(), events)
            out[algorithm]["seconds"].append(time.process_time() - started)
            out[algorithm]["rows"] = len(rows)
            out[algorithm]["digest"] = hashlib.sha256(rows.to_csv(index=False).encode()).hexdigest()
            del rows
            gc.collect()
            started = time.process_time()
            run_local(held_out, text, id_col=ID, algorithm=algorithm)
            out[algorithm]["local_run"].append(time.process_time() - started)
    for figures in out.values():
        figures["seconds"] = min(figures["seconds"])
        figures["local_run"] = min(figures["local_run"])
    return out


def first_batch(held_out: pd.DataFrame, text: str, collector: str) -> float:
    """Engine seconds of the CBS-Tree's first batch in a fresh process, the rules parsed
    and compiled just before (as `sparkcep run` has it), with Python's garbage collector
    paused during the batch (as the engine does) or left `running`."""
    from sparkcep.engines.episodes import program as episode_program
    from sparkcep.plan import Options
    from sparkcep.runners.local import _seen, check_events

    checked = check_events(held_out, text, Options(id_col=ID, algorithm="episodes"))
    (program,) = checked.programs
    events = program.in_order(_seen(program, checked.valid))
    if collector == "running":
        episode_program._collector_paused = contextlib.nullcontext
    started = time.process_time()
    program.process(program.new_state(), events)
    return time.process_time() - started


def in_subprocess(folder: Path, src: Path, *args: str):
    """This module run with the package in `src` on the input in `folder` (`_subprocess`)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.episodes_nab", "--in", str(folder), *args],
        capture_output=True, text=True, env=env, cwd=folder,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{src}: {done.stderr[-2000:]}")
    return json.loads((folder / "measured.json").read_text())


def _subprocess(folder: Path, task: list[str]) -> None:
    """What `in_subprocess` runs: the input from `folder`, the figures into it."""
    held_out, text, repeat = pickle.loads((folder / "input.pickle").read_bytes())
    if task[0] == "measure":
        figures = measure(held_out, text, repeat)
    else:
        figures = first_batch(held_out, text, task[1])
    (folder / "measured.json").write_text(json.dumps(figures))


# ---- the table ---------------------------------------------------------------------------------


def write(after: dict, before: dict | None, facts: dict, args) -> str:
    reference = after["episodes"]["digest"]
    lines = [
        "# Mined episode rules on the NAB traffic detectors: engine speed, before and after",
        "",
        f"`python -m benchmarks.episodes_nab --repeat {args.repeat}"
        + (f" --before {args.before}`" if before else " --before none`")
        + f" on {platform.machine()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} cores (a shared machine: CPU seconds, the best of {args.repeat}).",
        "",
        f"{facts['rules']:,} rules mined from the history ({facts['history']:,} events) over "
        f"{facts['predicates']:,} distinct predicates, run on the {facts['held_out']:,} "
        "held-out events (the module's docstring says how both are built). *Engine*: the "
        "program's `process` (rules parsed and compiled before); *local run*: `run_local` "
        "as a whole (the rules parsed and compiled, the input checked, the rows sorted). "
        "*Same rows*: the rows' CSV bytes equal the CBS-Tree's after the change.",
        "",
        "| algorithm | code | engine s | engine events/s | local run s | predictions | same rows |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for algorithm in ALGORITHMS:
        for code, figures in (("before", before), ("after", after)):
            if figures is None:
                continue
            r = figures[algorithm]
            lines.append(
                f"| {LABEL[algorithm]} | {code} | {r['seconds']:.3f} | "
                f"{r['events'] / r['seconds']:,.0f} | {r['local_run']:.2f} | {r['rows']:,} | "
                f"{'yes' if r['digest'] == reference else 'NO'} |"
            )
    lines += ["", f"Before the change: {REPORTED_BEFORE}.", ""]
    if before:
        lines += [
            "After / before, engine time: "
            + ", ".join(
                f"{LABEL[a]} {before[a]['seconds'] / after[a]['seconds']:.1f}x faster"
                for a in ALGORITHMS
            )
            + ".",
            "",
        ]
    first, n = facts["first_batch"], after["episodes"]["events"]
    lines += [
        "Python's garbage collector: the CBS-Tree's first batch in a fresh process, the "
        "rules parsed and compiled just before (as `sparkcep run` has it), takes "
        f"{first['paused']:.3f} s ({n / first['paused']:,.0f} events/s) with the collector "
        f"paused during the batch, as the engine does, and {first['running']:.3f} s "
        f"({n / first['running']:,.0f} events/s) with it left running: the rows' lists set "
        "off full collections, each walking every object of the process (best of "
        f"{args.repeat} processes each). The runs of the table start from a collected heap, "
        "where a batch may set off none.",
        "",
    ]
    text = "\n".join(lines)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "episodes_nab.md").write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description="mined episode rules on the NAB traffic data")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", default=BEFORE, help="a commit to compare with, or none")
    parser.add_argument("--in", dest="folder", help=argparse.SUPPRESS)  # a subprocess's input
    parser.add_argument("task", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.folder:
        _subprocess(Path(args.folder), args.task)
        return
    if not DATA.exists():
        print(f"skipping: {DATA} is not here")
        return
    from sparkcep.engines.episodes.rules import RuleSet
    from sparkcep.plan import Options, plan_queries

    history, held_out = workload()
    text = mined_rules(history)
    plans, names = plan_queries(text, None, Options(id_col=ID))
    facts = {
        "history": len(history),
        "held_out": len(held_out),
        "rules": len(plans),
        "predicates": len(RuleSet(plans, names).predicates),
    }
    print(f"{facts}", flush=True)
    after = measure(held_out, text, args.repeat)
    with tempfile.TemporaryDirectory(prefix="episodes-nab-") as folder:
        folder = Path(folder)
        (folder / "input.pickle").write_bytes(pickle.dumps((held_out, text, args.repeat)))
        first = {"paused": [], "running": []}
        for _ in range(args.repeat):
            for collector, seconds in first.items():
                seconds.append(in_subprocess(folder, ROOT / "src", "first", collector))
        before = None
        if args.before.lower() != "none":
            from benchmarks.before_after import extract

            before = in_subprocess(folder, extract(args.before, folder / "code"), "measure")
    facts["first_batch"] = {collector: min(s) for collector, s in first.items()}
    print(write(after, before, facts, args))


if __name__ == "__main__":
    main()
