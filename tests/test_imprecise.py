"""The imprecise engines (docs/imprecise.md): every algorithm against the possible-worlds
oracle, the paper's worked examples, the language, rejected rows and when a match is
reported."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from imprecise_oracle import possible_world_matches
from imprecise_strategies import interval_queries, interval_streams

from sparkcep import QueryError, match_local, run_local
from sparkcep.engines.registry import engines

ENGINES = engines()
ALGORITHMS = [name for name in ENGINES if name.startswith("imprecise")]
FIG1 = pd.DataFrame(
    {"id": ["a1", "c2", "b3", "c4"], "type": list("ACBC"), "lo": [1, 3, 3, 4], "hi": [5, 5, 5, 8]}
)
FIG1_QUERY = (
    "PATTERN SEQ(A a, B b, C c) STRATEGY {} TIME BETWEEN lo AND hi WIDTH AT MOST 4 WITHIN 4"
)


def frame_of(events: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(events)
    if "v" in frame:
        frame["v"] = frame["v"].astype("Int64")
    return frame


def engine_rows(frame, query, algorithm, **options) -> dict[tuple, tuple]:
    """signature -> (range_start, range_end, confidence, key values)."""
    result = run_local(frame, query, id_col="id", algorithm=algorithm, **options)
    assert len(result.rejected) == 0, result.rejected
    out = result.matches
    variables = [c for c in "abc" if c in out.columns]
    rows = {}
    for row in out.to_dict("records"):
        sig = tuple(row[v] for v in variables)
        assert sig not in rows, f"{sig} reported twice"
        rows[sig] = (row["range_start"], row["range_end"], row["confidence"])
    return rows


def oracle_rows(frame, query, **options) -> dict[tuple, tuple]:
    events = frame.astype(object).where(frame.notna(), None).to_dict("records")
    out = possible_world_matches(query, events, **options)
    variables = [c for c in "abc" if c in (out[0] if out else {})]
    return {
        tuple(m[v] for v in variables): (m["range_start"], m["range_end"], m["confidence"])
        for m in out
    }


def assert_same(got: dict, expected: dict, what: str):
    assert set(got) == set(expected), f"{what}: signatures\n{sorted(got)}\n!=\n{sorted(expected)}"
    for sig, (start, end, conf) in expected.items():
        g_start, g_end, g_conf = got[sig]
        assert (g_start, g_end) == (start, end), f"{what}: range of {sig}"
        assert 0 < g_conf <= 1, f"{what}: confidence of {sig}: {g_conf}"
        assert (g_conf == 1) == (conf == 1), f"{what}: certainty of {sig}: {g_conf} vs {conf}"
        assert abs(g_conf - float(conf)) <= 1e-12, (
            f"{what}: confidence of {sig}: {g_conf} != {conf}"
        )


# ---- the paper's examples -------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fig1_by_the_definitions(algorithm):
    """Fig. 1 states 15/225 for (a1, b3, c2); the possible worlds give 25/225 under
    skip-till-any and 24/225 under skip-till-next, range [1, 5] (docs/imprecise.md)."""
    for strategy, expected in (("SKIP_TILL_ANY_MATCH", 25), ("SKIP_TILL_NEXT_MATCH", 24)):
        query = FIG1_QUERY.format(strategy)
        got = engine_rows(FIG1, query, algorithm, time_col="lo")
        start, end, conf = got[("a1", "b3", "c2")]
        assert (start, end) == (1, 5)
        assert conf == pytest.approx(expected / 225, abs=1e-12)
        oracle = oracle_rows(FIG1, query, time_col="lo")
        assert oracle[("a1", "b3", "c2")][2] == Fraction(expected, 225)
        assert_same(got, oracle, f"Fig. 1, {strategy}")


def test_fig1_stated_confidence_is_not_the_definitions():
    oracle = oracle_rows(FIG1, FIG1_QUERY.format("SKIP_TILL_ANY_MATCH"), time_col="lo")
    assert oracle[("a1", "b3", "c2")][2] != Fraction(15, 225)


def test_algorithm_2_without_the_window_over_counts():
    """Algorithm 2 taken literally (no window over the valid intervals): 35/225."""
    from sparkcep.engines.imprecise.confidence import AnyConfidence
    from sparkcep.engines.imprecise.events import IntervalEvents

    ev = IntervalEvents.from_arrays([1, 3, 3, 4], [5, 5, 5, 8], [1, 4, 2, 4])
    idx, vlb, vub = np.array([[0, 2, 1]]), np.array([[1, 3, 4]]), np.array([[3, 4, 5]])
    literal = AnyConfidence(ev, 4, apply_window=False)(idx, vlb, vub)[0][0]
    assert literal * 225 == pytest.approx(35)
    assert AnyConfidence(ev, 4)(idx, vlb, vub)[0][0] * 225 == pytest.approx(25)


def test_fig3_valid_bounds():
    from sparkcep.engines.imprecise.bounds import ValidBounds

    # (a), (b): a1 = [1,5], b3 = [3,5], c2 = [3,5] in query order
    vlb, rub, vub, ok = ValidBounds.three_pass([[1, 3, 3]], [[5, 5, 5]], 4)
    assert vlb.tolist() == [[1, 3, 4]] and rub.tolist() == [[3, 4, 5]] and ok.all()
    # (c): a1 = [1,5], b5 = [2,3], c6 = [6,7]: vlb 1, 2, 6; rub 2, 3, 7; T = 5 < 6: pruned
    vlb, rub, vub, ok = ValidBounds.three_pass([[1, 2, 6]], [[5, 3, 7]], 4)
    assert vlb.tolist() == [[1, 2, 6]] and rub.tolist() == [[2, 3, 7]]
    assert vub[0, 2] == 5 and not ok.any()
    # the one-pass algorithm (C.1) prunes c6 on arrival: c6.vlb = 6 is not < a1.vub + 4 = 6
    _, vubs, ok = ValidBounds.one_pass([2], [[5, 3]], [6], [7], 4)
    assert vubs.tolist() == [[2, 3, 7]] and not ok.any()


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_fig3c_match_is_pruned(algorithm):
    frame = pd.DataFrame(
        {"id": ["a1", "b5", "c6"], "type": list("ABC"), "lo": [1, 2, 6], "hi": [5, 3, 7]}
    )
    query = "PATTERN SEQ(A a, B b, C c) TIME BETWEEN lo AND hi WIDTH AT MOST 4 WITHIN 4"
    assert engine_rows(frame, query, algorithm, time_col="lo") == {}
    assert oracle_rows(frame, query, time_col="lo") == {}


def test_fig3d_any_state_valid_intervals():
    """Fig. 3(d): events a1, c2, b3 in arrival order; the run (a1, b3, c2) ends with
    b3.vlb = 3, b3.vub = 4, c2.vlb = 4, a1.vub = 3."""
    from sparkcep.engines.imprecise.events import IntervalEvents, Pattern
    from sparkcep.engines.imprecise.runs import AnyState

    ev = IntervalEvents.from_arrays([1, 3, 3], [5, 5, 5], [1, 4, 2])
    pattern = Pattern((1, 2, 4), 4, False, ((), (), ()), ("a", "b", "c"), 4)
    runs = AnyState(ev, pattern, trace=True)
    done = runs.signatures()
    assert done.tolist() == [[0, 2, 1]]
    assert runs.last_bounds == {(0, 2, 1): ([1, 3, 4], [3, 4, 5])}


# ---- every algorithm equals the possible worlds ------------------------------------------------


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=interval_streams(), query=interval_queries())
def test_every_algorithm_equals_the_possible_worlds(events, query):
    frame = frame_of(events)
    expected = oracle_rows(frame, query)
    for algorithm in ALGORITHMS:
        assert_same(engine_rows(frame, query, algorithm), expected, f"{algorithm}: {query}")


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=interval_streams(max_events=4), query=interval_queries(max_half=2))
def test_wide_intervals_equal_the_possible_worlds(events, query):
    """Intervals of up to 5 points: the window cuts some first points and not others."""
    frame = frame_of(events)
    expected = oracle_rows(frame, query)
    for algorithm in ALGORITHMS:
        assert_same(engine_rows(frame, query, algorithm), expected, f"{algorithm}: {query}")


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=interval_streams(pmf=True), query=interval_queries(), data=st.data())
def test_pmfs_equal_the_possible_worlds(events, query, data):
    frame = frame_of(events)
    query = (
        query.split(" TIME BETWEEN")[0]
        + " TIME BETWEEN ts - 1 AND ts + 1 WITHIN "
        + (query.split(" WITHIN ")[1])
    )
    expected = oracle_rows(frame, query, pmf_col="pmf")
    algorithm = data.draw(st.sampled_from(ALGORITHMS))
    assert_same(engine_rows(frame, query, algorithm, pmf_col="pmf"), expected, query)


@pytest.mark.parametrize("threshold", ["0.1", "0.115", "0.12", "1"])
def test_threshold_keeps_the_signatures_of_at_least_that_confidence(threshold):
    """THRESHOLD over interval times bounds the confidence (a probability): Fig. 1 has
    (a1, b3, c2) at 25/225 = 0.111 and (a1, b3, c4) at 27/225 = 0.12."""
    query = FIG1_QUERY.format("SKIP_TILL_ANY_MATCH") + f" THRESHOLD {threshold}"
    expected = {
        sig: row
        for sig, row in oracle_rows(FIG1, query, time_col="lo").items()
        if row[2] >= Fraction(threshold)
    }
    assert len(expected) == {"0.1": 2, "0.115": 1, "0.12": 1, "1": 0}[threshold]
    for algorithm in ALGORITHMS:
        assert_same(engine_rows(FIG1, query, algorithm, time_col="lo"), expected, algorithm)


def test_bounds_with_units_equal_the_bounds_in_ticks():
    """`ts - 1 s AND ts + 500 ms` over a time column in ms is `ts - 1000 AND ts + 500`,
    U_max read from the bounds, as a window with a unit is its ticks."""
    frame = pd.DataFrame(
        {"id": [0, 1, 2, 3], "type": list("ABAB"), "ts": [0, 900, 2000, 2400]}
    )  # fmt: skip
    in_ticks = match_local(
        frame, "PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1000 AND ts + 500 WITHIN 1500",
        id_col="id",
    )  # fmt: skip
    with_units = match_local(
        frame, "PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 s AND ts + 500 ms WITHIN 1.5 s",
        id_col="id", time_unit="ms",
    )  # fmt: skip
    assert len(in_ticks) == 4
    pd.testing.assert_frame_equal(with_units, in_ticks)


U_MAX_EVENTS = pd.DataFrame(
    {"id": [0, 1, 2, 3, 4], "type": list("ABABB"), "ts": [0, 3, 6, 9, 10], "d": [1, 2, 0, 3, 9]}
)  # the last row's interval [1, 19] is the widest: U_max = 18
U_MAX_QUERY = "PATTERN SEQ(A a, B b) TIME BETWEEN ts - d AND ts + d WITHIN 6"


def test_a_batch_reads_u_max_from_the_data():
    """Without WIDTH AT MOST or --max-width, a batch run takes U_max from its input (the
    largest upper - lower) and says so; the rows are those of the width given."""
    result = run_local(U_MAX_EVENTS, U_MAX_QUERY, id_col="id")
    given = match_local(U_MAX_EVENTS, U_MAX_QUERY.replace("WITHIN", "WIDTH AT MOST 18 WITHIN"),
                        id_col="id")  # fmt: skip
    assert len(result.rejected) == 0 and len(given) == 5
    pd.testing.assert_frame_equal(result.matches, given)
    assert any(
        w.startswith("U_max = 18 ticks: the largest interval width") for w in result.warnings
    )
    from sparkcep.explanation import explain_queries
    from sparkcep.plan import Options

    assert "U_max (the largest upper - lower) read from the input" in explain_queries(
        U_MAX_QUERY, None, Options()
    )


def test_spark_reads_u_max_from_the_data_and_a_stream_asks_for_it(spark):
    from sparkcep import stream
    from sparkcep.runners.spark.batch import run

    result = run(spark.createDataFrame(U_MAX_EVENTS), U_MAX_QUERY, id_col="id")
    local = match_local(U_MAX_EVENTS, U_MAX_QUERY, id_col="id")
    pd.testing.assert_frame_equal(result.rows.toPandas(), local, check_dtype=False)
    assert any(w.startswith("U_max = 18 ticks") for w in result.warnings())
    source = spark.readStream.format("rate").load()
    source = source.selectExpr("value AS id", "'A' AS type", "value AS ts", "value AS d")
    with pytest.raises(QueryError, match="over a stream needs U_max"):
        stream(source, U_MAX_QUERY, id_col="id")


def test_time_upper_column_equals_the_clause():
    rng = np.random.default_rng(3)
    n = 30
    ts = np.sort(rng.integers(0, 40, n))
    frame = pd.DataFrame(
        {"id": np.arange(n), "type": rng.choice(list("ABC"), n), "ts": ts,
         "hi": ts + rng.integers(0, 4, n)}
    )  # fmt: skip
    by_columns = match_local(
        frame, "PATTERN SEQ(A a, B b, C c) WITHIN 8", id_col="id", time_end_col="hi",
        max_width=3,
    )  # fmt: skip
    by_clause = match_local(
        frame, "PATTERN SEQ(A a, B b, C c) TIME BETWEEN ts AND hi WIDTH AT MOST 3 WITHIN 8",
        id_col="id",
    )  # fmt: skip
    assert len(by_columns) > 0
    pd.testing.assert_frame_equal(by_columns, by_clause)


# ---- point times run as before ----------------------------------------------------------------


def test_point_time_queries_keep_the_nfa_engine():
    from sparkcep.engines.registry import choose
    from sparkcep.plan import analyze

    assert choose(analyze("PATTERN SEQ(A a, B b) WITHIN 5")).name == "nfa"
    assert choose(analyze("PATTERN SEQ(A a, B b) TIME BETWEEN ts AND ts WITHIN 5")).name == (
        "imprecise"
    )


@pytest.mark.parametrize("strategy", ["SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH"])
def test_a_certain_match_has_confidence_exactly_one(strategy):
    """Intervals of 9 points (probability 1/9 each) in order and inside the window: every
    possible world gives the match, so its confidence is 1, not a float sum above it; a
    pmf that sums to 1 within the accepted rounding counts as a pmf."""
    frame = pd.DataFrame({"id": [0, 1, 2, 3], "type": list("ABCD"), "ts": [0, 12, 24, 36]})
    query = (
        f"PATTERN SEQ(A a, B b, C c, D d) STRATEGY {strategy} TIME BETWEEN ts - 4 AND ts + 4 "
        "WITHIN 80"
    )
    for algorithm in ALGORITHMS:
        out = match_local(frame, query, id_col="id", algorithm=algorithm)
        assert out["confidence"].tolist() == [1.0], algorithm
    frame["pmf"] = [[0.5 + 4e-10, 0.5]] * 4
    query = query.replace("ts - 4 AND ts + 4", "ts AND ts + 1")
    out = match_local(frame, query, id_col="id", pmf_col="pmf")
    assert out["confidence"].tolist() == [1.0]


def test_zero_width_intervals_equal_the_nfa_with_confidence_one():
    """A point event is an interval of one point: the matches are the nfa's (with
    distinct times: equal times are never in sequence over intervals)."""
    rng = np.random.default_rng(7)
    n = 40
    frame = pd.DataFrame(
        {"id": np.arange(n), "type": rng.choice(list("ABC"), n), "ts": rng.permutation(n)}
    )
    point = match_local(frame, "PATTERN SEQ(A a, B b, C c) WITHIN 9", id_col="id")
    interval = match_local(
        frame, "PATTERN SEQ(A a, B b, C c) TIME BETWEEN ts AND ts WITHIN 9", id_col="id"
    )
    assert sorted(map(tuple, point[["a", "b", "c"]].values.tolist())) == sorted(
        map(tuple, interval[["a", "b", "c"]].values.tolist())
    )
    assert (interval["confidence"] == 1.0).all()
    assert (
        interval["range_start"].to_numpy()
        == point.set_index(["a", "b", "c"])
        .loc[list(map(tuple, interval[["a", "b", "c"]].values))]["start"]
        .to_numpy()
    ).all()


# ---- point-based and event-based agree on larger inputs -------------------------------------


def random_interval_stream(n: int, seed: int, half: int = 2, types: str = "ABC"):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "type": rng.choice(list(types), n),
            "ts": np.sort(rng.integers(0, n, n)),
            "v": rng.integers(0, 4, n),
            "k": rng.integers(0, 2, n),
            "d": rng.integers(0, half + 1, n),
        }
    )


@pytest.mark.parametrize(
    "query",
    [
        "PATTERN SEQ(A a, B b, C c) WHERE [k] TIME BETWEEN ts - d AND ts + d WIDTH AT MOST 4 "
        "WITHIN 10",
        "PATTERN SEQ(A a, B b, C c) WHERE a.v <= c.v STRATEGY SKIP_TILL_NEXT_MATCH "
        "TIME BETWEEN ts - 2 AND ts + 2 WITHIN 8",
        "PATTERN SEQ(A a, ANY b, A c) STRATEGY SKIP_TILL_NEXT_MATCH "
        "TIME BETWEEN ts - 1 AND ts + 1 WITHIN 6",
        "PATTERN SEQ(B a, A b) WHERE a.v != b.v TIME BETWEEN ts - d AND ts + d WIDTH AT MOST 4 "
        "WITHIN 12",
    ],
)
def test_point_based_and_event_based_agree_on_larger_streams(query):
    frame = random_interval_stream(160, seed=len(query))
    results = {name: engine_rows(frame, query, name) for name in ALGORITHMS}
    baseline = results.pop("imprecise-points")
    assert len(baseline) > 20
    for name, got in results.items():
        assert set(got) == set(baseline), name
        for sig, (start, end, conf) in baseline.items():
            assert got[sig][:2] == (start, end), (name, sig)
            assert got[sig][2] == pytest.approx(conf, abs=1e-12), (name, sig)


# ---- rejected rows ---------------------------------------------------------------------------

BAD_ROWS = [
    {"id": 0, "type": "A", "ts": 5, "hi": 7, "pmf": [0.2, 0.3, 0.5]},
    {"id": 1, "type": "B", "ts": 6, "hi": 4, "pmf": [1.0]},  # lower > upper
    {"id": 2, "type": "B", "ts": 7, "hi": 30, "pmf": [0.5, 0.5]},  # wider than U_max
    {"id": 3, "type": "B", "ts": 8, "hi": 9, "pmf": [0.5, 0.4]},  # does not sum to 1
    {"id": 4, "type": "B", "ts": 9, "hi": 10, "pmf": [0.5]},  # one value for two points
    {"id": 5, "type": "B", "ts": 10, "hi": 11, "pmf": [1.5, -0.5]},  # negative
    {"id": 6, "type": "B", "ts": 11, "hi": None, "pmf": [1.0]},  # no upper bound
    {"id": 7, "type": "B", "ts": 7, "hi": 8, "pmf": [0.25, 0.75]},
]


def test_bad_intervals_and_pmfs_are_rejected_with_the_reason():
    frame = pd.DataFrame(BAD_ROWS)
    frame["hi"] = frame["hi"].astype("Int64")
    result = run_local(
        frame, "PATTERN SEQ(A a, B b) WITHIN 10", id_col="id", time_end_col="hi",
        pmf_col="pmf", max_width=5,
    )  # fmt: skip
    reasons = dict(zip(result.rejected["id"], result.rejected["reason"]))
    assert set(reasons) == {1, 2, 3, 4, 5, 6}
    assert "lower > upper" in reasons[1]
    assert "wider than U_max = 5" in reasons[2]
    assert "does not sum to 1" in reasons[3]
    assert "one probability per point" in reasons[4]
    assert "negative" in reasons[5]
    assert "upper bound (hi) is missing" in reasons[6]
    (row,) = result.matches.to_dict("records")
    assert (row["a"], row["b"]) == (0, 7)
    # a at 5..7 with 0.2, 0.3, 0.5; b at 7 (0.25) or 8 (0.75): P = 0.5 * 0.25 + 1 * 0.75
    assert row["confidence"] == pytest.approx(0.5 * 0.25 + 0.75)
    assert (row["range_start"], row["range_end"]) == (5, 8)


def test_time_outside_its_interval_is_rejected():
    frame = pd.DataFrame({"type": ["A", "B"], "ts": [1, 2], "lo": [0, 3], "hi": [2, 4]})
    result = run_local(
        frame, "PATTERN SEQ(A a, B b) TIME BETWEEN lo AND hi WIDTH AT MOST 2 WITHIN 9"
    )
    assert result.rejected["reason"].tolist() == ["ts lies outside its interval [lo, hi]"]


@pytest.mark.spark
def test_bad_intervals_are_rejected_in_spark(spark):
    from sparkcep.runners.spark.batch import run

    schema = "id long, type string, ts long, hi long, pmf array<double>"
    rows = [tuple(r.values()) for r in BAD_ROWS]
    result = run(
        spark.createDataFrame(rows, schema), "PATTERN SEQ(A a, B b) WITHIN 10",
        id_col="id", time_end_col="hi", pmf_col="pmf", max_width=5,
    )  # fmt: skip
    rejected = result.rejected.toPandas()
    assert sorted(rejected["id"]) == [1, 2, 3, 4, 5, 6]
    (row,) = result.rows.toPandas().to_dict("records")
    assert (row["a"], row["b"]) == (0, 7)
    assert row["confidence"] == pytest.approx(0.875)


# ---- the language -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "options", "message"),
    [
        ("PATTERN SEQ(A a, !B x, C c) TIME BETWEEN ts - 1 AND ts + 1 WITHIN 5", {},
         "negation is not supported over interval times"),
        ("PATTERN SEQ(A a, B+ b[]) TIME BETWEEN ts - 1 AND ts + 1 WITHIN 5", {},
         "Kleene closure is not supported"),
        ("PATTERN SEQ(A a, B b) STRATEGY STRICT_CONTIGUITY TIME BETWEEN ts AND ts + 1 WITHIN 5",
         {}, "strict contiguity"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 AND ts + 1", {}, "needs a WITHIN window"),
        ("PATTERN SEQ(A a, B b) AGG COUNT TIME BETWEEN ts - 1 AND ts + 1 WITHIN 5", {},
         "AGG over interval times"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts + 1 AND ts + 3 WITHIN 5", {},
         "must contain the time column"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 AND ts + 1 WITHIN 5", {"time_end_col": "hi"},
         "given twice"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts - v AND ts WIDTH AT MOST 3 WITHIN 5", {},
         "'v' holds float values"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN a.ts AND ts + 1 WIDTH AT MOST 3 WITHIN 5", {},
         "not a variable's"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts AND ts + 1 WIDTH AT MOST 2 s WITHIN 5", {},
         "the width has a unit"),
        ("PATTERN SEQ(A a, B b) WITHIN 5", {"pmf_col": "pmf"}, "give the interval too"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 ms AND ts WITHIN 5", {"time_unit": "s"},
         "a whole number of ticks"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 s AND ts WITHIN 5", {},
         "the bound has a unit"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts AND ts + 1 WITHIN 5 THRESHOLD 0", {},
         r"a confidence in \(0, 1\], not 0"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts AND ts + 1 WITHIN 5 MISSING RATE 0.1", {},
         "missed events .* are not supported over interval times"),
    ],
)  # fmt: skip
def test_query_errors_point_at_the_clause(query, options, message):
    from sparkcep.plan import Options, analyze

    schema = {"ts": "int", "type": "string", "d": "int", "v": "float", "hi": "int", "pmf": "string"}
    with pytest.raises(QueryError, match=message):
        analyze(query, schema, Options(**options))


def test_a_query_error_shows_line_and_column():
    from sparkcep.plan import analyze

    with pytest.raises(QueryError) as error:
        analyze("PATTERN SEQ(A a, !B x, C c)\nTIME BETWEEN ts - 1 AND ts + 1 WITHIN 5")
    assert error.value.span.line == 1 and error.value.span.column == 18  # the "!"
    assert "^" in str(error.value)


SECONDS = pd.DataFrame(
    {"id": range(8), "type": list("ABCBCACB"), "ts": [0, 1, 2, 3, 5, 6, 7, 9]}
)  # integer seconds; STAMPS: the same events as timestamps, within their second
BASE = pd.Timestamp("2015-09-01 10:00:00")
STAMPS = SECONDS.assign(
    ts=BASE
    + pd.to_timedelta(SECONDS["ts"], unit="s")
    + pd.to_timedelta([0, 300, 0, 999, 500, 0, 1, 250], unit="ms")
)
STAMP_QUERY = "PATTERN SEQ(A a, B b, C c) TIME BETWEEN ts - 1 s AND ts + 1 s WITHIN 4 s"


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_timestamp_time_in_seconds_equals_the_integer_seconds(algorithm):
    """Over a timestamp column the interval's points are whole seconds here (the coarsest
    unit of ts - 1 s), each time truncated to its second: the signatures, confidences and
    ranges (as timestamps) are those of the same events in integer seconds."""
    expected = {
        sig: (BASE + pd.Timedelta(seconds=lo), BASE + pd.Timedelta(seconds=hi), conf)
        for sig, (lo, hi, conf) in oracle_rows(
            SECONDS, STAMP_QUERY.replace(" s", ""), id_col="id"
        ).items()
    }
    assert len(expected) == 4
    assert_same(engine_rows(STAMPS, STAMP_QUERY, algorithm), expected, algorithm)
    warnings = run_local(STAMPS, STAMP_QUERY, id_col="id").warnings
    assert any("the interval's points are whole s" in w for w in warnings)


def test_timestamp_points_follow_the_time_unit():
    """--time-unit ms: points of 1 ms, the times kept to the millisecond; the same as the
    events in integer milliseconds."""
    millis = STAMPS.assign(ts=(STAMPS["ts"] - BASE) // pd.Timedelta(milliseconds=1))
    in_ms = match_local(millis, STAMP_QUERY, id_col="id", time_unit="ms")
    stamped = match_local(STAMPS, STAMP_QUERY, id_col="id", time_unit="ms")
    assert len(in_ms) > 0
    for col in ("range_start", "range_end"):
        in_ms[col] = BASE + pd.to_timedelta(in_ms[col], unit="ms")
    pd.testing.assert_frame_equal(stamped, in_ms, check_dtype=False)


@pytest.mark.parametrize(
    ("query", "options", "message"),
    [
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 AND ts + 1 WITHIN 5 s", {},
         "holds timestamps: give the bound a unit"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 s AND ts WITHIN 5 s", {"time_unit": "ns"},
         "an interval's points are s, ms, us, not ns"),
        ("PATTERN SEQ(A a, B b) TIME BETWEEN ts - d AND ts WITHIN 5 s", {},
         "'d' holds int values"),
    ],
)  # fmt: skip
def test_timestamp_interval_errors(query, options, message):
    from sparkcep.plan import Options, analyze

    schema = {"ts": "timestamp", "type": "string", "d": "int"}
    with pytest.raises(QueryError, match=message):
        analyze(query, schema, Options(**options))


@pytest.mark.spark
def test_timestamp_time_in_spark_equals_local(spark):
    """Bounds from timestamp columns, checked and measured (U_max) in Spark: the rows of
    `ts - 1 s AND ts + 1 s` locally, and the row whose time lies outside is rejected."""
    from sparkcep.runners.spark.batch import run

    one = pd.Timedelta(seconds=1)
    bounded = STAMPS.assign(lo=STAMPS["ts"] - one, hi=STAMPS["ts"] + one)
    outside = {"id": 8, "type": "A", "ts": BASE + 20 * one, "lo": BASE + 21 * one,
               "hi": BASE + 22 * one}  # fmt: skip
    bounded = pd.concat([bounded, pd.DataFrame([outside])], ignore_index=True)
    query = "PATTERN SEQ(A a, B b, C c) TIME BETWEEN lo AND hi WITHIN 4 s"
    result = run(spark.createDataFrame(bounded), query, id_col="id")
    local = match_local(STAMPS, STAMP_QUERY, id_col="id")
    assert len(local) == 4
    pd.testing.assert_frame_equal(result.rows.toPandas(), local, check_dtype=False)
    (rejected,) = result.rejected.toPandas().to_dict("records")
    assert rejected["id"] == 8 and rejected["reason"] == "ts lies outside its interval [lo, hi]"
    assert any(w.startswith("U_max = 2 s") for w in result.warnings())


# ---- when a match is reported ----------------------------------------------------------------


def test_a_match_waits_until_no_event_to_come_can_change_it():
    """Skip-till-next, SEQ(A a, B b) WITHIN 10, times +-2: b1 at 4 may still be preceded by
    a B at 6 or later (its interval starts at 4), so (a, b1) waits; once time is past
    b1's valid upper bound + U_max, it is reported, with the later B counted."""
    from sparkcep.checks import compile_one

    events = pd.DataFrame(
        {"id": [0, 1, 2, 3], "type": ["A", "B", "B", "C"], "ts": [1, 4, 6, 20],
         "v": 0, "k": 0, "seq": 0}
    )  # fmt: skip
    query = (
        "PATTERN SEQ(A a, B b) STRATEGY SKIP_TILL_NEXT_MATCH TIME BETWEEN ts - 2 AND ts + 2 "
        "WITHIN 10"
    )
    program = compile_one(query, events)
    state = program.new_state()
    assert len(program.process(state, events.iloc[:2])) == 0  # b2 may come before b1
    assert len(program.process(state, events.iloc[2:3])) == 0  # F = 4: b1 may lie at 6
    out = program.process(state, events.iloc[3:])  # F = 18: both final
    expected = program.run(events)
    pd.testing.assert_frame_equal(out, expected)
    assert len(out) == 2 and program.is_empty(state) is False
    (low,) = out[out["b"] == 1]["confidence"]
    assert low < 1.0  # b2 can come first
    assert len(program.flush(state)) == 0


