"""The query language: what parses, and errors that point at line, column and text."""

from __future__ import annotations

import re

import pytest

from sparkcep import QueryError, SparkcepError, analyze, match_local, parse
from sparkcep.language import ast
from sparkcep.language.parser import parse_file

SCHEMA = {"ts": "int", "type": "string", "k": "int", "v": "float", "name": "string"}

QUERY_1 = """PATTERN SEQ(TaskStart a, CPU b, TaskFinish c, CPU d)
WHERE a.taskId = c.taskId AND b.nodeId = a.nodeId AND d.nodeId = a.nodeId
  AND b.value > 95 AND d.value <= 70
STRATEGY SKIP_TILL_ANY_MATCH
WITHIN 15 seconds
RETURN a, b, c, b.value AS peak"""


def test_the_issue_example_parses():
    q = parse(QUERY_1)
    assert [(c.var, c.event_type) for c in q.components] == [
        ("a", "TaskStart"),
        ("b", "CPU"),
        ("c", "TaskFinish"),
        ("d", "CPU"),
    ]
    assert q.strategy == "SKIP_TILL_ANY_MATCH"
    assert (q.within.amount, q.within.unit) == (15, "s")
    assert [item.alias for item in q.returns] == [None, None, None, "peak"]


def test_components_negation_kleene_and_any():
    q = parse("PATTERN SEQ(!A x, ANY y, B+ z[], NOT C w, D+ u)")
    assert [(c.negated, c.kleene, c.event_type) for c in q.components] == [
        (True, False, "A"),
        (False, False, None),
        (False, True, "B"),
        (True, False, "C"),
        (False, True, "D"),
    ]


def test_keywords_are_case_insensitive_and_clauses_come_in_any_order():
    a = parse("pattern seq(A a, B b) within 5 where a.v < b.v strategy skip_till_next_match")
    b = parse("PATTERN SEQ(A a, B b) STRATEGY skip_till_next_match WHERE a.v < b.v WITHIN 5")
    assert a.where == b.where and a.within == b.within


def test_expressions():
    q = parse(
        "PATTERN SEQ(A a, B b) WHERE (a.v + 1) * 2 >= b.v % 3 OR NOT a.name IN ('x', 'y') "
        "AND a.k NOT IN (1, 2) AND a.v BETWEEN 1 AND 2 AND a.flag = TRUE AND [k] "
        "AND a.`odd name` <> -1.5"
    )
    text = ast.to_text(q.where)
    for piece in ("NOT IN (1, 2)", "[k]", "a.`odd name` != -1.5", "(a.v >= 1)", "TRUE"):
        assert piece in text


def test_in_lists_take_signed_numbers():
    q = parse("PATTERN SEQ(A a) WHERE a.v IN (-1, +2, -0.5, 3) AND a.w NOT IN (-7)")
    lists = [n for n in ast.walk(q.where) if isinstance(n, ast.InList)]
    assert [[v.value for v in n.values] for n in lists] == [[-1, 2, -0.5, 3], [-7]]
    events = [{"type": "A", "ts": t, "v": v, "w": 0} for t, v in enumerate([-1, 1, -0.5, 2])]
    assert match_local(events, q.text)["a"].tolist() == [0, 2, 3]


def test_chained_equality_is_a_conjunction():
    q = parse("PATTERN SEQ(A a, B b, C c) WHERE a.x = b.x = c.x")
    assert ast.to_text(q.where) == "((a.x = b.x) AND (b.x = c.x))"


def test_named_queries():
    queries = parse_file("QUERY one: PATTERN SEQ(A a) WITHIN 3; QUERY two: PATTERN SEQ(B b)")
    assert [q.name for q in queries] == ["one", "two"]


