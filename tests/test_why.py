"""`why`: the near misses of a pattern query, checked against the brute-force oracle.

A near miss of depth k binds the first k positive components; from the definitions
(docs/semantics.md) it must be a match of the query cut after its k-th positive
component (the *prefix query*: those components, the negations between them, the
conjuncts that name no later component, the same window and strategy), and no match of
the prefix query of depth k + 1 may extend it (else it would have gone on). A near miss
of full depth is a match of the query without its negations at the start and end, and
not a match of the query. The deepest near miss reaches as far as the oracle's deepest
prefix match. Reasons are checked on hand-made cases.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import oracle_matches

import sparkcep
from sparkcep.errors import SparkcepError
from sparkcep.misses import COLUMNS
from sparkcep.plan import Options
from sparkcep.why_not import near_misses

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = ("SKIP_TILL_ANY_MATCH", "SKIP_TILL_NEXT_MATCH", "STRICT_CONTIGUITY")


@st.composite
def cases(draw):
    """(events, query parts): no Kleene closure; negations anywhere, with a window at
    the edges; conditions on one component, between two, and a negation's."""
    n = draw(st.integers(2, 4))
    comps = [{"var": "abcd"[i], "type": draw(st.sampled_from("ABC")), "neg": False,
              "kleene": draw(st.integers(0, 3)) == 0} for i in range(n)]  # fmt: skip
    for c in comps[1:-1] if n > 2 else []:
        c["neg"] = draw(st.integers(0, 3)) == 0
    if draw(st.integers(0, 5)) == 0:
        comps[-1]["neg"] = True
    if draw(st.integers(0, 7)) == 0:
        comps[0]["neg"] = True
    if all(c["neg"] for c in comps) or sum(not c["neg"] for c in comps) < 1:
        comps[0]["neg"] = False
    for c in comps:
        c["kleene"] = c["kleene"] and not c["neg"]
    positives = [c["var"] for c in comps if not c["neg"]]
    kleene = [c["var"] for c in comps if c["kleene"]]
    strategy = draw(st.sampled_from(STRATEGIES))
    conds = []  # (text, variables)
    for c in comps:
        if draw(st.integers(0, 3)) == 0:
            op = draw(st.sampled_from(["<", ">", "!=", "<="]))
            conds.append((f"{c['var']}.v {op} {draw(st.integers(0, 4))}", {c["var"]}))
    if len(positives) >= 2 and draw(st.booleans()):
        x, y = draw(st.permutations(positives))[:2]
        if not (x in kleene and y in kleene):  # (two Kleene element-wise: not generated)
            op = draw(st.sampled_from(["<", "<=", "=", "!="]))
            if strategy == "STRICT_CONTIGUITY" and op == "=":
                op = "<="  # (an equality may make a key of a prefix query, not of the query)
            conds.append((f"{x}.v {op} {y}.v", {x, y}))
    for var in kleene:
        if draw(st.booleans()):
            op = draw(st.sampled_from(["<", "<=", "!="]))
            conds.append((f"prev({var}.v) {op} {var}.v", {var}))
        if draw(st.integers(0, 2)) == 0:
            fn = draw(st.sampled_from(["sum", "max", "min", "count", "avg", "first", "last"]))
            arg = var if fn == "count" else f"{var}.v"
            op, bound = draw(st.sampled_from([("<", 6), (">=", 2), ("<=", 3)]))
            conds.append((f"{fn}({arg}) {op} {bound}", {var}))
    for c in comps:
        if c["neg"] and draw(st.booleans()):
            other = draw(st.sampled_from(positives))
            side = f"max({other}.v)" if other in kleene else f"{other}.v"
            op = "<=" if strategy == "STRICT_CONTIGUITY" else "="
            conds.append((f"{c['var']}.v {op} {side}", {c["var"]}))
    edge = comps[0]["neg"] or comps[-1]["neg"]
    window = draw(st.integers(1, 9)) if edge or draw(st.booleans()) else None
    parts = {
        "comps": comps,
        "conds": conds,
        "key": draw(st.booleans()),
        "strategy": strategy,
        "window": window,
    }
    events = [
        {"id": i, "type": draw(st.sampled_from("ABCD")), "ts": draw(st.integers(0, 9)),
         "v": draw(st.integers(0, 4)), "k": draw(st.integers(0, 1))}
        for i in range(draw(st.integers(0, 11)))
    ]  # fmt: skip
    return events, parts


