"""Match windows, as the paper ran its experiments (match-windows.md §6, Figs 6, 7 and 8).

benchmarks/ses.py departs from the paper to fit one run (one random pattern per k, τ = 2 s
on the trades, the join tree's plain window scanning every key of a window). This file
runs the paper's settings:

- Figs 6 (SES) and 7 (ZStream): P_seq = SEQ({v1}, ..., {vk}) and P_set = SEQ({v1, ...,
  vk}) for k = 1..10, TEN random distinct patterns per k (seeded; fewer only where fewer
  exist: P_set on the 10 stock ids has C(10, k)), τ = 10 days on the hospital log
  (case_id = patient, the partition key; activity = type, drawn from the 30 most frequent)
  and τ = 20 ms on the trades (stock id = type; no key, so fp = f and fpc = fc, as the
  paper reports f and fc on NYSE). The factor of each pruning (f, fp, fpc) is its
  throughput over the plain match window's on the same events; mean and min–max over
  the patterns of a k.
- Fig 7's ZStream: the join tree (`jointree`, every match) whose leaves are hashed on the
  partition attributes (`HashJoinTree`): a leaf of the window [h, end) is a range of the
  events of h's key, found by a hash look-up, as ZStream's hash joins on the equality
  predicates; the shipped tree scans every key's events of the window instead (its plain
  window is given beside, on hospital, as `tree as shipped`).
- Fig 8: P_nyse = SEQ({a+, g+}, {i+}) with rising a, g and falling i prices (τ = 20 ms,
  the paper's NYSE default; Fig 8's τ is not given) on 10^3 .. 10^6 trades (beyond
  224,473, the trace repeated later in time).

Throughput is measured, never extrapolated: one program over the same events, already
checked and in processing order (what a Spark partition hands a program), best of up to
three runs when a run is short. The plain window runs on the longest time-prefix of the
input it finishes in about `--budget` seconds (grown geometrically, each step a real
run); the prunings run on the same prefix (the factor) and on the whole input (their
throughput; above `--whole-cap` seconds, on the longest prefix within it, said in the
table). Peak memory: the process's peak resident set (VmHWM, reset before each
measurement through /proc/self/clear_refs) and its growth over the resident set at the
start of that measurement. SES runs as shipped (`ses`: plain-variable patterns answered
for every window at once) and, for a few patterns per k, window by window
(`ses-window`: the matcher called once per window, as the paper's automaton) to tell
where ours differs. Writes benchmarks/results/ses_paper.md and ses_paper.csv.

    python -m benchmarks.ses_paper [--quick]
"""

from __future__ import annotations

import argparse
import csv
import gc
import itertools
import json
import math
import os
import random
import signal
import time

import numpy as np

from benchmarks.ses import (
    DATA,
    RESULTS,
    Dataset,
    compiled,
    hospital,
    nyse,
    pattern,
    trades,
    with_matcher,
)
from sparkcep.engines.ses import matcher as ses_matcher
from sparkcep.engines.ses.jointree import JoinTreeMatcher
from sparkcep.errors import SparkcepError

TAU = {"hospital": 10, "trades": 20}  # days, ms (match-windows.md §6.1)
TAU_TEXT = {"hospital": "10 days", "trades": "20 ms"}
EMPTY = np.zeros(0, dtype=np.int64)
LONG_RUN = 0.1  # seconds: a shorter run is timed by several (`timed`)
CPU_SUM = 0.3  # seconds of CPU the runs of a short run add up to
MAX_RUNS = 2000
SHORT_CLOCK = ["cpu-sum"]  # how short runs are timed: "cpu-sum", or "wall" (the best of ten)


# ---- ZStream's hash join on the partition attributes --------------------------------------


class HashJoinTree(JoinTreeMatcher):
    """The join tree with each variable's events hashed on the partition key: a leaf of
    the window [h, end) is the range of h's key's events (a dict look-up and a binary
    search), never a scan of the window's other keys. Same leaves, same matches."""

    def __init__(self, plan, table, columns, *, key=None):
        super().__init__(plan, table, columns, key=key)
        self.groups: dict[str, dict[int, np.ndarray]] = {}
        if key is None:
            return
        for var, cands in self.cands.items():
            codes = key[cands]
            order = np.argsort(codes, kind="stable")  # positions stay in order in a key
            codes, cands = codes[order], cands[order]
            cuts = np.flatnonzero(np.diff(codes)) + 1
            firsts = codes[np.r_[0, cuts]].tolist() if len(codes) else []
            self.groups[var] = dict(zip(firsts, np.split(cands, cuts)))

    def _positions(self, var: str, h: int, end: int) -> np.ndarray:
        if self.key is None:
            return super()._positions(var, h, end)
        group = self.groups[var].get(int(self.key[h]), EMPTY)
        return group[np.searchsorted(group, h) : np.searchsorted(group, end)]


def program(ds: Dataset, query: str, matcher: str, prune: str):
    """`zstream`: the join tree with hashed leaves; else as benchmarks.ses compiles it."""
    if matcher != "zstream":
        return compiled(ds, query, matcher, prune)
    prog = ds.program(query, "jointree", prune)
    prog.make_matcher = lambda plan, table, columns, key: HashJoinTree(
        plan, table, columns, key=key
    )
    return prog


def select_of(matcher: str) -> str:
    return "ALL" if matcher in ("zstream", "jointree") else "EARLIEST MAXIMAL"


def prunings(ds: Dataset) -> tuple[str, ...]:
    return ("f", "fp", "fpc") if ds.keyed else ("f", "fpc")  # no key: fp = f


