"""MATCH_RECOGNIZE: the engine equals the oracle written from the standard's definitions
(tests/mr_oracle.py) on random queries and streams, the vendors' documented examples give
their documented rows, and errors point at line and column."""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest
from helpers import examples, normalize
from hypothesis import HealthCheck, given, settings
from mr_oracle import SkipFailure, oracle_match_recognize
from mr_strategies import mr_queries, patterns
from strategies import events_frame, streams

import sparkcep
from sparkcep import QueryError, SparkcepError, match_recognize_local
from sparkcep.language.match_recognize import parse_match_recognize, pattern_text


def engine_rows(frame: pd.DataFrame, text: str) -> tuple[list[str], Counter]:
    out = match_recognize_local(frame, text, id_col="id")
    cols = list(out.columns)
    return cols, Counter(tuple(normalize(v) for v in row) for row in out.itertuples(index=False))


def plain(frame: pd.DataFrame, cols: list[str]) -> list[list]:
    """Rows as lists of plain values (nulls None)."""
    return [[normalize(v) for v in row] for row in frame[cols].itertuples(index=False)]


# ---- the engine equals the oracle ----------------------------------------------------------


# 60 examples (100 took 8 s, through the local runner)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams(max_events=9), query=mr_queries())
def test_engine_equals_the_oracle_on_random_queries(events, query):
    frame = events_frame(events)
    try:
        expected = oracle_match_recognize(events, query)
    except SkipFailure:
        with pytest.raises(SparkcepError, match="AFTER MATCH SKIP"):
            match_recognize_local(frame, query, id_col="id")
        return
    cols, got = engine_rows(frame, query)
    want = Counter(tuple(normalize(r[c]) for c in cols) for r in expected)
    if expected:
        assert list(expected[0]) == cols
    assert got == want, f"{query}\nengine - oracle: {got - want}\noracle - engine: {want - got}"


# ---- documented examples, rows checked by hand ---------------------------------------------

TRINO_V = """SELECT * FROM orders MATCH_RECOGNIZE(
     PARTITION BY custkey
     ORDER BY orderdate
     MEASURES
              A.totalprice AS starting_price,
              LAST(B.totalprice) AS bottom_price,
              LAST(U.totalprice) AS top_price
     {rows}
     AFTER MATCH SKIP PAST LAST ROW
     PATTERN ({pattern})
     SUBSET U = (C, D)
     DEFINE
              B AS totalprice < PREV(totalprice),
              C AS totalprice > PREV(totalprice) AND totalprice <= A.totalprice,
              D AS totalprice > PREV(totalprice)
     )"""

ORDERS = pd.DataFrame(
    {
        "custkey": [1] * 9 + [2] * 4,
        "orderdate": list(range(1, 10)) + list(range(1, 5)),
        "totalprice": [90, 80, 70, 80, 90, 100, 110, 100, 120, 50, 40, 50, 60],
    }
)


def test_trino_v_shape_one_row_per_match():
    # custkey 1: 90 (A) 80 70 (B) 80 90 (C: rising, not above 90) 100 110 (D); then 100
    # starts nothing (120 is not a fall), custkey 2: 50 40 (B) 50 (C) 60 (D).
    out = match_recognize_local(
        ORDERS, TRINO_V.format(rows="ONE ROW PER MATCH", pattern="A B+ C+ D+")
    )
    assert out.values.tolist() == [[1, 90, 70, 110], [2, 50, 40, 60]]


def test_trino_v_shape_all_rows_with_an_exclusion():
    # PATTERN (A {- B+ C+ -} D+): the first row and the rising tail, measures running.
    text = TRINO_V.format(rows="ALL ROWS PER MATCH", pattern="A {- B+ C+ -} D+")
    out = match_recognize_local(ORDERS, text)
    assert list(out.columns) == [
        "custkey", "orderdate", "starting_price", "bottom_price", "top_price", "totalprice"
    ]  # fmt: skip
    assert plain(out, ["custkey", "orderdate", "bottom_price", "top_price"]) == [
        [1, 1, None, None],
        [1, 6, 70, 100],
        [1, 7, 70, 110],
        [2, 1, None, None],
        [2, 4, 40, 60],
    ]