def query_text(parts, depth: int | None = None, drop: set = frozenset()) -> str:
    """The query of `parts`, or its prefix query of `depth` positive components; without
    the negated components `drop`."""
    comps = [c for c in parts["comps"] if c["var"] not in drop]
    positives = [i for i, c in enumerate(comps) if not c["neg"]]
    if depth is not None:
        comps = comps[positives[0] : positives[depth - 1] + 1]  # the middle negations
        # a negation whose condition names a later component is decided only once that
        # one binds: not part of the prefix
        kept = {c["var"] for c in comps}
        comps = [c for c in comps if not c["neg"] or not any(
            c["var"] in used and any(f"{v}." in t for v in "abcd" if v not in kept)
            for t, used in parts["conds"])]  # fmt: skip
    names = {c["var"] for c in comps}
    text = "PATTERN SEQ(" + ", ".join(_component(c) for c in comps) + ")"
    conds = [t for t, used in parts["conds"] if used <= names]
    conds = [t for t in conds if all(f"{v}." not in t for v in "abcd" if v not in names)]
    if parts["key"]:
        conds.append("[k]")
    if conds:
        text += " WHERE " + " AND ".join(conds)
    text += f" STRATEGY {parts['strategy']}"
    if parts["window"] is not None:
        text += f" WITHIN {parts['window']}"
    return text


def _component(c: dict) -> str:
    if c["kleene"]:
        return f"{c['type']}+ {c['var']}[]"
    return ("!" if c["neg"] else "") + f"{c['type']} {c['var']}"


def ids(row: dict, variables) -> tuple:
    """The events a match binds to `variables`, a Kleene one's as a tuple."""
    return tuple(tuple(row[v]) if isinstance(row[v], list) else row[v] for v in variables)


def bound_ids(miss) -> dict:
    """var -> its event id (a tuple of ids for a Kleene component), from `ids` and
    the `bound` text of a near miss (in pattern order)."""
    out: dict = {}
    names = [part.split("=")[0] for part in miss.bound.split(", ") if "=" in part]
    kleene = {part.split("=")[0] for part in miss.bound.split(", ") if "=[" in part}
    events = iter(miss.ids)
    for var in dict.fromkeys(names):
        if var in kleene:
            count = miss.bound.split(f"{var}=[")[1].split("]")[0].count(" at ")
            out[var] = tuple(int(next(events)) for _ in range(count))
        else:
            out[var] = int(next(events))
    return out


OPTIONS = Options(id_col="id")