# ---- measuring ------------------------------------------------------------------------------


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident set (Linux >= 4.0)
        return True
    except OSError:
        return False


_ORDERED: dict = {}


def ordered(ds, prog, n: int):
    """The first n events of `ds` in `prog`'s processing order (sorting 150,000 rows
    takes longer than some runs: kept for the programs that sort alike)."""
    key = (ds.name, n, tuple(prog.sort_columns()))  # a prefix of trades x5 is of trades
    if key not in _ORDERED:
        if len(_ORDERED) >= 8:
            _ORDERED.pop(next(iter(_ORDERED)))
        _ORDERED[key] = prog.in_order(ds.valid.iloc[:n])
    return _ORDERED[key]


def _run(prog, frame) -> tuple[float, float, int]:
    """(CPU seconds of this process, wall seconds, rows) of one run."""
    cpu, wall = time.process_time(), time.perf_counter()
    rows = len(prog.run(frame))
    return time.process_time() - cpu, time.perf_counter() - wall, rows


class OverCap(SparkcepError):
    """A run took more CPU seconds than its cap (stopped by SIGPROF)."""


def _over_cap(signum, frame):
    raise OverCap("over the time cap")


def _capped(fn, cap: float | None):
    """fn() stopped after `cap` CPU seconds of this process (OverCap)."""
    if not cap:
        return fn()
    previous = signal.signal(signal.SIGPROF, _over_cap)
    signal.setitimer(signal.ITIMER_PROF, cap)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def timed(prog, frame, matcher: str, cap: float | None = None) -> dict:
    """The time of a run: CPU seconds of the process when the run is long (the machine is
    shared, and wall time counts the time other jobs hold the core). A shorter run is run
    again until the CPU seconds of its runs add up to CPU_SUM, and timed by their mean
    (this VM charges CPU time by ticks: one run of a few milliseconds may read 0, the sum
    of enough runs does not); `SHORT_CLOCK[0] == "wall"`: by the best wall time of up to
    ten runs instead, as the runs before the CPU sums were. Also the rows, and the peak
    resident set of the first run. A first run over `cap` CPU seconds raises OverCap."""
    resettable = _reset_peak()
    start_kb = _status_kb("VmRSS:")
    cpu, wall, rows = _capped(lambda: with_matcher(matcher, lambda: _run(prog, frame)), cap)
    peak_kb = _status_kb("VmHWM:")
    if wall >= LONG_RUN:
        seconds, clock = max(cpu, 1e-6), "cpu"
    elif SHORT_CLOCK[0] == "cpu-sum":
        runs, cpu_sum, wall_sum = 1, cpu, wall
        while runs < MAX_RUNS and cpu_sum < CPU_SUM and wall_sum < 10 * CPU_SUM:
            c, w, rows = with_matcher(matcher, lambda: _run(prog, frame))
            cpu_sum, wall_sum, runs = cpu_sum + c, wall_sum + w, runs + 1
        seconds, clock = max(cpu_sum / runs, 1e-9), f"cpu/{runs}"
    else:
        seconds, clock, total, runs = wall, "wall", wall, 1
        while runs < 10 and (runs < 3 or total < LONG_RUN):
            _, w, rows = with_matcher(matcher, lambda: _run(prog, frame))
            seconds, total, runs = min(seconds, w), total + w, runs + 1
    out = {"seconds": seconds, "clock": clock, "wall": wall, "cpu": cpu, "rows": rows}
    out["events"] = len(frame)
    out["eps"] = len(frame) / max(seconds, 1e-9)
    if resettable:
        out["peak_mb"] = peak_kb / 1024
        out["grow_mb"] = max(0, peak_kb - start_kb) / 1024
    return out


def plain_window(ds, query, matcher, budget: float, n_all: int, start: int = 500):
    """The plain window on the longest time-prefix it runs in about `budget` seconds:
    (events, measurement). Grows the prefix by real runs."""
    prog = program(ds, query, matcher, "none")
    n, last = min(start, n_all), None
    while True:
        frame = ordered(ds, prog, n)
        try:
            m = timed(prog, frame, matcher, cap=max(1.0, 2 * budget))
        except OverCap:
            if last is None:
                raise
            n, m = last  # this prefix holds a slower stretch: the last one in the cap
            frame = ordered(ds, prog, n)
            break
        if n >= n_all or m["seconds"] >= budget / 3:
            break
        last = (n, m)
        n = min(n_all, int(n * min(10.0, max(1.5, 0.8 * budget / m["seconds"]))))
    return n, m


