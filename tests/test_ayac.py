"""Probabilistic detection (ayac): the language, the paper's examples, the engine against
the brute-force path oracle, and the precise engine when nothing is missed."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from ayac_oracle import oracle_paths
from ayac_strategies import ayac_queries
from helpers import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import events_frame, queries, streams

from sparkcep import QueryError, analyze, explain, match_local, parse, run_local
from sparkcep.engines.registry import choose

SCHEMA = {"ts": "int", "type": "string", "k": "int", "v": "float", "reader": "string"}


# ---- the language -------------------------------------------------------------------------


def test_the_clauses_parse():
    q = parse(
        "PATTERN SEQ(ANY x, !ANY y, ANY z)\n"
        "WHERE x.reader = 'A' AND y.reader = 'B' AND z.reader = 'C'\n"
        "  AND y.tag = x.tag AND z.tag = coalesce(x.tag, z.tag)\n"
        "WITHIN 10 min\n"
        "MISSING RATE x 0.05, y 0.2\n"
        "DELAY z EXPONENTIAL(2 min), y UNIFORM(0 s, 5 min)\n"
        "THRESHOLD 0.3 USING MODEL 'model.json'"
    )
    assert [(r.var, r.rate) for r in q.missing_rates] == [("x", 0.05), ("y", 0.2)]
    assert [(d.var, d.law, [(a.amount, a.unit) for a in d.args]) for d in q.delays] == [
        ("z", "EXPONENTIAL", [(2, "min")]),
        ("y", "UNIFORM", [(0, "s"), (5, "min")]),
    ]
    assert q.threshold == 0.3 and q.model_path == "model.json"
    assert parse("PATTERN A a WITHIN 5 MISSING RATE 0.1").missing_rates[0].var is None


def test_the_clauses_choose_the_engine_and_other_queries_keep_theirs():
    plain = analyze("PATTERN SEQ(A a, B b) WITHIN 5")
    lossy = analyze("PATTERN SEQ(A a, B b) WITHIN 5 MISSING RATE 0.1")
    counted = analyze("PATTERN SEQ(A a, B b) AGG COUNT WITHIN 5")
    assert (choose(plain).name, choose(lossy).name, choose(counted).name) == ("nfa", "ayac", "aseq")


def test_the_spec_holds_rates_laws_and_threshold():
    plan = analyze(
        "PATTERN SEQ(A a, !B b, C c) WITHIN 2 min MISSING RATE 0.1, b 0.3 "
        "DELAY c EXPONENTIAL(30 s) THRESHOLD 0.2",
        SCHEMA,
        _options(time_unit="ms"),
    )
    spec = plan.spec
    assert spec.rates == {"a": 0.1, "b": 0.3, "c": 0.1}
    assert spec.laws["c"].mean() == 30_000  # ticks of the time column (ms)
    assert spec.laws["b"].params() == {"low": 0.0, "high": 120_000.0}  # UNIFORM(0, W)
    assert spec.threshold == 0.2
    default = analyze("PATTERN SEQ(A a, C c) WITHIN 9 MISSING RATE a 0.2, c 0.1").spec
    assert default.threshold == pytest.approx(0.04)  # the paper's advice: ε² (largest ε)


def _options(**kw):
    from sparkcep.plan import Options

    return Options(**kw)


ERRORS = [  # (query, the text the error points at, what it says)
    ("PATTERN SEQ(A a, B b) WITHIN 5\nMISSING RATE 1.5", "1.5", "between 0 and 1"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 MISSING RATE a -0.1", "a -0.1", "between 0 and 1"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 MISSING RATE 0.1 THRESHOLD 2", "2", "between 0 and 1"),
    ("PATTERN SEQ(A a, B b) WITHIN 5\n  THRESHOLD 0.3", "0.3", "needs MISSING RATE"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 MISSING RATE 0.1 DELAY b GAMMA(2)", "GAMMA", "unknown law"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 DELAY a UNIFORM(3)", "a UNIFORM(3)", "first positive"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 DELAY b EXPONENTIAL(0)", "b EXP", "longer than zero"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 DELAY b UNIFORM(4, 2)", "b UNIFORM", "low < high"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 MISSING RATE q 0.1", "q 0.1", "unknown variable 'q'"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 MISSING RATE 0.1, 0.2", "0.2", "given twice"),
    ("PATTERN SEQ(A a, ANY b) WITHIN 5 MISSING RATE 0.1", "ANY b", "a condition on it alone"),
    ("PATTERN SEQ(A a, B+ b[]) WITHIN 5 MISSING RATE 0.1", "B+ b[]", "no Kleene closure"),
    ("PATTERN SEQ(A a, !B b) WITHIN 5 MISSING RATE 0.1", "!B b", "cannot end the pattern"),
    ("PATTERN SEQ(A a, B b) MISSING RATE 0.1", "MISSING RATE 0.1", "needs a WITHIN window"),
    ("PATTERN SEQ(A a, B b) STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 5 MISSING RATE 0.1",
     "SKIP_TILL_NEXT_MATCH", "SKIP_TILL_ANY_MATCH"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 MISSING RATE 0.1 USING MODEL 'no/such/model.json'",
     "'no/such", "cannot read the model"),
    ("PATTERN SEQ(A a, B missing) WITHIN 5 MISSING RATE 0.1", "B missing", "output column"),
    ("PATTERN SEQ(A a, B b) WITHIN 5 MISSING RATE 0.1 RETURN a.v AS probability",
     "a.v AS probability", "already has a column"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "at", "message"), ERRORS)
def test_mistakes_point_at_the_text(text, at, message):
    with pytest.raises(QueryError) as info:
        analyze(text)
    assert message in info.value.message
    where = text.rindex(at)
    line = text[:where].count("\n") + 1
    column = where - (text[:where].rfind("\n") + 1) + 1
    assert (info.value.line, info.value.column) == (line, column), str(info.value)


def test_a_model_file(tmp_path):
    model = {
        "unit": "s",
        "components": {
            "a": {"miss_rate": 0.2},
            "b": {"miss_rate": 0.1, "delay": {"law": "exponential", "mean": 2.0}},
        },
    }
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    text = f"PATTERN SEQ(A a, B b) WITHIN 10 s USING MODEL '{path}' THRESHOLD 0.1"
    spec = analyze(text, SCHEMA, _options(time_unit="ms")).spec
    assert spec.rates == {"a": 0.2, "b": 0.1}
    assert spec.laws["b"].mean() == pytest.approx(2000.0)  # seconds -> ms ticks
    # The query's clauses override the model.
    over = analyze(text.replace("THRESHOLD", "MISSING RATE b 0.5 THRESHOLD"), SCHEMA,
                   _options(time_unit="ms")).spec  # fmt: skip
    assert over.rates == {"a": 0.2, "b": 0.5}
    lines = explain(text, SCHEMA, time_unit="ms")
    assert "USING MODEL" in lines and "b: miss rate 0.1 (model)" in lines
    assert "EXPONENTIAL(2000 ms) (model)" in lines
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"components": {"zz": {"miss_rate": 0.1}}}))
    with pytest.raises(QueryError, match="not a variable of the pattern"):
        analyze(f"PATTERN SEQ(A a, B b) WITHIN 10 USING MODEL '{bad}'")


def test_explain_shows_the_model_and_the_automaton():
    text = explain(
        "PATTERN SEQ(A x, !B y, C z) WITHIN 10 MISSING RATE 0.1 DELAY z EXPONENTIAL(4) "
        "THRESHOLD 0.5"
    )
    assert "\nengine        ayac: " in text
    assert "z: miss rate 0.1 (query); delay from the previous positive EXPONENTIAL(4 ticks)" in text
    # x missing: at most ε = 0.1 < 0.5, so that skip edge is removed.
    assert "V0 -> V2  S^{PN}: skips x, y; G(W) = " in text and "removed (below THRESHOLD)" in text
    assert "V1 -> V2  S^{N}: skips y; G(W) = 1, kept" in text


# ---- the paper's examples and path scores -----------------------------------------------


def test_a_missed_positive_scores_eps_times_F():
    # §3.1: S^P(T) = ε F_b(T), not renormalised; T = 3 between a and c.
    events = pd.DataFrame({"type": ["A", "C"], "ts": [0, 3]})
    out = match_local(
        events,
        "PATTERN SEQ(A a, B b, C c) WITHIN 10 MISSING RATE 0.1 DELAY b EXPONENTIAL(2) "
        "THRESHOLD 0.01",
    )
    assert out["b"].isna().tolist() == [True]
    assert out["missing"].tolist() == [["b"]]
    assert out["probability"].iloc[0] == pytest.approx(0.1 * (1 - math.exp(-1.5)), rel=1e-12)


def test_segments_apart_multiply():
    # b and d missed, apart: the path's probability is S^P_b(t_c − t_a) · S^P_d(t_e − t_c).
    events = pd.DataFrame({"type": list("ACE"), "ts": [0, 3, 9]})
    out = match_local(
        events,
        "PATTERN SEQ(A a, B b, C c, D d, E e) WITHIN 20 MISSING RATE 0.3 "
        "DELAY b EXPONENTIAL(2), d UNIFORM(0, 8) THRESHOLD 0.0",
    )
    row = out[out["a"].notna() & out["c"].notna()]
    assert row["missing"].tolist() == [["b", "d"]]
    expected = 0.3 * (1 - math.exp(-3 / 2)) * 0.3 * (6 / 8)
    assert row["probability"].iloc[0] == pytest.approx(expected, rel=1e-12)


def shoplifting_reads():
    # Tag 1 pays (read at B), tag 2 is read at A and C only, tag 3 only at C.
    return pd.DataFrame(
        {
            "type": "read",
            "reader": ["A", "A", "B", "A", "C", "C", "C"],
            "tag": [1, 2, 1, 3, 1, 2, 3],
            "ts": [0, 10, 20, 40, 50, 60, 90],
        }
    )


SHOPLIFTING = """PATTERN SEQ(ANY x, !ANY y, ANY z)
WHERE x.reader = 'A' AND y.reader = 'B' AND z.reader = 'C'
  AND y.tag = x.tag AND z.tag = coalesce(x.tag, z.tag)