@settings(max_examples=300, deadline=None)
@given(cases())
def test_near_misses_are_real_partial_matches_that_cannot_go_on(case):
    events, parts = case
    if not events:
        return
    frame = pd.DataFrame(events)
    query = query_text(parts)
    positives = [c["var"] for c in parts["comps"] if not c["neg"]]
    misses = near_misses(frame, query, OPTIONS, near=1_000)
    by_id = {e["id"]: e for e in events}
    full = oracle_matches(query, events)
    prefix = {k: oracle_matches(query_text(parts, k), events)
              for k in range(1, len(positives) + 1)}  # fmt: skip
    for miss in misses.itertuples():
        chosen = bound_ids(miss) if miss.ids else {}
        bound = positives[: miss.depth]
        assert list(chosen)[: miss.depth] == bound and len(chosen) <= miss.depth + 1
        got = tuple(chosen[v] for v in bound)
        if not chosen:  # no first component in its key (the plan's: [k], or implied)
            key = [c for c in misses.columns if c not in COLUMNS]
            first = positives[0]

            def first_event(row, first=first):
                return by_id[row[first][0] if isinstance(row[first], list) else row[first]]

            same_key = [r for r in prefix[1]
                        if all(first_event(r)[c] == getattr(miss, c) for c in key)]  # fmt: skip
            assert not same_key, (query, miss.reason)
            continue
        if miss.depth and miss.depth < len(positives):
            assert got in {ids(r, bound) for r in prefix[miss.depth]}, (query, miss.bound)
        if miss.depth < len(positives):
            # no match of the next prefix goes on from it (with the elements it took of
            # the next component, when its aggregate failed on them)
            nxt = positives[miss.depth]
            taken = chosen.get(nxt, ())
            for row in prefix[miss.depth + 1]:
                elements = tuple(row[nxt]) if isinstance(row[nxt], list) else (row[nxt],)
                assert not (ids(row, bound) == got and elements[: len(taken)] == taken), (
                    query, miss.bound, miss.reason, row,
                )  # fmt: skip
        else:  # a negation forbade the whole binding: a match without the negations
            negated = {c["var"] for c in parts["comps"] if c["neg"]}
            assert miss.stopped_at in negated
            without = oracle_matches(query_text(parts, drop=negated), events)
            assert got in {ids(r, positives) for r in without}, (query, miss.reason)
            assert got not in {ids(r, positives) for r in full}, (query, miss.reason)
    if not full:
        deepest = max((k for k, rows in prefix.items() if rows), default=0)
        edge_killed = deepest == len(positives)
        top = int(misses["depth"].iloc[0]) if len(misses) else 0
        assert top == deepest or (edge_killed and not len(misses)), (query, misses)
    assert int(misses.attrs["summary"].split(", ")[1].split(" ")[0]) == len(full)


EVENTS = pd.DataFrame(
    {
        "id": [1, 2, 3, 4, 5, 6],
        "type": ["Start", "CPU", "CPU", "Finish", "Start", "CPU"],
        "ts": [0, 2, 4, 5, 20, 40],
        "task": [17, 0, 0, 18, 19, 0],
        "v": [0, 80, 97, 0, 0, 99],
    }
)


def reasons(query: str, **kw) -> list[str]:
    return list(near_misses(EVENTS, query, OPTIONS, **kw)["reason"])


def test_a_condition_says_the_values_it_compared():
    query = "PATTERN SEQ(Start a, CPU b, Finish c) WHERE a.task = c.task WITHIN 10"
    assert reasons(query, near=1) == [
        "a.task = c.task was false for Finish 4 at 5: 17 = 18 (the first Finish of 1 in the window)"
    ]


def test_the_window_says_how_far_past_it_the_next_candidate_came():
    query = "PATTERN SEQ(Start a, CPU b) WHERE b.v > 98 WITHIN 10"
    # the first Start's CPUs fail b.v > 98; the second's only CPU comes 10 after its window
    assert reasons(query) == [
        "b.v > 98 was false for CPU 2 at 2: 80 > 98 (the first CPU of 2 in the window)",
        "the window closed: the first CPU after it, CPU 6 at 40, 10 ticks after the window's end",
    ]


def test_a_negation_names_the_event_that_fired():
    query = "PATTERN SEQ(Start a, !CPU x, Finish c) WHERE x.v > 90 WITHIN 10"
    assert reasons(query, near=1) == [
        "the negation !x fired: CPU 3 at 4 between Start 1 at 0 and Finish 4 at 5 (the "
        "first Finish of 1 in the window)"
    ]


def test_a_kleene_component_says_which_elements_its_aggregate_failed_on():
    query = "PATTERN SEQ(Start a, CPU+ b[], Finish c) WHERE sum(b.v) > 200 AND prev(b.v) < b.v WITHIN 10"
    misses = near_misses(EVENTS, query, OPTIONS)
    assert list(misses["bound"])[:2] == [
        "a=Start 1 at 0, b=[CPU 2 at 2, CPU 3 at 4]",
        "a=Start 1 at 0, b=[CPU 3 at 4]",
    ]  # (b=[CPU 2] alone goes on: it takes CPU 3)
    assert list(misses["reason"])[:2] == [
        "sum(b.v) > 200 was false for b = [2, 3]: 177 > 200",
        "sum(b.v) > 200 was false for b = [3]: 97 > 200",
    ]
    assert list(misses["depth"]) == [1, 1, 1] and set(misses["stopped_at"]) == {"b"}