def run_prunings(ds, query, matcher, prunes, n, none, whole_cap, whole=None) -> dict:
    """Every pruning on the plain window's events (the factor) and those of `whole`
    (default: all) on the whole input."""
    n_all = len(ds.valid)
    row: dict = {"events": n, "none_eps": none["eps"], "none_rows": none["rows"]}
    row["none_wall_eps"], row["none_clock"] = n / max(none["wall"], 1e-6), none["clock"]
    row["none_peak_mb"], row["none_grow_mb"] = none.get("peak_mb"), none.get("grow_mb")
    for p in prunes:
        prog = program(ds, query, matcher, p)
        try:
            m = timed(prog, ordered(ds, prog, n), matcher, cap=max(2.0, 3 * none["seconds"]))
        except SparkcepError as error:
            row[f"{p}_error"] = type(error).__name__
            continue
        row[f"{p}_eps"], row[f"{p}_rows"] = m["eps"], m["rows"]
        row[f"{p}_wall_eps"], row[f"{p}_clock"] = n / max(m["wall"], 1e-6), m["clock"]
        row[f"{p}_x"] = m["eps"] / none["eps"]
        if whole is not None and p not in whole and n < n_all:
            continue
        full = m
        if n < n_all:
            size = n_all if n_all / m["eps"] <= whole_cap else max(n, int(whole_cap * m["eps"]))
            try:
                full = timed(prog, ordered(ds, prog, size), matcher, cap=2 * whole_cap)
            except SparkcepError as error:
                row[f"{p}_whole_error"] = type(error).__name__
                continue
        row[f"{p}_whole_eps"], row[f"{p}_whole_events"] = full["eps"], full["events"]
        row[f"{p}_whole_rows"] = full["rows"]
        row[f"{p}_peak_mb"], row[f"{p}_grow_mb"] = full.get("peak_mb"), full.get("grow_mb")
    counts = {row[k] for k in row if k.endswith("_rows") and "whole" not in k}
    if len(counts) > 1:
        row["rows_error"] = "prunings disagree"
    return row


def one_row(ds, query, matcher, budget, whole_cap, detail=False) -> dict:
    """`detail`: every pruning on the whole input (else fpc only) and, for the join tree
    on a keyed data set, the tree as shipped on the plain window's events."""
    started = time.perf_counter()
    row = _one_row(ds, query, matcher, budget, whole_cap, detail)
    row["row_seconds"] = time.perf_counter() - started
    return row


def _one_row(ds, query, matcher, budget, whole_cap, detail) -> dict:
    n_all = len(ds.valid)
    gc.collect()
    try:
        n, none = plain_window(ds, query, matcher, budget, n_all)
    except SparkcepError as error:
        return {"none_error": type(error).__name__}
    whole = None if detail else ("fpc",)
    row = run_prunings(ds, query, matcher, prunings(ds), n, none, whole_cap, whole)
    if (
        detail and matcher == "zstream" and ds.keyed
    ):  # the join tree as shipped: its plain window scans every key
        prog = compiled(ds, query, "jointree", "none")
        try:
            cap = max(2.0, 5 * none["seconds"])
            m = timed(prog, ordered(ds, prog, n), "jointree", cap=cap)
            row["shipped_none_eps"] = m["eps"]
            if m["rows"] != none["rows"]:
                row["rows_error"] = "shipped tree disagrees"
        except SparkcepError as error:
            row["shipped_none_error"] = type(error).__name__
    return row


# ---- Figs 6 and 7 ----------------------------------------------------------------------------


def draw(rng: random.Random, types: list[str], k: int, ordered: bool, count: int) -> list:
    """`count` distinct patterns of k distinct types (ordered for P_seq, sets for
    P_set); all of them when fewer exist."""
    total = math.perm(len(types), k) if ordered else math.comb(len(types), k)
    if total <= count:
        pool = itertools.permutations(types, k) if ordered else itertools.combinations(types, k)
        return [list(p) for p in pool]
    seen: set = set()
    out = []
    while len(out) < count:
        kinds = rng.sample(types, k)
        key = tuple(kinds) if ordered else frozenset(kinds)
        if key not in seen:
            seen.add(key)
            out.append(kinds)
    return out


def k_query(ds: Dataset, label: str, kinds: list[str], matcher: str) -> str:
    names = [f"v{i + 1}" for i in range(len(kinds))]
    if label == "P_seq":
        sets = [[(v, t, False)] for v, t in zip(names, kinds)]
    else:
        sets = [[(v, t, False) for v, t in zip(names, kinds)]]
    return pattern(ds, sets, TAU[ds.name], select_of(matcher))


def k_experiments(datasets, ks, repeats, window_repeats, budget, whole_cap, out, deadline):
    """Round r runs the r-th pattern of every (data, pattern, k): a time cap drops the
    last patterns of every k alike."""
    drawn = {}
    for ds in datasets:
        for label in ("P_seq", "P_set"):
            for k in ks:
                rng = random.Random(f"{ds.name}-{label}-{k}")
                drawn[ds.name, label, k] = (ds, draw(rng, ds.types, k, label == "P_seq", repeats))
    for r in range(repeats):
        for (name, label, k), (ds, kinds_list) in drawn.items():
            if r >= len(kinds_list):
                continue
            kinds = kinds_list[r]
            for matcher, figure in (("ses", 6), ("zstream", 7), ("ses-window", 6)):
                if matcher == "ses-window" and r >= window_repeats:
                    continue
                where = {"figure": figure, "data": name, "pattern": label, "k": k, "rep": r,
                         "matcher": matcher, "types": " | ".join(kinds)}  # fmt: skip
                if time.time() > deadline:
                    out.append({**where, "skipped": "time cap of the run"})
                    continue
                query = k_query(ds, label, kinds, matcher)
                row = one_row(ds, query, matcher, budget, whole_cap, r < window_repeats)
                row.update(where)
                out.append(row)
                print(_short(row), flush=True)


# ---- Fig 8 -----------------------------------------------------------------------------------


def size_experiments(sizes, plain_cap, whole_cap, out) -> None:
    big = Dataset("trades", trades(repeat=5), "ts", "type", [])
    for n_target in sizes:
        for matcher in ("ses", "zstream"):
            query = nyse(big, TAU["trades"], select_of(matcher))
            gc.collect()
            row = {"figure": 8, "data": "trades x5", "pattern": "P_nyse", "k": n_target,
                   "matcher": matcher}  # fmt: skip
            sub = _Prefix(big, n_target)
            try:
                n, none = plain_window(sub, query, matcher, plain_cap, n_target, start=2000)
            except SparkcepError as error:
                row["none_error"] = type(error).__name__
                out.append(row)
                continue
            row.update(run_prunings(sub, query, matcher, ("f", "fpc"), n, none, whole_cap))
            out.append(row)
            print(_short(row), flush=True)