def test_explain_names_the_algorithm():
    from sparkcep.explanation import explain_queries
    from sparkcep.plan import Options

    def lines(text):
        return dict(line.split(None, 1) for line in text.splitlines() if line[:1] != " ")

    query = "PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 AND ts + 1 WITHIN 5"
    told = lines(explain_queries(query, None, Options()))
    assert told["engine"].startswith("imprecise: event-based")
    assert told["algorithm"].startswith("imprecise: event-based, query-order evaluation")
    assert "at most 2 ticks wide" in told["time"]
    told = lines(explain_queries(query, None, Options(algorithm="imprecise-points")))
    assert told["algorithm"].startswith("imprecise-points: point-based")


def test_cli_runs_an_interval_query(tmp_path):
    import json

    from typer.testing import CliRunner

    from sparkcep.cli import app

    rows = [
        {"id": "a1", "type": "A", "ts": 1, "hi": 5},
        {"id": "c2", "type": "C", "ts": 3, "hi": 5},
        {"id": "b3", "type": "B", "ts": 3, "hi": 5},
        {"id": "c4", "type": "C", "ts": 4, "hi": 8},
    ]
    source = tmp_path / "events.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "m.jsonl"
    result = CliRunner().invoke(
        app,
        ["run", "PATTERN SEQ(A a, B b, C c) WITHIN 4", "--input", str(source), "--output",
         str(out), "--local", "--id", "id", "--time-upper", "hi", "--max-width", "4"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["a"], r["b"], r["c"]) for r in got] == [("a1", "b3", "c2"), ("a1", "b3", "c4")]
    assert got[0]["confidence"] == pytest.approx(25 / 225)
    explained = CliRunner().invoke(
        app, ["explain", "PATTERN SEQ(A a, B b, C c) WITHIN 4", "--time-upper", "hi",
              "--max-width", "4", "--algorithm", "imprecise-anystate"],
    )  # fmt: skip
    assert "imprecise-anystate: event-based, any-state" in explained.output


