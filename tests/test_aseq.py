"""A-Seq: the paper's worked examples, the oracle on random streams, sharing."""

from __future__ import annotations

import contextlib
import math

import pandas as pd
import pytest
from aggregation_oracle import oracle_aggregate
from helpers import engine_rows, examples, normalize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import agg_queries, streams
from strategies import events_frame as frame

from sparkcep import QueryError
from sparkcep.checks import compile_one
from sparkcep.engines.aseq import forest
from sparkcep.plan import Options
from sparkcep.runners.local import aggregate_local, run_aggregate_local


@pytest.fixture(scope="module", autouse=True)
def chop_every_shared_tail():
    """The tests here check chop-connect's answers, so they cut every shared tail, even
    the short ones the cost rule leaves whole (test_chop_cost_rule checks the rule)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(forest, "CHOP_MIN_STEPS", 1)
        patch.setattr(forest, "CHOP_RULE", "always")
        yield


def letters(types: str, times=None) -> pd.DataFrame:
    times = list(times) if times is not None else list(range(1, len(types) + 1))
    return pd.DataFrame({"type": list(types), "ts": times})


def rows(df: pd.DataFrame, cols) -> list[tuple]:
    return [tuple(normalize(v) for v in r) for r in df[cols].itertuples(index=False)]


# ---- the paper's examples -------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["aseq", "twostep"])
def test_example_3_start_event_marking(algorithm):
    # a1 b1 c1 a2 c2 b2 d1 c3 a3 d2 at 1..10 s, window 7 s: 2 at d1, 1 at d2.
    stream = letters("ABCACBDCAD")
    got = aggregate_local(
        stream, "PATTERN SEQ(A a, B b, C c, D d) AGG COUNT WITHIN 7", algorithm=algorithm
    )
    assert rows(got, ["ts", "count"]) == [(7, 2), (10, 1)]


@pytest.mark.parametrize("algorithm", ["aseq", "twostep"])
def test_example_4_negation_recount(algorithm):
    # (A, B, !C, D): c1 at 3 s clears (A, B); at d1 the result is 2, <a1, b1, d1> is not
    # counted since c1 lies between b1 and d1.
    stream = letters("ABCABD")
    got = aggregate_local(
        stream, "PATTERN SEQ(A a, B b, !C c, D d) AGG COUNT WITHIN 10", algorithm=algorithm
    )
    assert rows(got, ["ts", "count"]) == [(6, 2)]


EXAMPLE_8 = letters("ABCABDCADE")  # a1 b1 c1 a2 b2 d1 c2 a3 d2 e1 at 1..10 s


def test_example_8_chop_connect():
    # (A,B,C,D,E) chopped into (A,B,C) + (D,E), the tail shared with SEQ(D, E); window 9 s.
    queries = [
        "QUERY de: PATTERN SEQ(D d, E e) AGG COUNT WITHIN 9",
        "QUERY abcde: PATTERN SEQ(A a, B b, C c, D d, E e) AGG COUNT WITHIN 9",
    ]
    run = run_aggregate_local(EXAMPLE_8, queries, sharing="chop")
    got = run.matches
    assert rows(got[got["query"] == "abcde"], ["ts", "count"]) == [(10, 1)]
    assert rows(got[got["query"] == "de"], ["ts", "count"]) == [(10, 2)]


def test_example_8_snapshots():
    from sparkcep.engines.aseq.connect import snapshot_counts
    from sparkcep.engines.aseq.counters import PrefixCounters
    from sparkcep.prep.table import build_table

    events = EXAMPLE_8.assign(id=range(len(EXAMPLE_8)))
    program = compile_one(
        "QUERY de: PATTERN SEQ(D d, E e) AGG COUNT WITHIN 9;"
        "QUERY abcde: PATTERN SEQ(A a, B b, C c, D d, E e) AGG COUNT WITHIN 9;",
        events,
        Options(sharing="chop"),
    )
    qp = program.forest.queries[1]
    assert len(qp.pieces) == 2  # chopped into (A, B, C) + (D, E)
    table = build_table(
        events, mask=program.mask(events), segment_cols=[], time_col="ts", tiebreak=None,
        attributes=[],
    )  # fmt: skip
    counters = PrefixCounters(program.forest, table)
    # The snapshot of (A, B, C) per A taken at each D: a1 -> 1 at d1 (6 s) and 3 at d2
    # (9 s); a2 -> 0 at d1 and 1 at d2 (Fig. 10). Here as counts of (a, B, C) matches
    # ended before each D, i.e. the head chain of the query.
    head = snapshot_counts(counters, qp, 1)
    ts = counters.stats.ts
    per_tag = {}
    for tag, group, count in zip(head.tag, head.group, head.count):
        per_tag.setdefault(int(ts[tag]), []).append((int(ts[group]), int(count)))
    cumulative = {
        a: [(t, sum(c for tt, c in v if tt < t)) for t in (6, 9)] for a, v in per_tag.items()
    }
    assert cumulative[1] == [(6, 1), (9, 3)]
    assert cumulative[4] == [(6, 0), (9, 1)]


def test_example_9_multi_connect_equals_unshared():
    # (A,B,C,D,E,F,G) chopped into (A,B,C) + (D,E) + (F,G), the tails shared.
    stream = letters("ABCABDCADEAFEFGBG", times=range(1, 18))
    queries = [
        "QUERY de: PATTERN SEQ(D d, E e) AGG COUNT WITHIN 12",
        "QUERY fg: PATTERN SEQ(F f, G g) AGG COUNT WITHIN 12",
        "QUERY all: PATTERN SEQ(A a, B b, C c, D d, E e, F f, G g) AGG COUNT WITHIN 12",
    ]
    shared = run_aggregate_local(stream, queries, sharing="chop")
    alone = run_aggregate_local(stream, queries, sharing="none")
    twostep = run_aggregate_local(stream, queries, algorithm="twostep")
    assert shared.matches.equals(alone.matches)
    assert shared.matches.equals(twostep.matches)
    (program,) = shared.programs
    assert len(program.forest.queries[2].pieces) == 3
    got = shared.matches
    assert got[got["query"] == "all"]["count"].max() > 0


@pytest.mark.parametrize("algorithm", ["aseq", "twostep"])
def test_a_row_where_new_matches_end_unless_every_trigger_is_asked(algorithm):
    events = pd.DataFrame({"type": list("ABBABB"), "ts": [0, 1, 2, 3, 7, 8], "ip": list("xxyyxy")})
    query = "PATTERN SEQ(A a, B b) GROUP BY ip AGG COUNT AS n WITHIN 6"
    # by hand: x has A0-B1 (B7 is 7 after A0), y has A3-B8; B2 (y) has no A before it
    # and B7 (x) ends no match while A0's window is over: both count 0
    got = aggregate_local(events, query, algorithm=algorithm)
    assert sorted(rows(got, ["ts", "ip", "n"])) == [(1, "x", 1), (8, "y", 1)]
    every = aggregate_local(events, query + " EMIT EVERY TRIGGER", algorithm=algorithm)
    assert sorted(rows(every, ["ts", "ip", "n"])) == [
        (1, "x", 1), (2, "y", 0), (7, "x", 0), (8, "y", 1),
    ]  # fmt: skip
    explicit = aggregate_local(events, query + " EMIT ON MATCH", algorithm=algorithm)
    assert explicit.equals(got)


def test_a_trigger_that_ends_no_match_gives_no_row_even_in_a_full_window():
    events = pd.DataFrame({"type": list("ABB"), "ts": [0, 1, 2], "v": [1, 5, 0]})
    query = "PATTERN SEQ(A a, B b) WHERE a.v < b.v AGG COUNT AS n WITHIN 10"
    # A0-B1 matches (1 < 5), A0-B2 does not (1 < 0 is false): at 2 the window still
    # holds A0-B1, but no match ends there
    assert rows(aggregate_local(events, query), ["ts", "n"]) == [(1, 1)]
    every = aggregate_local(events, query + " EMIT EVERY TRIGGER")
    assert rows(every, ["ts", "n"]) == [(1, 1), (2, 1)]


def test_emit_belongs_to_agg_and_explain_names_it():
    from sparkcep import explain

    with pytest.raises(QueryError, match="EMIT says when an AGG query gives a row"):
        aggregate_local(letters("AB"), "PATTERN SEQ(A a, B b) WITHIN 3 EMIT EVERY TRIGGER")
    assert "EMIT ON MATCH" in explain("PATTERN SEQ(A a, B b) AGG COUNT WITHIN 5")
    text = explain("PATTERN SEQ(A a, B b) AGG COUNT WITHIN 5 EMIT EVERY TRIGGER")
    assert "also where no match ends" in text


def test_sum_avg_min_max_are_exact():
    stream = pd.DataFrame(
        {"type": list("ABABC"), "ts": [1, 2, 3, 4, 5], "price": [1.0, 10.0, 2.0, 20.0, 7.0]}
    )
    q = "PATTERN SEQ(A a, B b, C c) AGG COUNT, SUM(b.price) AS total, AVG(a.price), MIN(b.price), MAX(a.price) WITHIN 10"
    got = aggregate_local(stream, q)
    # matches: (a1,b1,c), (a1,b2,c), (a2,b2,c): b prices 10, 20, 20; a prices 1, 1, 2
    assert rows(got, ["ts", "count", "total", "avg", "min", "max"]) == [
        (5, 3, 50, round(4 / 3, 9), 10, 2)
    ]


def test_group_by_reports_per_group():
    stream = pd.DataFrame({"type": list("ABABAB"), "ts": range(6), "ip": list("xxyyxy")})
    got = aggregate_local(stream, "PATTERN SEQ(A a, B b) GROUP BY ip AGG COUNT AS n WITHIN 100")
    assert rows(got, ["ts", "ip", "n"]) == [(1, "x", 1), (3, "y", 1), (5, "y", 2)]


def test_explain_says_which_path_and_why():
    from sparkcep import explain

    assert "aseq" in explain("PATTERN SEQ(A a, B b) WHERE [k] AGG COUNT WITHIN 5")
    text = explain("PATTERN SEQ(A a, B b) WHERE a.v < b.v AGG COUNT WITHIN 5")
    assert "enumerated" in text and "a.v < b.v" in text


def test_errors():
    with pytest.raises(QueryError, match="either AGG"):
        aggregate_local(letters("AB"), "PATTERN SEQ(A a, B b) AGG COUNT RETURN a")
    with pytest.raises(QueryError, match="GROUP BY needs an AGG"):
        aggregate_local(letters("AB"), "PATTERN SEQ(A a, B b) GROUP BY type")


# ---- against the oracle ------------------------------------------------------------


def check(events, query, algorithms=("aseq", "twostep")):
    """Each algorithm's rows are the oracle's (computed once for all of them)."""
    expected = oracle_aggregate(query, events)
    for algorithm in algorithms:
        got = engine_rows(frame(events), query, algorithm=algorithm)
        cols = [c for c in got.columns]
        exp = [tuple(normalize(r[c]) for c in cols) for r in expected]
        assert rows(got, cols) == exp, (algorithm, query)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_aggregates_equal_the_oracle(data):
    events = data.draw(streams())
    query = data.draw(agg_queries())
    check(events, query)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_shared_runs_equal_unshared(data):
    events = frame(data.draw(streams(types="ABCD")))
    queries = [
        "QUERY q1: PATTERN SEQ(A a, B b, C c) AGG COUNT, SUM(b.v) AS s WITHIN 6",
        "QUERY q2: PATTERN SEQ(A a, B b) AGG COUNT, MAX(a.v) AS m WITHIN 5",
        "QUERY q3: PATTERN SEQ(D d, A a, B b, C c) AGG COUNT, SUM(d.v) AS s, MIN(c.v) AS m WITHIN 7",
        "QUERY q4: PATTERN SEQ(A a, B b, !D x, C c) AGG COUNT WITHIN 6",
        "QUERY q5: PATTERN SEQ(C c, D d, A a, B b) AGG COUNT, AVG(a.v) AS av WITHIN 8",
    ]
    picked = data.draw(st.lists(st.sampled_from(queries), min_size=2, max_size=5, unique=True))
    _assert_every_sharing_agrees(events, picked)


def _assert_every_sharing_agrees(events, queries) -> None:
    """Prefix trees, chop-connect, and chop-connect one tail START at a time all give the
    unshared answers."""
    outs = {s: engine_rows(events, queries, sharing=s) for s in ("none", "prefix", "chop")}
    assert outs["prefix"].equals(outs["none"])
    assert outs["chop"].equals(outs["none"])
    with connect_chunk(1):  # connect one tail START at a time
        chunked = engine_rows(events, queries, sharing="chop")
    assert chunked.equals(outs["none"])


@contextlib.contextmanager
def connect_chunk(rows: int):
    from sparkcep.engines.aseq import connect as aseq

    saved, aseq.CONNECT_CHUNK = aseq.CONNECT_CHUNK, rows
    try:
        yield
    finally:
        aseq.CONNECT_CHUNK = saved


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_chop_connect_per_group_equals_unshared(data):
    events = frame(data.draw(streams(max_events=24, types="ABCD")))
    queries = [
        "QUERY q1: PATTERN SEQ(A a, B b, C c) WHERE [k] GROUP BY k AGG COUNT, SUM(c.v) WITHIN 3",
        "QUERY q2: PATTERN SEQ(D d, A a, B b, C c) WHERE [k] GROUP BY k AGG COUNT, MAX(d.v) WITHIN 4",
        "QUERY q3: PATTERN SEQ(C c, D d, A a, B b, C c2) WHERE [k] GROUP BY k AGG COUNT WITHIN 5",
    ]
    unshared = engine_rows(events, queries, sharing="none")
    for rows in (1, 7, 10**9):
        with connect_chunk(rows):
            chop = engine_rows(events, queries, sharing="chop")
        assert chop.equals(unshared)


def test_counts_beyond_64_bits_stay_exact():
    import math

    # 250 events of one type and a pattern of 12 of them: C(250, 12) matches end by the
    # last event, more than int64 holds.
    stream = pd.DataFrame({"type": ["A"] * 250, "ts": range(250), "v": [1] * 250})
    comps = ", ".join(f"A a{i}" for i in range(12))
    got = aggregate_local(stream, f"PATTERN SEQ({comps}) AGG COUNT, SUM(a0.v) AS s WITHIN 1000")
    assert int(got["count"].iloc[-1]) == math.comb(250, 12) > 2**63
    assert int(got["s"].iloc[-1]) == math.comb(250, 12)


# Values of very different magnitudes: a window total taken as a difference of running
# sums over the partition loses the small ones (1e16 + 1.0 - 1e16 = 0.0).
MAGNITUDES = [1e16, 3.0e12, 7.69, 1.0, 0.1, 2.5e-7, 123456.789]


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_float_sums_are_correctly_rounded_whatever_came_before(data):
    events = data.draw(streams(max_events=14))
    events.sort(key=lambda e: e["ts"])  # ids in time order: a big value, then small ones
    for i, e in enumerate(events):
        e["v"] = 1e16 if i == 0 else data.draw(st.sampled_from(MAGNITUDES))
    var = data.draw(st.sampled_from("ab"))
    group = data.draw(st.sampled_from(["", " WHERE [k] GROUP BY k"]))
    w = data.draw(st.integers(1, 6))
    query = f"PATTERN SEQ(A a, B b){group} AGG SUM({var}.v) AS s, AVG({var}.v) AS av WITHIN {w}"
    expected = oracle_aggregate(query, events)
    for algorithm in ("aseq", "twostep"):
        got = engine_rows(frame(events), query, algorithm=algorithm)
        assert len(got) == len(expected)
        for (_, row), exp in zip(got.iterrows(), expected):
            for col in ("s", "av"):
                if exp[col] is None:
                    assert pd.isna(row[col])
                else:
                    assert math.isclose(row[col], exp[col], rel_tol=1e-12, abs_tol=0), (
                        algorithm, query, col,
                    )  # fmt: skip


def test_a_float_sum_forgets_the_values_before_its_window():
    events = pd.DataFrame(
        {"type": list("ABAB"), "ts": [0, 1, 10, 11], "v": [1e16, None, 1.0, None]}
    )
    query = "PATTERN SEQ(A a, B b) AGG COUNT AS n, SUM(a.v) AS s, AVG(a.v) AS av WITHIN 5"
    for algorithm in ("aseq", "twostep"):
        got = aggregate_local(events, query, algorithm=algorithm)
        assert got[["ts", "n", "s", "av"]].values.tolist() == [
            [1, 1, 1e16, 1e16],
            [11, 1, 1.0, 1.0],
        ]


# ---- chop-connect on random workloads ------------------------------------------------


@st.composite
def tail_sharing_workloads(draw):
    """Queries that share a tail: SEQ(base), and SEQ(head, base[, base2]) for random
    heads, aggregates, windows and keys (all keyed alike, as queries run together must)."""
    word = st.lists(st.sampled_from("ABCD"), min_size=1, max_size=3)
    base, base2 = draw(word), draw(word)
    keyed = draw(st.booleans())
    queries = [base, base2]
    for _ in range(draw(st.integers(1, 3))):
        queries.append(draw(word) + base + (base2 if draw(st.booleans()) else []))
    texts = []
    for i, types in enumerate(queries):
        names = [f"v{j}" for j in range(len(types))]
        comps = ", ".join(f"{t} {n}" for t, n in zip(types, names))
        var = draw(st.sampled_from(names))
        items = draw(
            st.lists(
                st.sampled_from(
                    ["COUNT", f"SUM({var}.v) AS s", f"AVG({var}.v) AS av",
                     f"MIN({var}.v) AS mn", f"MAX({var}.v) AS mx"]
                ),
                min_size=1, max_size=2, unique=True,
            )
        )  # fmt: skip
        where = " WHERE [k] GROUP BY k" if keyed else ""
        window = draw(st.integers(1, 8))
        texts.append(
            f"QUERY q{i}: PATTERN SEQ({comps}){where} AGG {', '.join(items)} WITHIN {window}"
        )
    return texts


# 60 workloads (120 took 10 s: each runs three sharings and a chunked connect)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_tail_sharing_workloads_equal_unshared(data):
    events = frame(data.draw(streams(max_events=16, types="ABCD")))
    queries = data.draw(tail_sharing_workloads())
    _assert_every_sharing_agrees(events, queries)


# A tail piece shared with a query of a longer window holds matches too long for the
# chopped query: seven A at 0 and a B at 6, SEQ(A) WITHIN 8 keeping the (A B) root's
# counters alive past the chopped query's window of 1; then A at 0, 3, 4, 5 and B at 6,
# the tail (a0, b) too long for the window of 4, the others not.
TAIL_LONGER_THAN_WINDOW = [
    (
        "AAAAAAAB",
        [0] * 7 + [6],
        {
            "q0": "PATTERN SEQ(A a, B b) AGG COUNT WITHIN 1",
            "q1": "PATTERN SEQ(A a) AGG COUNT WITHIN 8",
            "q2": "PATTERN SEQ(A a, A b, B c) AGG COUNT WITHIN 1",
        },
        # b is 6 after every a: q0 and q2 find nothing (nor do equal times make a
        # sequence for q2); each A sees the 7 A of its instant for q1.
        [("q1", 0, 7)] * 7,
    ),
    (
        "AAAAB",
        [0, 3, 4, 5, 6],
        {
            "q0": "PATTERN SEQ(A a, B b) AGG COUNT, SUM(a.v) AS s WITHIN 8",
            "q2": "PATTERN SEQ(A a, A b, B c) AGG COUNT, SUM(a.v) AS s WITHIN 4",
        },
        # v = 1..5. q0: all four A before b (1+2+3+4); q2: a3 a4, a3 a5, a4 a5 then b
        # (a0 is 6 before b): 2+2+3.
        [("q0", 6, 4, 10), ("q2", 6, 3, 7)],
    ),
]


@pytest.mark.parametrize(("types", "times", "queries", "expected"), TAIL_LONGER_THAN_WINDOW)
def test_chop_drops_tail_matches_longer_than_the_query_window(types, times, queries, expected):
    events = [
        {"id": i, "type": t, "ts": ts, "v": i + 1, "k": 0, "seq": i}
        for i, (t, ts) in enumerate(zip(types, times))
    ]
    by_oracle = [
        (name, r["ts"], *[r[c] for c in ("count", "s") if c in r])
        for name, query in queries.items()
        for r in oracle_aggregate(query, events)
    ]
    assert by_oracle == expected
    texts = [f"QUERY {name}: {query}" for name, query in queries.items()]
    cols = ["query", "ts", "count", *(["s"] if len(expected[0]) > 3 else [])]
    for chunk in (1, 10**9):  # one tail START at a time, then all at once
        with connect_chunk(chunk):
            run = run_aggregate_local(pd.DataFrame(events), texts, id_col="id", sharing="chop")
        assert rows(run.matches, cols) == expected


def _chopped_contributions(query: str):
    from sparkcep.engines.aseq.connect import query_contributions
    from sparkcep.engines.aseq.counters import PrefixCounters
    from sparkcep.prep.table import build_table

    events = EXAMPLE_8.assign(id=range(len(EXAMPLE_8)), v=range(len(EXAMPLE_8)))
    program = compile_one(
        "QUERY de: PATTERN SEQ(D d, E e) AGG COUNT WITHIN 9;" + query,
        events,
        Options(sharing="chop"),
    )
    table = build_table(
        events, mask=program.mask(events), segment_cols=[], time_col="ts", tiebreak=None,
        attributes=["v"],
    )  # fmt: skip
    counters = PrefixCounters(program.forest, table)
    return query_contributions(counters, program.forest.queries[1])


def test_the_last_connect_gives_one_sided_bundles_unless_min_or_max():
    from sparkcep.engines.aseq.combine import NEVER

    # Example 8: (A,B,C) + (D,E); the matches of (A,B,C,D,E) by end (e1 at 10 s: one)
    # and by start (a1 at 1 s: none inside its window; a2 at 4 s: one), no join.
    q = "QUERY abcde: PATTERN SEQ(A a, B b, C c, D d, E e) AGG COUNT, SUM(a.v) AS s WITHIN 9;"
    got = _chopped_contributions(q)
    by_end = [(int(t), int(c)) for s, t, c in zip(got.start, got.end, got.count) if s == NEVER]
    by_start = [(int(s), int(c)) for s, t, c in zip(got.start, got.end, got.count) if t == NEVER]
    assert len(by_end) + len(by_start) == len(got)
    assert by_end == [(10, 1)]
    assert [(s, c) for s, c in by_start if c] == [(4, 1)]
    assert got.matches() == 1
    # MIN and MAX need each bundle's start and end: the joint connect.
    q = "QUERY abcde: PATTERN SEQ(A a, B b, C c, D d, E e) AGG MAX(a.v) AS m WITHIN 9;"
    got = _chopped_contributions(q)
    assert not ((got.start == NEVER) | (got.end == NEVER)).any()
    assert [(int(s), int(e), int(c)) for s, e, c in zip(got.start, got.end, got.count)] == [
        (4, 10, 1)
    ]


def test_chop_connect_counts_beyond_64_bits_stay_exact():
    # 100 B, then 100 A: SEQ(12 B, 12 A) chopped into (12 B) + (12 A), the tail shared
    # with SEQ(12 A). Each piece's counts fit in int64 (C(100, 12) < 2**60), their
    # product does not: C(100, 12)**2 matches end by the last A.
    stream = pd.DataFrame({"type": ["B"] * 100 + ["A"] * 100, "ts": range(200), "v": 1})
    heads = ", ".join(f"B b{i}" for i in range(12))
    tails = ", ".join(f"A a{i}" for i in range(12))
    queries = [
        f"QUERY t: PATTERN SEQ({tails}) AGG COUNT WITHIN 1000",
        f"QUERY q: PATTERN SEQ({heads}, {tails}) AGG COUNT, SUM(b0.v) AS s WITHIN 1000",
    ]
    got = run_aggregate_local(stream, queries, sharing="chop")
    (program,) = got.programs
    assert len(program.forest.queries[1].pieces) == 2
    last = got.matches[got.matches["query"] == "q"].iloc[-1]
    assert int(last["count"]) == math.comb(100, 12) ** 2 > 2**63
    assert int(last["s"]) == math.comb(100, 12) ** 2


# ---- the paper's state: nothing that follows the number of matches -------------------


@pytest.mark.parametrize(
    "aggregates",
    [
        "COUNT",
        "COUNT, SUM(b.v) AS s, AVG(a.v) AS av",
        "SUM(b.f) AS s, AVG(a.f) AS av",
        "MIN(a.v) AS lo, MAX(c.v) AS hi",
    ],
)
def test_the_counters_hold_no_structure_that_follows_the_matches(aggregates):
    """A dense stream (3,000 events, window 600): a length-3 pattern has about 1.8 x 10^7
    matches here, from about 2 x 10^5 (START, end) pairs. What the counters hand to the
    triggers is bounded by the events: one total per end group and per START row, and
    for MIN/MAX only the records of each START's running extreme (values in random
    order: a few per START)."""
    import numpy as np

    from sparkcep.engines.aseq.connect import piece_contributions
    from sparkcep.engines.aseq.counters import PrefixCounters
    from sparkcep.prep.table import build_table

    n, window = 3_000, 600
    rng = np.random.default_rng(5)
    types = rng.choice(list("ABC"), n)
    events = pd.DataFrame(
        {"type": types, "ts": np.arange(n), "v": rng.permutation(n), "id": np.arange(n)}
    ).assign(f=lambda df: df["v"] / 7)  # floats: their sums exact, a few floats per total
    query = f"PATTERN SEQ(A a, B b, C c) AGG {aggregates} WITHIN {window}"
    program = compile_one(query, events, Options())
    table = build_table(
        events, mask=program.mask(events), segment_cols=[], time_col="ts", tiebreak=None,
        attributes=["v", "f"],
    )  # fmt: skip
    counters = PrefixCounters(program.forest, table)
    contributions = piece_contributions(counters, program.forest.queries[0], 0)
    c_times = np.flatnonzero(types == "C")
    pairs = sum(  # (A, C) within the window: what a bundle per (START, end) would hold
        np.searchsorted(c_times, t + window) - np.searchsorted(c_times, t)
        for t in np.flatnonzero(types == "A")
    )
    assert contributions.matches() > 10**7 and pairs > 10**5
    if "MIN" in aggregates:
        assert len(contributions) < pairs / 10
    elif ".f" in aggregates:  # each total as a few floats, per channel
        assert len(contributions) <= 2 * n * (1 + 3 * 2) and len(contributions) < pairs / 10
    else:
        assert len(contributions) <= 2 * n


def test_a_stream_keeps_only_the_starts_alive_in_its_window():
    """Fed in about 30 batches, as a stream's micro-batches are, A-Seq carries one counter row
    per START still inside the window (the paper's state, whatever the matches) and gives
    the rows of one batch."""
    import numpy as np

    from sparkcep.engines.output import sort_rows

    n, window = 3_000, 200
    rng = np.random.default_rng(8)
    events = pd.DataFrame(
        {
            "type": rng.choice(list("ABC"), n),
            "ts": np.sort(rng.integers(0, n, n)),  # equal times too
            "v": rng.integers(-50, 50, n),
            "k": rng.integers(0, 3, n),
            "id": np.arange(n),
        }
    )
    query = (
        f"PATTERN SEQ(A a, B b, C c) WHERE [k] GROUP BY k "
        f"AGG COUNT, SUM(b.v) AS s, MAX(a.v) AS hi WITHIN {window}"
    )
    program = compile_one(query, events, Options(id_col="id"))
    whole = engine_rows(events, query)
    state, parts = program.new_state(), []
    ts = events["ts"].to_numpy()
    cuts = list((np.flatnonzero(np.diff(ts)) + 1)[::60][1:])  # between instants
    for lo, hi in zip([0, *cuts], [*cuts, n]):
        parts.append(program.process(state, program.in_order(events.iloc[lo:hi])))
        now = ts[hi - 1]
        alive = ((events["type"] == "A") & (ts > now - window) & (ts <= now)).to_numpy()
        carried = sum(len(rows) for rows in state.carry.values())
        assert carried <= alive.sum()  # at most one row per live START (fewer: equal times)
    streamed = sort_rows(pd.concat(parts, ignore_index=True), program.order)
    assert len(cuts) >= 25 and len(whole) > 100, (len(cuts), len(whole))
    pd.testing.assert_frame_equal(streamed, whole, check_dtype=False)


def test_explain_shows_what_queries_run_together_share():
    from sparkcep import explain

    text = (
        "QUERY de: PATTERN SEQ(D d, E e) AGG COUNT WITHIN 9;"
        "QUERY ade: PATTERN SEQ(A a, D d, E e) AGG COUNT WITHIN 9;"
        "QUERY dx: PATTERN SEQ(D d, X x) AGG COUNT WITHIN 9;"
    )
    prefix = explain(text)
    assert "together   de, ade, dx" in prefix
    assert "(D E)" in prefix and "(A D E)" in prefix and "(D X)" in prefix
    chopped = explain(text, sharing="chop")
    assert "(A) + (D E)" in chopped and "chop-connect cuts a query where" in chopped


def _seq(types: str, window: int = 9) -> str:
    return f"PATTERN SEQ({', '.join(f'{t} {t.lower()}' for t in types)}) AGG COUNT WITHIN {window}"


def test_chop_cost_rule_leaves_short_tails_whole_and_cuts_long_ones(monkeypatch):
    from sparkcep import explain

    monkeypatch.setattr(forest, "CHOP_MIN_STEPS", 6)
    short = ";".join(f"QUERY {n}: {_seq(t)}" for n, t in (("de", "DE"), ("ade", "ADE")))
    text = explain(short, sharing="chop")
    assert "(A D E) (a shared tail of 2 steps left uncut" in text
    assert "cuts from 6" in text and "+" not in text.split("together")[1]
    long = ";".join(f"QUERY {n}: {_seq(t)}" for n, t in (("six", "BCDEFG"), ("seven", "ABCDEFG")))
    assert "(A) + (B C D E F G)" in explain(long, sharing="chop")
    # The cut query counts what it counts whole: on a stream where every type recurs.
    events = letters("ABCDEFG" * 3 + "GFEDCBA" + "ABCDEFG", range(0, 70, 2)).assign(id=range(35))
    queries = [_seq("BCDEFG", 30), _seq("ABCDEFG", 30)]
    chopped = engine_rows(events, queries, sharing="chop")
    whole = engine_rows(events, queries, sharing="none")
    assert len(whole) > 0 and chopped.equals(whole)


def test_infinite_values_give_infinite_sums_beside_exact_finite_ones():
    events = pd.DataFrame(
        {"type": list("ABABAB"), "ts": range(6), "v": [1.0, math.inf, 2.5, 3.0, -math.inf, 1.0]}
    )
    query = "PATTERN SEQ(A a, B b) AGG COUNT, SUM(a.v) AS sa, SUM(b.v) AS sb WITHIN 3"
    for algorithm in ("aseq", "twostep"):
        got = aggregate_local(events, query, algorithm=algorithm)
        # (a0, b1) at 1; (a2, b3) at 3, a0 out of the window; (a4, b5) at 5
        assert got[["ts", "count", "sa", "sb"]].values.tolist() == [
            [1, 1, 1.0, math.inf],
            [3, 1, 2.5, 3.0],
            [5, 1, -math.inf, 1.0],
        ], algorithm


@settings(max_examples=examples(150), deadline=None)
@given(
    batches=st.lists(
        st.lists(
            st.tuples(
                st.integers(0, 3),
                st.floats(allow_nan=False, allow_infinity=False, width=64).filter(
                    lambda v: abs(v) < 1e300
                ),
            ),
            max_size=12,
        ),
        max_size=8,
    ),
    carry_every=st.sampled_from([4, 8, 1 << 14]),
)
def test_exact_sums_are_the_exact_sums_of_their_floats(batches, carry_every):
    """ExactSums against Python's exact fractions: each place's terms add up to the
    exact sum of what was added there, the first term is that sum rounded."""
    from fractions import Fraction

    import numpy as np

    from sparkcep.engines.aseq.combine import ExactSums

    sums = ExactSums(4)
    sums.MOST_ADDS = carry_every  # carries often, or as in a run
    expected = [Fraction(0)] * 4
    for batch in batches:
        if not batch:
            continue
        place = np.array([p for p, _ in batch], dtype=np.int64)
        values = np.array([v for _, v in batch], dtype=np.float64)
        sums.add_at(place, values)
        for p, v in batch:
            expected[p] += Fraction(v)
    places, terms = sums.terms(np.arange(4))
    got = [Fraction(0)] * 4
    first = {}
    for p, t in zip(places.tolist(), terms.tolist()):
        got[p] += Fraction(t)
        first.setdefault(p, t)
    assert got == expected
    for p, t in first.items():
        assert t == float(expected[p])  # correctly rounded


# ---- chop-connect's cost rule on the input's counts ------------------------------------


def _rule_forest(counts_of: dict[str, int], heads: str = "A", span=10_000, window=100):
    """The forest of SEQ(B..G) and SEQ(h, B..G) for each head h, its cuts decided on
    made-up counts."""
    from sparkcep.engines.aseq.forest import Forest, TypeCounts
    from sparkcep.plan import analyze

    options = Options()
    patterns = ["BCDEFG", *(h + "BCDEFG" for h in heads)]
    plans = [analyze(_seq(t, window), None, options) for t in patterns]
    probe = Forest(plans, "chop", rule="always")  # the signature bit of each type
    bit = {probe.signatures.items[node.bits[0]].event_type: node.bits[0] for node in probe.nodes}
    counts = TypeCounts({bit[t]: n for t, n in counts_of.items()}, span)
    return Forest(plans, "chop", probe.signatures, counts=counts, rule="counts"), counts, bit


def test_chop_cost_rule_decides_on_the_counts(monkeypatch):
    """A cut saves, per START of the chopped query, the tail's events in its window; its
    connect goes through the tail's (START, end) bundles and the snapshot pairs. A
    frequent head before a tail of frequent middle types and rare ends is cut; a rare
    head before a tail with frequent ends is not."""
    monkeypatch.setattr(forest, "CHOP_MIN_STEPS", 2)
    cheap = {"A": 1000, "B": 10, "C": 1000, "D": 1000, "E": 1000, "F": 1000, "G": 10}
    chosen, counts, _ = _rule_forest(cheap)
    assert [len(qp.pieces) for qp in chosen.queries] == [1, 2]
    (estimate,) = chosen.estimates[1]
    share = counts.share(100)  # 100 / 10,000
    assert estimate.saving == pytest.approx(1000 * (10 + 4 * 1000 + 10) * share)
    connect = forest.CHOP_CONNECT * (10 * 10 * share + 10 * 1000 * share + 1000)
    assert estimate.connect == pytest.approx(connect)
    assert estimate.collect == pytest.approx(forest.CHOP_COLLECT * 10 * 10 * share)
    assert estimate.cut and "(A) + (B C D E F G) (cut: a cut saves" in chosen.describe()[1]
    costly = {"A": 10, "B": 1000, "C": 10, "D": 10, "E": 10, "F": 10, "G": 1000}
    whole, _, _ = _rule_forest(costly)
    assert [len(qp.pieces) for qp in whole.queries] == [1, 1]
    (estimate,) = whole.estimates[1]
    assert not estimate.cut and estimate.saving < estimate.connect
    assert "(A B C D E F G) (left whole: a cut saves" in whole.describe()[1]
    # Each query on its own estimates: a rare head is left whole beside a frequent one
    # (frequent tail ends: its connect goes through many tail bundles for little saving).
    dense = {t: 1000 for t in "BCDEFG"}
    both, _, _ = _rule_forest({**dense, "A": 100_000, "H": 1}, heads="AH")
    assert [len(qp.pieces) for qp in both.queries] == [1, 2, 1]
    assert [e.cut for e in both.estimates[2]] == [False]
    # Savings that each beat their connect but not, together, collecting the tail.
    monkeypatch.setattr(forest, "CHOP_COLLECT", 1e9)
    assert [len(qp.pieces) for qp in _rule_forest(cheap)[0].queries] == [1, 1]
    # Forced: every candidate is cut, whatever the counts.
    monkeypatch.setattr(forest, "CHOP_RULE", "always")
    from sparkcep.engines.aseq.forest import Forest

    forced = Forest([qp.plan for qp in whole.queries], "chop")
    assert [len(qp.pieces) for qp in forced.queries] == [1, 2]


@pytest.mark.parametrize("frequent_head", [True, False])
def test_chop_cuts_decided_at_run_time_give_the_unshared_rows(monkeypatch, frequent_head):
    """`explain` names the candidate cut and says the counts decide; a run decides on its
    input's counts (cut or not, as the estimates say) and gives the rows of unshared."""
    import numpy as np

    from sparkcep import explain

    monkeypatch.setattr(forest, "CHOP_MIN_STEPS", 2)
    monkeypatch.setattr(forest, "CHOP_RULE", "counts")
    queries = [_seq("BCDE", 40), _seq("ABCDE", 40)]
    text = explain(";".join(f"QUERY q{i}: {q}" for i, q in enumerate(queries)), sharing="chop")
    assert "(A) + (B C D E) (candidate cuts: the input's type counts decide at run time)" in text
    assert "decided at run time" in text
    rng = np.random.default_rng(3)
    weights = [8, 1, 8, 8, 1] if frequent_head else [1, 8, 1, 1, 8]
    p = np.array(weights, dtype=float) / sum(weights)
    n = 1500
    events = pd.DataFrame(
        {"type": rng.choice(list("ABCDE"), n, p=p), "ts": np.arange(n), "id": np.arange(n)}
    )
    program = compile_one(queries, events, Options(id_col="id", sharing="chop"))
    assert program.forest.pending
    state = program.new_state()
    got = program.process(state, program.in_order(events))
    cut = [len(qp.pieces) > 1 for qp in program.forest.queries]
    assert cut == [False, frequent_head], program.forest.describe()
    assert any(("cut:" if frequent_head else "left whole:") in line for line in state.stats["chop"])
    from sparkcep.engines.output import sort_rows

    whole = engine_rows(events, queries, sharing="none")
    assert len(whole) > 0
    pd.testing.assert_frame_equal(sort_rows(got, program.order), whole, check_dtype=False)


def test_exact_window_totals_in_limbs_equal_python_integers():
    """combine's exact float totals (int64 limbs, rounded once) against the same totals
    over Python integers, on values of both signs and magnitudes 1e-7 to 1e16, and the
    rounding of limbs against Python's int / int (ties to even, negative, subnormal)."""
    import random

    import numpy as np

    from sparkcep.engines.aseq.combine import (
        _exact_float_total,
        _python_float_total,
        _round_limbs,
        _to_float,
    )

    rng = random.Random(11)
    for _ in range(300):
        n = rng.randint(1, 50)
        pool = [1e16, -1e16, 3.0e12, 7.69, 1.0, 0.1, -0.1, 2.5e-7, 123456.789]
        values = np.array([rng.choice([*pool, rng.uniform(-1e5, 1e5)]) for _ in range(n)])
        picks = [np.array(sorted(rng.sample(range(n), rng.randint(0, n)))) for _ in range(6)]

        def window_total(v, picks=picks):
            out = np.zeros(len(picks), dtype=v.dtype if v.dtype != object else object)
            for i, pick in enumerate(picks):
                out[i] = v[pick].sum() if len(pick) else 0
            return out

        got = _exact_float_total(values, window_total)
        expected = _python_float_total(values, np.isfinite(values), window_total)
        assert got.tolist() == expected.tolist()
    for _ in range(2000):
        total = rng.choice([1, -1]) * rng.randint(1, 2**200) >> rng.randint(0, 150)
        if rng.random() < 0.3:  # a tie: 53 bits, then a single 1 bit
            total = (rng.randint(2**52, 2**53 - 1) * 2 + 1) << rng.randint(0, 60)
        low = rng.choice([-1100, -1074, -300, -64, 0, 64])
        limbs, rest = [], total
        for _ in range(8):
            limbs.append(rest & (2**32 - 1))
            rest >>= 32
        limbs[-1] += rest << 32 if rest else 0
        row = np.array([limbs], dtype=object)
        if any(abs(x) >= 2**62 for x in limbs):
            continue
        got = _round_limbs(row.astype(np.int64), low)[0]
        assert got == _to_float(total, low), (total, low)


def test_min_max_sweep_equals_a_heap_of_the_live_matches():
    """MIN/MAX at each trigger over the bundles alive there (end <= t < start + w), by
    the sparse table, against the brute force."""
    import numpy as np

    from sparkcep.engines.aseq.combine import Triggers, _sweep_extreme

    rng = np.random.default_rng(4)
    for _ in range(400):
        nc, nt, w = rng.integers(0, 30), rng.integers(0, 20), int(rng.integers(1, 8))
        group, start = rng.integers(0, 3, nc), rng.integers(0, 20, nc)
        end = start + rng.integers(0, w, nc)
        values = rng.choice([1.0, 2.0, -3.0, np.inf, -np.inf, 5.5], nc)
        trig = Triggers(np.arange(nt), rng.integers(0, 25, nt), rng.integers(0, 3, nt))
        for func, pick in (("min", min), ("max", max)):
            got = _sweep_extreme(func, group, start, end, values, trig, w)
            for j in range(nt):
                alive = [
                    values[i]
                    for i in range(nc)
                    if group[i] == trig.group[j]
                    and end[i] <= trig.ts[j] < start[i] + w
                    and np.isfinite(values[i])
                ]
                assert got[j] == (pick(alive) if alive else None)


def test_exact_sums_give_their_terms_a_chunk_of_places_at_a_time(monkeypatch):
    """ExactSums.terms rounds the sums of a chunk of places at a time (bounded copies):
    the same terms, place by place, as all at once."""
    from fractions import Fraction

    import numpy as np

    from sparkcep.engines.aseq import combine

    rng = np.random.default_rng(9)
    sums = combine.ExactSums(50)
    for _ in range(20):
        place = rng.integers(0, 50, 30)
        values = rng.choice([1e16, -1e16, 0.1, 7.69, 2.5e-7, -3.0e12], 30) * rng.integers(1, 99, 30)
        sums.add_at(place, values)
    whole = sums.terms(np.arange(50))
    monkeypatch.setattr(combine, "TERMS_CHUNK", 7)
    chunked = sums.terms(np.arange(50))
    assert whole[0].tolist() == chunked[0].tolist() and whole[1].tolist() == chunked[1].tolist()
    totals = [Fraction(0)] * 50
    for p, t in zip(*chunked):
        totals[p] += Fraction(t)
    assert sum(totals) != 0 and len(set(chunked[0].tolist())) > 40