class _Prefix:
    """The first n events of a dataset, as a dataset."""

    def __init__(self, ds: Dataset, n: int):
        self.__dict__.update(ds.__dict__)
        self.valid = ds.valid.iloc[:n]
        self.program = ds.program


# ---- the paper's figures as read from its text ------------------------------------------------

# The paper gives Figs 6-8 as plots only; its extracted text keeps the y-axis ticks and
# legends, twelve axes for the twelve panels of Figs 6 and 7 (side by side on the page,
# so their text interleaves). Our reading, in order: 1-12 (no legend), 1-3 (fpc fp f),
# 0-700 (fpc fp f), 0-60 (fc f), 0-25 (fpc fp f), 1-6 (fc f), then 1-6, 1-5, 1-6, 1-5,
# 0-12 (fc f), 1-4 (fc f); Fig 8: 0-8 (SES), 1-4 (ZStream). "axis N": the top of the
# panel's y axis, an upper bound of its highest curve (fpc, or fc on NYSE); "?": the
# assignment of that axis to the panel is a guess.
PAPER = {
    (6, "hospital", "P_seq"): "axis 1–3 (?)",
    (6, "hospital", "P_set"): "axis 0–700; text: > 2 orders of magnitude",
    (6, "trades", "P_seq"): "axis 1–12 (?)",
    (6, "trades", "P_set"): "axis 0–60 (?)",
    (7, "hospital", "P_seq"): "axis 1–5 or 1–6; text: fpc 3–4×",
    (7, "hospital", "P_set"): "axis 1–5 or 1–6; text: fpc 3–4×",
    (7, "trades", "P_seq"): "axis 0–12",
    (7, "trades", "P_set"): "axis 1–4",
    (8, "trades x5", "ses"): "axis 0–8; fc roughly constant",
    (8, "trades x5", "zstream"): "axis 1–4; fc roughly constant",
}


# ---- output ---------------------------------------------------------------------------------


def _short(row: dict) -> dict:
    keep = ("figure", "data", "pattern", "k", "rep", "matcher", "events", "row_seconds")
    out = {k: row[k] for k in keep if k in row}
    for k, v in row.items():
        if k.endswith("_x") or k.endswith("error"):
            out[k] = round(v, 2) if isinstance(v, float) else v
    return out


def _eps(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:,.0f} k" if v >= 1e3 else f"{v:.0f}"


def _spread(values: list[float]) -> str:
    if not values:
        return "–"
    mean = float(np.mean(values))
    if len(values) == 1:
        return f"{mean:.1f}×"
    return f"{mean:.1f}× [{min(values):.1f}–{max(values):.1f}]"


def _num(rows, field) -> list[float]:
    return [float(r[field]) for r in rows if r.get(field) not in (None, "")]


def _mean(rows, field):
    values = _num(rows, field)
    return float(np.mean(values)) if values else None


def _events(rows, n_all) -> str:
    ns = [int(r["events"]) for r in rows if r.get("events")]
    if not ns:
        return "–"
    if min(ns) == n_all:
        return f"all {n_all:,}"
    return f"{min(ns):,}" if min(ns) == max(ns) else f"{min(ns):,}–{max(ns):,}"


def _whole(rows, p, n_all) -> str:
    eps = _mean(rows, f"{p}_whole_eps")
    if eps is None:
        return "–"
    sizes = _num(rows, f"{p}_whole_events")
    note = "" if sizes and min(sizes) == n_all else f" (≥{int(min(sizes)):,} ev)"
    return _eps(eps) + note


def _mb(rows, field) -> str:
    values = _num(rows, field)
    return f"{max(values):.0f}" if values else "–"


def _errors(rows) -> str:
    errors = sorted({str(v) for r in rows for k, v in r.items() if k.endswith("error") and v})
    skipped = sum(1 for r in rows if r.get("skipped"))
    failed = sum(1 for r in rows if r.get("none_error"))
    parts = errors + ([f"{skipped} skipped (time)"] if skipped else [])
    if failed:
        parts.append(f"{failed} without a plain window")
    return ", ".join(parts)


def k_table(rows, figure, matcher, sizes) -> list[str]:
    lines = [
        "| data | pattern | k | patterns | events (factor) | matches (mean) | f × | fp × "
        "| fpc × | paper (top curve) | plain events/s | whole input f / fp / fpc events/s "
        "| peak RSS MB (growth): plain / fpc | notes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|---|",
    ]
    for data in ("hospital", "trades"):
        for label in ("P_seq", "P_set"):
            ks = sorted({r["k"] for r in rows if r["data"] == data and r["pattern"] == label})
            for k in ks:
                group = [
                    r
                    for r in rows
                    if r["figure"] == figure and r["matcher"] == matcher and r["data"] == data
                    and r["pattern"] == label and r["k"] == k
                ]  # fmt: skip
                if not group:
                    continue
                done = [r for r in group if r.get("none_eps")]
                keyed = data == "hospital"
                fp = _spread(_num(done, "fp_x")) if keyed else "= f"
                whole = " / ".join(
                    _whole(done, p, sizes[data]) if (keyed or p != "fp") else "= f"
                    for p in ("f", "fp", "fpc")
                )
                matches = _mean(done, "none_rows")
                mem = f"{_mb(done, 'none_peak_mb')} (+{_mb(done, 'none_grow_mb')}) / " + (
                    f"{_mb(done, 'fpc_peak_mb')} (+{_mb(done, 'fpc_grow_mb')})"
                )
                paper = PAPER.get((figure if matcher != "ses-window" else 6, data, label), "")
                lines.append(
                    f"| {data} | {label} | {k} | {len(done)}/{len(group)} | "
                    f"{_events(done, sizes[data])} | "
                    f"{'–' if matches is None else f'{matches:,.0f}'} | "
                    f"{_spread(_num(done, 'f_x'))} | {fp} | {_spread(_num(done, 'fpc_x'))} | "
                    f"{paper} | {_eps(_mean(done, 'none_eps'))} | {whole} | {mem} | "
                    f"{_errors(group)} |"
                )
    return lines