def test_strategies_and_missing_types_are_said():
    assert reasons("PATTERN SEQ(Start a, Stop b) WITHIN 10", near=1) == [
        "no Stop event after Start 1 at 0"
    ]
    strict = "PATTERN SEQ(Start a, Finish c) STRATEGY STRICT_CONTIGUITY WITHIN 10"
    assert reasons(strict, near=1) == ["strict contiguity: CPU 2 at 2 is not a Finish"]
    nxt = "PATTERN SEQ(Start a, CPU b, Finish c) WHERE b.v > 90 STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 4"
    assert reasons(nxt, near=1) == [
        "skip-till-next-match took CPU 3 at 4: CPU 3 at 4, at the window's end (WITHIN leaves "
        "its end out)"
    ]


def test_a_type_no_event_has_is_said_once_not_under_every_key():
    events = EVENTS.assign(node=["n1", "n1", "n2", "n1", "n2", "n2"])
    query = "PATTERN SEQ(Start a, Stopp s) WHERE [node] WITHIN 100"
    summary = near_misses(events, query, OPTIONS).attrs["summary"]
    assert summary.count("no event has the type 'Stopp'") == 1
    assert "its component never matches" in summary.splitlines()[-1]
    present = near_misses(events, "PATTERN SEQ(Start a, CPU b) WHERE [node] WITHIN 100", OPTIONS)
    assert "no event has the type" not in present.attrs["summary"]


def test_a_key_and_a_time_range_narrow_what_is_looked_at():
    events = EVENTS.assign(node=["n1", "n1", "n2", "n1", "n2", "n2"])
    query = "PATTERN SEQ(Start a, Finish c) WHERE [node] WITHIN 100"
    misses = near_misses(events, query, OPTIONS, key="n2")
    assert list(misses["node"]) == ["n2"] and list(misses["depth"]) == [1]
    assert misses.attrs["summary"].startswith("3 events in 1 key, 0 matches")
    rejected = pd.concat([events, pd.DataFrame([{"id": 9, "type": "Start", "node": "n2"}])])
    assert (
        near_misses(rejected, query, OPTIONS)
        .attrs["summary"]
        .endswith("; 1 row rejected (time, type or a cell unreadable), not looked at")
    )  # (a row without a time)
    assert len(near_misses(events, query, OPTIONS, key="n2", start=21)) == 1  # depth 0
    with pytest.raises(SparkcepError, match="not a query of this kind"):
        near_misses(events, "PATTERN SEQ(Start a, CPU b) WITHIN 10 AGG COUNT", OPTIONS)


@pytest.mark.spark
def test_a_spark_dataframe_gives_the_pandas_near_misses(spark):
    query = "PATTERN SEQ(Start a, CPU b, Finish c) WHERE a.task = c.task WITHIN 10"
    local = sparkcep.why(EVENTS, query, id_col="id")
    through_spark = sparkcep.why(spark.createDataFrame(EVENTS), query, id_col="id")
    assert through_spark.to_dict("records") == local.to_dict("records")
    assert list(local["depth"]) == [2, 2, 1]
    ticker = pd.read_csv(ROOT / "examples" / "ticker_v_shapes" / "events.csv")
    rows = (ROOT / "examples" / "ticker_v_shapes" / "query.cep").read_text()
    rows = rows.replace("UP+)", "UP UP UP)")
    by_key = sparkcep.why(spark.createDataFrame(ticker), rows, key="XYZ")
    assert by_key.to_dict("records") == sparkcep.why(ticker, rows, key="XYZ").to_dict("records")
    assert set(by_key["symbol"]) == {"XYZ"} and len(by_key)
    # without an id column, events are named by their row in the whole DataFrame
    events = EVENTS.drop(columns=["id"]).assign(node=["n1", "n2", "n2", "n1", "n1", "n2"])
    query = "PATTERN SEQ(Start a, CPU b) WHERE [node] AND b.v > 98 WITHIN 10"
    local = sparkcep.why(events, query, key="n2")
    assert local["ids"].tolist() == [[]] and "no Start event" in local.loc[0, "reason"]
    local = sparkcep.why(events, query, key="n1")
    assert local["ids"].tolist() == [[0], [4]]  # (its Starts: rows 0 and 4 of the frame)
    through_spark = sparkcep.why(spark.createDataFrame(events), query, key="n1")
    assert through_spark["ids"].tolist() == [[0], [4]]


