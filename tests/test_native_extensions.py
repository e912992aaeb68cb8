"""Beyond SASE in the native language: AFTER MATCH SKIP (and, below, OUTPUT TIMEOUTS and
FUNNEL). Each is checked against its definition in docs/language.md, applied by the test
to the brute-force oracle's matches (tests/oracle.py), on random streams and queries."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from helpers import examples, oracle_rows, rows_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mr_strategies import funnel_queries
from oracle import key_attributes, oracle_matches
from strategies import events_frame, queries, streams

from sparkcep import QueryError, match_local
from sparkcep.checks import compile_one, yield_checks
from sparkcep.language.parser import parse
from sparkcep.plan import Options

# ---- AFTER MATCH SKIP -------------------------------------------------------------------------


def skip_selection(query: str, events: list[dict], mode: str) -> list[dict]:
    """docs/language.md, AFTER MATCH SKIP, applied to every match the oracle finds: per
    partition, matches in order of their first event, the longest first (latest last
    event), then output order; a match is kept when its first event comes after the skip
    point, which the kept match moves to its last (PAST LAST EVENT) or first event."""
    matches = oracle_matches(query, events)
    q = parse(query)
    positives = [c.var for c in q.components if not c.negated]
    tie = q.order_by[1] if len(q.order_by) > 1 else None
    by_id = {e["id"]: e for e in events}

    def event_key(ident):
        e = by_id[ident]
        value = e.get(tie) if tie else None
        return (e["ts"], (0,) if value is None else (1, value), ident)

    def ends(m):
        first, last = m[positives[0]], m[positives[-1]]
        first = first[0] if isinstance(first, list) else first
        last = last[-1] if isinstance(last, list) else last
        return event_key(first), event_key(last)

    key = key_attributes(query)
    ranked = list(range(len(matches)))  # the oracle's rows are in output order
    ranked.sort(key=lambda i: ends(matches[i])[1], reverse=True)  # the longest first
    ranked.sort(key=lambda i: (tuple(matches[i].get(k) for k in key), ends(matches[i])[0]))
    points: dict = {}
    kept = []
    for i in ranked:
        part = tuple(matches[i].get(k) for k in key)
        first, last = ends(matches[i])
        if part in points and first <= points[part]:
            continue
        kept.append(matches[i])
        points[part] = last if mode == "PAST LAST EVENT" else first
    return kept


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=streams(max_events=9),
    query=queries(),
    mode=st.sampled_from(["PAST LAST EVENT", "TO NEXT EVENT"]),
)
def test_after_match_skip_equals_its_definition(events, query, mode):
    text = f"{query} AFTER MATCH SKIP {mode}"
    try:
        frame = events_frame(events)
        got = match_local(frame, text, id_col="id")
    except QueryError:
        return
    expected = skip_selection(query, events, mode)
    cols = list(got.columns)
    assert Counter(rows_of(got, cols)) == Counter(oracle_rows(expected, cols)), text


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=streams(max_events=9),
    query=queries(),
    mode=st.sampled_from(["PAST LAST EVENT", "TO NEXT EVENT"]),
)
def test_after_match_skip_passes_the_conformance_checks(events, query, mode):
    """In batches, with stored state, with advance: the one-shot rows."""
    frame = events_frame(events)
    try:
        program = compile_one(f"{query} AFTER MATCH SKIP {mode}", frame, Options(id_col="id"))
    except QueryError:
        return
    for check in yield_checks(None):
        check(program, frame)


def test_skip_is_an_error_with_agg():
    with pytest.raises(QueryError, match="AFTER MATCH SKIP keeps some of the matches"):
        match_local(
            pd.DataFrame({"type": ["A"], "ts": [1]}),
            "PATTERN SEQ(A a, B b) AGG COUNT WITHIN 5 AFTER MATCH SKIP PAST LAST EVENT",
        )


RISING = (
    "PATTERN SEQ(ANY+ t[]) WHERE [stock_id] AND prev(t.price) < t.price AND count(t) >= 3 "
    "STRATEGY STRICT_CONTIGUITY WITHIN {w} RETURN count(t) AS n"
)


def rising_runs(trades: pd.DataFrame, window: int) -> list[tuple]:
    """By hand: per stock, maximal runs of strictly rising prices in time order (equal
    times ordered by row number), each cut greedily into pieces shorter than the window
    in time; the pieces of 3 trades or more."""
    out = []
    for stock, part in trades.groupby("stock_id", sort=True):
        part = part.sort_values(["time_ms", "row"], kind="stable")
        prices, times = part["price"].to_numpy(), part["time_ms"].to_numpy()
        i = 0
        while i < len(part):
            j = i
            while j + 1 < len(part) and prices[j + 1] > prices[j] and times[j + 1] > times[j]:
                if times[j + 1] - times[i] >= window:
                    break
                j += 1
            if j - i + 1 >= 3:
                out.append((stock, int(times[i]), int(times[j]), j - i + 1))
            i = j + 1
    return sorted(out)


def test_rising_kleene_query_gives_one_row_per_run_on_the_trades(shared_data):
    trades = pd.read_csv(
        shared_data / "stocks" / "trades.csv.gz", header=None, nrows=30_000,
        names=["side", "tx_id", "stock_id", "volume", "price", "time_ms"],
    )  # fmt: skip
    trades = trades.assign(type="T", row=np.arange(len(trades)))
    window = 60_000  # ms
    query = RISING.format(w=window)
    every = match_local(trades, query, time_col="time_ms", id_col="row")
    runs = match_local(
        trades, query + " AFTER MATCH SKIP PAST LAST EVENT", time_col="time_ms", id_col="row"
    )
    expected = rising_runs(trades, window)
    assert len(every) > len(runs)  # without SKIP, every rising part of a run is a match
    got = sorted(
        (r.stock_id, int(r.start), int(r.end), int(r.n)) for r in runs.itertuples(index=False)
    )
    assert got == expected


# ---- OUTPUT TIMEOUTS -------------------------------------------------------------------------


def _conjunct_vars(expr) -> set[str]:
    from sparkcep.language import ast as qast

    if isinstance(expr, qast.Equivalence):
        return set()
    return {n.var for n in qast.walk(expr) if isinstance(n, qast.AttrRef | qast.VarRef)}


def timeouts_definition(query: str, events: list[dict]) -> list[dict]:
    """docs/language.md, OUTPUT TIMEOUTS, from the oracle's matches of each prefix of the
    pattern: a partial match binds the first i positives (their conditions, the negations
    between them); one that no partial match of i + 1 positives (nor, for a Kleene Pi,
    one with one more element) extends times out (a batch input ends past every window)."""
    from sparkcep.language import ast as qast

    q = parse(query)
    comps = list(q.components)
    positives = [c for c in comps if not c.negated]
    gap, gaps = 0, {}
    for c in comps:
        if c.negated:
            gaps[c.var] = gap
        else:
            gap += 1
    key = key_attributes(query)
    conjuncts = qast.conjuncts(q.where)
    levels = []
    for i in range(1, len(positives) + 1):
        keep = [c for c in comps if (not c.negated and c in positives[:i]) or
                (c.negated and 0 < gaps[c.var] < i)]  # fmt: skip
        names = {c.var for c in keep}
        conds = [qast.to_text(e) for e in conjuncts if _conjunct_vars(e) <= names]
        conds += [f"[{k}]" for k in key]
        text = "PATTERN SEQ(" + ", ".join(_component(c) for c in keep) + ")"
        text += (" WHERE " + " AND ".join(conds)) if conds else ""
        text += f" STRATEGY {q.strategy or 'SKIP_TILL_ANY_MATCH'}"
        text += f" WITHIN {q.within.amount}"
        text += " ORDER BY " + ", ".join(q.order_by) if q.order_by else ""
        levels.append(oracle_matches(text, events))

    def binding(m, i):
        return tuple(tuple(m[c.var]) if c.kleene else m[c.var] for c in positives[:i])

    out = [
        {**m, "timeout": False, "reached": positives[-1].var} for m in oracle_matches(query, events)
    ]
    for i in range(1, len(positives)):
        extended = {binding(m, i + 1)[:i] for m in levels[i]}
        if positives[i - 1].kleene:
            extended |= {(*binding(m, i)[:-1], binding(m, i)[-1][:-1]) for m in levels[i - 1]}
        for m in levels[i - 1]:
            if binding(m, i) not in extended:
                row = {**m, "timeout": True, "reached": positives[i - 1].var}
                row.update({c.var: [] if c.kleene else None for c in positives[i:]})
                out.append(row)
    return out


def _component(c) -> str:
    text = ("!" if c.negated else "") + (c.event_type or "ANY") + ("+" if c.kleene else "")
    return f"{text} {c.var}" + ("[]" if c.kleene else "")


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams(max_events=8), query=queries())
def test_output_timeouts_equals_its_definition(events, query):
    text = query.split(" RETURN ")[0] + " OUTPUT TIMEOUTS"
    try:
        got = match_local(events_frame(events), text, id_col="id")
    except QueryError:
        return
    expected = timeouts_definition(text.replace(" OUTPUT TIMEOUTS", ""), events)
    cols = list(got.columns)
    assert Counter(rows_of(got, cols)) == Counter(oracle_rows(expected, cols)), text


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams(max_events=8), query=queries())
def test_output_timeouts_pass_the_conformance_checks(events, query):
    frame = events_frame(events)
    try:
        program = compile_one(query + " OUTPUT TIMEOUTS", frame, Options(id_col="id"))
    except QueryError:
        return
    for check in yield_checks(None):
        check(program, frame)


def test_output_timeouts_needs_a_window():
    with pytest.raises(QueryError, match="OUTPUT TIMEOUTS needs a WITHIN window"):
        match_local(
            pd.DataFrame({"type": ["A"], "ts": [1]}), "PATTERN SEQ(A a, B b) OUTPUT TIMEOUTS"
        )


# ---- FUNNEL ------------------------------------------------------------------------------------


def funnel_definition(query: str, events: list[dict]) -> list[dict]:
    """docs/language.md, FUNNEL: per key and step i, a row at the earliest time a chain of
    events of steps 1..i (in order, conditions held, within the window) completes: the
    earliest end among the oracle's matches of SEQ(s1, ..., si)."""
    q = parse(query)
    key = key_attributes(query)
    where = query.split(" WHERE ")[1].split(" WITHIN ")[0] if " WHERE " in query else ""
    conds = [c for c in where.split(" AND ") if c]
    tail = query[query.index(" WITHIN ") :]
    rows = []
    for i, comp in enumerate(q.components, start=1):
        names = {c.var for c in q.components[:i]}
        mine = [c for c in conds if c.startswith("[") or c.split(".")[0] in names]
        mine += [f"[{k}]" for k in key if f"[{k}]" not in mine]
        text = f"PATTERN SEQ({', '.join(_component(c) for c in q.components[:i])})"
        text += (" WHERE " + " AND ".join(mine)) if mine else ""
        earliest: dict = {}
        for m in oracle_matches(text + tail, events):
            part = tuple(m[k] for k in key)
            earliest[part] = min(earliest.get(part, m["end"]), m["end"])
        for part, end in earliest.items():
            rows.append({**dict(zip(key, part)), "step": i, "reached": comp.var, "ts": end})
    return rows


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams(max_events=10), query=funnel_queries())
def test_funnel_equals_its_definition(events, query):
    from sparkcep import run_local

    got = run_local(events_frame(events), query, id_col="id").matches
    cols = list(got.columns)
    assert Counter(rows_of(got, cols)) == Counter(
        oracle_rows(funnel_definition(query, events), cols)
    )


