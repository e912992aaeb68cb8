"""Episode rules (cbs-tree-episode-prediction.md): the engines against the brute-force
oracle, the CBS-Tree against a linear scan, the paper's examples, the language's errors
and the conformance suite for the three algorithms."""

from __future__ import annotations

import doctest
import importlib
import random

import pandas as pd
import pytest
from episode_oracle import OracleRule, events_in_order, min_latest, predicted_union, predictions
from episode_strategies import rule_files
from helpers import engine_rows, examples, normalize
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import events_frame, streams

from sparkcep import QueryError, run_local
from sparkcep.checks import check_engine, compile_one, random_events, yield_checks
from sparkcep.engines.episodes.tree import NOT_FOUND, REJECTED, CBSTree
from sparkcep.engines.registry import compile_jobs, engines
from sparkcep.errors import DataError
from sparkcep.plan import Options, analyze, plan_queries

ENGINES = engines()
ALGORITHMS = ("episodes", "tofel", "directmatch")
COLUMNS = ["query", "ids", "t_s", "t_e", "predict", "after", "before"]


def algorithm_rows(frame: pd.DataFrame, text: str, algorithm: str, key: str | None) -> list[tuple]:
    out = engine_rows(frame, text, algorithm=algorithm)
    cols = COLUMNS + ([key] if key else [])
    return sorted(tuple(normalize(row[c]) for c in cols) for _, row in out.iterrows())


def oracle_rows(events: list[dict], rules, key, tiebreak) -> list[tuple]:
    parts = [events] if key is None else [
        [e for e in events if e[key] == value] for value in sorted({e[key] for e in events})
    ]  # fmt: skip
    rows = []
    for part in parts:
        ordered = events_in_order(part, lambda r: r["type"], tiebreak)
        for row in predictions(rules, ordered):
            extra = (part[0][key],) if key else ()
            rows.append(tuple(normalize(row[c]) for c in COLUMNS) + extra)
    return sorted(rows)


# ---- the engines equal the oracle ---------------------------------------------------------


@settings(max_examples=examples(70), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams(max_events=11), rule_file=rule_files())
def test_every_algorithm_equals_the_oracle(stream, rule_file):
    text, rules, key, tiebreak = rule_file
    expected = oracle_rows(stream, rules, key, tiebreak)
    frame = events_frame(stream)
    for algorithm in ALGORITHMS:
        assert algorithm_rows(frame, text, algorithm, key) == expected, algorithm


@settings(max_examples=examples(40), deadline=None)
@given(
    stream=st.lists(st.tuples(st.sampled_from("ABC"), st.integers(0, 2)), min_size=1, max_size=14),
    rule_file=rule_files(max_rules=2),
)
def test_dense_streams_one_event_per_time(stream, rule_file):
    # Distinct times, as in the paper (ts = record number, gaps of 1 or 2): long runs of
    # rejected and non-minimal latest occurrences.
    text, rules, _, _ = rule_file
    text = text.replace(" WHERE [k]", "").replace(" ORDER BY ts, seq", "")
    ts, events = 0, []
    for i, (kind, gap) in enumerate(stream):
        ts += gap + 1
        events.append({"id": i, "type": kind, "ts": ts, "v": 0, "k": 0, "seq": 0})
    expected = oracle_rows(events, rules, None, None)
    frame = events_frame(events)
    for algorithm in ALGORITHMS:
        assert algorithm_rows(frame, text, algorithm, None) == expected, algorithm


@settings(max_examples=examples(40), deadline=None)
@given(stream=streams(max_events=10), rule_file=rule_files(max_rules=1))
def test_lemma_1_min_latest_predict_what_every_occurrence_predicts(stream, rule_file):
    from episode_oracle import occurrences

    _, (rule,), _, _ = rule_file
    events = events_in_order(stream, lambda r: r["type"])

    def predicted(occs):
        return predicted_union(
            [(max(e.ts for e in o), min(e.ts for e in o) + rule.rule_window) for o in occs]
        )

    assert predicted(min_latest(rule, events)) == predicted(occurrences(rule, events))


# ---- the CBS-Tree equals a linear scan -------------------------------------------------------


