"""The plan: partition key, where conditions are checked, and `explain`."""

from __future__ import annotations

import inspect
import pydoc

import pandas as pd
import pytest
import typer
from oracle import key_attributes

import sparkcep
from sparkcep import QueryError, analyze, explain
from sparkcep.cli import EXPLAIN_FLAGS, RUN_FLAGS, STREAM_FLAGS
from sparkcep.cli import app as cli_app
from sparkcep.plan import Options
from sparkcep.plan.model import (
    MATCH_RECOGNIZE_OPTIONS,
    OPTIONS,
    PUBLIC_OPTIONS,
    STREAM_OPTIONS,
    takes_options,
)

SCHEMA = {"ts": "int", "type": "string", "k": "int", "j": "int", "v": "float"}


@pytest.mark.parametrize(
    ("query", "key"),
    [
        # Query 1 of the paper: no attribute ties all four components.
        (
            "PATTERN SEQ(A a, B b, C c, D d) WHERE a.k = c.k AND b.j = a.j AND d.j = a.j",
            (),
        ),
        ("PATTERN SEQ(A a, B b, C c) WHERE [k]", ("k",)),
        ("PATTERN SEQ(A a, B b, C c) WHERE a.k = b.k = c.k", ("k",)),
        ("PATTERN SEQ(A a, B b, C c) WHERE [j] AND [k]", ("j", "k")),
        ("PATTERN SEQ(A a, B b, C c) WHERE a.k = b.k AND b.k = c.k AND a.v < c.v", ("k",)),
        # A negation not tied to the key would be missed by a partitioned run.
        ("PATTERN SEQ(A a, !X x, C c) WHERE a.k = c.k", ()),
        ("PATTERN SEQ(A a, !X x, C c) WHERE [k]", ("k",)),
        # Positives tied only through the negated variable are not a key.
        ("PATTERN SEQ(A a, !X x, C c) WHERE a.k = x.k AND x.k = c.k", ()),
        ("PATTERN SEQ(A a, B b) WHERE a.k = b.k OR a.v > 1", ()),
        ("PATTERN SEQ(A a, B b) WHERE a.k = b.j", ()),
        # A single component is trivially in one class: [k] keys it (its Kleene elements
        # then share k), as docs/semantics.md says.
        ("PATTERN SEQ(A+ a[]) WHERE [k] AND prev(a.v) < a.v", ("k",)),
        ("PATTERN A a WHERE [k]", ("k",)),
    ],
)
def test_partition_key(query, key):
    assert analyze(query, SCHEMA).key == key
    assert tuple(key_attributes(query)) == key  # the oracle reads the spec the same way


def test_conditions_are_filed_where_engines_check_them():
    plan = analyze(
        "PATTERN SEQ(A a, B+ b[], !X x, C c) WHERE [k] AND a.v > 1 AND prev(b.v) < b.v "
        "AND sum(b.v) > 3 AND c.v > max(b.v) AND x.v = a.v AND b.v > a.v WITHIN 10",
        SCHEMA,
    )
    local = {c.var: [e for e in c.local] for c in plan.components}
    assert len(local["a"]) == 1 and not local["b"] and not local["c"]
    kinds = sorted((c.kind, plan.positives[c.stage].var) for c in plan.conditions)
    assert kinds == [("bind", "c"), ("closure", "b"), ("element", "b"), ("element", "b")]
    (neg,) = plan.negations
    assert neg.gap == 2 and len(neg.conditions) == 1 and neg.stage == 2
    assert plan.key == ("k",) and len(plan.key_conditions) == 3


def test_explain_says_engine_key_filter_and_conditions():
    text = explain(
        "PATTERN SEQ(A a, B b) WHERE [k] AND a.v > 3 AND b.v > a.v WITHIN 5 s",
        SCHEMA,
        time_unit="ms",
    )
    assert "nfa" in text.splitlines()[1]
    assert "partitioned by k" in text
    assert "a: type = 'A' AND (a.v > 3)" in text
    assert "(b.v > a.v): checked when b binds" in text
    assert "5 s (last.ts - first.ts < the window, 5000 ticks)" in text


WINDOW_LINES = ("window ", "windows ", "pattern     EPISODE", "component ")


