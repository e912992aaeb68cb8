"""The plan: partition key, where conditions are checked, and `explain`."""

from __future__ import annotations

import pytest
from oracle import key_attributes

from sparkcep import QueryError, analyze, explain
from sparkcep.plan import Options

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
    from sparkcep.explain import explain_queries

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