def _scan(symbols, e, lt, rt, rejected):
    for p in range(rt, lt - 1, -1):
        if symbols[p] == e:
            return REJECTED if p in rejected else p
    return NOT_FOUND


def test_tree_latest_instance_equals_a_linear_scan_for_every_case_and_wrap():
    rng = random.Random(7)
    for capacity in range(1, 12):
        tree, symbols = CBSTree(capacity), []
        for p in range(3 * capacity + 2):  # every wrap-around position of the newest leaf
            symbols.append(rng.choice([-1, 0, 1, 2]))
            tree.insert(p, symbols[-1])
            held = range(max(0, p - capacity + 1), p + 1)
            for lt in held:
                for rt in range(lt, p + 1):
                    rejected = set(rng.sample(list(held), min(2, len(held))))
                    for e in (0, 1, 2):
                        assert tree.find(e, lt, rt) == _scan(symbols, e, lt, rt, ())
                        assert tree.find(e, lt, rt, rejected) == _scan(symbols, e, lt, rt, rejected)


def test_tree_visits_at_most_two_root_to_leaf_paths():
    rng = random.Random(3)
    for capacity in (7, 8, 13, 64, 100):
        tree = CBSTree(capacity)
        visits = [0]
        tree.count_visits(visits)
        height, node = 0, tree.root
        while node > capacity:
            node, height = tree.lch[node], height + 1
        for p in range(3 * capacity):
            tree.insert(p, rng.choice([-1, 0, 1, 2, 3]))
            for _ in range(20):
                lt = rng.randint(max(0, p - capacity + 1), p)
                visits[0] = 0
                tree.find(rng.randrange(4), lt, rng.randint(lt, p))
                assert visits[0] <= 2 * (height + 1)


def test_figures_4_5_and_9_and_example_1():
    A, B, C, D = range(4)
    tree = CBSTree(7)
    for t, e in enumerate([A, B, A, C, D, C, B], start=1):
        tree.insert(t - 1, e)
    # Figure 4: node 8 is the parent of leaves 1 and 2; the root is node 14.
    assert tree.root == 14 and (tree.lch[8], tree.rch[8]) == (1, 2)
    assert tree.paper_sets(8) == ([A, B], [1, 2])
    assert tree.paper_sets(13) == ([B, C, D], [5, 6, 7])
    tree.insert(7, D)  # (D, 8) replaces (A, 1) in leaf 1 (Figure 5)
    assert tree.paper_sets(8) == ([B, D], [2, 8])
    assert tree.paper_sets(12) == ([A, B, C, D], [2, 3, 4, 8])
    # Example 1 (Figure 9): B within [2, 8] is (B, 7); the Case_4 text's C is 6, not 4.
    assert tree.find(B, 1, 7) + 1 == 7
    assert tree.find(C, 1, 7) + 1 == 6
    assert tree.find(A, 1, 7) + 1 == 3
    assert tree.find(D, 1, 6) + 1 == 5


# ---- the paper's examples and the traps ---------------------------------------------

TRAFFIC = """RULE congestion:
  EPISODE (W w, X x, Y y; w -> y, x -> y)
  WITHIN 10 min
  PREDICT Z WITHIN 15 min;"""


def _figure_3():
    # Figure 3 as far as the text gives it: X 8:00, W 8:02, X 8:03, Y 8:05, Y 8:07, and
    # readings that are none of W, X, Y in the other minutes.
    kinds = ["X", "Q", "W", "X", "Q", "Y", "Q", "Y"]
    times = pd.date_range("2006-01-02 08:00", periods=8, freq="min")
    return pd.DataFrame({"type": kinds, "ts": times, "id": range(8)})


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_traffic_rule_reports_o2_only(algorithm):
    out = run_local(_figure_3(), TRAFFIC, id_col="id", algorithm=algorithm).matches
    assert len(out) == 1  # O1 and O3 are not minimal (they enclose O2)
    row = out.iloc[0]
    assert row["query"] == "congestion" and row["vertices"] == ["w", "x", "y"]
    assert row["ids"] == [2, 3, 5]  # O2 = <(W, 8:02), (X, 8:03), (Y, 8:05)>
    assert row["t_s"] == pd.Timestamp("2006-01-02 08:02")
    assert row["t_e"] == pd.Timestamp("2006-01-02 08:05")
    # Z in (8:05, 8:17): the text's "(8:02, 8:17)" is a typo for (t_e, t_s + 15 min).
    assert row["after"] == pd.Timestamp("2006-01-02 08:05")
    assert row["before"] == pd.Timestamp("2006-01-02 08:17")