def test_the_command_line_prints_the_near_misses(tmp_path):
    import subprocess

    EVENTS.to_csv(tmp_path / "events.csv", index=False)
    query = "PATTERN SEQ(Start a, CPU b, Finish c) WHERE a.task = c.task WITHIN 10"
    done = subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", "why", query, "--input", "events.csv",
         "--id", "id", "--near", "1"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "6 events in 1 partition, 0 matches, 4 partial matches explored",
        "",
        "2 of 3 bound: a=Start 1 at 0, b=CPU 2 at 2",
        "  c not bound: a.task = c.task was false for Finish 4 at 5: 17 = 18 (the first "
        "Finish of 1 in the window)",
    ]


def test_a_picture_of_the_near_misses(tmp_path):
    query = "PATTERN SEQ(Start a, CPU b, Finish c) WHERE a.task = c.task WITHIN 10"
    path = tmp_path / "why.png"
    misses = sparkcep.why(EVENTS, query, id_col="id", plot=str(path))
    assert len(misses) == 3
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


@settings(max_examples=150, deadline=None)
@given(cases())
def test_the_matches_explained_are_the_oracles_and_their_alternatives_too(case):
    """`match=ID`: the matches that start with event ID are exactly the oracle's; under
    skip-till-any-match (no Kleene closure, no negation) each event's `others` is the
    number of other events with which the match so far goes on (the oracle's matches of
    the next prefix query that extend it)."""
    events, parts = case
    if not events:
        return
    query = query_text(parts)
    positives = [c["var"] for c in parts["comps"] if not c["neg"]]
    full = oracle_matches(query, events)
    frame = pd.DataFrame(events)
    for start in {_first_id(row, positives[0]) for row in full}:
        explained = near_misses(frame, query, OPTIONS, match=start)
        events_of = explained[explained["var"] != ""]
        got = {
            tuple(int(e.split(" ")[1]) for e in rows["event"])
            for _, rows in events_of.groupby("match")
        }
        want = {_flat(row, positives) for row in full if _first_id(row, positives[0]) == start}
        assert got == want, (query, start)
        simple = not any(c["kleene"] or c["neg"] for c in parts["comps"])
        if simple and parts["strategy"] == "SKIP_TILL_ANY_MATCH":
            prefix = {k: oracle_matches(query_text(parts, k), events)
                      for k in range(1, len(positives) + 1)}  # fmt: skip
            for _, rows in events_of.groupby("match"):
                chosen = [int(e.split(" ")[1]) for e in rows["event"]]
                for j in range(1, len(chosen)):
                    goes_on = {row[positives[j]] for row in prefix[j + 1]
                               if ids(row, positives[:j]) == tuple(chosen[:j])}  # fmt: skip
                    assert rows["others"].iloc[j] == len(goes_on) - 1, (query, chosen, j)


def _first_id(row: dict, var: str) -> int:
    return row[var][0] if isinstance(row[var], list) else row[var]


def _flat(row: dict, positives: list[str]) -> tuple:
    return tuple(e for v in positives for e in (row[v] if isinstance(row[v], list) else [row[v]]))


