"""One row per complex event (`ayac_rows="events"`, docs/ayac.md): the paths that end at
the same observed event are one complex event, reported as its most probable path with
the event's probability (the largest of its paths') and the number of its paths; checked
against the brute-force path oracle grouped by hand, against the per-path rows, in
batches and on Spark. The default stays one row per path."""

from __future__ import annotations

from collections import defaultdict

import pandas as pd
import pytest
from ayac_oracle import oracle_paths
from ayac_strategies import ayac_queries
from helpers import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import events_frame, streams

import sparkcep
from sparkcep import QueryError, analyze, match_local, run_local
from sparkcep.errors import SparkcepError

TOLERANCE = 1e-4  # the engine's tables against the oracle's integrals

EXAMPLE = pd.DataFrame(  # examples/lossy_rfid/events.csv
    {
        "type": "zone",
        "exp": 9,
        "row": [2, 3, 4, 2, 4],
        "ts": [1000, 4000, 7000, 30000, 36000],
    }
)
WALK = """PATTERN SEQ(zone a, zone b, zone c)
WHERE b.row = a.row + 1 AND c.row = b.row + 1 AND c.row = a.row + 2 AND [exp]
WITHIN 10 s
MISSING RATE 0.1
DELAY b UNIFORM(0 s, 8 s), c UNIFORM(0 s, 8 s)
THRESHOLD 0.05"""


def _ids(value):
    return None if pd.isna(value) else int(value)


def test_the_walk_example_by_hand():
    paths = match_local(EXAMPLE, WALK, time_unit="ms")
    assert "paths" not in paths.columns and len(paths) == 5  # the default: one row a path
    events = match_local(EXAMPLE, WALK, time_unit="ms", ayac_rows="events")
    got = [
        ([_ids(r[v]) for v in "abc"], r["missing"], round(r["probability"], 6), r["paths"])
        for _, r in events.iterrows()
    ]
    # The walk 1-2-3 ending at id 1 has one path (zone 1 inferred missing, 0.0875); the
    # walk 2-3-4 ending at id 2 has three ((0, 1, 2) observed whole, p = 1; (0, -, 2)
    # 0.075; (-, 1, 2) 0.0875): its row is the complete one, with probability 1; the walk
    # ending at id 4 has one ((3, -, 4), 0.075).
    assert got == [
        ([None, 0, 1], ["a"], 0.0875, 1),
        ([0, 1, 2], [], 1.0, 3),
        ([3, None, 4], ["b"], 0.075, 1),
    ]
    assert events["paths"].dtype == "Int64"


def test_the_paths_of_one_event_are_not_exclusive():
    # Two complete paths end at the C read: both score 1 (the paper's path score is the
    # event's probability, §4), so they cannot be exclusive worlds whose probabilities
    # add (2 > 1); the event's probability is 1, its row the later A (the shorter path).
    events = pd.DataFrame({"type": ["A", "A", "C"], "ts": [0, 1, 3], "id": [10, 11, 12]})
    query = "PATTERN SEQ(A a, C c) WITHIN 5 MISSING RATE 0.1 THRESHOLD 0.01"
    paths = match_local(events, query, id_col="id")
    # (10, 12) and (11, 12) observed whole, and (-, 12) with a inferred missing (ε F = 0.1)
    assert sorted(paths["probability"].tolist()) == [pytest.approx(0.1), 1.0, 1.0]
    one = match_local(events, query, id_col="id", ayac_rows="events")
    assert one[["a", "c", "probability", "paths"]].values.tolist() == [[11, 12, 1.0, 3]]


def _oracle_events(events: pd.DataFrame, query: str, theta: float):
    """The oracle's paths grouped by their last event: {end: [(path, probability)]}."""
    plan = analyze(query)
    variables = [c.var for c in plan.positives]
    groups = defaultdict(list)
    for p in oracle_paths(events.to_dict("records"), query):
        groups[p[variables[-1]]].append((tuple(p[v] for v in variables), p["probability"]))
    return variables, groups


def _agree_by_event(events: pd.DataFrame, query: str):
    plan = analyze(query)
    theta = plan.spec.threshold
    variables, groups = _oracle_events(events, query, theta)
    got = match_local(events, query, id_col="id", ayac_rows="events")
    ends = got[variables[-1]].astype(int).tolist()
    assert len(ends) == len(set(ends)), "an event reported twice"
    rows = {e: r for e, (_, r) in zip(ends, got.iterrows())}
    for end, paths in groups.items():
        best = max(p for _, p in paths)
        if best >= theta + TOLERANCE:
            assert end in rows, f"the event ending at {end} (p = {best:.6f}) is missing: {query}"
    for end, row in rows.items():
        assert end in groups, f"{end} ends no path of {query}"
        paths = dict(groups[end])
        best = max(paths.values())
        assert abs(row["probability"] - best) <= TOLERANCE, (end, row["probability"], best)
        assert best >= theta - TOLERANCE
        path = tuple(_ids(row[v]) for v in variables)
        assert path in paths and abs(paths[path] - best) <= TOLERANCE, (path, paths, query)
        assert row["missing"] == [v for v, i in zip(variables, path) if i is None]
        if all(abs(p - theta) > TOLERANCE for p in paths.values()):  # not on the edge
            assert row["paths"] == sum(p >= theta for p in paths.values()), (end, paths)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_events_equal_the_oracle_paths_grouped_by_their_last_event(data):
    events = events_frame(data.draw(streams(max_events=9)))
    query = data.draw(ayac_queries())
    try:
        analyze(query)
    except QueryError:
        assume(False)
    _agree_by_event(events, query)


