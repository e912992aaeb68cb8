"""Match windows: the prunings f, fp, fpc against the plain match window, side by side in
one run (match-windows.md §6), for the SES matcher and the join tree; and nfa behind match
windows against nfa alone.

Data (../shared/data): `trades` — the stock trade trace (224,473 trades, 10 stock ids as
types S1..S10, millisecond times, no key: p does not apply, as on the paper's NYSE
data); `hospital` — the BPI 2011 hospital log (150,291 events, activity as type,
timestamps, partitioned by case_id).

Experiments:
- `k`: P_seq = SEQ({v1}, ..., {vk}) and P_set = SEQ({v1, ..., vk}) for k = 1..10, each
  variable a random distinct type (trades: τ = 2 s; hospital: τ = 10 days);
- `tau`: P_nyse = ⟨{a+, g+}, {i+}⟩ on trades (prices rising for a and g, falling for i)
  and P_onco = ⟨{c, d}, {p+, r+}, {b, h}⟩ on the hospital log, over several τ;
- `size`: P_nyse on 10² .. 10⁶ trades (beyond 224,473, the trace repeated later in time);
- `nfa`: plain SEQ patterns (P_seq) by nfa alone and by nfa behind match windows (fpc).

Each measurement is the time of one program over the same events (already checked and
in processing order: what a Spark partition hands the program), best of a few runs.
The plain window ("none") is the slowest; each row runs on as many events as it
processes in about `--budget` seconds (at most the whole input), and every pruning of
that row runs on the same events. SES runs twice: as shipped (plain-variable patterns
are answered for every window at once, `chain.EarliestChain`) and window by window
(`SesProgram.vectorized = False`: the matcher called once per window, as the paper's C
implementation calls its automaton). Writes benchmarks/results/ses.md, ses.csv, ses.png.

    python -m benchmarks.ses [--quick] [--budget 1.0]
"""

from __future__ import annotations

import argparse
import csv
import random
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from sparkcep.engines.registry import compile_jobs
from sparkcep.engines.ses import matcher as ses_matcher
from sparkcep.engines.ses.program import SesProgram
from sparkcep.errors import SparkcepError
from sparkcep.inputs import ROW, schema_of, split_valid
from sparkcep.plan import Options, plan_queries

RESULTS = Path(__file__).parent / "results"
DATA = Path(__file__).parent.parent.parent / "shared" / "data"
PRUNINGS = ("none", "f", "fp", "fpc")
MATCHERS = ("ses", "ses-window", "jointree")


# ---- data ----------------------------------------------------------------------------------


def trades(repeat: int = 1) -> pd.DataFrame:
    df = pd.read_csv(
        DATA / "stocks" / "trades.csv.gz",
        header=None,
        names=["side", "tx", "stock", "volume", "price", "ts"],
    )
    df["type"] = "S" + df["stock"].astype(str)
    df = df[["type", "ts", "price", "volume"]]
    if repeat > 1:
        span = int(df["ts"].max() - df["ts"].min()) + 3_600_000
        df = pd.concat([df.assign(ts=df["ts"] + i * span) for i in range(repeat)])
    return df.reset_index(drop=True)


def hospital() -> pd.DataFrame:
    df = pd.read_csv(DATA / "medical" / "hospital.csv.gz")
    df["timestamp"] = pd.to_datetime(df["timestamp"], format="mixed")
    return df[["case_id", "activity", "timestamp", "age"]]


