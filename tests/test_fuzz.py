"""The query parser under fuzzing (issue 10.4): whatever the text, planning a query
either succeeds or raises a QueryError that points at a line and column; never a
RecursionError, an OverflowError or a lark error. benchmarks/fuzz_queries.py runs the
same mutations 100,000 times."""

from __future__ import annotations

import pandas as pd
import pytest
import query_fuzz

from sparkcep import run_local
from sparkcep.errors import QueryError
from sparkcep.language import ast
from sparkcep.language.parser import MAX_DEPTH, parse
from sparkcep.plan import Options, plan_queries

# about 6 s on one core (1,500 to 2,000 queries a second); benchmarks/fuzz_queries.py
# runs 100,000
FUZZ_COUNT = 10_000
FUZZ_SEED = 20261126


def test_seeds_come_from_tests_docs_and_engines():
    pool = query_fuzz.seeds()
    assert len(pool) > 200
    assert any(q.lstrip().upper().startswith("RULE") for q in pool)  # episode rules too


def test_fuzzed_queries_raise_only_positioned_query_errors():
    counts, crashes, _ = query_fuzz.run(FUZZ_COUNT, FUZZ_SEED)
    assert crashes == []
    assert set(counts) <= {"ok", "QueryError"}
    assert counts["ok"] > 0 and counts["QueryError"] > 0
    assert sum(counts.values()) == FUZZ_COUNT


# ---- each kind of crash the fuzzing of issue 10.4 found, by hand -------------------

BASE = "PATTERN SEQ(A a, B b) WHERE "


def error_of(text: str, schema=None) -> QueryError:
    with pytest.raises(QueryError) as info:
        plan_queries(text, schema, Options(time_unit="ms"))
    error = info.value
    assert error.line >= 1 and error.column >= 1, str(error)
    return error


DEEP = {
    "250 nested sums": BASE + "(" * 250 + "a.v" + " + 1)" * 250 + " > 1",
    "1000 ANDs": BASE + " AND ".join(["a.v > 1"] * 1000),
    "1000 ORs": BASE + " OR ".join(["a.v > 1"] * 1000),
    "1000 + 1": BASE + "a.v" + " + 1" * 1000 + " > 1",
    "2000 NOTs": BASE + "NOT " * 2000 + "a.v > 1",
    "1000 minus signs": BASE + "- " * 1000 + "a.v > 1",
    "300 nested calls": BASE + "abs(" * 300 + "a.v" + ")" * 300 + " > 1",
    "1000 ANDs in RETURN": "PATTERN SEQ(A a) RETURN " + " AND ".join(["a.v > 1"] * 1000),
}


@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_deep_nesting_is_a_query_error(text):
    error = error_of(text)
    assert f"nests deeper than {MAX_DEPTH} levels" in error.message


def test_the_nesting_error_points_inside_the_where_clause():
    text = BASE + "(" * 250 + "a.v" + " + 1)" * 250 + " > 1"
    error = error_of(text)
    assert error.line == 1 and len(BASE) < error.column <= len(text)


def test_parentheses_alone_add_no_nesting():
    # 250 parentheses around one comparison crashed the parser (RecursionError); they
    # hold one expression, so they are not nesting
    plans, _ = plan_queries(BASE + "(" * 250 + "a.v > 1" + ")" * 250, None, Options())
    assert ast.to_text(plans[0].query.where) == "(a.v > 1)"


EVENTS = pd.DataFrame({"ts": [1, 2, 3], "type": ["A", "B", "B"], "v": [1.0, 2.0, 3.0]})
SHALLOW = {  # just under the limit: each runs, and b.v > a.v holds for both B events
    "90 parentheses": BASE + "(" * 90 + "b.v > a.v" + ")" * 90,
    "95 ANDs": BASE + " AND ".join(["b.v > a.v"] * 95),
    "95 ORs": BASE + " OR ".join(["b.v > a.v"] * 95),
    "90 + 0": BASE + "b.v" + " + 0" * 90 + " > a.v",
    "90 NOTs": BASE + "NOT " * 90 + "b.v > a.v",
}


@pytest.mark.parametrize("text", SHALLOW.values(), ids=SHALLOW.keys())
def test_nesting_under_the_limit_runs(text):
    result = run_local(EVENTS, text)
    assert len(result.matches) == 2  # (A@1, B@2) and (A@1, B@3)


@pytest.mark.parametrize(
    "number",
    ["18446744073709551616", "9223372036854775808", "1" + "0" * 400, "1" + "0" * 5000],
)
def test_integers_beyond_int64_are_query_errors(number):
    text = BASE + f"a.v * {number} > 1"
    error = error_of(text)
    assert error.message.startswith("number too large")
    assert (error.line, error.column) == (1, text.index(number) + 1)