def test_explain_without_input_says_the_window_as_written():
    """Without an input or --time-unit, the time column's unit is unknown: each engine's
    explain says its window as written (7 ms, not "1 s ... 1 ticks", which reading it in
    seconds gave) and that its ticks depend on the time column's unit; with a unit, the
    ticks are said."""
    import re

    from sparkcep.engines.registry import engines
    from sparkcep.explanation import explain_queries

    ENGINES = engines()
    for name, engine in ENGINES.items():
        query = re.sub(r"WITHIN \d+(?![\d.]| *[a-z])", "WITHIN 7 ms", engine.examples[0])
        query += "" if "WITHIN" in query else " WITHIN 7 ms"
        text = explain_queries(query, None, Options(algorithm=name))
        lines = [line for line in text.splitlines() if line.startswith(WINDOW_LINES)]
        window = next(line for line in lines if line.startswith("window "))
        assert "7 ms (" in window and "ticks depend on the time column's unit" in window, name
        for line in lines:  # the window, a match window, an episode rule's windows, delays
            assert not re.search(r"\d ticks| 1 s\b", line), (name, line)
        known = explain_queries(query, None, Options(algorithm=name, time_unit="us"))
        assert re.search(r"700[01] ticks", known), (name, known)  # 7001: INCLUSIVE
    lossy = (
        "PATTERN SEQ(A a, B b) WHERE [k] WITHIN 7 min MISSING RATE 0.2 DELAY b EXPONENTIAL(1 min)"
    )
    assert "EXPONENTIAL(60 s)" in explain_queries(lossy, None, Options())  # not "60 ticks"


def test_explain_strict_contiguity_keeps_every_event():
    text = explain("PATTERN SEQ(A a, B b) STRATEGY STRICT_CONTIGUITY WITHIN 5", SCHEMA)
    assert "every event of a partition is kept" in text


def test_options_are_checked_against_the_schema():
    from sparkcep import QueryError

    with pytest.raises(QueryError, match="time column 'when'"):
        analyze("PATTERN SEQ(A a)", SCHEMA, Options(time_col="when"))


def test_kleene_elements_share_the_equivalence_attribute():
    """docs/language.md's "rising" query: [symbol] on a single Kleene component keeps each
    run within one stock (it mixed stocks: t = [0, 1] over an AAA then a BBB trade)."""
    from sparkcep import match_local

    trades = [
        {"type": "Trade", "ts": 1, "symbol": "AAA", "price": 10.0},
        {"type": "Trade", "ts": 2, "symbol": "BBB", "price": 11.0},
        {"type": "Trade", "ts": 3, "symbol": "AAA", "price": 12.0},
    ]
    query = "PATTERN SEQ(Trade+ t[]) WHERE [symbol] AND prev(t.price) < t.price WITHIN 1 min"
    got = match_local(trades, query, time_unit="s")
    pairs = sorted(map(tuple, got["t"]))
    assert pairs == [(0,), (0, 2), (1,), (2,)]
    assert got["symbol"].tolist() == ["AAA", "AAA", "AAA", "BBB"]


@pytest.mark.parametrize("spelling", ["s", "sec", "secs", "second", "Seconds"])
def test_a_time_unit_is_spelled_as_in_the_language(spelling):
    """WITHIN 2 sec was read, --time-unit sec refused: one table of units serves both."""
    options = Options(time_unit=spelling)
    assert options.time_unit == "s"
    plan = analyze("PATTERN SEQ(A a, B b) WITHIN 2 min", {"ts": "int", "type": "string"}, options)
    assert plan.window == 120  # 2 min in seconds


def test_a_time_column_in_minutes_is_still_refused():
    with pytest.raises(QueryError, match="unknown time unit 'min'"):
        analyze("PATTERN SEQ(A a) WITHIN 2 min", {"ts": "int", "type": "string"},
                Options(time_unit="minutes"))  # fmt: skip


# ---- options: defined once on `Options`, taken by every public function and the CLI ----

EVENTS = pd.DataFrame({"kind": ["A", "B", "A", "B"], "t": [1, 2, 3, 4], "n": [10, 11, 12, 13]})
RENAMED = {"time_col": "t", "type_col": "kind"}  # the defaults (ts, type) name no column


def test_every_option_arrives_in_one_options_value():
    """Each option keyword, given a value other than its default, reaches the function as
    part of one `Options` (written as text, a size is read as bytes)."""
    values = {
        "time_col": "t", "type_col": "k", "id_col": "n", "time_unit": "ms", "tiebreak": "o",
        "time_end_col": "u", "max_matches": 3, "memory_budget": "2GB", "algorithm": "nfa",
        "sharing": "none", "prune": "f", "pmf_col": "p", "max_width": 4, "ayac_rows": "events",
    }  # fmt: skip
    assert set(values) == set(PUBLIC_OPTIONS)

    @takes_options()
    def probe(*, options=None):
        return options

    assert probe(**values) == Options(**{**values, "memory_budget": 2 * 2**30})
    assert probe(options=Options(id_col="n"), time_col="t") == Options(id_col="n", time_col="t")