def test_funnel_tables_and_errors():
    from sparkcep import funnel_local

    clicks = pd.DataFrame(
        {
            "user": ["a", "a", "a", "b", "b", "c", "c"],
            "type": ["visit", "cart", "pay", "visit", "pay", "cart", "visit"],
            "ts": [1, 2, 3, 1, 2, 1, 9],
        }
    )
    per_key, per_step = funnel_local(
        clicks, "FUNNEL SEQ(visit v, cart c, pay p) WHERE [user] WITHIN 5"
    )
    # a: all three; b: a visit, no cart; c: a cart before its visit, so the visit only
    assert per_key.values.tolist() == [["a", 3, "p"], ["b", 1, "v"], ["c", 1, "v"]]
    assert per_step["keys"].tolist() == [3, 1, 1]
    for bad, message in (
        ("FUNNEL SEQ(visit v, !cart c, pay p) WHERE [user] WITHIN 5", "no negation"),
        ("FUNNEL SEQ(visit v, pay p) WHERE [user]", "needs a WITHIN"),
        ("FUNNEL SEQ(visit v, pay p) WHERE [user] AND p.ts > v.ts WITHIN 5", "about one step"),
    ):
        with pytest.raises(QueryError, match=message):
            funnel_local(clicks, bad)


# ---- on a stream: the batch rows ----------------------------------------------------------------

