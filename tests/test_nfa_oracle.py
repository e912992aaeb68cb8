"""The nfa engine against the brute-force oracle on random streams and random patterns."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import engine_rows, examples, oracle_rows, rows_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import oracle_matches
from strategies import STRATEGY_NAMES, queries, streams
from strategies import events_frame as frame

from sparkcep import QueryError, run_local
from sparkcep.plan import analyze

SETTINGS = settings(
    max_examples=examples(100),  # per strategy (250: 28 s for the three, 100: ~11 s)
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check_against_oracle(events: list[dict], query: str) -> None:
    try:
        expected = oracle_matches(query, events)
    except ValueError as oracle_error:
        with pytest.raises(QueryError):
            engine_rows(frame(events), query)
        return oracle_error
    got = engine_rows(frame(events), query)
    cols = list(got.columns)
    assert sorted(rows_of(got, cols)) == sorted(oracle_rows(expected, cols)), query
    # The documented order: key, end, start, then ids.
    plan = analyze(query)
    order = [*plan.key, "end", "start", *[c.var for c in plan.positives]]
    rows = rows_of(got, order)
    assert rows == sorted(rows)
    return None


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@SETTINGS
@given(data=st.data())
def test_engine_equals_oracle(strategy, data):
    events = data.draw(streams())
    query = data.draw(queries(strategy=strategy))
    check_against_oracle(events, query)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=streams(max_events=12, types="AB"))
def test_kleene_skip_till_any_explodes_like_the_oracle(events):
    query = "PATTERN SEQ(A a, B+ b[]) WHERE prev(b.v) <= b.v WITHIN 8 RETURN count(b) AS n"
    check_against_oracle(events, query)


# The SASE example of the issue (imprecise-timestamps.md §2.1, Query 1), through the engine:
# the stream a, b1, b2, c, d gives two matches under skip-till-any and one under
# skip-till-next (b1, the first eligible CPU event).
QUERY_1 = (
    "PATTERN SEQ(TaskStart a, CPU b, TaskFinish c, CPU d) "
    "WHERE a.taskId = c.taskId AND b.nodeId = a.nodeId AND d.nodeId = a.nodeId "
    "AND b.value > 95 AND d.value <= 70 WITHIN 15 STRATEGY "
)
QUERY_1_STREAM = pd.DataFrame(
    {
        "id": [10, 11, 12, 13, 14],
        "type": ["TaskStart", "CPU", "CPU", "TaskFinish", "CPU"],
        "ts": [1, 2, 3, 4, 5],
        "taskId": [7, None, None, 7, None],
        "nodeId": [3, 3, 3, 3, 3],
        "value": [None, 96, 99, None, 60],
    }
)


@pytest.mark.parametrize(
    ("strategy", "bs"), [("SKIP_TILL_ANY_MATCH", [11, 12]), ("SKIP_TILL_NEXT_MATCH", [11])]
)
def test_sase_query_1_through_the_engine(strategy, bs):
    got = run_local(QUERY_1_STREAM, QUERY_1 + strategy, id_col="id").matches
    assert got[["a", "b", "c", "d"]].values.tolist() == [[10, b, 13, 14] for b in bs]


def test_a_query_run_with_one_that_ends_in_a_negation_gives_its_rows_once():
    """The window closing releases the matches of the query that ends in a negation,
    not again those of the other query (A1 B2 A3 B4, no C: three matches each)."""
    from sparkcep.engines.registry import compile_jobs
    from sparkcep.plan import Options, plan_queries

    events = pd.DataFrame({"type": list("ABAB"), "ts": [1, 2, 3, 4], "id": [0, 1, 2, 3]})
    text = (
        "QUERY x: PATTERN SEQ(A a, B b) WITHIN 10; QUERY y: PATTERN SEQ(A a, B b, !C c) WITHIN 10;"
    )
    expected = sorted((q, a, b) for q in "xy" for a, b in [(0, 1), (0, 3), (2, 3)])
    got = run_local(events, text, id_col="id").matches
    assert sorted(zip(got["query"], got["a"], got["b"])) == expected
    options = Options(id_col="id")
    (program,) = compile_jobs(*plan_queries(text, None, options), options)
    state = program.new_state()  # a stream: the watermark passes the window, then the end
    parts = [program.process(state, events), program.advance(state, 20), program.flush(state)]
    rows = pd.concat(parts)
    assert sorted(zip(rows["query"], rows["a"], rows["b"])) == expected