# ---- the case study: cluster monitoring on the Hadoop log (examples/hadoop_load) ----------


def test_hadoop_case_study_equals_the_definition(shared_data, tmp_path):
    """Each signature of the example's query, and its range and confidence, from the
    definition: with uniform intervals, the confidence is the share of the point tuples
    ta < tb < tc < td with td - ta < W (skip-till-any), counted here directly."""
    import subprocess
    import sys

    folder = Path(__file__).parent.parent / "examples" / "hadoop_load"
    events_file = tmp_path / "events.csv"
    subprocess.run(
        [sys.executable, str(folder / "derive.py"), str(shared_data / "logs" / "Hadoop_2k.log"),
         "--output", str(events_file)],
        check=True, capture_output=True,
    )  # fmt: skip
    events = pd.read_csv(events_file, dtype={"task": str})
    query = (folder / "query.cep").read_text()
    out = match_local(events, query, id_col="id")
    got = {
        (r.a, r.b, r.c, r.d): (r.range_start, r.range_end, r.confidence, r.task, r.peak)
        for r in out.itertuples()
    }
    assert len(got) == len(out) > 50
    assert ((out.confidence > 0) & (out.confidence <= 1)).all(), out.confidence.max()

    window = 3000
    by_id = events.set_index("id")
    starts = events[events.type == "TaskStart"]
    ends = events[events.type == "TaskEnd"]
    loads = events[events.type == "Load"]
    expected = {}
    for a in starts.itertuples():
        for c in ends[(ends.task == a.task) & (ends.node == a.node)].itertuples():
            high = loads[(loads.node == a.node) & (loads.value >= 8)]
            low = loads[(loads.node == a.node) & (loads.value <= 1)]
            for b in high.itertuples():
                for d in low.itertuples():
                    result = _count_points([a, b, c, d], window)
                    if result is not None:
                        expected[(a.id, b.id, c.id, d.id)] = result
    assert set(got) == set(expected)
    for sig, (start, end, conf) in expected.items():
        g = got[sig]
        assert (g[0], g[1]) == (start, end)
        assert g[2] == pytest.approx(float(conf), abs=1e-12)
        assert (g[2] == 1) == (conf == 1)  # certain exactly when every point tuple matches
        assert g[3] == by_id.loc[sig[0], "task"] and g[4] == by_id.loc[sig[1], "value"]
    # the task that ran on MSRA-SA-41 and the two on MININT-FNANLI5 that failed
    assert set(out["task"]) == {"20_m_000001_0", "20_m_000002_0", "20_m_000003_0"}