def test_why_a_match_took_its_events():
    query = "PATTERN SEQ(Start a, CPU b, Finish c) STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 10"
    explained = near_misses(EVENTS, query, OPTIONS, match=1)
    assert explained.attrs["summary"] == "1 match starts with event 1"
    assert list(explained["why"]) == [
        "the match's first event",
        "skip-till-next-match: the first CPU after Start 1 at 0 that fits; 1 later one would "
        "have fitted too",
        "skip-till-next-match: the first Finish after CPU 2 at 2 that fits",
        "the window: its last event came 5 ticks before the window's end",
    ]


# ---- MATCH_RECOGNIZE ------------------------------------------------------------------------


def _every_row_shown(query: str, measures: str) -> str:
    """`query` with ALL ROWS PER MATCH SHOW EMPTY MATCHES, whatever its ROWS PER MATCH,
    and `measures` first among its MEASURES."""
    for rows in ("ONE ROW PER MATCH", "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
                 "ALL ROWS PER MATCH OMIT EMPTY MATCHES", "ALL ROWS PER MATCH SHOW EMPTY MATCHES",
                 "ALL ROWS PER MATCH"):  # fmt: skip
        query = query.replace(rows, "@ROWS@")
    query = query.replace("@ROWS@", "ALL ROWS PER MATCH SHOW EMPTY MATCHES")
    if "MEASURES" in query:
        return query.replace("MEASURES ", f"MEASURES {measures}, ", 1)
    return query.replace("ALL ROWS PER MATCH", f"MEASURES {measures} ALL ROWS PER MATCH", 1)


@st.composite
def row_pattern_cases(draw):
    """A random MATCH_RECOGNIZE query whose every row starts an attempt (SKIP TO NEXT
    ROW) and whose matches each show their rows, empty ones too (their start row)."""
    from mr_strategies import mr_queries
    from strategies import streams

    query = draw(mr_queries(allow_runtime_errors=False))
    query = query.replace("AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO NEXT ROW")
    return draw(streams(max_events=8)), _every_row_shown(query, "MATCH_NUMBER() AS mno_")


@settings(max_examples=80, deadline=None)
@given(row_pattern_cases())
def test_row_pattern_near_misses_start_where_no_match_does(case):
    """Every row starts an attempt (SKIP TO NEXT ROW): as many attempts fail (near
    misses, all of them) as there are rows no match of the oracle starts at."""
    from mr_oracle import SkipFailure, oracle_match_recognize
    from strategies import events_frame

    events, query = case
    if "{-" in query:  # (an exclusion hides a match's rows, its start among them)
        return
    try:
        expected = oracle_match_recognize(events, query)
    except SkipFailure:
        return
    frame = events_frame(events)
    order = "seq" if "ORDER BY ts, seq" in query else None
    starts: dict = {}
    partitioned = "PARTITION BY k" in query
    for row in expected:  # (MATCH_NUMBER counts within a partition)
        starts.setdefault((row["k"] if partitioned else None, row["mno_"]), []).append(row["id"])
    matched = {ids[0] for ids in starts.values()}  # (rows in match order: the first starts it)
    misses = near_misses(frame, query, Options(id_col="id"), near=10_000)
    # the start row of each near miss, by the time (and tie-break) it names
    assert misses.attrs["summary"].split(";")[0].endswith(f"{len(misses):,} did not")
    attempted = len(frame.dropna(subset=["k"])) if partitioned else len(frame)
    assert len(misses) == attempted - len(matched), (query, misses, matched, order)


def test_a_row_pattern_s_time_range_is_as_if_the_input_held_only_those_rows():
    rows = pd.DataFrame({"t": range(8), "price": [5, 4, 3, 3, 2, 9, 8, 10]})
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t MEASURES A.price AS p "
        "PATTERN (A B+ C) DEFINE B AS price < PREV(price), C AS price > PREV(price))"
    )
    ranged = sparkcep.why(rows, query, start=1, end=4)
    alone = sparkcep.why(rows[(rows.t >= 1) & (rows.t <= 4)], query)
    assert ranged["bound"].tolist() == alone["bound"].tolist()
    assert ranged["depth"].tolist() == [2, 2, 1, 1]  # rows 1..4: attempts from 1, 2, 3, 4
    # the attempt from t=2 (3, 3: B fails at t=3); from t=3 (B wants t=4 < 3: true, then
    # the range ends)
    assert ranged.loc[1, "reason"] == "the rows looked at end after row t=4"
    assert "the rows looked at end" not in alone.loc[1, "reason"]  # (its partition ends)