STREAMED = {
    # one program, one stream: each row names its query
    "skip-timeouts": "QUERY skip: PATTERN SEQ(A a, B+ bs[]) WHERE [k] AND prev(bs.v) <= bs.v "
    "STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 400 ms AFTER MATCH SKIP PAST LAST EVENT;\n"
    "QUERY timeouts: PATTERN SEQ(A a, B b, C c) WHERE [k] WITHIN 300 ms OUTPUT TIMEOUTS;",
    "funnel": "FUNNEL SEQ(A a, B b, C c, D d) WHERE [k] WITHIN 500 ms",
}


@pytest.mark.spark
@pytest.mark.parametrize("query", STREAMED.values(), ids=STREAMED.keys())
def test_streaming_equals_batch(spark, tmp_path, query):
    from test_streaming import batch_lines, events, run_stream, stream_lines, write_files

    frame = events(400, seed=13)
    write_files(frame, tmp_path / "in", parts=2, beat_apart=False)  # state crosses a batch
    _, writer = run_stream(spark, tmp_path / "in", query, tmp_path)
    expected = batch_lines(frame, query)
    assert len(expected) > 0
    for name in ("skip", "timeouts") if "QUERY" in query else ():
        assert any(f'"query":"{name}"'.encode() in line for line in expected), name
    assert stream_lines(tmp_path / "out") == expected
    assert writer.totals["late"] == 0