def _count_points(evs, window):
    """(least ta, greatest td, share of the valid tuples) of uniform intervals, or None."""
    (ta, tb, tc, td) = [np.arange(e.ts - e.delta, e.ts + e.delta + 1) for e in evs]
    total, first, last = 0, None, None
    for x in ta:
        for z in tc[tc > x]:
            n_b = int(((tb > x) & (tb < z)).sum())
            ds = td[(td > z) & (td < x + window)]
            if n_b and len(ds):
                total += n_b * len(ds)
                first = x if first is None else min(first, x)
                last = int(ds.max()) if last is None else max(last, int(ds.max()))
    if not total:
        return None
    return first, last, Fraction(total, len(ta) * len(tb) * len(tc) * len(td))


def test_timestamp_time_passes_the_conformance_suite():
    """Batches cut anywhere, advance (in the time column's ticks, microseconds), stored
    state: a timestamp column's points behave as integer times do."""
    from sparkcep.checks import yield_checks
    from sparkcep.engines.registry import compile_jobs
    from sparkcep.plan import Options, plan_queries
    from sparkcep.schema import kind_of_pandas

    options = Options(id_col="id")
    schema = {c: kind_of_pandas(t) for c, t in STAMPS.dtypes.items()}
    (program,) = compile_jobs(*plan_queries(STAMP_QUERY, schema, options), options)
    for check in yield_checks(ENGINES["imprecise"]):
        check(program, STAMPS)