class Dataset:
    """Events checked and ready; programs compiled on them."""

    def __init__(self, name: str, frame: pd.DataFrame, time_col: str, type_col: str, types):
        self.name = name
        self.options = Options(time_col=time_col, type_col=type_col)
        valid, _ = split_valid(frame, time_col=time_col, type_col=type_col, id_col=None)
        self.valid = valid
        self.schema = schema_of(valid.drop(columns=[ROW]))
        self.types = types
        self.keyed = name == "hospital"

    def program(self, query: str, algorithm: str, prune: str | None):
        options = replace(self.options, algorithm=algorithm, prune=prune)
        plans, names = plan_queries(query, self.schema, options)
        (program,) = compile_jobs(plans, names, replace(options, id_col=ROW))
        return program

    def variable(self, var: str, kind: str, plus: bool = False) -> tuple[str, str | None]:
        """(the variable as written in a set, its condition) for one type."""
        if self.keyed:
            return var + "+" * plus, f"{var}.activity = '{kind}'"
        return f"{kind}{'+' * plus} {var}", None

    def window(self, amount) -> str:
        return f"{amount} days" if self.keyed else str(amount)


def pattern(ds: Dataset, sets: list[list[tuple[str, str, bool]]], tau, select: str, extra=()):
    """SEQ of sets of (variable, type, plus) with SELECT and WITHIN."""
    parts, conds = [], list(extra)
    for members in sets:
        items = []
        for var, kind, plus in members:
            text, cond = ds.variable(var, kind, plus)
            items.append(text)
            if cond:
                conds.append(cond)
        parts.append("{" + ", ".join(items) + "}")
    if ds.keyed:
        conds.append("[case_id]")
    where = (" WHERE " + " AND ".join(conds)) if conds else ""
    return f"PATTERN SEQ({', '.join(parts)}){where} WITHIN {ds.window(tau)} SELECT {select}"


def plain_seq(ds: Dataset, kinds: list[str], tau) -> str:
    """The same P_seq as a plain pattern (for nfa)."""
    comps, conds = [], []
    for i, kind in enumerate(kinds):
        var = f"v{i + 1}"
        if ds.keyed:
            comps.append(f"ANY {var}")
            conds.append(f"{var}.activity = '{kind}'")
        else:
            comps.append(f"{kind} {var}")
    if ds.keyed:
        conds.append("[case_id]")
    where = (" WHERE " + " AND ".join(conds)) if conds else ""
    return f"PATTERN SEQ({', '.join(comps)}){where} WITHIN {ds.window(tau)}"


# ---- timing --------------------------------------------------------------------------------


def run_once(program, frame) -> tuple[float, int]:
    start = time.perf_counter()
    rows = program.run(frame)
    return time.perf_counter() - start, len(rows)


def measure(program, frame, repeat_below: float = 0.3) -> tuple[float, int]:
    """Best time of a few runs (one when a run is long), and the rows."""
    best, rows = run_once(program, frame)
    total = best
    while total < repeat_below and total < 3 * best + 1e-9:
        seconds, rows = run_once(program, frame)
        best = min(best, seconds)
        total += seconds
    return best, rows


def compiled(ds: Dataset, query: str, matcher: str, prune: str | None):
    algorithm = "ses" if matcher == "ses-window" else matcher
    return ds.program(query, algorithm, prune)


def with_matcher(matcher: str, fn):
    SesProgram.vectorized = matcher != "ses-window"
    try:
        return fn()
    finally:
        SesProgram.vectorized = True


def row_events(ds: Dataset, query: str, matcher: str, budget: float, cap: int) -> int:
    """How many events the plain window processes in about `budget` seconds."""
    program = compiled(ds, query, matcher, "none")
    probe = min(cap, 1000 if ds.keyed else 3000)
    frame = program.in_order(ds.valid.iloc[:probe])
    seconds, _ = with_matcher(matcher, lambda: run_once(program, frame))
    rate = probe / max(seconds, 1e-6)
    return int(min(cap, max(probe, rate * budget)))