@pytest.mark.parametrize("seed", range(3))
def test_the_events_equal_the_oracle_on_longer_streams(seed):
    from sparkcep.checks import random_events

    events = random_events(n=30, seed=seed)
    for query in (
        "PATTERN SEQ(A a, B b, !D x, C c) WHERE [k] WITHIN 6 MISSING RATE 0.4 THRESHOLD 0.0",
        "PATTERN SEQ(A a, B b, C c) WHERE c.v = coalesce(a.v, b.v, c.v) WITHIN 6 "
        "MISSING RATE a 0.3, b 0.7 DELAY b EXPONENTIAL(1.5), c UNIFORM(1, 4) THRESHOLD 0.05",
    ):
        _agree_by_event(events, query)


def _grouped(paths: pd.DataFrame, last: str) -> pd.DataFrame:
    """The per-path rows reduced by hand: per last event, the largest probability and
    the number of paths."""
    return (
        paths.groupby(last)
        .agg(probability=("probability", "max"), paths=("probability", "size"))
        .reset_index()
        .astype({last: "int64", "paths": "int64"})
    )


@pytest.mark.parametrize("seed", range(4))
def test_the_events_are_the_paths_grouped(seed):
    from sparkcep.checks import random_events

    events = random_events(n=60, seed=seed)
    query = (
        "PATTERN SEQ(A a, !D x, B b, C c) WHERE [k] WITHIN 8 MISSING RATE 0.3 "
        "DELAY b EXPONENTIAL(2) THRESHOLD 0.02 RETURN a.v AS av"
    )
    paths = match_local(events, query, id_col="id")
    one = match_local(events, query, id_col="id", ayac_rows="events")
    assert list(one.columns) == [c for c in paths.columns if c != "av"] + ["paths", "av"]
    expected = _grouped(paths, "c")
    mine = one[["c", "probability", "paths"]].astype({"c": "int64", "paths": "int64"})
    mine = mine.sort_values("c").reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, expected.sort_values("c").reset_index(drop=True))
    # each row is one of the event's paths, with its RETURN values
    keys = ["a", "b", "c", "probability", "av"]
    per_path = {tuple(map(str, r)) for r in paths[keys].astype(object).values}
    assert all(tuple(map(str, r)) in per_path for r in one[keys].astype(object).values)


def test_in_batches_the_events_are_the_same():
    from sparkcep.checks import random_events

    events = random_events(n=40, seed=7)
    events = events.assign(ts=range(len(events)))  # distinct times, no key: as a stream
    query = "PATTERN SEQ(A a, B b, C c) WITHIN 6 MISSING RATE 0.3 THRESHOLD 0.05"
    result = run_local(events, query, id_col="id", ayac_rows="events")
    program = result.programs[0]
    state = program.new_state()
    parts = [program.process(state, events.iloc[i : i + 7]) for i in range(0, len(events), 7)]
    fed = program.concat(parts, events)
    cols = ["a", "b", "c", "probability", "paths"]

    def rows(frame):  # batches give their rows in order of their last event, not by key
        return sorted(map(str, frame[cols].astype(object).values.tolist()))

    assert len(result.matches) and rows(fed) == rows(result.matches)


def test_on_spark_the_events_are_the_local_ones(spark):
    from sparkcep.checks import random_events

    events = random_events(n=60, seed=3)
    query = "PATTERN SEQ(A a, B b, C c) WITHIN 6 MISSING RATE 0.4 THRESHOLD 0.02"
    local = match_local(events, query, id_col="id", ayac_rows="events")
    remote = sparkcep.match(
        spark.createDataFrame(events), query, id_col="id", ayac_rows="events"
    ).toPandas()
    cols = ["a", "b", "c", "probability", "paths"]

    def rows(frame):
        return sorted(
            tuple(-1 if pd.isna(v) else round(float(v), 12) for v in r) for r in frame[cols].values
        )

    assert len(local) and rows(remote) == rows(local)
    assert len(set(local["c"])) == len(local)  # one row an event


def test_mistakes():
    query = "PATTERN SEQ(A a, B paths) WITHIN 5 MISSING RATE 0.1"
    events = pd.DataFrame({"type": ["A", "B"], "ts": [0, 1]})
    assert len(match_local(events, query))  # a variable 'paths' is fine per path
    with pytest.raises(QueryError, match="'paths' is an output column"):
        match_local(events, query, ayac_rows="events")
    with pytest.raises(SparkcepError, match="ayac_rows is paths or events"):
        match_local(events, "PATTERN SEQ(A a, B b) WITHIN 5 MISSING RATE 0.1", ayac_rows="rows")