def test_comments_are_ignored():
    q = parse("-- the first\nPATTERN SEQ(A a, B b) // trailing\nWITHIN 4")
    assert q.within.amount == 4


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("PATTERN SEQ(A a B b)", 1, 17, "unexpected 'B'"),
        ("PATTERN SEQ(A a, B b)\nWHERE a.v >", 2, 12, "ends too early"),
        ("PATTERN SEQ(A a)\n  WHERE a.v @ 3", 2, 13, "unexpected character '@'"),
        ("PATTERN SEQ(A a) WITHIN 5 fortnights", 1, 27, "unknown time unit 'fortnights'"),
        ("PATTERN SEQ(A a) WHERE a.v = 1 WHERE a.v = 2", 1, 32, "WHERE is given twice"),
        ("PATTERN SEQ(A a, B b[])", 1, 18, "marks a Kleene variable"),
        ("PATTERN SEQ(A a) WHERE a.v < a.k < 3", 1, 24, "only '=' can be chained"),
        ("PATTERN SEQ(A a, B b) WHERE a.v > 1 WITHN 10 s", 1, 37, "did you mean WITHIN?"),
        ("PATERN SEQ(A a) WITHIN 3", 1, 1, "did you mean PATTERN?"),
        # the missing ')' belongs after '1' on line 2, not before WITHIN on line 3
        ("PATTERN SEQ(A a, B b)\nWHERE (a.v > 1\nWITHIN 10 s", 2, 15, "a ')' is missing here"),
    ],
)
def test_syntax_errors_point_at_the_text(text, line, column, message):
    with pytest.raises(QueryError) as info:
        parse(text)
    error = info.value
    assert (error.line, error.column) == (line, column)
    assert message in str(error)
    source_line = text.splitlines()[line - 1]
    assert source_line in str(error)
    caret_line = str(error).splitlines()[-1]
    assert caret_line.index("^") - 2 == column - 1


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("PATTERN SEQ(A a, B b)\nWHERE x.v > 1", 2, 7, "unknown variable 'x'"),
        ("PATTERN SEQ(A a, B b) WHERE a.zz > 1", 1, 29, "'zz' is not a column of the input"),
        ("PATTERN SEQ(A a, B b) WHERE a.name > 3", 1, 29, "cannot compare a string with an int"),
        ("PATTERN SEQ(A a, B b) WHERE a.v + 1", 1, 29, "must be true or false"),
        ("PATTERN SEQ(A a, !B b) WHERE a.v > 1", 1, 18, "negation at the end"),
        ("PATTERN SEQ(!B b, A a)", 1, 13, "negation at the start"),
        ("PATTERN SEQ(A a, B b) STRATEGY FASTEST", 1, 32, "unknown strategy 'FASTEST'"),
        ("PATTERN SEQ(A a, A a)", 1, 18, "variable 'a' is used twice"),
        ("PATTERN SEQ(A a, B b) WHERE prev(a.v) > 1", 1, 29, "not one"),
        ("PATTERN SEQ(A a, B+ b[]) WHERE b.v > avg(b.v) WITHIN 3", 1, 32, "mixes elements"),
        ("PATTERN SEQ(!A a, B b, !C c) WHERE a.v = c.v WITHIN 3", 1, 36, "one negated variable"),
        ("PATTERN SEQ(A a, B b) WHERE foo(a.v) > 1", 1, 29, "unknown function 'foo'"),
        ("PATTERN SEQ(A a, B b) RETURN a.v, a.v", 1, 35, "already has a column 'a_v'"),
        ("PATTERN SEQ(A a, B b) RETURN a AS x", 1, 30, "is an event, not a value"),
        ("PATTERN SEQ(A a, B b) ORDER BY v", 1, 23, "ORDER BY must start with the time"),
        ("PATTERN SEQ(!A a)", 1, 13, "at least one positive"),
    ],
)
def test_meaning_errors_point_at_the_text(text, line, column, message):
    with pytest.raises(QueryError) as info:
        analyze(text, SCHEMA)
    error = info.value
    assert message in error.message
    assert (error.line, error.column) == (line, column)
    assert "^" in str(error)


def test_errors_in_a_named_query_point_into_that_query():
    text = "QUERY ok: PATTERN SEQ(A a) WITHIN 3;\nQUERY bad: PATTERN SEQ(A a) WHERE a.zz > 1;"
    bad = parse_file(text)[1]
    with pytest.raises(QueryError) as info:
        analyze(bad, SCHEMA)
    assert "'zz' is not a column" in info.value.message
    assert "a.zz > 1" in str(info.value)


def test_window_units_against_the_time_column():
    from sparkcep.plan import Options

    stamps = {**SCHEMA, "ts": "timestamp"}
    assert analyze("PATTERN SEQ(A a) WITHIN 15 seconds", stamps).window == 15_000_000
    assert analyze("PATTERN SEQ(A a) WITHIN 2 min", stamps).window == 120_000_000
    with pytest.raises(QueryError, match="give the window a unit"):
        analyze("PATTERN SEQ(A a) WITHIN 15", stamps)
    assert analyze("PATTERN SEQ(A a) WITHIN 15", SCHEMA).window == 15
    with pytest.raises(QueryError, match="--time-unit"):
        analyze("PATTERN SEQ(A a) WITHIN 5 s", SCHEMA)
    ms = Options(time_unit="ms")
    assert analyze("PATTERN SEQ(A a) WITHIN 5 s", SCHEMA, ms).window == 5000
    # Times are whole ticks: last - first < 1.5 s is last - first < 2 s.
    assert analyze("PATTERN SEQ(A a) WITHIN 1.5 s", SCHEMA, Options(time_unit="s")).window == 2
    assert analyze("PATTERN SEQ(A a) WITHIN 1 days", SCHEMA, Options(time_unit="s")).window == 86400