def prunings_row(ds, experiment, param, query, matcher, budget, cap) -> dict:
    """Throughput of every pruning of one matcher on one query, on the same events."""
    row = {"experiment": experiment, "data": ds.name, "param": param, "matcher": matcher}
    try:
        n = row_events(ds, query, matcher, budget, cap)
    except SparkcepError as error:
        return {**row, "error": type(error).__name__}
    row["events"] = n
    for prune in PRUNINGS:
        program = compiled(ds, query, matcher, prune)
        frame = program.in_order(ds.valid.iloc[:n])
        try:
            seconds, rows = with_matcher(matcher, lambda p=program, f=frame: measure(p, f))
        except SparkcepError as error:
            row[f"{prune}_error"] = type(error).__name__
            continue
        row[f"{prune}_eps"] = n / seconds
        row[f"{prune}_rows"] = rows
        row["matches"] = rows
    _same_rows(row)
    for prune in PRUNINGS[1:]:
        if row.get(f"{prune}_eps") and row.get("none_eps"):
            row[f"{prune}_x"] = row[f"{prune}_eps"] / row["none_eps"]
    return row


def _same_rows(row: dict) -> None:
    """Every pruning gives the same number of rows (they give the same rows: tests)."""
    counts = {row[f"{p}_rows"] for p in PRUNINGS if f"{p}_rows" in row}
    if len(counts) > 1:
        row["rows_error"] = "prunings disagree"


def nfa_row(ds, param, query, budget, cap) -> dict:
    row = {"experiment": "nfa", "data": ds.name, "param": param, "matcher": "nfa"}
    program = ds.program(query, "nfa", None)
    probe = program.in_order(ds.valid.iloc[: min(cap, 3000)])
    seconds, _ = run_once(program, probe)
    n = int(min(cap, max(len(probe), len(probe) / max(seconds, 1e-6) * budget)))
    row["events"] = n
    for name, algorithm, prune in (("nfa", "nfa", None), ("windows", "nfa-windows", "fpc")):
        program = ds.program(query, algorithm, prune)
        frame = program.in_order(ds.valid.iloc[:n])
        try:
            seconds, rows = measure(program, frame)
        except SparkcepError as error:
            row[f"{name}_error"] = type(error).__name__
            continue
        row[f"{name}_eps"] = n / seconds
        row["matches"] = rows
    if row.get("nfa_eps") and row.get("windows_eps"):
        row["windows_x"] = row["windows_eps"] / row["nfa_eps"]
    return row


# ---- experiments -----------------------------------------------------------------------------


def k_experiments(ds: Dataset, ks, repeats: int, budget: float, out: list) -> None:
    tau = 10 if ds.keyed else 2000
    rng = random.Random(11)
    for k in ks:
        for r in range(repeats):
            kinds = rng.sample(ds.types, k)
            names = [f"v{i + 1}" for i in range(k)]
            seq_sets = [[(v, t, False)] for v, t in zip(names, kinds)]
            set_sets = [[(v, t, False) for v, t in zip(names, kinds)]]
            for label, sets in (("P_seq", seq_sets), ("P_set", set_sets)):
                for matcher in MATCHERS:
                    select = "ALL" if matcher == "jointree" else "EARLIEST MAXIMAL"
                    query = pattern(ds, sets, tau, select)
                    row = prunings_row(ds, label, k, query, matcher, budget, len(ds.valid))
                    row["repeat"] = r
                    out.append(row)
                    print(_short(row), flush=True)
            out.append(nfa_row(ds, k, plain_seq(ds, kinds, tau), budget, len(ds.valid)))
            print(_short(out[-1]), flush=True)


def nyse(ds: Dataset, tau: int, select: str) -> str:
    a, g, i = "S6", "S3", "S7"
    sets = [[("a", a, True), ("g", g, True)], [("i", i, True)]]
    extra = ("prev(a.price) < a.price", "prev(g.price) < g.price", "prev(i.price) > i.price")
    return pattern(ds, sets, tau, select, extra)


ONCO = {  # an analogue of P_onco on the hospital log (its Θ is not given in the paper)
    "c": "vervolgconsult poliklinisch",  # a follow-up consultation ...
    "d": "ordertarief",  # ... and an order, in any order,
    "p": "hemoglobine foto-elektrisch",  # then hemoglobin tests ...
    "r": "leukocyten tellen elektronisch",  # ... and leukocyte counts,
    "b": "kalium potentiometrisch",  # then potassium ...
    "h": "creatinine",  # ... and creatinine
}


