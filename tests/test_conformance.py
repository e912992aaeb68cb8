"""The conformance suite every engine passes (as scikit-learn's check_estimator).

For random streams and queries, per partition of the key: the incremental operator fed
the events in batches cut at random points, with its state pickled and restored between
batches, gives exactly the one-shot output; empty input and one event work; the output
order is the documented one.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pandas as pd
import pytest
from helpers import examples, rows_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import agg_queries, queries, streams
from test_nfa_oracle import frame

from sparkcep import QueryError, run_local
from sparkcep.engines.operator import PatternOperator
from sparkcep.events import sort_columns
from sparkcep.output import sort_output

ENGINES = {"nfa": PatternOperator}


def partitions(plan, events: pd.DataFrame):
    """The events of each partition, in processing order."""
    ordered = events.sort_values(sort_columns(plan, "id"), kind="stable")
    if not plan.key:
        yield ordered
        return
    for _, part in ordered.groupby(list(plan.key), sort=True, dropna=True):
        yield part


def run_in_batches(engine, plan, events: pd.DataFrame, cuts: list[int], pickle_at: set[int]):
    outs = []
    for part in partitions(plan, events):
        op = engine(plan, id_col="id")
        bounds = sorted({0, len(part), *[c % (len(part) + 1) for c in cuts]})
        for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            outs.append(op.process(part.iloc[lo:hi]))
            if i in pickle_at:
                op = pickle.loads(pickle.dumps(op))
        outs.append(op.flush())
    if not outs:
        return None
    return sort_output(plan, pd.concat(outs, ignore_index=True))


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_batches_and_pickling_give_the_one_shot_output(engine, data):
    events = frame(data.draw(streams()))
    query = data.draw(queries())
    try:
        expected = run_local(events, query, id_col="id")
    except QueryError:
        return
    cuts = data.draw(st.lists(st.integers(0, 12), max_size=4))
    pickle_at = set(data.draw(st.lists(st.integers(0, 4), max_size=3)))
    got = run_in_batches(ENGINES[engine], expected.plan, events, cuts, pickle_at)
    cols = list(expected.matches.columns)
    if got is None:
        assert len(expected.matches) == 0
        return
    assert rows_of(got, cols) == rows_of(expected.matches, cols), query


@pytest.mark.parametrize("engine", ENGINES)
def test_empty_input_and_one_event(engine):
    events = frame([{"id": 0, "type": "A", "ts": 5, "v": 1, "k": 0, "seq": 0}])
    plan = run_local(events, "PATTERN SEQ(A a) WITHIN 3", id_col="id").plan
    op = ENGINES[engine](plan, id_col="id")
    assert len(op.process(events.iloc[:0])) == 0
    out = op.process(events)
    assert rows_of(out, ["start", "end", "a"]) == [(5, 5, 0)]
    assert len(op.flush()) == 0


@pytest.mark.parametrize("engine", ENGINES)
def test_trailing_negation_waits_for_the_window(engine):
    # SEQ(A a, !X x) WITHIN 5: a at 1 is final once time reaches 6 without an X.
    events = frame(
        [
            {"id": 0, "type": "A", "ts": 1, "v": 0, "k": 0, "seq": 0},
            {"id": 1, "type": "A", "ts": 3, "v": 0, "k": 0, "seq": 0},
            {"id": 2, "type": "X", "ts": 7, "v": 0, "k": 0, "seq": 0},
            {"id": 3, "type": "B", "ts": 9, "v": 0, "k": 0, "seq": 0},
        ]
    )
    plan = run_local(events, "PATTERN SEQ(A a, !X x) WITHIN 5", id_col="id").plan
    op = ENGINES[engine](plan, id_col="id")
    assert len(op.process(events.iloc[:2])) == 0  # time 3: nothing is final yet
    out = op.process(events.iloc[2:3])  # time 7 passes 1 + 5; the X at 7 kills a at 3
    assert rows_of(out, ["a"]) == [(0,)]
    assert len(op.process(events.iloc[3:])) == 0
    assert len(op.flush()) == 0


def test_operator_rejects_out_of_order_batches():
    from sparkcep.errors import DataError

    events = frame(
        [
            {"id": 0, "type": "A", "ts": 5, "v": 0, "k": 0, "seq": 0},
            {"id": 1, "type": "A", "ts": 3, "v": 0, "k": 0, "seq": 0},
        ]
    )
    plan = run_local(events, "PATTERN SEQ(A a) WITHIN 3", id_col="id").plan
    op = PatternOperator(plan, id_col="id")
    op.process(events.iloc[:1])
    with pytest.raises(DataError):
        op.process(events.iloc[1:])


# ---- the aggregate operator ---------------------------------------------------------------


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_aggregate_operator_batches_and_pickling_give_the_one_shot_output(data):
    from sparkcep.aggregate_job import AggregateOperator
    from sparkcep.runners.local import run_aggregate_local

    events = frame(data.draw(streams()))
    query = data.draw(agg_queries())
    expected = run_aggregate_local(events, query, id_col="id")
    plan = expected.stats["plans"][0]
    cuts = data.draw(st.lists(st.integers(0, 12), max_size=4))
    pickle_at = set(data.draw(st.lists(st.integers(0, 4), max_size=3)))
    outs = []
    groups = [events] if not plan.group_by else [g for _, g in events.groupby(list(plan.group_by))]
    for part in groups:
        part = part.sort_values(sort_columns(plan, "id")[len(plan.key) :], kind="stable")
        # Batches end between times: equal-time events arrive together (as a watermark
        # releases them), since a trigger counts the matches ended at its time.
        times = part["ts"].to_numpy()
        bounds = sorted({0, len(part), *[c % (len(part) + 1) for c in cuts]})
        bounds = sorted(
            {b if b in (0, len(part)) else int(np.searchsorted(times, times[b])) for b in bounds}
        )
        op = AggregateOperator([plan], id_col="id")
        for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            outs.append(op.process(part.iloc[lo:hi]))
            if i in pickle_at:
                op = pickle.loads(pickle.dumps(op))
        outs.append(op.flush())
    got = (
        pd.concat([o for o in outs if len(o)], ignore_index=True)
        if any(len(o) for o in outs)
        else None
    )
    cols = list(expected.matches.columns)
    if got is None:
        assert len(expected.matches) == 0
        return
    key = lambda r: str(r)  # noqa: E731
    assert sorted(rows_of(got, cols), key=key) == sorted(
        rows_of(expected.matches, cols), key=key
    ), query