def shipped_table(rows, sizes) -> list[str]:
    lines = [
        "| pattern | k | patterns | events | plain, hashed leaves (ZStream) | plain, tree as "
        "shipped | hashed / shipped | fpc × over hashed | fpc × over shipped |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label in ("P_seq", "P_set"):
        for k in sorted({r["k"] for r in rows if r["pattern"] == label}):
            group = [
                r
                for r in rows
                if r["figure"] == 7 and r["data"] == "hospital" and r["pattern"] == label
                and r["k"] == k and r.get("shipped_none_eps") and r.get("none_eps")
            ]  # fmt: skip
            if not group:
                continue
            ratio = [r["none_eps"] / r["shipped_none_eps"] for r in group]
            over_hashed = _num(group, "fpc_x")
            over_shipped = [r["fpc_eps"] / r["shipped_none_eps"] for r in group if r.get("fpc_eps")]
            lines.append(
                f"| {label} | {k} | {len(group)} | {_events(group, sizes['hospital'])} | "
                f"{_eps(_mean(group, 'none_eps'))} | {_eps(_mean(group, 'shipped_none_eps'))} "
                f"| {_spread(ratio)} | {_spread(over_hashed)} | {_spread(over_shipped)} |"
            )
    return lines


def size_table(rows) -> list[str]:
    lines = [
        "| matcher | |E| | plain window on | matches | f × | fc × | paper | plain events/s "
        "| whole |E|: f / fc events/s | peak RSS MB (growth): plain / fc | notes |",
        "|---|---:|---:|---:|---:|---:|---|---:|---|---|---|",
    ]
    for matcher in ("ses", "zstream"):
        for r in [r for r in rows if r["figure"] == 8 and r["matcher"] == matcher]:
            n = int(r["k"])
            on = "–" if not r.get("events") else f"{int(r['events']):,}"
            fx = "–" if not r.get("f_x") else f"{r['f_x']:.1f}×"
            cx = "–" if not r.get("fpc_x") else f"{r['fpc_x']:.1f}×"
            matches = "–" if r.get("none_rows") in (None, "") else f"{int(r['none_rows']):,}"
            lines.append(
                f"| {matcher} | {n:,} | {on} | {matches} | {fx} | {cx} | "
                f"{PAPER[(8, 'trades x5', matcher)]} | {_eps(r.get('none_eps'))} | "
                f"{_whole([r], 'f', n)} / {_whole([r], 'fpc', n)} | "
                f"{_mb([r], 'none_peak_mb')} (+{_mb([r], 'none_grow_mb')}) / "
                f"{_mb([r], 'fpc_peak_mb')} (+{_mb([r], 'fpc_grow_mb')}) | {_errors([r])} |"
            )
    return lines


def window_sizes(datasets) -> dict[str, float]:
    """Mean events in a window of τ from each event, all types (the plain window)."""
    out = {}
    for ds in datasets:
        col = ds.options.time_col
        ts = ds.valid[col].to_numpy()
        if ds.keyed:
            ts = ts.astype("datetime64[ns]").astype(np.int64)
            tau = TAU[ds.name] * 86_400 * 10**9
        else:
            tau = TAU[ds.name]
        ts = np.sort(ts)
        out[ds.name] = float(np.mean(np.searchsorted(ts, ts + tau) - np.arange(len(ts))))
    return out


def write(rows, meta: dict, quick: bool) -> None:
    RESULTS.mkdir(exist_ok=True)
    name = "ses_paper.quick" if quick else "ses_paper"
    fields = sorted({k for r in rows for k in r})
    with open(RESULTS / f"{name}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    sizes = meta["sizes"]
    lines = [
        "# Match windows, as the paper ran its experiments (match-windows.md §6, Figs 6–8)",
        "",
        f"`python -m benchmarks.ses_paper{' --quick' if quick else ''}`: one run of "
        f"{meta['seconds']:.0f} s on a shared 2-core machine; load average (1, 5, 15 min) "
        f"before {meta['load_before']}, after {meta['load_after']}. Plain-window budget "
        f"{meta['budget']:g} s, whole-input cap {meta['whole_cap']:g} s a measurement; "
        f"{meta['repeats']} random distinct patterns per k (all of them where fewer exist), "
        f"`ses-window` on {meta['window_repeats']} of them.",
        "",
        "How to read: `f ×`, `fp ×`, `fpc ×` = throughput of the pruning over the plain match "
        "window's, both on the same events (`events (factor)`: the time-prefix the plain "
        "window finishes in the budget, `all` = the whole input), mean [min–max] over the "
        "patterns of a k. `whole input` = the pruning's own throughput on the whole input "
        f"(mean over the patterns: f and fp on the first {meta['window_repeats']} of a k, fpc "
        "on all; `(≥ n ev)`: on a prefix of at least n events, the whole input being over "
        "the cap). A run of 0.1 s or more is timed in CPU seconds of the process (the machine "
        f"is shared: wall time also counts the time other jobs hold the core), {_short_text(meta)}"
        "; the .csv has both clocks. `peak RSS` = the process's peak resident set during the "
        "measurement (largest over the patterns), `(+growth)` over its resident set at the "
        "start (the process holds the data sets and the interpreter: ~"
        f"{meta['base_mb']:.0f} MB). τ = 10 days (hospital, key case_id) and 20 ms "
        "(trades, no key: fp = f, fpc = fc, the paper's NYSE legends). Mean events in a "
        f"plain window of τ: hospital {meta['windows']['hospital']:,.0f} (every patient), "
        f"trades {meta['windows']['trades']:.1f}. `paper`: Figs 6–8 are plots; their "
        "extracted text keeps only axis ticks and legends, so we give the top of the panel's "
        "axis (an upper bound of its highest curve, fpc or fc) and the text's statements.",
        "",
        "## Fig 6: SES (as shipped), P_seq and P_set, k = 1..10",
        "",
        *k_table(rows, 6, "ses", sizes),
        "",
        "### SES window by window (`ses-window`, as the paper's automaton), fewer patterns",
        "",
        *k_table(rows, 6, "ses-window", sizes),
        "",
        "## Fig 7: ZStream (join tree, hash joins on the partition key), SELECT ALL",
        "",
        *k_table(rows, 7, "zstream", sizes),
        "",
        "### The ZStream baseline against the join tree as shipped (hospital, plain window)",
        "",
        *shipped_table(rows, sizes),
        "",
        "## Fig 8: P_nyse, τ = 20 ms, |E| from 10^3 to 10^6 (trades repeated later in time)",
        "",
        *size_table(rows),
        "",
        *flat_lines(rows),
        "",
        "## The target: shipped SES, all prunings (fpc), P_set, mean of the patterns",
        "",
        *target_lines(rows),
        "",
        *meta.get("why", []),
    ]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


SHORT_TEXT = {
    "wall": "a shorter one by the best wall time of 3 to 10 runs (this VM charges CPU time "
    "by ticks: a run of a few ms may read 0)",
    "cpu-sum": "a shorter one by the mean CPU time of as many runs as add up to "
    f"{CPU_SUM} s (this VM charges CPU time by ticks: one run of a few ms may read 0)",
}


def _wall_caveat(meta: dict) -> list[str]:
    """What the best wall time did to the factors, where short runs were timed so."""
    if meta.get("short_clock", "wall") != "wall":
        return []
    fig8 = meta.get("fig8")
    where = "" if not fig8 else " (Figs 6 and 7 here; Fig 8 was measured again by CPU sums)"
    return [
        f"- Runs under 0.1 s are timed by their best wall time{where}. On a loaded machine a "
        "run of 10–100 ms is often preempted in all its repeats, so its wall time overstates "
        "its cost, and a pruning whose run on the row's events lasts 10–100 ms has its "
        "factor understated, by up to 2×."
    ]


def _short_text(meta: dict) -> str:
    """How this table's short runs were timed."""
    text = SHORT_TEXT[meta.get("short_clock", "wall")]
    fig8 = meta.get("fig8")
    if fig8 and fig8["short_clock"] != meta.get("short_clock", "wall"):
        text += (
            f"; Fig 8's rows were measured again on {fig8['date']} (`--fig8`, load "
            f"{fig8['load_before']} before, {fig8['load_after']} after), "
            + SHORT_TEXT[fig8["short_clock"]]
        )
    return text


def target_lines(rows) -> list[str]:
    lines = [
        "| data | k | shipped SES fpc × (mean of the patterns) | ≥ 100×? | window by window, "
        "first pattern |",
        "|---|---:|---:|---|---:|",
    ]
    overall = []
    for data in ("hospital", "trades"):
        for k in sorted({r["k"] for r in rows if r.get("figure") == 6 and r["data"] == data}):
            values = [
                r["fpc_x"] for r in _pick(rows, 6, "ses", data, "P_set") if r["k"] == k
                and r.get("fpc_x")
            ]  # fmt: skip
            window = [
                r["fpc_x"] for r in _pick(rows, 6, "ses-window", data, "P_set") if r["k"] == k
                and r.get("fpc_x")
            ]  # fmt: skip
            if values:
                mean = float(np.mean(values))
                overall.append(mean)
                lines.append(
                    f"| {data} | {k} | {_spread(values)} | {'yes' if mean >= 100 else 'no'} | "
                    f"{_spread(window)} |"
                )
    if overall:
        lines.append(f"| all | all | {np.mean(overall):.1f}× (mean of the k means) | | |")
    return lines


def _pick(rows, figure, matcher, data=None, label=None, rep=None) -> list[dict]:
    return [
        r
        for r in rows
        if r.get("figure") == figure and r["matcher"] == matcher
        and (data is None or r["data"] == data) and (label is None or r["pattern"] == label)
        and (rep is None or r.get("rep") == rep) and r.get("none_eps")
    ]  # fmt: skip


def flat_lines(rows) -> list[str]:
    """Is Fig 8's fc factor flat (within 2×) over |E| from 10^4 on?"""
    lines = []
    for matcher in ("ses", "zstream"):
        got = [(int(r["k"]), r["fpc_x"]) for r in _pick(rows, 8, matcher) if r.get("fpc_x")]
        got = [(n, x) for n, x in got if n >= 10_000]
        if len(got) >= 2:
            (n0, x0), (n1, x1) = got[0], got[-1]
            xs = [x for _, x in got]
            spread = max(xs) / min(xs)
            lines.append(
                f"- {matcher}: fc × {x0:.1f} at |E| = {n0:,} and {x1:.1f} at {n1:,} (ratio "
                f"{max(x0, x1) / min(x0, x1):.1f}); over every |E| from {n0:,} to {n1:,}: "
                f"{min(xs):.1f}–{max(xs):.1f}× (max / min {spread:.1f}: "
                f"{'within' if spread <= 2 else 'NOT within'} 2×)."
            )
    return lines


def why_lines(rows, meta) -> list[str]:
    """Measured reasons for the gaps to the paper (from this run's rows)."""
    lines = ["## Why ours differs (measured in this run)", ""]
    lines.append(
        "1. **The shipped SES's plain window is not the paper's.** P_seq and P_set are "
        "plain-variable patterns, which the shipped SES answers for every window at once "
        "(`chain.EarliestChain`, numpy over the whole batch) with or without the prunings; "
        "what is left for f, p and c to save is a few array passes. Called window by "
        "window (`ses-window`, as the paper's automaton), the same matcher pays a Python "
        "call per window, and c removes most calls. On the same patterns (the first of "
        "each k):"
    )
    for data in ("hospital", "trades"):
        for label in ("P_seq", "P_set"):
            shipped = {r["k"]: r for r in _pick(rows, 6, "ses", data, label, 0)}
            window = {r["k"]: r for r in _pick(rows, 6, "ses-window", data, label, 0)}
            ks = sorted(set(shipped) & set(window))
            if not ks:
                continue
            speed = np.mean([shipped[k]["none_eps"] / window[k]["none_eps"] for k in ks])
            fx_s = np.mean([shipped[k].get("fpc_x", np.nan) for k in ks])
            fx_w = np.mean([window[k].get("fpc_x", np.nan) for k in ks])
            lines.append(
                f"   - {data} {label}: plain window {_eps(np.mean([shipped[k]['none_eps'] for k in ks]))}"
                f" events/s as shipped against {_eps(np.mean([window[k]['none_eps'] for k in ks]))}"
                f" window by window ({speed:.0f}× faster); fpc × {fx_s:.1f} as shipped, "
                f"{fx_w:.1f} window by window (means over k = {ks[0]}..{ks[-1]})."
            )
    windows = meta.get("windows", {})
    tree = _pick(rows, 7, "zstream", "trades")
    if windows and tree:
        per_call = np.mean([1e6 / r["none_eps"] for r in tree])
        lines.append(
            f"2. **τ = 20 ms leaves almost nothing in a trade window** (mean "
            f"{windows.get('trades', 0):.1f} events of any stock; hospital, 10 days: "
            f"{windows.get('hospital', 0):,.0f} events of every patient). The plain window "
            f"calls A once per event: {per_call:.0f} µs a window for the join tree on the "
            "trades (mean over its rows), mostly the cost of a Python call and of building a "
            "tree for one or two events. c skips nearly every call once k ≥ 2 (a window must "
            "hold k events of the right types), so our factors measure the Python per-call "
            "cost saved; the paper's C implementation pays far less per call, which bounds "
            "its ZStream factors at 3–4× (Fig 7) where ours reach tens to hundreds."
        )
    ratios = [
        r["none_eps"] / r["shipped_none_eps"]
        for r in _pick(rows, 7, "zstream", "hospital")
        if r.get("shipped_none_eps")
    ]
    if ratios:
        lines.append(
            f"3. **Hash joins on the key change little here.** On hospital the ZStream "
            f"baseline (leaves hashed on case_id) runs the plain window {np.mean(ratios):.2f}× "
            f"[{min(ratios):.2f}–{max(ratios):.2f}] as fast as the tree as shipped (whose "
            "leaves already keep only the first event's patient, by a scan of the window): "
            "the shipped tree's factors were not inflated by more than that. On the trades "
            "there is no key: the two are the same tree."
        )
    lines.append(
        "4. **P_set against P_seq.** The paper's SES automaton starts an instance at every "
        "event that fits any variable of a set, and most of them die: the plain window pays "
        "for them, hence its > 100× for P_set on Onco. Our matcher finds the earliest and "
        "maximal matches of a set of plain variables without enumerating instances, so the "
        "plain window's cost for P_set is close to P_seq's (see `plain events/s` in the "
        "tables), and so is the factor. This is the design of our matcher, not a "
        "measurement of the paper's automaton, which we do not have."
    )
    lines.append(
        "5. **Data.** The paper's Onco (341,055 chemotherapy events) and NYSE (1M trades of "
        "named stocks over 34 hours) are not ours: BPI 2011 hospital log (150,291 events, "
        "1,143 patients, the 30 most frequent of 624 activities as types) and the stock "
        "trace (224,473 trades, 10 anonymous stock ids: P_set has only C(10, k) distinct "
        "patterns, one at k = 10; P_nyse's Apple, Google and IBM are ids 6, 3 and 7)."
    )
    lines += [
        "",
        "## Measurement caveats",
        "",
        *_wall_caveat(meta),
        "- `plain, tree as shipped` below 1× of the hashed tree (two rows) are 5,000-event "
        "prefixes timed by wall time: noise of the same kind.",
        "- Peak RSS is the whole process's (the data sets are loaded); the growth over the "
        "start of a measurement is mostly 0 because the allocator reuses freed memory: "
        "only large runs (Fig 8 at 10^5–10^6, the join tree's many matches) show growth.",
        "- `OverCap`: a run stopped at its CPU cap (2 × the whole-input cap, or 3 × the "
        "plain window's time); `TooManyBindings` / `TooManyMatches`: the engines' own "
        "guards (200,000 partial matches in one window; the memory budget for SELECT ALL) "
        "on the whole input, where SELECT ALL on hospital P_set has millions of matches.",
    ]
    return lines


# ---- main -----------------------------------------------------------------------------------


def sizes_and_caps(quick: bool):
    sizes = (10_000, 100_000) if quick else (1000, 10_000, 100_000, 1_000_000)
    plain_cap, whole_cap = (2.0, 2.0) if quick else (20.0, 15.0)
    return sizes, plain_cap, whole_cap


def fig8_again(quick: bool) -> None:
    """Fig 8's rows measured again (short runs timed by their summed CPU seconds), the
    other figures' rows kept from the last run's .json."""
    name = "ses_paper.quick" if quick else "ses_paper"
    saved = json.loads((RESULTS / f"{name}.json").read_text())
    rows = [r for r in saved["rows"] if r.get("figure") != 8]
    started, load_before = time.time(), " ".join(f"{x:.2f}" for x in os.getloadavg())
    ses_matcher.STEP_LIMIT = 200_000
    size_experiments(*sizes_and_caps(quick), rows)
    meta = saved["meta"]
    meta.setdefault("short_clock", "wall")  # the runs before the CPU sums
    meta["fig8"] = {
        "short_clock": SHORT_CLOCK[0],
        "seconds": time.time() - started,
        "load_before": load_before,
        "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "date": time.strftime("%Y-%m-%d"),
    }
    meta["why"] = why_lines(rows, meta)
    (RESULTS / f"{name}.json").write_text(json.dumps({"meta": meta, "rows": rows}, default=str))
    write(rows, meta, quick)
    print(f"wrote {RESULTS / name}.md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer k, patterns and sizes")
    parser.add_argument("--budget", type=float, help="seconds of the plain window a row")
    parser.add_argument("--whole-cap", type=float, help="seconds of a whole-input run")
    parser.add_argument("--repeats", type=int, help="random patterns per k")
    parser.add_argument(
        "--window-repeats", type=int, help="of them run by ses-window and every pruning whole"
    )
    parser.add_argument("--max-minutes", type=float, help="skip the rest of Figs 6/7 after")
    parser.add_argument("--rewrite", action="store_true", help="the .md again from the .json")
    parser.add_argument("--fig8", action="store_true", help="Fig 8 again, into the last run's")
    args = parser.parse_args()
    quick = args.quick
    if args.fig8:
        fig8_again(quick)
        return
    if args.rewrite:  # the tables again from the last run's measurements
        saved = json.loads((RESULTS / f"ses_paper{'.quick' if quick else ''}.json").read_text())
        saved["meta"]["why"] = why_lines(saved["rows"], saved["meta"])
        write(saved["rows"], saved["meta"], quick)
        return
    budget = args.budget or (0.1 if quick else 0.2)
    whole_cap = args.whole_cap or 0.5
    repeats = args.repeats or (2 if quick else 10)
    window_repeats = args.window_repeats if args.window_repeats is not None else 1
    ks = (2, 6) if quick else tuple(range(1, 11))
    sizes_8, plain_cap, size_whole_cap = sizes_and_caps(quick)
    max_minutes = args.max_minutes or (2.0 if quick else 19.0)
    if not DATA.exists():
        raise SystemExit(f"the shared data folder {DATA} is not here")

    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = time.time()
    ses_matcher.STEP_LIMIT = 200_000  # a window with more partial matches: "too many"
    trade = Dataset("trades", trades(), "ts", "type", [f"S{i}" for i in range(1, 11)])
    hosp_frame = hospital()
    top = hosp_frame["activity"].value_counts().index[:30].tolist()
    hosp = Dataset("hospital", hosp_frame, "timestamp", "activity", top)
    # prefixes in time (the log is sorted by patient): a prefix keeps the stream's density
    hosp.valid = hosp.valid.sort_values("timestamp", kind="stable").reset_index(drop=True)
    base_mb = _status_kb("VmRSS:") / 1024
    rows: list[dict] = []
    deadline = started + 60 * max_minutes
    k_experiments((hosp, trade), ks, repeats, window_repeats, budget, whole_cap, rows, deadline)
    size_experiments(sizes_8, plain_cap, size_whole_cap, rows)
    meta = {
        "seconds": time.time() - started,
        "load_before": load_before,
        "load_after": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "budget": budget,
        "whole_cap": whole_cap,
        "repeats": repeats,
        "window_repeats": window_repeats,
        "short_clock": SHORT_CLOCK[0],
        "sizes": {"hospital": len(hosp.valid), "trades": len(trade.valid)},
        "windows": window_sizes((hosp, trade)),
        "base_mb": base_mb,
    }
    meta["why"] = why_lines(rows, meta)
    name = "ses_paper.quick" if quick else "ses_paper"
    (RESULTS / f"{name}.json").write_text(json.dumps({"meta": meta, "rows": rows}, default=str))
    write(rows, meta, quick)
    print(f"wrote {RESULTS / ('ses_paper.quick' if quick else 'ses_paper')}.md")


if __name__ == "__main__":
    main()