WITHIN 60
MISSING RATE 0.2
DELAY y UNIFORM(0, 40), z UNIFORM(0, 60)
THRESHOLD {threshold}"""


def test_shoplifting():
    # The paper's running example (§2.2, Fig. 1), written with the clauses; no
    # key (the coalesce default is not an equality), so every read can pair with every.
    out = match_local(shoplifting_reads(), SHOPLIFTING.format(threshold=0.0))
    # Tag 1 paid: its B read at 20 lies between its A (0) and C (50) reads: ruled out;
    # inferring its A read missing does not help: the B read is in the window before C
    # (y.tag = x.tag is NULL with x missing, so it forbids).
    # Tag 2: A at 10, C at 60, no B: its B read would have come within 40 ticks after A
    # (F_y(50) = 1) and been seen with probability 0.8: S^N(50) = 0 / (0.2 · 1 + 0) = 0;
    # with its A read inferred missing, tag 1's B read at 20 is in the window: ruled out.
    # Tag 3: A at 40, C at 90: S^N(50) = 0 again; with x inferred missing, the window
    # (30, 90) holds no B read, so that path scores
    # ε_x ∫_0^60 f_z(s) S^N_y(s) ds, f_z = 1/60, S^N_y(s) = (1 − s/40)/(1 − 0.8 s/40).
    assert out[["z", "missing"]].values.tolist() == [[6, ["x"]]]
    assert pd.isna(out["x"].iloc[0])
    s = np.linspace(0, 60, 600_001)
    mid = (s[1:] + s[:-1]) / 2
    f_y = np.minimum(mid / 40, 1.0)
    expected = 0.2 * np.sum(np.diff(s) / 60 * (1 - f_y) / (0.2 * f_y + 1 - f_y))
    assert out["probability"].iloc[0] == pytest.approx(expected, abs=1e-6)
    # The precise engine (no MISSING RATE) sees no theft at all: S^N is 1 when nothing
    # is ever missed... and tag 2 and 3 are thefts for it.
    precise = match_local(shoplifting_reads(), SHOPLIFTING.split("MISSING")[0])
    assert precise[["x", "z"]].values.tolist() == [[1, 5], [3, 6]]


def test_shoplifting_with_a_shorter_gap_reports_the_theft():
    reads = pd.DataFrame({"type": "read", "reader": ["A", "C"], "tag": [7, 7], "ts": [0, 30]})
    out = match_local(reads, SHOPLIFTING.format(threshold=0.5))
    # F_y(30) = 0.75: S^N(30) = 0.25 / (0.2 · 0.75 + 0.25) = 0.625.
    assert out[["x", "z"]].values.tolist() == [[0, 1]]
    assert out["probability"].iloc[0] == pytest.approx(0.625, rel=1e-12)


# ---- without losses it is the precise engine ------------------------------------------------


def _compatible(query: str) -> bool:
    return (
        "+" not in query
        and "SKIP_TILL_ANY_MATCH" in query
        and "WITHIN" in query
        and not analyze(query).has_trailing_negation
    )


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_without_missing_rate_it_gives_the_precise_matches(data):
    events = events_frame(data.draw(streams()))
    query = data.draw(queries(strategy="SKIP_TILL_ANY_MATCH"))
    try:
        assume(_compatible(query))
    except QueryError:
        assume(False)
    precise = match_local(events, query, id_col="id")
    lossless = match_local(events, query, id_col="id", algorithm="ayac")
    assert lossless["probability"].eq(1.0).all() and lossless["missing"].map(len).eq(0).all()
    cols = list(precise.columns)
    assert lossless[cols].astype(object).values.tolist() == precise.astype(object).values.tolist()


# ---- the engine against the brute-force oracle ---------------------------------------------

TOLERANCE = 1e-4  # the engine's tables against the oracle's integrals


def _rows(frame: pd.DataFrame, variables: list[str]) -> dict[tuple, float]:
    out = {}
    for record in frame.to_dict("records"):
        key = tuple(None if pd.isna(record[v]) else int(record[v]) for v in variables)
        assert key not in out, f"path {key} reported twice"
        out[key] = record["probability"]
    return out


def _agree(events: pd.DataFrame, query: str):
    plan = analyze(query)
    variables = [c.var for c in plan.positives]
    theta = plan.spec.threshold
    got = _rows(match_local(events, query, id_col="id"), variables)
    truth = {
        tuple(p[v] for v in variables): p["probability"]
        for p in oracle_paths(events.to_dict("records"), query)
    }
    for key, p in got.items():
        assert key in truth, f"{key} is not a path of {query}"
        assert abs(truth[key] - p) <= TOLERANCE, (key, p, truth[key], query)
        assert truth[key] >= theta - TOLERANCE, (key, p, truth[key], query)
    for key, p in truth.items():
        if p >= theta + TOLERANCE:
            assert key in got, f"the path {key} (p = {p:.6f}) is missing: {query}"


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_engine_equals_the_path_oracle(data):
    events = events_frame(data.draw(streams(max_events=9)))
    query = data.draw(ayac_queries())
    try:
        analyze(query)
    except QueryError:
        assume(False)
    _agree(events, query)


@pytest.mark.parametrize("seed", range(3))
def test_the_engine_equals_the_path_oracle_on_longer_streams(seed):
    from sparkcep.checks import random_events

    events = random_events(n=30, seed=seed)
    for query in (
        "PATTERN SEQ(A a, B b, !D x, C c) WHERE [k] WITHIN 6 MISSING RATE 0.4 THRESHOLD 0.0",
        "PATTERN SEQ(!D x, A a, B b, C c) WITHIN 5 MISSING RATE 0.6 DELAY c NORMAL(2, 1) "
        "THRESHOLD 0.02",
        "PATTERN SEQ(A a, B b, C c) WHERE c.v = coalesce(a.v, b.v, c.v) WITHIN 6 "
        "MISSING RATE a 0.3, b 0.7 DELAY b EXPONENTIAL(1.5), c UNIFORM(1, 4) THRESHOLD 0.05",
    ):
        _agree(events, query)


def test_a_path_is_reported_once_by_the_batch_of_its_last_event():
    events = pd.DataFrame({"type": list("ABCABC"), "ts": [1, 2, 3, 11, 12, 13], "id": range(6)})
    query = "PATTERN SEQ(A a, B b, C c) WITHIN 5 MISSING RATE 0.3 THRESHOLD 0.05"
    whole = run_local(events, query, id_col="id").matches
    program = run_local(events, query, id_col="id").programs[0]
    state = program.new_state()
    parts = [program.process(state, events.iloc[i : i + 1]) for i in range(6)]
    fed = program.concat(parts, events)
    assert _rows(fed, ["a", "b", "c"]) == _rows(whole, ["a", "b", "c"])
    program.advance(state, 100)
    assert program.is_empty(state)