def onco(ds: Dataset, tau: int, select: str) -> str:
    sets = [
        [("c", ONCO["c"], False), ("d", ONCO["d"], False)],
        [("p", ONCO["p"], True), ("r", ONCO["r"], True)],
        [("b", ONCO["b"], False), ("h", ONCO["h"], False)],
    ]
    return pattern(ds, sets, tau, select)


def tau_experiments(trade: Dataset, hosp: Dataset, budget: float, quick: bool, out: list) -> None:
    for tau in (250, 1000, 4000) if quick else (250, 500, 1000, 2000, 4000):
        for matcher in ("ses", "jointree"):
            select = "ALL" if matcher == "jointree" else "EARLIEST MAXIMAL"
            row = prunings_row(trade, "P_nyse (τ ms)", tau, nyse(trade, tau, select), matcher,
                               budget, len(trade.valid))  # fmt: skip
            out.append(row)
            print(_short(row), flush=True)
    for tau in (5, 20, 50) if quick else (5, 10, 20, 30, 50):
        for matcher in ("ses", "jointree"):
            select = "ALL" if matcher == "jointree" else "EARLIEST MAXIMAL"
            row = prunings_row(hosp, "P_onco (τ days)", tau, onco(hosp, tau, select), matcher,
                               budget, len(hosp.valid))  # fmt: skip
            out.append(row)
            print(_short(row), flush=True)


# The largest |E| each matcher runs without (False) and with (True) the conditions.
SIZE_LIMITS = {
    ("ses", False): 100_000,
    ("ses", True): 1_000_000,
    ("jointree", False): 10_000,
    ("jointree", True): 224_473,
}


def size_experiments(budget: float, quick: bool, out: list) -> None:
    big = Dataset("trades x5", trades(repeat=5), "ts", "type", [])
    sizes = (100, 10_000, 224_473) if quick else (100, 1000, 10_000, 100_000, 224_473, 1_000_000)
    for n in sizes:
        for matcher in ("ses", "jointree"):
            select = "ALL" if matcher == "jointree" else "EARLIEST MAXIMAL"
            query = nyse(big, 1000, select)
            row = {"experiment": "P_nyse |E| (τ = 1 s)", "data": big.name, "param": n,
                   "matcher": matcher, "events": n}  # fmt: skip
            for prune in PRUNINGS:
                program = compiled(big, query, matcher, prune)
                frame = program.in_order(big.valid.iloc[:n])
                if n > SIZE_LIMITS[(matcher, prune == "fpc")]:
                    row[f"{prune}_error"] = "skipped (slow)"
                    continue
                try:
                    seconds, rows = measure(program, frame)
                except SparkcepError as error:
                    row[f"{prune}_error"] = type(error).__name__
                    continue
                row[f"{prune}_eps"] = n / seconds
                row[f"{prune}_rows"] = rows
                row["matches"] = rows
            _same_rows(row)
            for prune in PRUNINGS[1:]:
                if row.get(f"{prune}_eps") and row.get("none_eps"):
                    row[f"{prune}_x"] = row[f"{prune}_eps"] / row["none_eps"]
            out.append(row)
            print(_short(row), flush=True)


def target(trade: Dataset, out: list) -> None:
    """The issue's target: SES with fpc on the whole trace, k = 3."""
    for label, sets in (
        ("P_seq", [[("a", "S6", False)], [("b", "S3", False)], [("c", "S7", False)]]),
        ("P_set", [[("a", "S6", False), ("b", "S3", False), ("c", "S7", False)]]),
    ):
        query = pattern(trade, sets, 2000, "EARLIEST MAXIMAL")
        program = trade.program(query, "ses", "fpc")
        frame = program.in_order(trade.valid)
        seconds, rows = measure(program, frame, repeat_below=1.0)
        out.append({"experiment": "target", "data": trade.name, "param": label,
                    "matcher": "ses", "events": len(frame), "matches": rows,
                    "fpc_eps": len(frame) / seconds})  # fmt: skip
        print(_short(out[-1]), flush=True)


