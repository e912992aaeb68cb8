"""Event set patterns and match windows (match-windows.md), against the oracle written from
Definition 2 (tests/ses_oracle.py) and the paper's Chemo example."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import engine_rows, examples, oracle_rows, rows_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ses_oracle import ses_oracle
from ses_strategies import all_queries, plain_set_queries, ses_queries, windowed_queries
from strategies import events_frame as frame
from strategies import streams

from sparkcep import QueryError
from sparkcep.checks import compile_one, yield_checks
from sparkcep.engines.registry import choose, engines
from sparkcep.errors import SparkcepError
from sparkcep.plan import Options, analyze
from sparkcep.runners.local import execute_local

ENGINES = engines()
PRUNINGS = ("none", "f", "fp", "fpc")


def SETTINGS(n: int):
    return settings(
        max_examples=examples(n),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def run(events, query, **options):
    return engine_rows(frame(events) if isinstance(events, list) else events, query, **options)


def same(got: pd.DataFrame, expected: list[dict], query: str) -> None:
    cols = list(got.columns)
    assert rows_of(got, cols) == oracle_rows(expected, cols), query


# ---- the engine against the oracle (Definition 2, then earliest and maximal) -------------------


@SETTINGS(120)
@given(events=streams(max_events=8), query=ses_queries())
def test_ses_equals_the_oracle(events, query):
    expected = ses_oracle(query, events)
    same(run(events, query, algorithm="ses"), expected, query)


@SETTINGS(40)
@given(events=streams(max_events=8), query=ses_queries(), data=st.data())
def test_every_pruning_gives_the_same_matches(events, query, data):
    prune = data.draw(st.sampled_from(PRUNINGS[:3]))
    expected = run(events, query, algorithm="ses")
    got = run(events, query, algorithm="ses", prune=prune)
    assert rows_of(got, list(got.columns)) == rows_of(expected, list(expected.columns))


@SETTINGS(40)
@given(events=streams(max_events=7), query=all_queries(), data=st.data())
def test_join_tree_equals_the_oracle(events, query, data):
    prune = data.draw(st.sampled_from(PRUNINGS))
    expected = ses_oracle(query, events)
    same(run(events, query, algorithm="jointree", prune=prune), expected, query)


@SETTINGS(50)
@given(events=streams(), query=windowed_queries(), data=st.data())
def test_nfa_behind_match_windows_equals_nfa(events, query, data):
    prune = data.draw(st.sampled_from(PRUNINGS))
    try:
        expected = run(events, query)
    except QueryError:
        return
    got = run(events, query, algorithm="nfa-windows", prune=prune)
    assert rows_of(got, list(got.columns)) == rows_of(expected, list(expected.columns)), query


@SETTINGS(25)
@given(events=streams(max_events=8), query=all_queries(max_size=1))
def test_sets_of_one_mean_what_plain_components_mean(events, query):
    """Sets of one variable are plain components: nfa, the SES matcher and the join tree
    give the same matches (the plain query has no SELECT)."""
    plain = query.replace(" SELECT ALL", "")
    assert choose(analyze(plain)).name == "nfa"
    expected = run(events, plain)
    for name in ("ses", "jointree", "nfa-windows"):
        got = run(events, query if name != "nfa-windows" else plain, algorithm=name)
        assert rows_of(got, list(got.columns)) == rows_of(expected, list(expected.columns))


@SETTINGS(60)
@given(events=streams(max_events=9), query=plain_set_queries(), data=st.data())
def test_every_window_at_once_equals_window_by_window(events, query, data):
    from sparkcep.engines.ses.program import SesProgram

    prune = data.draw(st.sampled_from(PRUNINGS))
    expected = ses_oracle(query, events)
    same(run(events, query, algorithm="ses", prune=prune), expected, query)
    SesProgram.vectorized = False
    try:
        same(run(events, query, algorithm="ses", prune=prune), expected, query)
    finally:
        SesProgram.vectorized = True


# ---- the conformance suite with each matcher selected ----------------------------------------


@pytest.mark.parametrize("name", ["ses", "jointree", "nfa-windows"])
@pytest.mark.parametrize("prune", ["none", "fpc"])
def test_conformance_suite_for_each_matcher(name, prune):
    from sparkcep.checks import random_events

    for query in ENGINES[name].examples:
        for seed in range(2):
            events = random_events(seed=seed)
            program = compile_one(query, events, Options(id_col="id", algorithm=name, prune=prune))
            assert program.engine == name
            for check in yield_checks(ENGINES[name]):
                check(program, events)


# ---- the language --------------------------------------------------------------------------------


def test_a_set_of_one_is_the_existing_component():
    plan = analyze("PATTERN SEQ({A a}, {b}, {C+ c}) WITHIN 5")
    assert plan.spec is None and choose(plan).name == "nfa"
    assert [(c.var, c.event_type, c.kleene) for c in plan.components] == [
        ("a", "A", False),
        ("b", None, False),
        ("c", "C", True),
    ]
    assert analyze("PATTERN SEQ(A a, ANY b, C+ c[]) WITHIN 5").components == plan.components


def test_sets_and_select_make_an_ses_plan():
    query = "PATTERN SEQ({c, p+}, {b}) WITHIN 15 days INCLUSIVE SELECT EARLIEST MAXIMAL"
    plan = analyze(query, {"ts": "timestamp", "type": "string"})
    assert plan.spec.sets == (("c", "p"), ("b",))
    assert plan.spec.select == "earliest maximal" and plan.spec.inclusive
    assert plan.window == 15 * 86_400_000_000 + 1  # inclusive: one tick more, exclusive
    assert choose(plan).name == "ses"
    assert analyze("PATTERN SEQ({a}, {b}) SELECT ALL").spec.sets == (("a",), ("b",))


def test_inclusive_window_of_a_plain_query():
    events = [{"id": i, "type": t, "ts": ts, "v": 0, "k": 0, "seq": 0}
              for i, (t, ts) in enumerate([("A", 0), ("B", 5), ("B", 6)])]  # fmt: skip
    exclusive = run(events, "PATTERN SEQ(A a, B b) WITHIN 5")
    inclusive = run(events, "PATTERN SEQ(A a, B b) WITHIN 5 INCLUSIVE")
    assert exclusive["b"].tolist() == [] and inclusive["b"].tolist() == [1]


@pytest.mark.parametrize(
    ("query", "line", "column", "words"),
    [
        ("PATTERN SEQ({a, b, a})", 1, 20, "used twice in this set"),
        ("PATTERN SEQ({a, b}, {C c})\nWITHIN 3 INCLUSIVE INCLUSIVE", 2, 20, "INCLUSIVE is given"),
        ("PATTERN SEQ({a, b}) INCLUSIVE", 1, 21, "INCLUSIVE belongs to a window"),
        ("PATTERN SEQ(A a, B b)\n  INCLUSIVE", 2, 3, "INCLUSIVE belongs to a window"),
        ("PATTERN SEQ({c, p}) WHERE prev(p.v) < p.v", 1, 27, "not one"),
        ("PATTERN SEQ({a, b}, !C c) WITHIN 3", 1, 21, "cannot have negations"),
        ("PATTERN SEQ(A a, B b) SELECT ALL STRATEGY STRICT_CONTIGUITY", 1, 43, "not STRATEGY"),
        ("PATTERN SEQ({a, b}) AGG COUNT WITHIN 3", 1, 25, "AGG cannot be combined"),
        ("PATTERN SEQ({a, b}) SELECT FIRST", 1, 28, "unexpected 'FIRST'"),
    ],
)
def test_positioned_errors(query, line, column, words):
    with pytest.raises(QueryError) as error:
        analyze(query)
    assert (error.value.line, error.value.column) == (line, column), str(error.value)
    assert words in str(error.value)


def test_an_unknown_pruning_is_refused():
    with pytest.raises(QueryError, match="unknown --prune"):
        analyze("PATTERN SEQ({a, b}) WITHIN 3", options=Options(prune="pf"))


def test_engines_that_cannot_answer_say_why():
    plan = analyze("PATTERN SEQ({a, b}) WITHIN 3 SELECT EARLIEST MAXIMAL",
                   options=Options(algorithm="jointree"))  # fmt: skip
    with pytest.raises(SparkcepError, match="SELECT ALL"):
        choose(plan)
    plan = analyze("PATTERN SEQ(!X x, A a) WITHIN 3", options=Options(algorithm="nfa-windows"))
    with pytest.raises(SparkcepError, match="outside the match window"):
        choose(plan)


def test_explain_says_which_prunings_apply():
    from sparkcep.explanation import explain_plan

    query = "PATTERN SEQ({c, p+}, {b}) WHERE c.PID = p.PID AND p.PID = b.PID WITHIN 15 INCLUSIVE"
    text = explain_plan(analyze(query, options=Options(prune="fpc")))
    assert "ses: SES automaton behind match windows" in text
    assert "partitioning (Definition 6): windows per PID" in text
    assert "SEQ({c, p+}, {b}): a set's variables in any order" in text
    assert "necessary conditions (Theorem 2): |W| >= 3, W[1] can bind c, p" in text
    assert "e.ts - ts <= 15" in text
    text = explain_plan(analyze(query, options=Options(prune="f")))
    assert "off: windows hold every PID" in text and "off: A is called for every window" in text
    text = explain_plan(analyze("PATTERN SEQ({a, b}) WITHIN 2", options=Options(prune="none")))
    assert "off: every event enters the windows" in text
    assert "does not apply: no attribute is tied to every variable" in text


# ---- the command line and Spark ----------------------------------------------------------------

CHEMO_QUERY = """PATTERN SEQ({c, p+}, {b})
WHERE c.L = 'C' AND p.L = 'P' AND b.L = 'B' AND [PID] AND prev(p.V) < p.V
WITHIN 15 days INCLUSIVE
SELECT EARLIEST MAXIMAL"""


def test_the_command_takes_prune(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from test_match_windows import CHEMO

    events = pd.DataFrame(CHEMO, columns=["id", "PID", "L", "V", "T"])
    events["T"] = pd.Timestamp("2012-07-01") + pd.to_timedelta(events["T"] - 1, unit="D")
    events.to_csv(tmp_path / "chemo.csv", index=False)
    (tmp_path / "q1.cep").write_text(CHEMO_QUERY)
    base = [sys.executable, "-m", "sparkcep.cli"]
    common = ["--input", tmp_path / "chemo.csv", "--time", "T", "--type", "L", "--id", "id"]
    env = dict(os.environ, COLUMNS="200")

    def sparkcep(*args):
        return subprocess.run([*base, *map(str, args)], capture_output=True, text=True, env=env)

    out = tmp_path / "m.jsonl"
    done = sparkcep(
        "run", tmp_path / "q1.cep", *common, "--output", out, "--local", "--prune", "fp"
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["c"], r["p"], r["b"]) for r in rows] == [
        (1, [3, 9], 11),
        (7, [5, 8], 12),
        (7, [8], 12),
    ]
    done = sparkcep("explain", tmp_path / "q1.cep", *common, "--prune", "f")
    assert "off: A is called for every window" in done.stdout, done.stderr
    done = sparkcep("run", tmp_path / "q1.cep", *common, "--output", out, "--local", "--prune", "x")
    assert done.returncode == 2 and "unknown --prune 'x'" in done.stderr


@pytest.mark.spark
@pytest.mark.parametrize(("name", "prune"), [("ses", "none"), ("jointree", "f")])
def test_unpartitioned_windows_through_spark(spark, name, prune):
    from sparkcep.checks import random_events
    from sparkcep.runners.spark.batch import execute

    events = random_events(n=200, seed=3)
    query = "PATTERN SEQ({A a, B+ b}, {C c}) WHERE [k] AND prev(b.v) < b.v WITHIN 4 SELECT ALL"
    options = Options(id_col="id", algorithm=name, prune=prune)
    local = execute_local(events, query, options).matches
    got = execute(spark.createDataFrame(events), query, options).rows.toPandas()
    cols = list(local.columns)
    assert len(local) > 0
    assert sorted(rows_of(got, cols), key=str) == sorted(rows_of(local, cols), key=str)