PRICES = pd.DataFrame({"id": range(5), "ts": range(5), "price": [100, 95, 90, 96, 99]})
FALL_RISE = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES {measures}
     ALL ROWS PER MATCH PATTERN ({pattern})
     DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price))"""


def test_rows_of_a_nested_exclusion_are_excluded():
    # A=100, B=95 90, C=96 99: every row but A's is inside the outer exclusion.
    text = FALL_RISE.format(measures="CLASSIFIER() AS c", pattern="A {- {- B+ -} C+ -}")
    assert plain(match_recognize_local(PRICES, text), ["ts", "c"]) == [[0, "A"]]
    assert [r["ts"] for r in oracle_match_recognize(PRICES.to_dict("records"), text)] == [0]
    text = FALL_RISE.format(measures="CLASSIFIER() AS c", pattern="A {- B+ {- C -} -} C")
    assert plain(match_recognize_local(PRICES, text), ["ts", "c"]) == [[0, "A"], [4, "C"]]


def test_classifier_navigated_past_the_current_row():
    # labels A B B C C; NEXT reads the next row's label within the match, null past it.
    measures = (
        "NEXT(CLASSIFIER()) AS n, PREV(CLASSIFIER(), 2) AS p2, "
        "NEXT(FIRST(CLASSIFIER()), 3) AS nf, PREV(FINAL LAST(CLASSIFIER())) AS pl, "
        "NEXT(FINAL LAST(CLASSIFIER())) AS nl, NEXT(CLASSIFIER(B)) AS nb"
    )
    text = FALL_RISE.format(measures=measures, pattern="A B+ C+")
    want = [
        ["B", None, "C", "C", None, None],
        ["B", None, "C", "C", None, "B"],
        ["C", "A", "C", "C", None, "C"],
        ["C", "B", "C", "C", None, "C"],
        [None, "B", "C", "C", None, "C"],
    ]
    cols = ["n", "p2", "nf", "pl", "nl", "nb"]
    assert plain(match_recognize_local(PRICES, text), cols) == want
    oracle = oracle_match_recognize(PRICES.to_dict("records"), text)
    assert [[r[c] for c in cols] for r in oracle] == want
    # ONE ROW PER MATCH: at the last row; DEFINE: the next row has no label yet.
    one = text.replace("ALL ROWS PER MATCH", "ONE ROW PER MATCH")
    assert plain(match_recognize_local(PRICES, one), cols) == [want[-1]]
    define = FALL_RISE.format(measures="COUNT(*) AS n", pattern="A B+ C+").replace(
        "C AS C.price", "C AS NEXT(CLASSIFIER()) IS NULL AND C.price"
    )
    assert plain(match_recognize_local(PRICES, define), ["n"]) == [[1], [2], [3], [4], [5]]


def test_in_lists_take_expressions():
    # IN (300, LAST(A.value)) is x = 300 OR x = LAST(A.value): B is 300 or repeats A.
    frame = pd.DataFrame({"id": range(6), "ts": range(6), "value": [100, 300, 7, 7, 5, 6]})
    text = """SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts
         MEASURES FIRST(A.value) AS a, LAST(B.value) AS b
         PATTERN (A B) DEFINE B AS B.value {op} (300, LAST(A.value)))"""
    assert plain(match_recognize_local(frame, text.format(op="IN")), ["a", "b"]) == [
        [7, 7],
        [100, 300],
    ]
    # NOT IN: 0-1 fail (300); 1-2 match (7), then 3-4 (5); rows sorted by the measures.
    assert plain(match_recognize_local(frame, text.format(op="NOT IN")), ["a", "b"]) == [
        [7, 5],
        [300, 7],
    ]


def test_equal_times_are_in_sequence_and_no_tie_warning_says_otherwise():
    # three rows at ts 1: matched in row order (A then B), not "never in sequence"
    frame = pd.DataFrame({"ts": [1, 1, 1], "v": [1, 2, 3]})
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.v AS a, B.v AS b "
        "PATTERN (A B) DEFINE B AS B.v > A.v)"
    )
    result = sparkcep.run_local(frame, text)
    assert plain(result.matches, ["a", "b"]) == [[1, 2]]
    assert not any("never in sequence" in w for w in result.warnings), result.warnings
    described = sparkcep.explain(text, frame)
    assert "never in sequence" not in described
    assert "ts, then the row number in the input: rows with equal values are in sequence" in (
        " ".join(described.split())
    )


NO_ORDER = """SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k
     MEASURES FIRST(A.price) AS top, LAST(B.price) AS low, LAST(C.price) AS back
     PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price))"""


def test_without_order_by_rows_are_matched_in_input_order():
    # ts runs backwards: in input order 9 7 5 8 is a V (ts order would read 8 5 7 9)
    frame = pd.DataFrame({"k": 1, "ts": [4, 3, 2, 1], "price": [9, 7, 5, 8]})
    result = sparkcep.run_local(frame, NO_ORDER, time_col="__order")
    assert plain(result.matches, ["top", "low", "back"]) == [[9, 5, 8]]
    assert any(
        "no ORDER BY: rows are matched in the order of the input" in w for w in result.warnings
    )
    assert plain(match_recognize_local(frame, NO_ORDER), ["top", "low", "back"]) == [[9, 5, 8]]
    assert "no ORDER BY: the input's row order" in sparkcep.explain(NO_ORDER, frame)


def test_match_number_cannot_be_navigated():
    text = FALL_RISE.format(measures="PREV(MATCH_NUMBER()) AS m", pattern="A B+ C+")
    with pytest.raises(QueryError, match="MATCH_NUMBER"):
        match_recognize_local(PRICES, text)


ACME = pd.DataFrame(
    {
        "symbol": "ACME",
        "tstamp": pd.date_range("2011-04-01", periods=20, freq="D"),
        "price": [12, 17, 19, 21, 25, 12, 15, 20, 24, 25, 19, 15, 25, 25, 14, 12, 14, 24, 23, 22],
    }
)


def test_oracle_database_ticker_v_shapes_skip_to_last_up():
    # Oracle's documentation (Database Data Warehousing Guide, "SQL for Pattern
    # Matching", the first example): three V shapes, 5-10, 10-13 and 14-18 April.
    out = match_recognize_local(
        ACME,
        """SELECT * FROM Ticker MATCH_RECOGNIZE (
             PARTITION BY symbol ORDER BY tstamp
             MEASURES STRT.tstamp AS start_tstamp, LAST(DOWN.tstamp) AS bottom_tstamp,
                      LAST(UP.tstamp) AS end_tstamp
             ONE ROW PER MATCH AFTER MATCH SKIP TO LAST UP
             PATTERN (STRT DOWN+ UP+)
             DEFINE DOWN AS DOWN.price < PREV(DOWN.price), UP AS UP.price > PREV(UP.price))""",
    )
    days = [[t.day for t in row[1:]] for row in out.itertuples(index=False)]
    assert days == [[5, 6, 10], [10, 12, 13], [14, 16, 18]]
    assert out["start_tstamp"].dtype == "datetime64[ns]"


def test_flink_price_drop_with_last_offset():
    # Flink's MATCH_RECOGNIZE documentation: a fall (each below the one before, the first
    # below the start) then one rise above the second-to-last fall: 10:00:04 to :08.
    ticker = pd.DataFrame(
        {
            "symbol": "ACME",
            "rowtime": range(11),
            "price": [12, 17, 19, 21, 25, 18, 15, 14, 24, 25, 19],
        }
    )
    out = match_recognize_local(
        ticker,
        """SELECT * FROM Ticker MATCH_RECOGNIZE (
            PARTITION BY symbol ORDER BY rowtime
            MEASURES START_ROW.rowtime AS start_tstamp,
                     LAST(PRICE_DOWN.rowtime) AS bottom_tstamp,
                     LAST(PRICE_UP.rowtime) AS end_tstamp
            ONE ROW PER MATCH AFTER MATCH SKIP TO LAST PRICE_UP
            PATTERN (START_ROW PRICE_DOWN+ PRICE_UP)
            DEFINE PRICE_DOWN AS (LAST(PRICE_DOWN.price, 1) IS NULL
                                  AND PRICE_DOWN.price < START_ROW.price)
                                 OR PRICE_DOWN.price < LAST(PRICE_DOWN.price, 1),
                   PRICE_UP AS PRICE_UP.price > LAST(PRICE_DOWN.price, 1))""",
    )
    assert out.values.tolist() == [["ACME", 4, 7, 8]]


def test_preferment_greedy_reluctant_alternation_and_permute():
    rows = pd.DataFrame({"ts": range(4), "x": [1, 1, 1, 1]})

    def labels(pattern):
        defines = ", ".join(f"{v} AS x = 1" for v in "ABC" if v in pattern)
        out = match_recognize_local(
            rows,
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES CLASSIFIER() AS c "
            f"ALL ROWS PER MATCH PATTERN ({pattern}) DEFINE {defines})",
        )
        return "".join(out["c"])

    assert labels("A+ B") == "AAAB"  # greedy: as many A as leave room for B
    assert labels("A+? B") == "ABAB"  # reluctant: one A, then B; then again
    assert labels("A{2,3}? B*") == "AABB"  # two A at least, then B* greedy takes the rest
    assert labels("(B | A) C") == "BCBC"  # alternation: the left branch first
    assert labels("PERMUTE(C, A, B)") == "CAB"  # the order of the list first; row 3 alone fails
    assert labels("A?? B") == "BBBB"  # ?? prefers no A


def test_empty_matches_and_unmatched_rows():
    rows = pd.DataFrame({"ts": range(4), "x": [5, 1, 5, 5]})
    base = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES MATCH_NUMBER() AS m, "
        "COUNT(*) AS n, CLASSIFIER() AS c {rows} PATTERN ({p}) DEFINE A AS x > 2)"
    )
    one = match_recognize_local(rows, base.format(rows="ONE ROW PER MATCH", p="A*"))
    # row 0: A; row 1: an empty match (x = 1); rows 2-3: AA
    assert plain(one, ["m", "n", "c"]) == [[1, 1, "A"], [2, 0, None], [3, 2, "A"]]
    omit = match_recognize_local(
        rows, base.format(rows="ALL ROWS PER MATCH OMIT EMPTY MATCHES", p="A*")
    )
    assert omit["ts"].tolist() == [0, 2, 3]
    unmatched = match_recognize_local(
        rows, base.format(rows="ALL ROWS PER MATCH WITH UNMATCHED ROWS", p="A")
    )
    assert plain(unmatched, ["ts", "m"]) == [[0, 1], [1, None], [2, 2], [3, 3]]


# ---- errors --------------------------------------------------------------------------------

HEAD = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "


@settings(max_examples=examples(60), deadline=None)
@given(pattern=patterns())
def test_a_printed_pattern_parses_back_to_the_same_pattern(pattern):
    def parsed(text: str):
        return parse_match_recognize(f"{HEAD}PATTERN ({text}) DEFINE A AS true)").pattern

    original = parsed(pattern)
    assert parsed(pattern_text(original)) == original, pattern_text(original)


def test_explain_keeps_the_groups_of_a_pattern():
    text = (
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n "
        "PATTERN (ADM Z*? (CRP Z*? LAC | LAC Z*? CRP) Z*? REL) DEFINE ADM AS v > 0)"
    )
    frame = pd.DataFrame({"k": [1], "ts": [1], "v": [1]})
    assert "ADM Z*? (CRP Z*? LAC | LAC Z*? CRP) Z*? REL" in sparkcep.explain(text, frame)


def test_syntax_errors_speak_the_users_words():
    def error(text: str) -> QueryError:
        with pytest.raises(QueryError) as info:
            parse_match_recognize(text)
        return info.value

    # terminals as written ('-}', '^'), never grammar names (EXCLUDE CLOSE, CIRCUMFLEX)
    found = error(HEAD + "PATTERN (A {- B ) DEFINE A AS v > 1)")
    assert "(expected '-}')" in found.message and found.column == 62
    found = error(HEAD + "PATTERN (A B) DEFINE A AS v > 1) WITHN 10 s")
    assert found.message == "unexpected 'WITHN': did you mean WITHIN?" and found.column == 79
    # a clause keyword inside PATTERN (...): the ')' is missing at the end of line 2
    found = error(
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts\n  PATTERN (A B\n  DEFINE A AS v > 1)"
    )
    assert "a ')' is missing here" in found.message and (found.line, found.column) == (2, 15)
    found = error(HEAD + "PATTERN (A B) DEFINE A AS v > 1")
    assert "to close the '(' of line 1, column 33" in found.message and found.column == 77
    for text in ("^", "$", "|", "+"):
        found = error(HEAD + f"PATTERN (A {text}) DEFINE A AS v > 1 ,)")
        assert not any(w in found.message for w in ("CIRCUMFLEX", "DOLLAR", "VBAR", "PLUS"))


@pytest.mark.parametrize(
    ("query", "message", "column"),
    [
        (
            HEAD + "PATTERN (A B) DEFINE A AS FINAL LAST(v) > 1)",
            "FINAL can only be used in MEASURES",
            72,
        ),
        (
            HEAD + "PATTERN (A B) DEFINE A AS LAST(A.v + B.v) > 1)",
            "must refer to one pattern variable",
            72,
        ),
        (
            HEAD + "PATTERN (A B) DEFINE A AS SUM(PREV(v)) > 1)",
            "PREV cannot be used inside an aggregate",
            76,
        ),
        (
            HEAD + "PATTERN (A B) DEFINE A AS PREV(PREV(v)) > 1)",
            "PREV cannot be nested in PREV",
            77,
        ),
        (HEAD + "PATTERN (A B) DEFINE A AS LAST(1) > 1)", "needs a column or CLASSIFIER", 72),
        (HEAD + "PATTERN (A B) DEFINE X AS v > 1)", "'X' does not appear in PATTERN", 67),
        (HEAD + "PATTERN (A B) DEFINE A AS Z.v > 1)", "'Z' is not a pattern variable", 72),
        (HEAD + "PATTERN (A B) SUBSET U = (A, Q) DEFINE A AS v > 1)", "'Q' is not a variable", 67),
        (HEAD + "PATTERN (A B) DEFINE A AS w > 1)", "'w' is not a column", 72),
        (HEAD + "PATTERN (A B) DEFINE A AS v + 'x' > 1)", "needs numbers", 76),
        (
            HEAD + "ALL ROWS PER MATCH WITH UNMATCHED ROWS PATTERN (A {- B -}) DEFINE A AS v > 1)",
            "cannot be used with ALL ROWS PER MATCH WITH UNMATCHED ROWS",
            96,
        ),
        (
            HEAD + "AFTER MATCH SKIP TO Q PATTERN (A B) DEFINE A AS v > 1)",
            "'Q' is not a pattern variable",
            46,
        ),
        (HEAD + "PATTERN (A B) DEFINE A AS v >)", "unexpected ')'", 75),
        (HEAD + "PATTERN (A{3,1}) DEFINE A AS v > 1)", "lower bound above its upper bound", 55),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts DESC PATTERN (A) DEFINE A AS v > 1)",
            "DESC",
            43,
        ),
        (
            "SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS v > 1) WITHIN 3",
            "WITHIN needs ORDER BY",
            72,
        ),
    ],
)
def test_errors_point_at_line_and_column(query, message, column):
    frame = pd.DataFrame({"ts": [1], "v": [1.0]})
    with pytest.raises(QueryError) as info:
        match_recognize_local(frame, query)
    assert message in info.value.message
    assert info.value.line == 1 and info.value.column == column, str(info.value)
    assert "^" in str(info.value)


def test_skip_to_the_first_row_fails_at_run_time():
    rows = pd.DataFrame({"ts": range(3), "x": [1, 1, 1]})
    head = HEAD + "MEASURES COUNT(*) AS n "
    query = head + "AFTER MATCH SKIP TO A PATTERN (A B) DEFINE A AS x = 1)"
    with pytest.raises(SparkcepError, match="first row of the match"):
        match_recognize_local(rows, query)
    query = head + "AFTER MATCH SKIP TO B PATTERN (A | B C) DEFINE A AS x = 1)"
    with pytest.raises(SparkcepError, match="no row mapped to B"):
        match_recognize_local(rows, query)


def test_null_partition_values_are_rejected_rows_with_the_reason():
    rows = pd.DataFrame({"ts": [1, 2, 3], "k": [1.0, None, 1.0], "v": [3, 2, 1]})
    result = sparkcep.run_local(
        rows,
        "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES COUNT(*) AS n "
        "PATTERN (A+) DEFINE A AS v > 0)",
        type_col=None,
    )
    assert result.matches.values.tolist() == [[1.0, 2]]
    assert result.rejected["reason"].tolist() == ["k is null (PARTITION BY)"]


def test_explain_and_the_cli(tmp_path):
    from typer.testing import CliRunner

    from sparkcep.cli import app

    query = tmp_path / "q.sql"
    query.write_text(
        "-- V shapes\nSELECT * FROM trades MATCH_RECOGNIZE (PARTITION BY s ORDER BY t "
        "MEASURES LAST(B.p) AS low PATTERN (A B+ C+) "
        "DEFINE B AS p < PREV(p), C AS p > PREV(p)) WITHIN 10 s\n"
    )
    data = tmp_path / "trades.csv"
    data.write_text("s,t,p\nx,1000,5\nx,2000,4\nx,3000,6\ny,1000,1\n")
    runner = CliRunner()
    out = tmp_path / "rows.jsonl"
    result = runner.invoke(
        app, ["run", str(query), "--input", str(data), "--output", str(out), "--local",
              "--time-unit", "ms"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert out.read_text().strip() == '{"s":"x","low":4}'
    shown = runner.invoke(app, ["explain", str(query), "--input", str(data), "--time-unit", "ms"])
    assert shown.exit_code == 0, shown.output
    assert "match_recognize" in shown.output and "window      10 s (" in shown.output
    assert "10000 ticks" in shown.output


# ---- through Spark --------------------------------------------------------------------------


def random_trades(n: int = 300, seed: int = 4) -> pd.DataFrame:
    import numpy as np

    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "sym": rng.choice(["x", "y", "z"], n),
            "t": np.sort(rng.integers(0, n, n)),  # equal times too
            "price": rng.integers(1, 9, n).astype(float),
            "tx": np.arange(n),
        }
    )


SPARK_QUERIES = [
    # partitioned: repartitioned by sym
    "SELECT * FROM trades MATCH_RECOGNIZE (PARTITION BY sym ORDER BY t, tx "
    "MEASURES FIRST(A.price) AS top, LAST(B.price) AS low, MATCH_NUMBER() AS m "
    "PATTERN (A B+ C+) DEFINE B AS price < PREV(price), C AS price > PREV(price))",
    # no PARTITION BY, SKIP TO NEXT ROW and WITHIN: time ranges overlapping by the window
    "SELECT * FROM trades MATCH_RECOGNIZE (ORDER BY t, tx MEASURES FIRST(A.tx) AS a, "
    "LAST(B.tx) AS b ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW "
    "PATTERN (A B+?) DEFINE A AS price > 6, B AS price < FIRST(A.price)) WITHIN 9",
    # no PARTITION BY, SKIP PAST LAST ROW: one partition (ranges would not be exact)
    "SELECT * FROM trades MATCH_RECOGNIZE (ORDER BY t, tx MEASURES COUNT(*) AS n "
    "PATTERN (A{2,}) DEFINE A AS price >= 4) WITHIN 9",
]


@pytest.mark.spark
def test_spark_without_order_by_uses_the_dataframes_order(spark):
    pdf = random_trades().sample(frac=1.0, random_state=5).reset_index(drop=True)
    pdf = pdf.rename(columns={"sym": "k"})  # rows out of time order: only input order counts
    local = match_recognize_local(pdf, NO_ORDER)
    assert len(local) > 0
    got = sparkcep.match_recognize(spark.createDataFrame(pdf), NO_ORDER).toPandas()
    assert plain(got, list(got.columns)) == plain(local, list(local.columns))


@pytest.mark.spark
@pytest.mark.parametrize("query", SPARK_QUERIES, ids=["partitioned", "ranges", "one"])
def test_spark_equals_local(spark, query):
    from sparkcep.plan import Options
    from sparkcep.plan.match_recognize import query_options
    from sparkcep.runners.spark.batch import execute

    pdf = random_trades()
    sdf = spark.createDataFrame(pdf.sample(frac=1.0, random_state=3)).repartition(3)
    local = match_recognize_local(pdf, query)
    assert len(local) > 0
    got = sparkcep.match_recognize(sdf, query).toPandas()
    assert list(got.columns) == list(local.columns)
    assert plain(got, list(got.columns)) == plain(local, list(local.columns))
    layout = execute(sdf, query, query_options(query, Options())).layout
    expected = {
        "partitioned": "partitioned by sym",
        "ranges": "time ranges",
        "one": "one partition",
    }
    kind = "partitioned" if "PARTITION" in query else "ranges" if "NEXT ROW" in query else "one"
    assert expected[kind] in layout


@pytest.mark.spark
def test_the_general_entry_points_take_a_match_recognize_text_with_its_order_by(spark):
    """`match_local`, `run_local` and `match` read the time from ORDER BY, as
    `match_recognize_local` does (they looked for a column 'ts')."""
    rows = pd.DataFrame({"t": range(8), "price": [5, 4, 3, 3, 2, 9, 8, 10]})
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t MEASURES A.price AS p, CLASSIFIER() AS c "
        "ALL ROWS PER MATCH PATTERN (A B+ C) DEFINE B AS price < PREV(price), "
        "C AS price > PREV(price))"
    )
    expected = sparkcep.match_recognize_local(rows, query)
    assert expected[["t", "c"]].values.tolist() == [[3, "A"], [4, "B"], [5, "C"]]
    assert sparkcep.match_local(rows, query).equals(expected)
    assert sparkcep.run_local(rows, query).matches.equals(expected)
    through_spark = sparkcep.match(spark.createDataFrame(rows), query).toPandas()
    assert through_spark.to_dict("records") == expected.to_dict("records")
