"""SELECT ALL blow-ups behind match windows: the matches of a window are counted before
any is enumerated (engines/ses/count.py), and a window whose matches cannot fit stops
the run at once with one line. The count against the brute-force oracle (Definition 2)
and against the matcher's enumeration, window by window."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from helpers import engine_rows, examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from ses_oracle import ses_oracle
from strategies import events_frame as frame
from strategies import streams
from test_bad_inputs import sparkcep

import sparkcep.engines.ses.matcher as ses_matcher
from sparkcep import run_local
from sparkcep.budget import TooManyMatches
from sparkcep.engines.ses.count import MatchCounter
from sparkcep.engines.ses.jointree import JoinTreeMatcher
from sparkcep.engines.ses.matcher import SesMatcher, TooManyBindings
from sparkcep.engines.ses.program import BindingProgram

# One A, n B's at distinct instants, one C: 2^n - 1 matches from the A.
SPLIT = "PATTERN SEQ({A c, B+ p}, {C b}) WITHIN 1000 SELECT ALL"


def split_events(n: int, *, b_first: bool = False) -> pd.DataFrame:
    types = ["A", "C", *["B"] * n] if b_first else ["A", *["B"] * n, "C"]
    return pd.DataFrame({"ts": range(len(types)), "type": types, "k": 1})


@contextmanager
def calls(cls, name: str):
    """Counts the calls of cls.name (the enumeration) while the block runs."""
    seen = []
    original = getattr(cls, name)

    def spy(self, *args, **kwargs):
        seen.append(args)
        return original(self, *args, **kwargs)

    with mock.patch.object(cls, name, spy):
        yield seen


# ---- the count against the oracle and the enumeration ------------------------------------


@st.composite
def countable_queries(draw):
    """SELECT ALL event set patterns with no condition between events (what the counter
    answers): typed or untyped variables, v+, local conditions, a key, a window."""
    n_sets = draw(st.sampled_from([1, 2, 2, 3]))
    names = iter("abcd")
    sets, conds, plus = [], [], 0
    for _ in range(n_sets):
        items = []
        for _ in range(draw(st.integers(1, 2))):
            var = next(names, None)
            if var is None:
                break
            kind = draw(st.sampled_from(["A", "B", "C", ""]))
            is_plus = plus < 2 and draw(st.integers(0, 2)) > 0
            plus += is_plus
            items.append(f"{kind}{'+' if is_plus else ''} {var}" if kind else var + "+" * is_plus)
            if draw(st.integers(0, 3)) == 0:
                conds.append(f"{var}.v {draw(st.sampled_from(['<', '>', '!=']))} 2")
        if items:
            sets.append("{" + ", ".join(items) + "}")
    if draw(st.booleans()):
        conds.append("[k]")
    query = "PATTERN SEQ(" + ", ".join(sets) + ")"
    if conds:
        query += " WHERE " + " AND ".join(conds)
    if draw(st.integers(0, 5)) > 0:
        query += f" WITHIN {draw(st.integers(1, 8))}" + " INCLUSIVE" * draw(st.booleans())
    return query + " SELECT ALL"


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    events=streams(max_events=9, types="ABC"),
    query=countable_queries(),
    prune=st.sampled_from(["none", "f", "fpc"]),
)
def test_the_count_is_the_number_of_matches(events, query, prune):
    # (call, window head) -> what the counter and the matcher give; a program matches
    # the windows of a batch in a call, then those of the rest at the end
    counted: dict[tuple[int, int], tuple[int, int]] = {}
    enumerated: dict[tuple[int, int], list] = {}
    match_windows = BindingProgram.match_windows
    matches = SesMatcher.matches
    call = [0]

    def count_every_window(self, plan, frame_, table, heads, ends):
        call[0] += 1
        counter = MatchCounter(plan, table, self.key_codes(plan, frame_, table))
        for h in heads.tolist():
            counted[call[0], h] = counter.count(h, int(ends[h]))
        return match_windows(self, plan, frame_, table, heads, ends)

    def record(self, h, end, limit=None):
        enumerated[call[0], h] = matches(self, h, end, limit)
        return enumerated[call[0], h]

    with (
        mock.patch.object(BindingProgram, "match_windows", count_every_window),
        mock.patch.object(SesMatcher, "matches", record),
    ):
        rows = engine_rows(frame(events), query, algorithm="ses", prune=prune)
    expected = ses_oracle(query, events)
    assert MatchCounter.applies(_plan(query), "all")
    # window by window: the matcher's matches and the events they bind
    for h, got in enumerated.items():
        cells = sum(len(p) for b in got for p in b.values())
        assert counted[h] == (len(got), cells), (query, h)
    # in all: Definition 2's matches, each binding one event per plain variable and
    # its list's events per v+
    cells = sum(len(v) if isinstance(v, list) else 1 for r in expected for v in _bound(r, query))
    assert sum(n for n, _ in counted.values()) == len(expected) == len(rows), query
    assert sum(c for _, c in counted.values()) == cells, query
    longest = max((len(v) for r in expected for v in _bound(r, query) if isinstance(v, list)),
                  default=0)  # fmt: skip
    event(f"matches: {min(len(expected), 10)}{'+' * (len(expected) >= 10)}")
    event(f"longest v+ list: {longest}")


def _plan(query: str):
    from sparkcep.plan import analyze

    return analyze(query)


def _bound(row: dict, query: str) -> list:
    return [row[c.var] for c in _plan(query).positives]


def test_the_counter_applies_to_select_all_without_conditions_between_events():
    assert MatchCounter.applies(_plan(SPLIT), "all")
    assert not MatchCounter.applies(_plan(SPLIT), "earliest maximal")
    prev = "PATTERN SEQ({A c, B+ p}, {C b}) WHERE prev(p.v) < p.v SELECT ALL"
    across = "PATTERN SEQ({A c, B+ p}, {C b}) WHERE c.v < b.v SELECT ALL"
    assert not MatchCounter.applies(_plan(prev), "all")
    assert not MatchCounter.applies(_plan(across), "all")


def test_events_of_one_instant_bind_at_most_one_element_of_a_plus():
    # p+ takes events at increasing instants: 3 instants of 2 B's give 3^3 - 1 lists
    events = pd.DataFrame({"ts": [0, 1, 1, 2, 2, 3, 3, 4], "type": list("ABBBBBBC")})
    rows = run_local(events, SPLIT).matches
    assert len(rows) == 3**3 - 1
    n, _ = _count(events, SPLIT)
    assert n == len(rows)


def _count(events: pd.DataFrame, query: str) -> tuple[int, int]:
    got = []
    count = MatchCounter.count

    def spy(self, h, end):
        got.append(count(self, h, end))
        return got[-1]

    with (
        mock.patch.object(MatchCounter, "count", spy),
        mock.patch("sparkcep.engines.ses.program.COUNT_FROM", 1),
    ):
        run_local(events, query)
    return sum(n for n, _ in got), sum(c for _, c in got)


# ---- stopping before the enumeration -----------------------------------------------------


def test_a_window_beyond_the_budget_stops_before_any_match_is_enumerated():
    # 2^40 - 1 matches in one window: enumerating them would never end
    with calls(SesMatcher, "matches") as enumerated, pytest.raises(TooManyMatches) as error:
        run_local(split_events(40), SPLIT)
    assert enumerated == []
    line = str(error.value)
    assert "\n" not in line
    assert "alone has 1,099,511,627,775 matches (SELECT ALL)" in line
    assert "memory budget of 2.0 GB" in line
    for remedy in ("SELECT EARLIEST MAXIMAL", "smaller window", "a key", "--max-matches"):
        assert remedy in line


def test_the_count_is_checked_against_the_budget_given():
    # 2^14 - 1 = 16,383 matches (beyond COUNT_FROM) fit 2 GB, not 1 MB
    assert len(run_local(split_events(14), SPLIT).matches) == 2**14 - 1
    with calls(SesMatcher, "matches") as enumerated, pytest.raises(TooManyMatches) as error:
        run_local(split_events(14), SPLIT, memory_budget=2**20)
    assert enumerated == []
    assert "alone has 16,383 matches" in str(error.value)
    assert "memory budget of 1 MB" in str(error.value)
    assert "or raise --memory-budget" in str(error.value)


def test_a_window_beyond_the_step_limit_stops_before_any_match_is_enumerated(monkeypatch):
    monkeypatch.setattr(ses_matcher, "STEP_LIMIT", 2000)
    with calls(SesMatcher, "matches") as enumerated, pytest.raises(TooManyBindings) as error:
        run_local(split_events(14), SPLIT)
    assert enumerated == []
    assert "alone has 16,383 matches (SELECT ALL), more than the 2,000 partial matches" in str(
        error.value
    )
    # without the count, the enumeration gets there too, after 2,000 partial matches
    monkeypatch.setattr(BindingProgram, "count_first", False)
    with pytest.raises(TooManyBindings, match="more than 2,000 partial matches"):
        run_local(split_events(14), SPLIT)


def test_windows_that_fit_are_enumerated_as_before(monkeypatch):
    events = pd.concat([split_events(11).assign(k=k) for k in range(3)], ignore_index=True)
    query = SPLIT.replace("WITHIN", "WHERE [k] WITHIN")
    counted = run_local(events, query).matches
    monkeypatch.setattr(BindingProgram, "count_first", False)
    plain = run_local(events, query).matches
    assert len(counted) == 3 * (2**11 - 1)
    pd.testing.assert_frame_equal(counted, plain)


def test_max_matches_enumerates_a_huge_window_only_that_far():
    rows = run_local(split_events(60), SPLIT, max_matches=1000).matches
    assert len(rows) == 1000
    assert (rows["c"] == 0).all() and (rows["b"] == 61).all()
    lists = [tuple(p) for p in rows["p"]]
    assert len(set(lists)) == 1000
    assert all(list(p) == sorted(p) and p[0] >= 1 and p[-1] <= 60 for p in lists)


def test_the_join_tree_stops_before_building_its_tree():
    with calls(JoinTreeMatcher, "matches") as built, pytest.raises(TooManyMatches) as error:
        run_local(split_events(40), SPLIT, algorithm="jointree")
    assert built == []
    assert "alone has 1,099,511,627,775 matches" in str(error.value)
    assert "--algorithm ses" in str(error.value)


def test_the_join_tree_stops_on_a_closure_node_beyond_the_step_limit(monkeypatch):
    # no match (every B is after the C), but without the necessary conditions (prune f)
    # the tree is built for the A's window, with 2^14 - 1 lists of B's
    monkeypatch.setattr(ses_matcher, "STEP_LIMIT", 2000)
    events = split_events(14, b_first=True)
    assert len(run_local(events, SPLIT, prune="f").matches) == 0
    with calls(JoinTreeMatcher, "matches") as built, pytest.raises(TooManyBindings) as error:
        run_local(events, SPLIT, algorithm="jointree", prune="f")
    assert built == []
    assert "16,383 sequences of p+ (its closure node)" in str(error.value)
    monkeypatch.setattr(BindingProgram, "count_first", False)  # the tree gets there too
    with pytest.raises(TooManyBindings, match="more than 2,000 partial matches"):
        run_local(events, SPLIT, algorithm="jointree", prune="f")


def test_the_command_says_it_in_one_line(tmp_path, capsys):
    source = tmp_path / "events.csv"
    split_events(40).to_csv(source, index=False)
    code, _, err = sparkcep(capsys, "run", SPLIT, "-i", source, "-o", tmp_path / "m.jsonl",
                            "--local")  # fmt: skip
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: stopped before matching: the match window from 0 ")


HOSPITAL = Path(__file__).parent.parent.parent / "shared" / "data" / "medical" / "hospital.csv.gz"
ISSUE = (
    "PATTERN SEQ({c, p+}, {b}) WHERE [case_id] AND c.activity='vervolgconsult poliklinisch' "
    "AND p.activity='aanname laboratoriumonderzoek' AND b.activity='ordertarief' "
    "WITHIN 15 days INCLUSIVE SELECT ALL"
)


@pytest.mark.slow
@pytest.mark.skipif(not HOSPITAL.exists(), reason="the shared data is not here")
@pytest.mark.parametrize("algorithm", ["ses", "jointree"])
def test_the_hospital_blowup_is_one_line(tmp_path, capsys, algorithm):
    code, _, err = sparkcep(capsys, "run", ISSUE, "-i", HOSPITAL, "-o", tmp_path / "m.jsonl",
                            "--local", "--time", "timestamp", "--type", "activity",
                            "--algorithm", algorithm)  # fmt: skip
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: stopped before matching: the match window from ")
    assert "(case_id " in lines[0]


def test_counts_are_exact_python_integers_however_large():
    from sparkcep.prep.table import EventTable

    n = 200
    mask = np.array([0b001] + [0b010] * n + [0b100])  # c, n p's, b
    table = EventTable(np.arange(n + 2), np.arange(n + 2), np.zeros(n + 2, np.int64), mask)
    matches, cells = MatchCounter(_plan(SPLIT), table).count(0, n + 2)
    assert matches == 2**n - 1
    assert cells == 2 * matches + n * 2 ** (n - 1)