def test_the_largest_int64_is_a_number():
    plan_queries(BASE + "a.v * 9223372036854775807 > -9223372036854775807", None, Options())


@pytest.mark.parametrize("number", ["1e400", "1" + "0" * 5000 + ".5"])
def test_floats_beyond_the_float_range_are_query_errors(number):
    text = BASE + f"a.v < {number}"
    error = error_of(text)
    assert error.message.startswith("number too large for a float")
    assert error.column == text.index(number) + 1


def test_a_multiplication_by_two_to_the_64_no_longer_overflows_at_run_time():
    with pytest.raises(QueryError, match="number too large"):
        run_local(EVENTS, BASE + "a.v * 18446744073709551616 > 1")


@pytest.mark.parametrize(
    "window", ["1e400 s", "1" + "0" * 400, "1" + "0" * 400 + " s", "1" + "0" * 5000 + " ms"]
)
def test_huge_windows_are_as_long_as_any_span(window):
    # a window beyond 2^62 ticks spans any two valid times (issue 10.1): A@1 matches B@2, B@3
    result = run_local(EVENTS, f"PATTERN SEQ(A a, B b) WITHIN {window}", time_unit="ms")
    assert len(result.matches) == 2
    assert parse(f"PATTERN SEQ(A a) WITHIN {window}").within.amount > 2**62


def test_a_huge_interval_width_is_a_query_error():
    text = "PATTERN SEQ(A a, B b) TIME BETWEEN lo AND hi WIDTH AT MOST 1e400 WITHIN 10"
    error = error_of(text)
    assert "width is too large" in error.message
    assert error.column == text.index("1e400") + 1


def test_a_funnel_with_select_is_a_query_error():
    # FUNNEL's spec has no AGG items, and the error for AGG read the first one (IndexError)
    error = error_of("FUNNEL SEQ(A a, B b) WITHIN 15 SELECT EARLIEST MAXIMAL")
    assert error.message == "FUNNEL cannot be combined with SELECT"


def test_an_empty_query_points_at_line_one():
    error = error_of("  \n ")
    assert (error.line, error.column) == (1, 1)


# ---- the SQL form (SELECT ... MATCH_RECOGNIZE) has the same limits -------------------

MR = (
    "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measure} AS m "
    "ONE ROW PER MATCH PATTERN ({pattern}) DEFINE A AS {define})"
)


def mr(measure="COUNT(*)", pattern="A+", define="A.v > 1") -> str:
    return MR.format(measure=measure, pattern=pattern, define=define)


def test_a_long_sum_in_match_recognize_is_typed_once_per_operand():
    # each + typed its operands twice: 2^60 steps for a chain of 60 (it never ended)
    plans, _ = plan_queries(mr(define="A.v" + " + 1" * 60 + " > 1"), SCHEMA, Options())
    assert len(plans) == 1
    # abs() typed its argument twice too
    plans, _ = plan_queries(mr(define="abs(" * 60 + "A.v" + ")" * 60 + " > 1"), SCHEMA, Options())
    assert len(plans) == 1
    with pytest.raises(QueryError, match="abs\\(\\) needs a number"):
        plan_queries(mr(define="abs(abs('x')) > 1"), SCHEMA, Options())


SCHEMA = {"ts": "int", "v": "float"}
MR_ERRORS = {
    "1000 ANDs": (mr(define=" AND ".join(["A.v > 1"] * 1000)), "nests deeper than"),
    "1000 + 1": (mr(define="A.v" + " + 1" * 1000 + " > 1"), "nests deeper than"),
    "5000 digits": (mr(define="A.v > 1" + "0" * 5000), "number too large"),
    "2^64": (mr(measure="SUM(A.v) * 18446744073709551616"), "number too large"),
    "a million repetitions": (mr(pattern="A{1000000}"), "unrolls the pattern past"),
    "a 5000-digit bound": (mr(pattern="A{" + "9" * 5000 + "}"), "unrolls the pattern past"),
    "20,001 repetitions": (mr(pattern="A{20001}"), "keep it under 20,000"),
}


@pytest.mark.parametrize("case", MR_ERRORS, ids=MR_ERRORS)
def test_match_recognize_limits_are_positioned_query_errors(case):
    text, message = MR_ERRORS[case]
    error = error_of(text, SCHEMA)
    assert message in error.message


def test_parentheses_alone_add_no_nesting_in_match_recognize():
    text = mr(define="(" * 250 + "A.v > 1" + ")" * 250)
    plans, _ = plan_queries(text, SCHEMA, Options())
    assert len(plans) == 1