@st.composite
def row_pattern_matches(draw):
    """A random MATCH_RECOGNIZE query (its own AFTER MATCH SKIP) whose matches show
    each row with its variable and the match's number."""
    from mr_strategies import mr_queries
    from strategies import streams

    query = draw(mr_queries(allow_runtime_errors=False))
    extra = "MATCH_NUMBER() AS mno_, CLASSIFIER() AS cls_"
    return draw(streams(max_events=8)), _every_row_shown(query, extra)


@settings(max_examples=80, deadline=None)
@given(row_pattern_matches())
def test_a_row_pattern_match_explained_is_the_oracle_s(case):
    """Each match of the oracle, asked for by its first row: the same number and the
    same variable on each row; a row no match starts at says so."""
    from mr_oracle import SkipFailure, oracle_match_recognize
    from strategies import events_frame

    events, query = case
    if "{-" in query:  # (an exclusion hides a match's rows)
        return
    try:
        expected = oracle_match_recognize(events, query)
    except SkipFailure:
        return
    frame = events_frame(events)
    partitioned = "PARTITION BY k" in query
    matches: dict = {}
    for row in expected:
        key = (row["k"] if partitioned else None, row["mno_"])
        matches.setdefault(key, []).append(row)
    starts = {}
    for (_k, mno), rows in matches.items():
        if rows[0]["cls_"] is None:
            continue  # (an empty match: no row of its own)
        starts[rows[0]["id"]] = (mno, [r["cls_"] for r in rows])
    for event_id in frame["id"]:
        try:
            explained = near_misses(frame, query, Options(id_col="id"), match=event_id)
        except SparkcepError as e:  # (a row left out: no PARTITION BY value)
            assert "no row has the id" in str(e)
            continue
        if event_id in starts:
            mno, variables = starts[event_id]
            assert list(explained["var"])[:-1] == variables, (query, explained)
            assert set(explained["match"]) == {mno}
            assert (
                explained["var"].iloc[-1] == "" and "AFTER MATCH SKIP" in explained["why"].iloc[-1]
            )
        else:
            assert len(explained) == 1 and explained["why"][0].startswith("no match starts here")


def test_why_a_row_pattern_match_took_its_rows():
    rows = pd.DataFrame({"t": range(8), "price": [5, 4, 3, 3, 2, 9, 8, 10]})
    query = (
        "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY t MEASURES A.price AS p "
        "PATTERN (A B+ C) DEFINE B AS price < PREV(price), C AS price > PREV(price))"
    )
    explained = sparkcep.why(rows, query, match=3)  # (no id column: the row number)
    assert explained["why"].tolist() == [
        "no DEFINE: any row",
        "price < PREV(price): 2 < 3 held",
        "price > PREV(price): 9 > 2 held",
        "the pattern ends with C at row t=5; AFTER MATCH SKIP (past last) goes on at row t=6",
    ]
    inside = sparkcep.why(rows, query, match=4)
    assert inside["why"][0] == (
        "no match starts here: the row lies inside match 1 (row t=3 to row t=5), and AFTER "
        "MATCH SKIP (past last) goes on after it"
    )
    longer = query.replace("(A B+ C)", "(A B+)").replace(", C AS price > PREV(price)", "")
    explained = sparkcep.why(rows, longer, match=0)  # B+ takes 4, 3, then 3 is not < 3
    assert explained["var"].tolist() == ["A", "B", "B", ""]
    assert (
        explained["why"]
        .iloc[-1]
        .startswith("it takes no further row: row t=3: B (price < PREV(price)) was false: 3 < 3")
    )
    with pytest.raises(SparkcepError, match="no row has the id 99"):
        sparkcep.why(rows, query, match=99)
