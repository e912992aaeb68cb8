"""Hand-computed checks of the brute-force oracle against docs/semantics.md.

Every expected value here was worked out by hand from the specification.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import key_attributes, oracle_matches


def ev(id, type, ts, **attrs):
    return {"id": id, "type": type, "ts": ts, **attrs}


def run(query, events, **kw):
    return oracle_matches(query, events, **kw)


def bound(rows, *variables):
    return [tuple(row[v] for v in variables) for row in rows]


# ---- Query 1 of the paper ------------------------------------------------------------------

Q1 = (
    "PATTERN SEQ(TaskStart a, CPU b, TaskFinish c, CPU d) "
    "WHERE a.taskId = c.taskId AND b.nodeId = a.nodeId AND d.nodeId = a.nodeId "
    "AND b.value > 95 AND d.value <= 70 WITHIN 15"
)
Q1_EVENTS = [
    ev(0, "TaskStart", 1, taskId=7, nodeId=3),
    ev(1, "CPU", 2, nodeId=3, value=96),
    ev(2, "CPU", 3, nodeId=3, value=99),
    ev(3, "TaskFinish", 4, taskId=7, nodeId=3),
    ev(4, "CPU", 5, nodeId=3, value=60),
]


def test_query1_skip_till_any_gives_two_matches():
    # no attribute joins all four variables (taskId: a,c; nodeId: a,b,d): no key columns
    assert run(Q1, Q1_EVENTS) == [
        {"start": 1, "end": 5, "a": 0, "b": 1, "c": 3, "d": 4},
        {"start": 1, "end": 5, "a": 0, "b": 2, "c": 3, "d": 4},
    ]


def test_query1_skip_till_next_gives_one_match():
    rows = run(Q1 + " STRATEGY SKIP_TILL_NEXT_MATCH", Q1_EVENTS)
    assert rows == [{"start": 1, "end": 5, "a": 0, "b": 1, "c": 3, "d": 4}]


def test_query1_input_order_is_irrelevant():
    assert run(Q1, list(reversed(Q1_EVENTS))) == run(Q1, Q1_EVENTS)


def test_query1_window_too_small():
    # ts(d) - ts(a) = 4: WITHIN 4 is not enough (exclusive), WITHIN 5 is
    assert run(Q1.replace("WITHIN 15", "WITHIN 4"), Q1_EVENTS) == []
    assert len(run(Q1.replace("WITHIN 15", "WITHIN 5"), Q1_EVENTS)) == 2


def test_key_attributes():
    assert key_attributes(Q1) == []
    assert key_attributes("PATTERN SEQ(A a, B b, !C c) WHERE a.k = b.k AND c.k = b.k WITHIN 5") == [
        "k"
    ]
    # the negated component is not joined on k: no key
    assert key_attributes("PATTERN SEQ(A a, B b, !C c) WHERE a.k = b.k WITHIN 5") == []
    # different attribute names do not join
    assert key_attributes("PATTERN SEQ(A a, B b) WHERE a.k = b.j") == []
    assert key_attributes("PATTERN SEQ(A a, B+ b[], !C c) WHERE [id] WITHIN 5") == ["id"]
    assert key_attributes("PATTERN SEQ(A a, B b) WHERE a.y = b.y AND [x] AND a.v > 1") == [
        "y",
        "x",
    ]
    # chained equality = two conjuncts; transitive closure
    assert key_attributes("PATTERN SEQ(A a, B b, C c) WHERE a.k = b.k = c.k") == ["k"]
    assert key_attributes("PATTERN SEQ(A a, B b, C c) WHERE a.k = b.k OR b.k = c.k") == []


def test_key_needs_the_positive_components_joined_among_themselves():
    # a and c are joined only through the negated n: the positive equalities on k put
    # a and c in two classes, so k is not a key attribute
    assert key_attributes("PATTERN SEQ(A a, !N n, C c) WHERE a.k = n.k AND n.k = c.k") == []
    # joined directly, with n joined to the class: key
    assert key_attributes("PATTERN SEQ(A a, !N n, C c) WHERE a.k = c.k AND n.k = c.k") == ["k"]
    assert key_attributes("PATTERN SEQ(A a, B b, !N n) WHERE a.k = b.k AND n.k = a.k WITHIN 5") == [
        "k"
    ]
    # a single positive component is trivially one class
    assert key_attributes("PATTERN SEQ(A a, !N n) WHERE a.k = n.k WITHIN 5") == ["k"]
    assert key_attributes("PATTERN SEQ(A+ a[]) WHERE [k]") == ["k"]
    assert key_attributes("PATTERN SEQ(A+ a[], !N n) WHERE [k] WITHIN 5") == ["k"]
    # ... but only attributes written in an equality between variables (or [attr]) count
    assert key_attributes("PATTERN SEQ(A a) WHERE a.k = 1") == []
    assert key_attributes("PATTERN SEQ(A a, !N n) WHERE a.k < n.k WITHIN 5") == []
    assert key_attributes("PATTERN SEQ(A a) WHERE a.k = a.k") == []


def test_key_equalities_through_a_negation_only_are_ordinary_conjuncts():
    # no key: a.k and c.k may differ, and n forbids only when both of its conjuncts hold
    q = "PATTERN SEQ(A a, !N n, C c) WHERE a.k = n.k AND n.k = c.k"
    assert run(q, [ev(0, "A", 1, k=1), ev(1, "C", 3, k=2)]) == [
        {"start": 1, "end": 3, "a": 0, "c": 1}
    ]
    events = [ev(0, "A", 1, k=1), ev(1, "N", 2, k=1), ev(2, "C", 3, k=2)]
    assert bound(run(q, events), "a", "c") == [(0, 2)]  # n.k = c.k is false: no block
    events = [ev(0, "A", 1, k=1), ev(1, "N", 2, k=1), ev(2, "C", 3, k=1)]
    assert run(q, events) == []


# ---- Kleene closure --------------------------------------------------------------------------

KLEENE = "PATTERN SEQ(A a, B+ b[], C c)"
KLEENE_EVENTS = [ev(0, "A", 1), ev(1, "B", 2), ev(2, "B", 3), ev(3, "C", 4)]


def test_kleene_skip_till_next_example_of_the_spec():
    rows = run(KLEENE + " STRATEGY SKIP_TILL_NEXT_MATCH", KLEENE_EVENTS)
    # ordered by end, start, then positions: (0,1,2,3) < (0,1,3)
    assert bound(rows, "a", "b", "c") == [(0, [1, 2], 3), (0, [1], 3)]
    assert rows[0]["start"] == 1 and rows[0]["end"] == 4


def test_kleene_skip_till_any():
    rows = run(KLEENE, KLEENE_EVENTS)
    assert bound(rows, "a", "b", "c") == [(0, [1, 2], 3), (0, [1], 3), (0, [2], 3)]


def test_kleene_elements_need_strictly_increasing_time():
    events = [ev(0, "A", 1), ev(1, "B", 2), ev(2, "B", 2), ev(3, "C", 4)]
    rows = run(KLEENE, events)
    assert bound(rows, "b") == [([1],), ([2],)]


def test_element_reference_must_hold_for_every_element():
    q = "PATTERN SEQ(A a, B+ b[]) WHERE b.v > a.v"
    events = [ev(0, "A", 1, v=5), ev(1, "B", 2, v=6), ev(2, "B", 3, v=4), ev(3, "B", 4, v=7)]
    # b may use only elements with v > 5: events 1 and 3
    assert bound(run(q, events), "b") == [([1],), ([1, 3],), ([3],)]


def test_prev_compares_with_previous_element_and_skips_the_first():
    q = "PATTERN SEQ(A+ a[]) WHERE a.v > prev(a.v)"
    events = [ev(0, "A", 1, v=1), ev(1, "A", 2, v=3), ev(2, "A", 3, v=2)]
    # single elements always pass; [0,2] passes (prev of event 2 is event 0, not 1);
    # [1,2] and [0,1,2] fail (2 > 3 is false)
    assert bound(run(q, events), "a") == [([0],), ([0, 1],), ([1],), ([0, 2],), ([2],)]
    # skip-till-next: after event 0 the first eligible element is event 1, so [0,2] goes
    rows = run(q + " STRATEGY SKIP_TILL_NEXT_MATCH", events)
    assert bound(rows, "a") == [([0],), ([0, 1],), ([1],), ([2],)]


def test_prev_with_null_is_unknown():
    q = "PATTERN SEQ(A+ a[]) WHERE a.v > prev(a.v)"
    events = [ev(0, "A", 1, v=None), ev(1, "A", 2, v=3)]
    assert bound(run(q, events), "a") == [([0],), ([1],)]


# ---- negation --------------------------------------------------------------------------------

MIDDLE = "PATTERN SEQ(A a, !N n, B b)"


@pytest.mark.parametrize(
    ("n_ts", "blocks"),
    [(0, False), (1, False), (2, True), (3, False), (4, False)],
)
def test_negation_in_the_middle(n_ts, blocks):
    # gap: a ≺ n ≺ b, i.e. 1 < ts(n) < 3; equal times are not in sequence
    events = [ev(0, "A", 1), ev(1, "N", n_ts), ev(2, "B", 3)]
    rows = run(MIDDLE, events)
    assert bound(rows, "a", "b") == ([] if blocks else [(0, 2)])
    assert all("n" not in row for row in rows)


def test_negation_only_counts_events_satisfying_its_conjuncts():
    q = MIDDLE + " WHERE n.k = a.k"
    assert bound(run(q, [ev(0, "A", 1, k=1), ev(1, "N", 2, k=2), ev(2, "B", 3)]), "a") == [(0,)]
    assert run(q, [ev(0, "A", 1, k=1), ev(1, "N", 2, k=1), ev(2, "B", 3)]) == []
    # a null never equals anything: the N event does not block
    assert bound(run(q, [ev(0, "A", 1, k=1), ev(1, "N", 2, k=None), ev(2, "B", 3)]), "a") == [(0,)]
    # an event of another type in the gap does not block either
    assert bound(run(q, [ev(0, "A", 1, k=1), ev(1, "X", 2, k=1), ev(2, "B", 3)]), "a") == [(0,)]


def test_negation_with_aggregate_of_kleene_variable():
    q = "PATTERN SEQ(A+ a[], !N n, B b) WHERE n.v > max(a.v)"
    events = [ev(0, "A", 1, v=1), ev(1, "A", 2, v=5), ev(2, "N", 3, v=3), ev(3, "B", 4)]
    # [0]: max 1 < 3, blocked; [0,1] and [1]: max 5, n.v = 3 not > 5, not blocked.
    # (N must lie after the last A, so for [0] the gap is 1 < ts < 4 and contains n.)
    assert bound(run(q, events), "a", "b") == [([0, 1], 3), ([1], 3)]


def test_null_key_event_takes_part_in_no_match():
    # key [k] (a alone is one class, n is joined to it): an A with a null k has no
    # partition, so it is not matched even though nothing can forbid it
    q = "PATTERN SEQ(A a, !N n) WHERE a.k = n.k WITHIN 5"
    assert run(q, [ev(0, "A", 1, k=None)]) == []
    assert run(q, [ev(0, "A", 1)]) == []  # a missing attribute is null
    assert run(q, [ev(0, "A", 1, k=None), ev(1, "N", 3, k=None)]) == []
    assert run(q, [ev(0, "A", 1, k=None), ev(1, "A", 2, k=1)]) == [
        {"start": 2, "end": 2, "k": 1, "a": 1}
    ]


@pytest.mark.parametrize(
    ("n", "blocks"),
    [
        ({"k": 1, "ts": 3}, True),  # same partition, 1 < 3 < 1 + 5
        ({"k": 1, "ts": 6}, False),  # same partition, outside the window
        ({"k": 2, "ts": 3}, False),  # another partition cannot forbid
        ({"k": None, "ts": 3}, False),  # no partition: cannot forbid
    ],
)
def test_negation_only_counts_events_of_the_partition(n, blocks):
    q = "PATTERN SEQ(A a, !N n) WHERE a.k = n.k WITHIN 5"
    events = [ev(0, "A", 1, k=1), ev(1, "N", n["ts"], k=n["k"])]
    assert run(q, events) == ([] if blocks else [{"start": 1, "end": 1, "k": 1, "a": 0}])


@pytest.mark.parametrize(
    "where",
    [
        "[k]",
        # written by hand: a.k = n.k refers to the elements of the Kleene a, allowed
        # because k is a key attribute (a.k = b.k joins the positives, n is joined)
        "a.k = n.k AND b.k = a.k",
    ],
)
def test_key_equality_of_kleene_first_component_with_negation(where):
    q = f"PATTERN SEQ(A+ a[], !N n, B b) WHERE {where}"
    assert key_attributes(q) == ["k"]
    # partition k=1: A0, B3 (the A1 and N2 of partition 2 are not there); partition 2 has no B
    events = [ev(0, "A", 1, k=1), ev(1, "A", 2, k=2), ev(2, "N", 3, k=2), ev(3, "B", 4, k=1)]
    assert bound(run(q, events), "a", "b", "k") == [([0], 3, 1)]
    events[2]["k"] = None
    assert bound(run(q, events), "a", "b", "k") == [([0], 3, 1)]
    events[2]["k"] = 1  # now in the gap of the partition: forbids
    assert run(q, events) == []


def test_kleene_element_equality_with_negation_is_an_error_when_not_a_key():
    # b is not joined to a on k: no key, and a.k = n.k is an element reference of a
    with pytest.raises(ValueError):
        run("PATTERN SEQ(A+ a[], !N n, B b) WHERE a.k = n.k", [])


@pytest.mark.parametrize(
    ("n_ts", "blocks"),
    [(6, False), (7, False), (8, True), (9, True), (10, False), (11, False)],
)
def test_negation_at_the_start(n_ts, blocks):
    # gap 0: n ≺ a (ts(n) < 10) and ts(n) > ts(last) - w = 12 - 5 = 7
    q = "PATTERN SEQ(!N n, A a, B b) WITHIN 5"
    events = [ev(0, "N", n_ts), ev(1, "A", 10), ev(2, "B", 12)]
    assert bound(run(q, events), "a", "b") == ([] if blocks else [(1, 2)])


@pytest.mark.parametrize(
    ("n_ts", "blocks"),
    [(11, False), (12, False), (13, True), (14, True), (15, False), (16, False)],
)
def test_negation_at_the_end(n_ts, blocks):
    # gap k: b ≺ n (ts(n) > 12) and ts(n) < ts(first) + w = 10 + 5 = 15
    q = "PATTERN SEQ(A a, B b, !N n) WITHIN 5"
    events = [ev(0, "A", 10), ev(1, "B", 12), ev(2, "N", n_ts)]
    assert bound(run(q, events), "a", "b") == ([] if blocks else [(0, 1)])


def test_negation_after_a_single_kleene_component():
    q = "PATTERN SEQ(A+ a[], !N n) WITHIN 3"
    events = [ev(0, "A", 1), ev(1, "A", 2), ev(2, "N", 3)]
    # [0]: gap 1 < ts < 4 holds N -> blocked; [0,1]: gap 2 < ts < 4 -> blocked;
    # [1]: gap 2 < ts < 5 -> blocked
    assert run(q, events) == []
    events = [ev(0, "A", 1), ev(1, "A", 2), ev(2, "N", 4)]
    # [0]: 1 < ts < 4: 4 is outside; [0,1]: 2 < ts < 4: outside; [1]: 2 < ts < 5: blocked
    assert bound(run(q, events), "a") == [([0],), ([0, 1],)]


def test_negation_with_order_by_tie_break():
    q = "PATTERN SEQ(A a, !N n, B b) ORDER BY ts, seq"
    events = [ev(0, "A", 5, seq=1), ev(1, "N", 5, seq=2), ev(2, "B", 5, seq=3)]
    assert run(q, events) == []
    events[1]["seq"] = 4  # now after b
    assert bound(run(q, events), "a", "b") == [(0, 2)]


def test_negation_at_start_or_end_needs_within():
    with pytest.raises(ValueError):
        run("PATTERN SEQ(!N n, A a)", [])
    with pytest.raises(ValueError):
        run("PATTERN SEQ(A a, !N n)", [])


def test_negation_in_skip_till_next_kills_the_run():
    q = MIDDLE + " STRATEGY SKIP_TILL_NEXT_MATCH"
    events = [ev(0, "A", 1), ev(1, "B", 3), ev(2, "N", 4), ev(3, "B", 5)]
    # (a, b@3) matches; (a, b@5) is not a candidate (n in the gap)
    assert bound(run(q, events), "a", "b") == [(0, 1)]
    events = [ev(0, "A", 1), ev(1, "N", 2), ev(2, "B", 3), ev(3, "B", 5)]
    assert run(q, events) == []


# ---- strategies ------------------------------------------------------------------------------


def test_skip_till_next_eligibility_uses_only_conjuncts_up_to_the_role():
    q = "PATTERN SEQ(A a, B b, C c) WHERE c.v = b.v"
    events = [ev(0, "A", 1), ev(1, "B", 2, v=1), ev(2, "B", 3, v=2), ev(3, "C", 4, v=2)]
    assert bound(run(q, events), "a", "b", "c") == [(0, 2, 3)]
    # the conjunct mentions c, so it is not part of b's eligibility: b must be event 1,
    # and (a, 1, c) fails the conjunct
    assert run(q + " STRATEGY SKIP_TILL_NEXT_MATCH", events) == []


def test_skip_till_next_window_kills_the_run():
    q = "PATTERN SEQ(A a, B b) WITHIN 3 STRATEGY SKIP_TILL_NEXT_MATCH"
    # b1 is the next relevant event but outside the window; b2 is not the first
    events = [ev(0, "A", 1), ev(1, "B", 4), ev(2, "B", 5)]
    assert run(q, events) == []


def test_skip_till_next_only_considers_events_of_the_partition():
    # key k (a.k = c.k and b.k = c.k join a, b, c). The conjunct b.k = c.k mentions c, so it
    # is not part of b's eligibility, but the B of partition 2 (event 1) is never eligible
    # for the run of partition 1: its next B is event 2.
    q = "PATTERN SEQ(A a, B b, C c) WHERE a.k = c.k AND b.k = c.k STRATEGY SKIP_TILL_NEXT_MATCH"
    events = [ev(0, "A", 1, k=1), ev(1, "B", 2, k=2), ev(2, "B", 3, k=1), ev(3, "C", 4, k=1)]
    assert run(q, events) == [{"start": 1, "end": 4, "k": 1, "a": 0, "b": 2, "c": 3}]


def test_skip_till_next_every_event_starts_a_run():
    q = "PATTERN SEQ(A a, B b) STRATEGY SKIP_TILL_NEXT_MATCH"
    events = [ev(0, "A", 1), ev(1, "A", 2), ev(2, "B", 3), ev(3, "B", 4)]
    assert bound(run(q, events), "a", "b") == [(0, 2), (1, 2)]


STRICT = "PATTERN SEQ(A a, B b) WHERE a.k = b.k STRATEGY STRICT_CONTIGUITY"


def test_strict_contiguity_broken_by_unrelated_type_in_same_partition():
    events = [ev(0, "A", 1, k=1), ev(1, "X", 2, k=1), ev(2, "B", 3, k=1)]
    assert run(STRICT, events) == []


def test_strict_contiguity_not_broken_by_other_partition():
    events = [ev(0, "A", 1, k=1), ev(1, "X", 2, k=2), ev(2, "B", 3, k=1)]
    # key column k is in the output
    assert run(STRICT, events) == [{"start": 1, "end": 3, "k": 1, "a": 0, "b": 2}]


def test_strict_contiguity_not_broken_by_null_key_event():
    events = [ev(0, "A", 1, k=1), ev(1, "X", 2, k=None), ev(2, "B", 3, k=1)]
    assert bound(run(STRICT, events), "a", "b") == [(0, 2)]


def test_strict_contiguity_without_key_is_the_whole_stream():
    q = "PATTERN SEQ(A a, B b) STRATEGY STRICT_CONTIGUITY"
    events = [ev(0, "A", 1, k=1), ev(1, "X", 2, k=2), ev(2, "B", 3, k=1)]
    assert run(q, events) == []
    events = [ev(0, "A", 1), ev(1, "B", 3), ev(2, "A", 4), ev(3, "B", 5)]
    assert bound(run(q, events), "a", "b") == [(0, 1), (2, 3)]


def test_strict_contiguity_equal_time_successor_breaks_without_order_by():
    q = "PATTERN SEQ(A a, B b) STRATEGY STRICT_CONTIGUITY"
    events = [ev(0, "A", 1, seq=1), ev(1, "B", 1, seq=2)]
    assert run(q, events) == []
    assert bound(run(q + " ORDER BY ts, seq", events), "a", "b") == [(0, 1)]


def test_strict_contiguity_with_kleene():
    q = "PATTERN SEQ(A+ a[], B b) STRATEGY STRICT_CONTIGUITY"
    events = [ev(0, "A", 1), ev(1, "A", 2), ev(2, "B", 3)]
    # [0] then b is broken by event 1; start 1 sorts before start 2
    assert bound(run(q, events), "a", "b") == [([0, 1], 2), ([1], 2)]


# ---- ORDER BY and the window -------------------------------------------------------------------


def test_equal_times_are_not_in_sequence_by_default():
    q = "PATTERN SEQ(A a, B b)"
    assert run(q, [ev(0, "A", 5), ev(1, "B", 5)]) == []


def test_order_by_tie_break_puts_equal_times_in_sequence():
    q = "PATTERN SEQ(A a, B b) ORDER BY ts, seq"
    assert bound(run(q, [ev(0, "A", 5, seq=1), ev(1, "B", 5, seq=2)]), "a", "b") == [(0, 1)]
    assert run(q, [ev(0, "A", 5, seq=2), ev(1, "B", 5, seq=1)]) == []
    assert run(q, [ev(0, "A", 5, seq=1), ev(1, "B", 5, seq=1)]) == []
    # nulls sort first
    assert bound(run(q, [ev(0, "A", 5, seq=None), ev(1, "B", 5, seq=0)]), "a", "b") == [(0, 1)]
    assert run(q, [ev(0, "A", 5, seq=0), ev(1, "B", 5, seq=None)]) == []
    # the time still comes first
    assert run(q, [ev(0, "A", 6, seq=1), ev(1, "B", 5, seq=2)]) == []


def test_order_by_changes_processing_order_for_skip_till_next():
    q = "PATTERN SEQ(A a, B b) STRATEGY SKIP_TILL_NEXT_MATCH"
    events = [ev(0, "A", 1, seq=0), ev(1, "B", 2, seq=5), ev(2, "B", 2, seq=3)]
    # by id: event 1 comes first; by seq: event 2 comes first
    assert bound(run(q, events), "a", "b") == [(0, 1)]
    assert bound(run(q + " ORDER BY ts, seq", events), "a", "b") == [(0, 2)]
    # skip-till-any row order follows processing positions too
    q_any = "PATTERN SEQ(A a, B b) ORDER BY ts, seq"
    assert bound(run(q_any, events), "a", "b") == [(0, 2), (0, 1)]


def test_window_is_exclusive():
    q = "PATTERN SEQ(A a, B b) WITHIN 5"
    assert run(q, [ev(0, "A", 0), ev(1, "B", 5)]) == []
    assert run(q, [ev(0, "A", 0), ev(1, "B", 4)]) == [{"start": 0, "end": 4, "a": 0, "b": 1}]


def test_window_applies_to_kleene_span():
    q = "PATTERN SEQ(A+ a[]) WITHIN 3"
    events = [ev(0, "A", 0), ev(1, "A", 2), ev(2, "A", 3)]
    # [0,1,2] and [0,2] span 3: not matches
    assert bound(run(q, events), "a") == [([0],), ([0, 1],), ([1],), ([1, 2],), ([2],)]


# ---- WHERE: nulls and arithmetic -----------------------------------------------------------------


def test_comparison_with_null_is_not_true():
    q = "PATTERN SEQ(A a, B b) WHERE a.v < b.v"
    assert run(q, [ev(0, "A", 1, v=None), ev(1, "B", 2, v=3)]) == []
    assert run(q, [ev(0, "A", 1), ev(1, "B", 2, v=3)]) == []  # missing attribute = null
    assert len(run(q, [ev(0, "A", 1, v=1), ev(1, "B", 2, v=3)])) == 1


def test_not_of_unknown_is_unknown():
    q = "PATTERN SEQ(A a) WHERE NOT (a.v > 5)"
    assert run(q, [ev(0, "A", 1, v=None)]) == []
    assert bound(run(q, [ev(0, "A", 1, v=4)]), "a") == [(0,)]
    assert run(q, [ev(0, "A", 1, v=6)]) == []


def test_or_with_unknown():
    q = "PATTERN SEQ(A a, B b) WHERE a.v > 5 OR b.v > 5"
    assert len(run(q, [ev(0, "A", 1, v=None), ev(1, "B", 2, v=6)])) == 1
    assert run(q, [ev(0, "A", 1, v=None), ev(1, "B", 2, v=1)]) == []


def test_in_list_with_null():
    events = [ev(0, "A", 1, v=None), ev(1, "A", 2, v=1), ev(2, "A", 3, v=3)]
    assert bound(run("PATTERN SEQ(A a) WHERE a.v IN (1, 2)", events), "a") == [(1,)]
    assert bound(run("PATTERN SEQ(A a) WHERE a.v NOT IN (1, 2)", events), "a") == [(2,)]


def test_modulo_keeps_dividend_sign_and_division_is_true_division():
    events = [ev(0, "A", 1, v=-7), ev(1, "A", 2, v=7)]
    assert bound(run("PATTERN SEQ(A a) WHERE a.v % 3 = -1", events), "a") == [(0,)]
    assert bound(run("PATTERN SEQ(A a) WHERE a.v % 3 = 1", events), "a") == [(1,)]
    assert bound(run("PATTERN SEQ(A a) WHERE a.v / 2 = 3.5", events), "a") == [(1,)]


def test_string_comparison_is_lexicographic():
    q = "PATTERN SEQ(A a) WHERE a.s < 'b'"
    events = [ev(0, "A", 1, s="abc"), ev(1, "A", 2, s="b"), ev(2, "A", 3, s="B")]
    assert bound(run(q, events), "a") == [(0,), (2,)]


def test_aggregates_in_where():
    q = "PATTERN SEQ(A+ a[], B b) WHERE sum(a.v) = b.v AND count(a) >= 2"
    events = [ev(0, "A", 1, v=1), ev(1, "A", 2, v=None), ev(2, "A", 3, v=2), ev(3, "B", 4, v=3)]
    # sum ignores null: [0,2] and [0,1,2] sum to 3 ([0,1] sums to 1; [1,2] to 2)
    assert bound(run(q, events), "a") == [([0, 1, 2],), ([0, 2],)]


def test_equivalence_attribute():
    q = "PATTERN SEQ(A a, B b) WHERE [k]"
    events = [ev(0, "A", 1, k=1), ev(1, "B", 2, k=2), ev(2, "B", 3, k=1), ev(3, "B", 4, k=None)]
    assert run(q, events) == [{"start": 1, "end": 3, "k": 1, "a": 0, "b": 2}]


# ---- RETURN --------------------------------------------------------------------------------------


def test_return_alias_element_references_and_kleene_aggregates():
    q = (
        "PATTERN SEQ(A a, B+ b[]) WHERE b.k = a.k "
        "RETURN a, b, b.value, avg(b.value) AS mean, count(b), sum(b.value) AS total, "
        "first(b.value) AS head, min(b.value) AS low"
    )
    events = [
        ev(0, "A", 1, k=1, value=0),
        ev(1, "B", 2, k=1, value=2),
        ev(2, "B", 3, k=1, value=None),
        ev(3, "B", 4, k=1, value=5),
    ]
    rows = run(q, [events[0], events[1], events[3]])
    # key k (a.k = b.k joins both components); rows: [1] (end 2), [1,3] and [3] (end 4)
    assert rows == [
        {"start": 1, "end": 2, "k": 1, "a": 0, "b": [1], "b_value": [2], "mean": 2.0,
         "count_b": 1, "total": 2, "head": 2, "low": 2},
        {"start": 1, "end": 4, "k": 1, "a": 0, "b": [1, 3], "b_value": [2, 5], "mean": 3.5,
         "count_b": 2, "total": 7, "head": 2, "low": 2},
        {"start": 1, "end": 4, "k": 1, "a": 0, "b": [3], "b_value": [5], "mean": 5.0,
         "count_b": 1, "total": 5, "head": 5, "low": 5},
    ]  # fmt: skip
    assert isinstance(rows[0]["mean"], float)
    # with a null element: avg/sum/min ignore it, count does not
    rows = run(q, events)
    row = next(r for r in rows if r["b"] == [1, 2, 3])
    assert row["b_value"] == [2, None, 5]
    assert row["mean"] == 3.5 and row["total"] == 7 and row["count_b"] == 3
    assert row["low"] == 2 and row["head"] == 2
    row = next(r for r in rows if r["b"] == [2])
    assert row["mean"] is None and row["total"] is None and row["count_b"] == 1


def test_return_singleton_expression_names():
    q = "PATTERN SEQ(A a) RETURN a.value, a.value * 2 AS twice, last(a.value)"
    rows = run(q, [ev(0, "A", 1, value=4)])
    assert rows == [{"start": 1, "end": 1, "a": 0, "a_value": 4, "twice": 8, "last_a_value": 4}]


def test_return_column_names_and_aggregates_with_nulls():
    q = (
        "PATTERN SEQ(A a, B+ b[]) WHERE [k] "
        "RETURN count(b), sum(b.v) / 2, count( b.v ), a.v*2, (a.v + 1), abs(a.v - 10), b.v, "
        "first(b.v), last(b.v), max(b.v)"
    )
    # key k: partition 1 is A0, B1, B2; partition 2 (B3) has no A
    events = [
        ev(0, "A", 1, k=1, v=4),
        ev(1, "B", 2, k=1, v=3),
        ev(2, "B", 3, k=1, v=None),
        ev(3, "B", 4, k=2, v=9),
    ]
    common = {"start": 1, "k": 1, "a": 0, "a_v_2": 8, "a_v_1": 5, "abs_a_v_10": 6}
    # order: [1] (end 2), then end 3: positions (0,1,2) before (0,2)
    assert run(q, events) == [
        {**common, "end": 2, "b": [1], "count_b": 1, "sum_b_v_2": 1.5, "count_b_v": 1,
         "b_v": [3], "first_b_v": 3, "last_b_v": 3, "max_b_v": 3},
        # count counts the null element, sum and max skip it, last takes it
        {**common, "end": 3, "b": [1, 2], "count_b": 2, "sum_b_v_2": 1.5, "count_b_v": 2,
         "b_v": [3, None], "first_b_v": 3, "last_b_v": None, "max_b_v": 3},
        # all null: sum and max are null
        {**common, "end": 3, "b": [2], "count_b": 1, "sum_b_v_2": None, "count_b_v": 1,
         "b_v": [None], "first_b_v": None, "last_b_v": None, "max_b_v": None},
    ]  # fmt: skip


def test_return_elements_of_one_kleene_with_aggregate_of_another():
    q = "PATTERN SEQ(A+ a[], B+ b[]) RETURN a.v - avg(b.v)"
    events = [ev(0, "A", 1, v=1), ev(1, "B", 2, v=4), ev(2, "B", 3, v=6)]
    rows = run(q, events)
    assert bound(rows, "b", "a_v_avg_b_v") == [([1], [-3.0]), ([1, 2], [-4.0]), ([2], [-5.0])]


def test_aggregates_in_where_count_nulls_first_last_take_them():
    events = [ev(0, "A", 1, v=None), ev(1, "A", 2, v=1), ev(2, "B", 3)]
    q = "PATTERN SEQ(A+ a[], B b) WHERE "
    assert bound(run(q + "count(a.v) = 2", events), "a") == [([0, 1],)]
    assert bound(run(q + "first(a.v) = 1", events), "a") == [([1],)]
    assert bound(run(q + "last(a.v) = 1", events), "a") == [([0, 1],), ([1],)]
    assert bound(run(q + "min(a.v) = 1", events), "a") == [([0, 1],), ([1],)]
    # [0]: max of all nulls is null, not > 0
    assert bound(run(q + "max(a.v) > 0", events), "a") == [([0, 1],), ([1],)]


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "PATTERN SEQ(A a, B+ b[]) WHERE b.v > avg(b.v)",  # element ref + aggregate of b
        "PATTERN SEQ(A a, !N n, !M m, B b) WHERE n.v = m.v",  # two negated variables
        "PATTERN SEQ(A+ a[], !N n, B b) WHERE n.v = a.v",  # Kleene element ref with n
        "PATTERN SEQ(!N n)",  # no positive component
        "PATTERN SEQ(A a, B b) WHERE c.v = 1",  # unknown variable
        "PATTERN SEQ(A a, B b) STRATEGY NOT_A_STRATEGY",
        "PATTERN SEQ(A a, B+ b[]) RETURN prev(b.v)",  # prev() in RETURN
        "PATTERN SEQ(A a, B+ b[]) RETURN b.v - prev(b.v)",
        "PATTERN SEQ(A a, B+ b[]) RETURN b.v - avg(b.v)",  # elements + aggregate of b
        "PATTERN SEQ(A+ a[], B+ b[]) RETURN a.v + b.v",  # elements of two Kleene variables
        "PATTERN SEQ(A a, B b) RETURN a AS x",  # bare variable with an alias
        "PATTERN SEQ(A a, B+ b[]) RETURN b AS ids",
        "PATTERN SEQ(A a, B b) ORDER BY ts, seq, v",  # two tie-break columns
        "PATTERN SEQ(A a, B b) ORDER BY seq",  # does not start with the time column
    ],
)
def test_errors(query):
    with pytest.raises(ValueError):
        run(query, [ev(0, "A", 1, v=1), ev(1, "B", 2, v=1)])


def test_equivalence_attribute_with_negation():
    q = "PATTERN SEQ(A a, !N n, B b) WHERE [k]"
    assert run(q, [ev(0, "A", 1, k=1), ev(1, "N", 2, k=1), ev(2, "B", 3, k=1)]) == []
    assert bound(run(q, [ev(0, "A", 1, k=1), ev(1, "N", 2, k=2), ev(2, "B", 3, k=1)]), "a") == [
        (0,)
    ]


@pytest.mark.parametrize("where", ["[k]", "a.k = b.k"])
def test_key_partitions_kleene_elements_in_skip_till_next(where):
    # key k either way: the A of partition 2 (event 1) is never eligible for the run of
    # partition 1, so the Kleene run of event 0 takes event 2 as its next element
    q = f"PATTERN SEQ(A+ a[], B b) WHERE {where} STRATEGY SKIP_TILL_NEXT_MATCH"
    events = [ev(0, "A", 1, k=1), ev(1, "A", 2, k=2), ev(2, "A", 3, k=1), ev(3, "B", 4, k=1)]
    assert bound(run(q, events), "a", "b", "k") == [([0, 2], 3, 1), ([0], 3, 1), ([2], 3, 1)]


def test_equivalence_attribute_with_a_single_component_partitions_the_kleene_elements():
    q = "PATTERN SEQ(A+ a[]) WHERE [k]"
    events = [ev(0, "A", 1, k=1), ev(1, "A", 2, k=2), ev(2, "A", 3, k=1), ev(3, "A", 4, k=None)]
    # rows ordered by key first: partition 1 ([0], then [0,2] and [2] ending at 3), then 2
    assert bound(run(q, events), "a", "k") == [([0], 1), ([0, 2], 1), ([2], 1), ([1], 2)]


def test_order_by_time_column_alone_is_allowed():
    q = "PATTERN SEQ(A a, B b) ORDER BY ts"
    assert run(q, [ev(0, "A", 5), ev(1, "B", 5)]) == []
    assert bound(run(q, [ev(0, "A", 5), ev(1, "B", 6)]), "a", "b") == [(0, 1)]