def test_each_public_function_takes_the_options_as_keywords():
    """An option changes each function's answer (so it was passed on), worked out by hand:
    with time and type renamed, SEQ(A, B) WITHIN 5 matches A0-B1, A0-B3, A2-B3."""
    query = "PATTERN SEQ(A a, B b) WITHIN 5"
    assert sparkcep.match_local(EVENTS, query, **RENAMED)[["a", "b"]].values.tolist() == [
        [0, 1], [0, 3], [2, 3],
    ]  # fmt: skip
    capped = sparkcep.match_local(EVENTS, query, **RENAMED, max_matches=1, id_col="n")
    assert len(capped) == 1 and capped["a"].iloc[0] == 10
    run = sparkcep.run_local(EVENTS, query, **RENAMED, id_col="n")
    assert run.matches[["a", "b"]].values.tolist() == [[10, 11], [10, 13], [12, 13]]
    counts = sparkcep.aggregate_local(EVENTS, query + " AGG COUNT", **RENAMED)
    # per trigger, the matches ended by then inside its window (docs/aggregation.md)
    assert counts[["ts", "count"]].values.tolist() == [[2, 1], [4, 3]]
    furthest, _ = sparkcep.funnel_local(EVENTS, "FUNNEL SEQ(A a, B b) WITHIN 5", **RENAMED)
    assert furthest["step"].tolist() == [2]  # the one key (the whole input) reached B
    assert "twostep" in sparkcep.explain(query + " AGG COUNT", None, algorithm="twostep")
    rows = [{"t": i, "price": p, "n": 100 + i} for i, p in enumerate([5, 4, 6])]
    dip = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t MEASURES A.n AS first_id "
    dip += "ONE ROW PER MATCH PATTERN (A B) DEFINE B AS price < PREV(price))"
    assert sparkcep.match_recognize_local(rows, dip, id_col="n")["first_id"].tolist() == [100]


def test_the_options_show_in_each_signature_with_their_defaults():
    """help() and inspect show each option as a keyword parameter with its default."""
    for name in ("match", "match_local", "aggregate", "aggregate_local", "run_local",
                 "funnel", "funnel_local", "explain", "stream"):  # fmt: skip
        params = inspect.signature(getattr(sparkcep, name)).parameters
        for option in STREAM_OPTIONS if name == "stream" else PUBLIC_OPTIONS:
            assert params[option].kind is inspect.Parameter.KEYWORD_ONLY, (name, option)
            if not (name == "stream" and option == "id_col"):  # a stream's ids are required
                assert params[option].default == OPTIONS[option].default, (name, option)
    assert inspect.signature(sparkcep.stream).parameters["id_col"].default is inspect._empty
    shown = inspect.signature(sparkcep.match_recognize_local).parameters
    assert [p for p in shown if p in OPTIONS] == list(MATCH_RECOGNIZE_OPTIONS)
    assert "time_col: str = 'ts'" in pydoc.render_doc(sparkcep.match_local)


def test_an_unknown_option_names_the_close_one():
    with pytest.raises(TypeError, match=r"match_local\(\) got an unexpected keyword argument "
                       r"'time_cl' \(did you mean time_col\?\)"):  # fmt: skip
        sparkcep.match_local(EVENTS, "PATTERN SEQ(A a)", time_cl="t")
    with pytest.raises(TypeError, match=r"unknown option .sharng. .did you mean sharing"):
        Options.from_kwargs(sharng="none")
    with pytest.raises(TypeError, match="missing a required argument: 'id_col'"):
        sparkcep.stream(None, "PATTERN SEQ(A a)")

    @takes_options("id_col", required=("id_col",))
    def probe(*, options=None):
        return options.id_col

    assert probe(options=Options(id_col="n")) == "n"  # a required option given in `options`


def test_the_flags_are_made_from_the_options():
    """Each flag that is an option has its flag, help and default from `Options`."""
    commands = typer.main.get_command(cli_app).commands
    for command, names in (("run", RUN_FLAGS), ("explain", EXPLAIN_FLAGS),
                           ("stream", STREAM_FLAGS)):  # fmt: skip
        params = {p.name: p for p in commands[command].params}
        for name in names:
            meta = OPTIONS[name].metadata
            assert params[name].opts == [meta["flag"]], (command, name)
            if not (command == "stream" and name == "id_col"):
                assert params[name].help == meta["help"], (command, name)
                assert params[name].default == OPTIONS[name].default, (command, name)
    stream_id = next(p for p in commands["stream"].params if p.name == "id_col")
    assert stream_id.required and "no row numbers" in stream_id.help


def test_the_match_of_spark_takes_the_options(spark):
    rows = spark.createDataFrame(EVENTS)
    out = sparkcep.match(rows, "PATTERN SEQ(A a, B b) WITHIN 5", **RENAMED, id_col="n")
    assert sorted(map(tuple, out.select("a", "b").collect())) == [(10, 11), (10, 13), (12, 13)]