def test_sase_strategy_written_in_where():
    plan = analyze(
        QUERY_1.replace("STRATEGY SKIP_TILL_ANY_MATCH\n", "").replace(
            "AND d.value <= 70", "AND d.value <= 70 AND skip_till_next_match(a, b, c, d)"
        ),
        {**SCHEMA, "taskId": "int", "nodeId": "int", "value": "float", "ts": "timestamp"},
    )
    assert plan.strategy == "SKIP_TILL_NEXT_MATCH"


STRING_EVENTS = [
    {"type": "Admission NC", "ts": 1, "name": "Alice", "tag": None, "alt": "x"},
    {"type": "Lab", "ts": 2, "name": "bob", "tag": "q", "alt": None},
    {"type": "Lab", "ts": 3, "name": None, "tag": None, "alt": None},
    {"type": "Lab test", "ts": 4, "name": "Ann_b", "tag": "x", "alt": "y"},
]


@pytest.mark.parametrize(
    ("where", "ids"),
    [
        ("a.name LIKE 'A%'", [0, 3]),
        ("a.name LIKE 'A__'", []),
        ("a.name NOT LIKE '%o%'", [0, 3]),  # null name: neither LIKE nor NOT LIKE
        ("lower(a.name) = 'bob' OR upper(a.name) = 'ALICE'", [0, 1]),
        ("length(a.name) > 3", [0, 3]),
        ("startswith(a.type, 'Lab') AND endswith(a.type, 'test')", [3]),
        ("contains(a.name, 'n')", [3]),
        ("coalesce(a.tag, a.alt) = 'x'", [0, 3]),
        ("coalesce(a.tag, a.alt, 'none') = 'none'", [2]),
    ],
)
def test_string_functions_with_sql_nulls(where, ids):
    got = match_local(STRING_EVENTS, f"PATTERN SEQ(ANY a) WHERE {where}")
    assert got["a"].tolist() == ids


def test_quoted_types_and_no_type_column():
    events = [{"type": e["type"], "ts": e["ts"]} for e in STRING_EVENTS]
    got = match_local(events, "PATTERN SEQ(`Admission NC` a, `Lab test` b) WITHIN 9")
    assert got[["a", "b"]].values.tolist() == [[0, 3]]
    # Every component ANY: the input needs no type column.
    plain = [{"ts": t, "v": v} for t, v in [(1, 5), (2, 50), (3, 70)]]
    got = match_local(plain, "PATTERN SEQ(ANY a, ANY b) WHERE a.v < 10 AND b.v > 40 WITHIN 9")
    assert got[["a", "b"]].values.tolist() == [[0, 1], [0, 2]]
    with pytest.raises(SparkcepError, match="type column 'type' is not in the input"):
        match_local(plain, "PATTERN SEQ(A a) WITHIN 9")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("PATTERN SEQ(ANY a) WHERE lower(a.v) = 'x'", "lower() needs text, not int"),
        ("PATTERN SEQ(ANY a) WHERE startswith(a.name) ", "startswith() takes 2 argument"),
        ("PATTERN SEQ(ANY a) WHERE coalesce(a.name, a.v) = 1", "values of one type"),
        ("PATTERN SEQ(ANY a) WHERE a.v LIKE 'x'", "like() needs text"),
    ],
)
def test_string_function_errors(text, message):
    with pytest.raises(QueryError, match=re.escape(message)):
        analyze(text, {"ts": "int", "type": "string", "name": "string", "v": "int"})


def test_syntax_errors_name_tokens_as_written_in_both_languages():
    from sparkcep.language import match_recognize, parser

    for grammar in (parser._lark(), match_recognize._lark()):
        for terminal in grammar.terminals:
            shown = parser._token_name(terminal.name, grammar)
            if shown is None:
                continue
            if shown.startswith(("'", "a ")) or " or " in shown:
                continue  # '^', '-}', a name, RUNNING or FINAL
            # else keywords as written (WITHIN, NOT IN), never CIRCUMFLEX or EXCLUDE CLOSE
            written = terminal.pattern.value.upper()
            assert all(word in written for word in shown.split()), (terminal.name, shown)
