"""The paper's running example (the Chemo relation, match-windows.md Fig. 1) through the
definitions, the pre-processing and the engines; the paper's slips, checked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from ses_oracle import ses_oracle

from sparkcep.plan import Options, analyze
from sparkcep.prep.match_windows import (
    MatchWindowScan,
    ScanEvent,
    SummaryStatistics,
    WindowConditions,
    filter_events,
    partition_attributes,
    window_ends,
)
from sparkcep.runners.local import execute_local

# Fig. 1: event, PID, L, V, T (day of July)
CHEMO = [
    (1, 1, "C", 1672.5, 3), (2, 1, "B", 7100, 4), (3, 1, "P", 111.5, 5), (4, 2, "B", 10100, 6),
    (5, 2, "P", 88, 8), (6, 2, "D", 84, 9), (7, 2, "C", 1320, 10), (8, 2, "P", 98, 11),
    (9, 1, "P", 116.5, 12), (10, 2, "P", 88, 15), (11, 1, "B", 3400, 17), (12, 2, "B", 4000, 18),
    (13, 2, "B", 4900, 19), (14, 1, "B", 3000, 22),
]  # fmt: skip
EVENTS = [{"id": e, "PID": pid, "L": label, "V": v, "T": t} for e, pid, label, v, t in CHEMO]
Q1 = """PATTERN SEQ({c, p+}, {b})
WHERE c.L = 'C' AND p.L = 'P' AND b.L = 'B'
  AND c.PID = p.PID AND p.PID = b.PID AND prev(p.V) < p.V