def test_the_traffic_rule_occurrences_by_the_oracle():
    frame = _figure_3()
    rule = OracleRule("congestion", ("W", "X", "Y"), ((0, 2), (1, 2)), 600, 900)
    rows = [{"id": i, "type": t, "ts": int(ts.value // 1000 // 1_000_000)} for i, t, ts in
            zip(frame["id"], frame["type"], frame["ts"])]  # fmt: skip
    events = events_in_order(rows, lambda r: r["type"])
    from episode_oracle import minimal, occurrences

    occs = {tuple(e.id for e in o) for o in occurrences(rule, events)}
    # O1, O2, O3 of the text, and <(X, 8:00), (W, 8:02), (Y, 8:07)>, which the text does
    # not list (7 minutes < 10: an occurrence by the definition; not minimal either).
    assert occs == {(2, 0, 5), (2, 3, 5), (2, 3, 7), (2, 0, 7)}
    assert {tuple(e.id for e in o) for o in minimal(occurrences(rule, events))} == {(2, 3, 5)}


ABC = "RULE abc: EPISODE (A a, B b, C c; a -> b, b -> c) WITHIN 8 PREDICT D WITHIN 8;"


def _abc_stream():
    # The trap: (A,1) (B,2) (X,3) (A,4) (B,5) (C,6) (X,7) (C,8).
    kinds = ["A", "B", "X", "A", "B", "C", "X", "C"]
    return pd.DataFrame({"type": kinds, "ts": range(1, 9), "id": range(8)})


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_rejection_stops_the_whole_retrieval(algorithm):
    out = run_local(_abc_stream(), ABC, id_col="id", algorithm=algorithm).matches
    # At 6: <(A,4), (B,5), (C,6)>. At 8 the latest occurrence <(A,4), (B,5), (C,8)>
    # encloses it: nothing, although <(A,1), (B,2), (C,8)> is an occurrence.
    assert out["ids"].tolist() == [[3, 4, 5]]


def test_algorithm_2_as_written_reports_a_non_minimal_occurrence():
    # With an 8-leaf tree over the stream, FindLatestEventOccurrence that treats a
    # rejected (B, 5) as "not found" goes on to (B, 2) and then (A, 1).
    A, B, C, X = range(4)
    tree = CBSTree(8)
    for p, e in enumerate([A, B, X, A, B, C, X, C]):
        tree.insert(p, e)
    rejected = {3, 4, 5}  # of <(A,4), (B,5), (C,6)>: the start, and B, C (nothing between)
    assert tree.find(C, 0, 7, rejected) == 7  # (C, 8) is not rejected
    assert tree.find(B, 0, 6, rejected) == REJECTED  # ours: stop
    assert tree.find(B, 0, 6, rejected, stop=False) == 1  # as written: (B, 2) ...
    assert tree.find(A, 0, 0, rejected, stop=False) == 0  # ... and (A, 1): not minimal


def test_the_window_is_exclusive():
    # t_e − t_s < ω (CBR's lt = rt − ω + 1), not §2.1's ≤.
    frame = pd.DataFrame({"type": ["A", "B", "A", "B"], "ts": [0, 3, 10, 12], "id": range(4)})
    rules = "RULE ab: EPISODE (A a, B b; a -> b) WITHIN 3 PREDICT C WITHIN 3;"
    assert run_local(frame, rules, id_col="id").matches["ids"].tolist() == [[2, 3]]


def test_unordered_vertices_may_share_an_instant_but_edges_may_not():
    frame = pd.DataFrame({"type": ["A", "B", "C", "C"], "ts": [1, 1, 1, 2], "id": range(4)})
    rules = (
        "RULE par: EPISODE (A a, B b) WITHIN 2 PREDICT Z WITHIN 2;"
        "RULE seq: EPISODE (A a, B b, C c; a -> c, b -> c) WITHIN 2 PREDICT Z WITHIN 3;"
    )
    out = run_local(frame, rules, id_col="id").matches
    assert sorted(map(tuple, out[["query", "t_s", "t_e"]].values.tolist())) == [
        ("par", 1, 1),
        ("seq", 1, 2),
    ]
    assert out.set_index("query").loc["seq", "ids"] == [0, 1, 3]


def test_symbol_expressions_and_partitions():
    frame = pd.DataFrame(
        {
            "sensor": ["a", "b", "a", "c", "b", "c"],
            "level": ["HI", "LO", "HI", "HI", "LO", "LO"],
            "road": [1, 1, 2, 1, 2, 2],
            "ts": [1, 2, 3, 4, 5, 6],
        }
    )
    rules = """RULE r: EPISODE ('a:HI' x, 'b:LO' y, 'c:HI' z; x -> z, y -> z)
      WHERE [road] SYMBOL concat(sensor, ':', level) WITHIN 5 PREDICT 'd:LO' WITHIN 9
      CONFIDENCE 0.75;"""
    out = run_local(frame, rules, type_col="sensor").matches
    assert out[["road", "ids", "predict", "confidence"]].values.tolist() == [
        [1, [0, 1, 3], "d:LO", 0.75]
    ]


def test_symbol_rules_need_no_type_column():
    """With SYMBOL the vertices' symbols come from other columns: the input needs no type
    column, and --type (the default 'type' here) need not name one."""
    frame = pd.DataFrame(
        {"sensor": ["a", "b", "a", "b"], "level": ["HI", "LO", "HI", "LO"], "ts": [1, 2, 5, 6]}
    )
    rules = """RULE r: EPISODE ('a:HI' x, 'b:LO' y; x -> y) SYMBOL concat(sensor, ':', level)
      WITHIN 3 PREDICT 'a:HI' WITHIN 5;"""
    out = run_local(frame, rules).matches
    assert out[["t_s", "t_e", "ids"]].values.tolist() == [[1, 2, [0, 1]], [5, 6, [2, 3]]]
    # so do mine-rules and evaluate-rules (a:HI at 5 falls in (2, 6), none in (6, 10))
    from sparkcep.runners.jobs.mining import MiningSettings, evaluate_rules, mine_rules

    report = evaluate_rules(rules, frame, Options())
    assert report[["predictions", "held"]].values.tolist() == [[2, 1]]
    symbol = "concat(sensor, ':', level)"
    settings = MiningSettings(window="3", rule_window="5", min_support=2, symbol=symbol)
    mined, _ = mine_rules(frame, settings, Options())
    assert (("a:HI", "b:LO"), "a:HI") in {(r.predicate, r.consequent) for r in mined}
    # a rule whose vertices are types still needs the type column
    with pytest.raises((QueryError, DataError), match="type column 'type' is not in the input"):
        run_local(frame, "RULE t: EPISODE (A a) WITHIN 3 PREDICT B WITHIN 3;")


def test_the_tie_warning_counts_only_ties_a_rule_orders():
    """Equal times matter to a rule only between symbols it puts in order (u -> ... -> v);
    the warning counts those events and says nothing of other ties."""
    rules = "RULE r: EPISODE (A a, B b, C c; a -> c, b -> c) WITHIN 5 PREDICT D WITHIN 5;"

    def warned(types, ts):
        frame = pd.DataFrame({"type": types, "ts": ts, "id": range(len(ts))})
        result = run_local(frame, rules, id_col="id")
        return [w for w in result.warnings if "share a time" in w]

    # A and B tied (no edge between them), X and D tied (in no rule's order): no warning
    assert warned(["A", "B", "X", "D", "C"], [1, 1, 2, 2, 3]) == []
    # A and C tied (a -> c): those two events; B and D elsewhere untied
    (warning,) = warned(["B", "A", "C", "D"], [0, 1, 1, 2])
    assert warning.startswith("2 events share a time")


def test_many_rules_of_one_partitioning_run_in_one_program():
    text = "\n".join(
        f"RULE r{i}: EPISODE (A a, B b; a -> b) WHERE [k] WITHIN {i + 1} PREDICT C WITHIN 40;"
        for i in range(40)
    )
    options = Options(id_col="id")
    plans, names = plan_queries(text, None, options)
    (program,) = compile_jobs(plans, names, options)
    assert len(program.rules) == 40 and program.rules.symbols == ["A", "B"]
    other = "RULE x: EPISODE (A a) WHERE [seq] WITHIN 2 PREDICT C WITHIN 2;"
    plans, names = plan_queries(text + other, None, options)
    assert len(compile_jobs(plans, names, options)) == 2  # another key: another program


def test_rules_of_one_predicate_report_as_each_rule_alone():
    # mine-rules writes one rule per consequent: CBR runs once per predicate and its
    # occurrences are each of its rules' rows; the rejected instances are shared too.
    frame = random_events(n=300, seed=7)
    bodies = [
        "EPISODE (A a, B b, C c; a -> c, b -> c) WHERE [k] WITHIN 6",
        "EPISODE (B b, C c) WHERE [k] WITHIN 4",
        "EPISODE (D d, A a; d -> a) WHERE [k] WITHIN 5",
    ]
    rules = [
        f"RULE p{i}_{c}: {body} PREDICT {c} WITHIN {7 + j} CONFIDENCE 0.{j + 5}"
        for j, c in enumerate("WXYZ")
        for i, body in enumerate(bodies)
    ]
    program = compile_one(";\n".join(rules), frame)
    assert len(program.rules) == 12 and len(program.rules.predicates) == 3
    for algorithm in ALGORITHMS:
        together = engine_rows(frame, ";\n".join(rules), algorithm=algorithm)
        alone = pd.concat([engine_rows(frame, rule, algorithm=algorithm) for rule in rules])
        alone = alone.sort_values(["query", "k", "t_e", "t_s"], kind="stable")
        assert len(together) > 100, algorithm
        pd.testing.assert_frame_equal(together, alone.reset_index(drop=True), obj=algorithm)


def test_the_tree_is_shared_the_queues_are_not():
    # Memory: the CBS-Tree's held events do not grow with the number of rules; ToFel's
    # queues do.
    frame = random_events(n=200, seed=4)
    held = {}
    for algorithm in ("episodes", "tofel"):
        for n_rules in (1, 30):
            text = "\n".join(
                f"RULE r{i}: EPISODE (A a, B b, C c; a -> c, b -> c) WITHIN {7 - i % 3}"
                " PREDICT D WITHIN 9;"
                for i in range(n_rules)
            )
            program = compile_one(text, frame, Options(id_col="id", algorithm=algorithm))
            state = program.new_state()
            program.process(state, program.in_order(frame))
            (seg,) = state.segments.values()
            kept = sum(len(q) for queues in seg.kept.values() for q in queues)
            held[algorithm, n_rules] = (seg.capacity, kept)
    assert held["episodes", 1] == held["episodes", 30]
    assert held["tofel", 30][1] > 10 * held["tofel", 1][1]


# ---- errors point at the query ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message", "where"),
    [
        ("EPISODE (A a, B b; a -> b, b -> a) WITHIN 3 PREDICT C WITHIN 3",
         "closes a cycle (b -> a -> b)", "b -> a"),
        ("EPISODE (A a, B b; a -> a) WITHIN 3 PREDICT C WITHIN 3", "closes a cycle", "a -> a"),
        ("EPISODE (A a, B b; a -> q) WITHIN 3 PREDICT C WITHIN 3",
         "'q' is not a vertex of the episode", "q"),
        ("EPISODE (A a, B b; a -> b) WITHIN 10 PREDICT C WITHIN 5",
         "rule window (PREDICT ... WITHIN) is shorter", "5"),
        ("EPISODE (A a, A b) WITHIN 3 PREDICT C WITHIN 3", "distinct events", "A b"),
        ("EPISODE (A a, B a) WITHIN 3 PREDICT C WITHIN 3", "used twice", "B a"),
        ("EPISODE (A a, B b) WHERE a.v > 1 WITHIN 3 PREDICT C WITHIN 3", "[attr] only",
         "a.v > 1"),
        ("EPISODE (A a) WITHIN 3 PREDICT C WITHIN 3 CONFIDENCE 1.5", "from 0 to 1", "1.5"),
        ("EPISODE (A a) PREDICT C WITHIN 3", "needs WITHIN", "EPISODE (A a)"),
        ("EPISODE (A a) WITHIN 3", "needs PREDICT", "EPISODE (A a)"),
        ("EPISODE (A a) SYMBOL a.v WITHIN 3 PREDICT C WITHIN 3", "own columns", "a.v"),
        ("EPISODE (A a) SYMBOL nope(v) WITHIN 3 PREDICT C WITHIN 3", "unknown function",
         "nope(v)"),
        ("EPISODE (A a) SYMBOL vv WITHIN 3 PREDICT C WITHIN 3", "not a column", "vv"),
        ("EPISODE (A a) SYMBOL v > 1 WITHIN 3 PREDICT C WITHIN 3", "not a condition", "v > 1"),
    ],
)  # fmt: skip
def test_positioned_errors(text, message, where):
    schema = {"type": "string", "ts": "int", "v": "float"}
    with pytest.raises(QueryError) as caught:
        analyze(text, schema)
    error = caught.value
    assert message in error.message
    line = text.splitlines()[error.line - 1]
    assert line[error.column - 1 :].startswith(where), (error.column, where)


def test_errors_in_a_rule_file_point_at_their_line():
    text = "RULE a: EPISODE (A a) WITHIN 3 PREDICT B WITHIN 3;\nRULE b: EPISODE (A x, B y; x -> z)\n  WITHIN 3 PREDICT C WITHIN 3;"
    with pytest.raises(QueryError) as caught:
        plan_queries(text, None, Options())
    assert "line 1, column 27" in str(caught.value) or "'z' is not a vertex" in str(caught.value)
    assert "'z' is not a vertex" in str(caught.value)


def test_pattern_clauses_are_not_rule_clauses():
    with pytest.raises(QueryError, match="unexpected"):
        analyze("EPISODE (A a) WITHIN 3 PREDICT C WITHIN 3 RETURN a.v")
    with pytest.raises(QueryError, match="unexpected"):
        analyze("PATTERN SEQ(A a, B b) WITHIN 3 PREDICT C WITHIN 3")


# ---- the conformance suite for each algorithm -----------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_conformance_suite_with_each_algorithm(algorithm):
    engine = ENGINES[algorithm]
    for query in ENGINES["episodes"].examples:
        for seed in range(2):
            events = random_events(seed=seed)
            program = compile_one(query, events, Options(id_col="id", algorithm=algorithm))
            assert program.algorithm == algorithm
            for check in yield_checks(engine):
                check(program, events)


def test_conformance_on_a_stream_with_timestamps():
    frame = random_events(n=60, seed=3)
    frame["ts"] = pd.Timestamp("2026-01-01") + pd.to_timedelta(frame["ts"], unit="min")
    check_engine(ENGINES["episodes"], events=frame, seeds=1)


def test_doctests_of_the_episode_modules():
    for name in ("__init__", "tree", "window", "cbr", "tofel", "rules", "symbols", "program"):
        module = importlib.import_module(
            "sparkcep.engines.episodes" + ("" if name == "__init__" else f".{name}")
        )
        failed, _ = doctest.testmod(module)
        assert failed == 0, name
    failed, _ = doctest.testmod(importlib.import_module("sparkcep.plan.episodes"))
    assert failed == 0


def test_explain_says_what_a_rule_file_runs():
    from sparkcep.explanation import explain_queries

    text = explain_queries(TRAFFIC)
    assert "engine      episodes" in text
    assert "(W w, X x, Y y; w -> y, x -> y)" in text and "predicts Z" in text
    assert "output      t_s, t_e, vertices, ids, predict, after, before" in text
    # the rule, not a SEQ pattern it is not, with its windows in the query's units
    assert "SEQ(" not in text
    assert "EPISODE (W w, X x, Y y; w -> y, x -> y) within 10 min" in text
    assert "(t_e, t_s + 15 min)" in " ".join(text.split())
