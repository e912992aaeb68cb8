"""The nfa engine against the brute-force oracle on random streams and random patterns."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers import examples, oracle_rows, rows_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import oracle_matches
from strategies import STRATEGY_NAMES, queries, streams

from sparkcep import QueryError, run_local

COLUMNS = ["id", "type", "ts", "v", "k", "seq"]
SETTINGS = settings(
    max_examples=examples(250),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def frame(events: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(events, columns=COLUMNS)
    return df.astype(
        {
            "id": "int64",
            "ts": "int64",
            "type": "object",
            "v": "float64",
            "k": "int64",
            "seq": "int64",
        }
    )


def check_against_oracle(events: list[dict], query: str) -> None:
    try:
        expected = oracle_matches(query, events)
    except ValueError as oracle_error:
        with pytest.raises(QueryError):
            run_local(frame(events), query, id_col="id")
        return oracle_error
    result = run_local(frame(events), query, id_col="id")
    got = result.matches
    cols = list(got.columns)
    assert sorted(rows_of(got, cols)) == sorted(oracle_rows(expected, cols)), query
    # The documented order: key, end, start, then ids.
    order = [*result.plan.key, "end", "start", *[c.var for c in result.plan.positives]]
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