WITHIN 15 INCLUSIVE
SELECT """
BITS = {"C": 0b001, "P": 0b010, "B": 0b100}  # ē with c, p, b as bits 0, 1, 2
SETS = [[0, 1], [2]]  # B1 = {c, p}, B2 = {b}

# Example 4 as printed (8 matches) and the 3 that Definition 2 adds (notes §2.4).
PRINTED = {
    (1, (3,), 11), (1, (3, 9), 11), (7, (5,), 12), (7, (5,), 13),
    (7, (8,), 12), (7, (8,), 13), (7, (5, 8), 12), (7, (5, 8), 13),
}  # fmt: skip
MISSING = {(1, (9,), 11), (7, (10,), 12), (7, (10,), 13)}
EARLIEST_MAXIMAL = {(1, (3, 9), 11), (7, (5, 8), 12), (7, (8,), 12)}  # Example 5


def triples(rows) -> set:
    return {(r["c"], tuple(r["p"]), r["b"]) for r in rows}


def run(query: str, **options) -> pd.DataFrame:
    options = Options(time_col="T", type_col="L", id_col="id", **options)
    return execute_local(pd.DataFrame(EVENTS), query, options).matches


def test_definition_2_gives_11_matches_example_4_prints_8():
    matches = triples(ses_oracle(Q1 + "ALL", EVENTS, type_col="L", time_col="T"))
    assert len(matches) == 11
    assert matches > PRINTED and matches - PRINTED == MISSING


def test_earliest_and_maximal_matches_of_example_5():
    em = ses_oracle(Q1 + "EARLIEST MAXIMAL", EVENTS, type_col="L", time_col="T")
    assert triples(em) == EARLIEST_MAXIMAL
    # Example 5: the b/e13 variant is not earliest, p/<e5> is not maximal.
    assert (7, (5, 8), 13) not in triples(em) and (7, (5,), 12) not in triples(em)


@pytest.mark.parametrize("prune", ["none", "f", "fp", "fpc"])
@pytest.mark.parametrize("algorithm", ["ses", "jointree"])
def test_the_engines_on_chemo(prune, algorithm):
    all_rows = run(Q1 + "ALL", algorithm=algorithm, prune=prune)
    assert triples(all_rows.to_dict("records")) == PRINTED | MISSING
    if algorithm == "ses":
        em = run(Q1 + "EARLIEST MAXIMAL", algorithm=algorithm, prune=prune)
        assert triples(em.to_dict("records")) == EARLIEST_MAXIMAL
        assert em["start"].tolist() == [3, 8, 10] and em["end"].tolist() == [17, 18, 18]


def test_chemo_with_timestamps_and_a_window_in_days():
    frame = pd.DataFrame(EVENTS)
    frame["T"] = pd.Timestamp("2012-07-01") + pd.to_timedelta(frame["T"] - 1, unit="D")
    query = (Q1 + "EARLIEST MAXIMAL").replace("WITHIN 15 INCLUSIVE", "WITHIN 15 days INCLUSIVE")
    rows = execute_local(frame, query, Options(time_col="T", type_col="L", id_col="id")).matches
    assert triples(rows.to_dict("records")) == EARLIEST_MAXIMAL
    exclusive = query.replace(" INCLUSIVE", "")  # e1 -> e11 is 14 days, e5 -> e12 is 10
    rows = execute_local(frame, exclusive, Options(time_col="T", type_col="L", id_col="id"))
    assert triples(rows.matches.to_dict("records")) == EARLIEST_MAXIMAL


# ---- the pre-processing, example by example --------------------------------------------------


def chemo_arrays():
    ts = np.array([t for *_, t in CHEMO])
    mask = np.array([BITS.get(label, 0) for _, _, label, _, _ in CHEMO])
    return ts, mask


def test_example_6_windows_hold_12_events():
    ts, _ = chemo_arrays()
    ends = window_ends(ts, np.zeros(len(ts), np.int64), 15 + 1)  # 15 days inclusive
    assert ends[0] - 0 == 12 and ends[1] - 1 == 12  # W1 = e1..e12, W2 = e2..e13


def test_example_8_filtering_drops_e6_only():
    _, mask = chemo_arrays()
    assert [CHEMO[i][0] for i in np.flatnonzero(~filter_events(mask))] == [6]


def test_example_9_candidate_windows_without_partitioning():
    ts, mask = chemo_arrays()
    keep = filter_events(mask)
    ts, mask = ts[keep], mask[keep]
    ends = window_ends(ts, np.zeros(len(ts), np.int64), 16)
    assert ends[0] == 11  # W'1 = e1..e5, e7..e12: 11 events
    cond = WindowConditions(SETS)
    assert cond.candidates(mask, np.arange(len(ts)), np.array([0, 1]), ends[:2]).tolist() == [
        True,  # W'1: e1, e3, e11 satisfy c, p, b in order
        False,  # W'2 starts with e2, a B (condition 5)
    ]


def test_example_10_and_figure_5_statistics():
    patient1 = [BITS[label] for _, pid, label, _, _ in CHEMO if pid == 1][:5]  # e1 e2 e3 e9 e11
    stats = SummaryStatistics(SETS)
    rows = []
    for e in patient1:
        stats.enqueue(e)
        rows.append((tuple(stats.counts), len(stats) >= 3, stats.passes()))
    assert rows == [  # Fig. 5: S, condition (4), conditions (6)+(7) as Theorem 3 tests them
        ((1, 0, 0), False, False),
        ((1, 0, 0), False, False),
        ((1, 1, 0), True, False),  # Example 10: S(<e1, e2, e3>) = (1, 1, 0)
        ((1, 2, 0), True, False),
        ((1, 2, 1), True, True),
    ]
    stats.dequeue()  # e1 leaves: c drops to 0, which resets b (a later set)
    assert tuple(stats.counts) == (0, 2, 0) and not stats.passes()
    # The same test, for every prefix window at once (column (5): W[1] = e1 can bind c).
    cond = WindowConditions(SETS)
    mask = np.array(patient1)
    got = [
        bool(cond.candidates(mask[:k], np.arange(k), np.array([0]), np.array([k]))[0])
        for k in range(1, 6)
    ]
    assert got == [False, False, False, False, True]


def test_example_12_partition_attributes_and_the_missing_e4():
    plan = analyze(Q1 + "ALL")
    equalities = [
        (e.left.attr, e.left.var, e.right.var) for e in plan.key_conditions if e.op == "="
    ]
    assert partition_attributes(["c", "p", "b"], equalities) == ("PID",) == plan.key
    in_w1 = [e for (e, pid, label, _, t) in CHEMO if label != "D" and t <= 3 + 15 and pid == 2]
    assert in_w1 == [4, 5, 7, 8, 10, 12]  # the paper prints it without e4


def test_example_13_bit_vectors():
    assert WindowConditions(SETS).bbar() == [0b000, 0b011]  # b̄1 = 000, b̄2 = 110 (c p b)
    stats = SummaryStatistics(SETS)
    for e in (0b001, 0b100, 0b010):  # ē1 = 100, ē2 = 001, ē3 = 010 in the paper's c p b order
        stats.enqueue(e)
    assert stats.sbar == 0b100  # s̄ = 001 in the paper's order: only b's count is zero


# ---- Algorithm 1 and its slips --------------------------------------------------------------


def chemo_scan(**options) -> tuple[MatchWindowScan, list]:
    """Algorithm 1 on Chemo, with A = every match of Definition 2 that starts at W[1]."""

    def matcher(window: list[ScanEvent]) -> list:
        events = [e.payload for e in window]
        rows = ses_oracle(Q1 + "ALL", events, type_col="L", time_col="T")
        return [r for r in rows if min([r["c"], *r["p"], r["b"]]) == window[0].payload["id"]]

    scan = MatchWindowScan(SETS, 15, matcher, **options)
    stream = [ScanEvent(e["PID"], e["T"], BITS.get(e["L"], 0), e) for e in EVENTS]
    return scan, scan.run(stream)


def test_algorithm_1_with_the_definitions_finds_all_11():
    scan, rows = chemo_scan()
    assert triples(rows) == PRINTED | MISSING
    # A is called for three windows only: e1's (patient 1), e5's and e7's (patient 2).
    assert [payload["id"] for _, payload in scan.tested] == [1, 5, 7]


def test_algorithm_1_as_printed_loses_matches_in_its_flush():
    _, rows = chemo_scan(literal_flush=True)
    # The patient-2 window is flushed with e4 (a B) first: the loop stops at once.
    assert triples(rows) == {(1, (3,), 11), (1, (3, 9), 11), (1, (9,), 11)}


def test_decrementing_an_uncounted_counter():
    stats = SummaryStatistics(SETS, literal_dequeue=True)
    for e in (0b001, 0b100, 0b010, 0b010, 0b100):  # patient 1: e1 e2 e3 e9 e11
        stats.enqueue(e)
    stats.dequeue()  # e1: c -> 0, b reset to 0
    stats.dequeue()  # e2, a B never counted: the paper's rule takes b below zero
    assert stats.counts[2] == -1
    fixed = SummaryStatistics(SETS)
    for e in (0b001, 0b100, 0b010, 0b010, 0b100):
        fixed.enqueue(e)
    fixed.dequeue()
    fixed.dequeue()
    assert fixed.counts == [0, 2, 0]


def test_the_literal_decrement_hides_a_match():
    """⟨{a}, {b}⟩, τ = 10: a1@0 b1@1 a2@11 b2@12. When b1 leaves, the literal rule takes
    cnt_b to -1, b2 brings it back to 0, and the window ⟨a2, b2⟩ is never tried."""
    stream = [ScanEvent(0, t, bits, t) for t, bits in ((0, 1), (1, 2), (11, 1), (12, 2))]

    def heads(**options):
        scan = MatchWindowScan([[0], [1]], 10, lambda w: [w[0].payload], **options)
        return scan.run(stream)

    assert heads() == [0, 11]
    assert heads(literal_dequeue=True) == [0]


@st.composite
def masked_streams(draw):
    n_sets = draw(st.integers(1, 3))
    sets, bit = [], 0
    for _ in range(n_sets):
        size = draw(st.integers(1, 2))
        sets.append(list(range(bit, bit + size)))
        bit += size
    n = draw(st.integers(0, 14))
    ts = sorted(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)))
    masks = draw(st.lists(st.integers(0, (1 << bit) - 1), min_size=n, max_size=n))
    tau = draw(st.integers(0, 6))
    return sets, np.array(ts, dtype=np.int64), np.array(masks, dtype=np.int64), tau


@settings(max_examples=examples(200), deadline=None)
@given(masked_streams())
def test_every_window_at_once_is_never_weaker_than_algorithm_1(case):
    """WindowConditions' candidates are candidates of Algorithm 1's incremental test too
    (the incremental counters can only be stale towards passing)."""
    sets, ts, mask, tau = case
    scan = MatchWindowScan(sets, tau, lambda w: [])
    scan.run(ScanEvent(0, int(t), int(m), i) for i, (t, m) in enumerate(zip(ts, mask)))
    incremental = {payload for _, payload in scan.tested}
    keep = mask != 0
    pos = np.flatnonzero(keep)
    ts_f, mask_f = ts[keep], mask[keep]
    ends = window_ends(ts_f, np.zeros(len(ts_f), np.int64), tau + 1)
    order = np.unique(ts_f, return_inverse=True)[1] if len(ts_f) else np.zeros(0, np.int64)
    heads = np.arange(len(ts_f))
    ok = WindowConditions(sets).candidates(mask_f, order, heads, ends) if len(heads) else []
    vectorised = {int(pos[h]) for h in heads[np.asarray(ok, dtype=bool)]}
    assert vectorised <= incremental


def test_the_pre_processing_imports_no_engine():
    import ast as pyast
    from pathlib import Path

    import sparkcep.prep.match_windows as module

    tree = pyast.parse(Path(module.__file__).read_text())
    imported = [n.module for n in pyast.walk(tree) if isinstance(n, pyast.ImportFrom)]
    imported += [a.name for n in pyast.walk(tree) if isinstance(n, pyast.Import) for a in n.names]
    assert not [m for m in imported if m and m.startswith("sparkcep.engines")]