# ---- output --------------------------------------------------------------------------------


def _short(row: dict) -> dict:
    return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()}


def _eps(v) -> str:
    if v is None or v == "":
        return "–"
    v = float(v)
    return f"{v / 1e6:.2f} M" if v >= 1e6 else f"{v / 1e3:,.0f} k" if v >= 1e3 else f"{v:.0f}"


def _x(v) -> str:
    return "–" if v in (None, "") else f"{float(v):.1f}×"


def aggregate(rows: list[dict]) -> list[dict]:
    """Average the throughput over the random patterns of one (experiment, data, k)."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = (row["experiment"], row["data"], row["param"], row["matcher"])
        groups.setdefault(key, []).append(row)
    out = []
    for (experiment, data, param, matcher), items in groups.items():
        merged = {"experiment": experiment, "data": data, "param": param, "matcher": matcher}
        for field in ("events", "matches"):
            values = [r[field] for r in items if r.get(field) not in (None, "")]
            merged[field] = int(np.mean([float(v) for v in values])) if values else None
        for name in (*[f"{p}_eps" for p in PRUNINGS], "nfa_eps", "windows_eps"):
            values = [float(r[name]) for r in items if r.get(name) not in (None, "")]
            if values:
                merged[name] = float(np.mean(values))
        for p in PRUNINGS[1:]:
            if merged.get(f"{p}_eps") and merged.get("none_eps"):
                merged[f"{p}_x"] = merged[f"{p}_eps"] / merged["none_eps"]
        if merged.get("windows_eps") and merged.get("nfa_eps"):
            merged["windows_x"] = merged["windows_eps"] / merged["nfa_eps"]
        errors = {v for r in items for k, v in r.items() if k.endswith("error") and v}
        merged["errors"] = ", ".join(sorted(errors))
        out.append(merged)
    return out


def write(rows: list[dict], seconds: float, budget: float) -> None:
    RESULTS.mkdir(exist_ok=True)
    fields = sorted({k for r in rows for k in r})
    with open(RESULTS / "ses.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    merged = aggregate(rows)
    lines = [
        "# Match windows: prunings against the plain match window (match-windows.md §6)",
        "",
        "Throughput in events per second of one program over events already checked and in "
        "processing order (what a Spark partition hands a program), best of a few runs, on "
        f"one shared 2-core machine; all in one run ({seconds:.0f} s). Each row runs every "
        f"pruning on the same events: as many as the plain window processes in about "
        f"{budget:g} s (at most the whole input), so rows differ in size. "
        "`×` = throughput over the plain match window (none). `ses` is the SES matcher as "
        "shipped (plain-variable patterns answered for every window at once); `ses-window` "
        "the same matcher called once per window (as the paper's automaton); `jointree` "
        "every match (SELECT ALL). On the trades there is no key, so fp = f (the paper "
        "reports f and fc on NYSE). Types of each random pattern: a seeded draw of distinct "
        "stock ids / frequent activities, averaged over the draws.",
        "",
    ]
    target_rows = [r for r in merged if r["experiment"] == "target"]
    if target_rows:
        lines += ["## The target: SES, fpc, the whole trade trace, k = 3 (τ = 2 s)", ""]
        lines += ["| pattern | events | matches | events/s |", "|---|---:|---:|---:|"]
        for r in target_rows:
            lines.append(
                f"| {r['param']} | {r['events']:,} | {r['matches']:,} | {_eps(r.get('fpc_eps'))} |"
            )
        lines.append("")
    experiments = [
        e for e in dict.fromkeys(r["experiment"] for r in merged) if e not in ("target", "nfa")
    ]
    for experiment in experiments:
        lines += [f"## {experiment}", ""]
        lines += [
            "| data | param | matcher | events | matches | none | f | fp | fpc | f × | fp × "
            "| fpc × | notes |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in merged:
            if r["experiment"] != experiment:
                continue
            lines.append(
                f"| {r['data']} | {r['param']} | {r['matcher']} | {r.get('events') or 0:,} "
                f"| {r.get('matches') or 0:,} | {_eps(r.get('none_eps'))} | "
                f"{_eps(r.get('f_eps'))} | {_eps(r.get('fp_eps'))} | {_eps(r.get('fpc_eps'))} "
                f"| {_x(r.get('f_x'))} | {_x(r.get('fp_x'))} | {_x(r.get('fpc_x'))} "
                f"| {r.get('errors', '')} |"
            )
        lines.append("")
    nfa_rows = [r for r in merged if r["experiment"] == "nfa"]
    if nfa_rows:
        lines += ["## nfa behind match windows (fpc) against nfa alone, P_seq", ""]
        lines += [
            "| data | k | events | matches | nfa | nfa-windows | × |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in nfa_rows:
            lines.append(
                f"| {r['data']} | {r['param']} | {r.get('events') or 0:,} | "
                f"{r.get('matches') or 0:,} | {_eps(r.get('nfa_eps'))} | "
                f"{_eps(r.get('windows_eps'))} | {_x(r.get('windows_x'))} |"
            )
        lines.append("")
    (RESULTS / "ses.md").write_text("\n".join(lines))
    plot(merged)


def plot(merged: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(e, d) for e in ("P_seq", "P_set") for d in ("hospital", "trades")]
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6), sharey=False)
    for ax, (experiment, data) in zip(axes, panels):
        for matcher, style in (("ses-window", "-"), ("ses", "--"), ("jointree", ":")):
            rows = [
                r
                for r in merged
                if r["experiment"] == experiment and r["data"] == data and r["matcher"] == matcher
            ]
            rows.sort(key=lambda r: int(r["param"]))
            for prune, color in (("f", "tab:blue"), ("fp", "tab:orange"), ("fpc", "tab:green")):
                xs = [int(r["param"]) for r in rows if r.get(f"{prune}_x")]
                ys = [r[f"{prune}_x"] for r in rows if r.get(f"{prune}_x")]
                if xs:
                    ax.plot(xs, ys, style, color=color, label=f"{matcher} {prune}")
        ax.set_title(f"{experiment} on {data}")
        ax.set_xlabel("variables k")
        ax.set_yscale("log")
    axes[0].set_ylabel("throughput / plain window")
    axes[-1].legend(fontsize=6, loc="best")
    fig.tight_layout()
    fig.savefig(RESULTS / "ses.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer k, τ and sizes")
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of the plain window")
    parser.add_argument("--repeats", type=int, default=1, help="random patterns per k")
    args = parser.parse_args()
    started = time.time()
    ses_matcher.STEP_LIMIT = 200_000  # a window with more partial matches: "too many"
    if not DATA.exists():
        raise SystemExit(f"the shared data folder {DATA} is not here")
    trade = Dataset("trades", trades(), "ts", "type", [f"S{i}" for i in range(1, 11)])
    hosp_frame = hospital()
    top = hosp_frame["activity"].value_counts().index[:30].tolist()
    hosp = Dataset("hospital", hosp_frame, "timestamp", "activity", top)
    rows: list[dict] = []
    target(trade, rows)
    ks = (1, 2, 3, 5, 10) if args.quick else range(1, 11)
    repeats = 1 if args.quick else args.repeats
    for ds in (trade, hosp):
        k_experiments(ds, ks, repeats, args.budget, rows)
    tau_experiments(trade, hosp, args.budget, args.quick, rows)
    size_experiments(args.budget, args.quick, rows)
    write(rows, time.time() - started, args.budget)
    print(f"wrote {RESULTS / 'ses.md'}")


if __name__ == "__main__":
    main()
