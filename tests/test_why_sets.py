"""`why` on event set patterns (`SEQ({c, p+}, {b})`, match-windows.md), checked against a
brute-force oracle of partial matches written here from the paper's Definition 2.

A partial match binds the variables of the first sets and some of the next one: each
plain variable one event, each `v+` one or more in time order, no event twice, every
event of a set before every event of the next, within the window, in one key, and every
condition naming only bound variables true. The oracle enumerates them all (every
subset of the next set, every sequence of a `v+`). Each near miss must be one, no
partial match with one more variable may extend it, its reason must be true of the
events, and with no match the deepest near miss is as deep as the deepest partial match.
"""

from __future__ import annotations

import re
import sys
from itertools import combinations, pairwise
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle import _holds, _Query
from ses_oracle import _sets, ses_oracle
from ses_strategies import ses_queries
from strategies import events_frame, streams

from sparkcep.errors import SparkcepError
from sparkcep.language import ast
from sparkcep.language.ast import bare_text
from sparkcep.misses import COLUMNS
from sparkcep.plan import Options
from sparkcep.why_not import near_misses

OPTIONS = Options(id_col="id")


# ---- the oracle: every partial match ------------------------------------------------------


class PartialMatches:
    """Every partial match of an event set pattern over `events` (dicts with id, type,
    ts, v, k, seq), by the variables it binds: frozenset -> [{var: (ids, ...)}]."""

    def __init__(self, text: str, events: list[dict]):
        q = _Query(text, "ts")
        self.q = q
        self.sets = [[c.var for c in s] for s in _sets(q.query.components)]
        self.comps = {c.var: c for c in q.query.components}
        self.order = [v for s in self.sets for v in s]
        within = q.query.within
        self.window = None if within is None else within.amount
        self.inclusive = q.query.inclusive
        self.tie = lambda e: tuple((0,) if e.get(c) is None else (1, e.get(c)) for c in q.tiebreak)
        self.events = sorted(events, key=lambda e: (e["ts"], self.tie(e), e["id"]))
        self.by_id = {e["id"]: e for e in events}
        self.properties = {
            v: [
                c
                for c in q.positive_conjuncts
                if c.mentioned == {v} and not c.agg_vars and not c.prev_vars
            ]
            for v in self.order
        }
        self.pool = {v: [e for e in self.events if self.fits(v, e)] for v in self.order}
        self.found: dict[frozenset, list[dict]] = {}
        for bound in self.prefixes():
            self.found[bound] = list(self.substitutions(bound))

    def key(self, e) -> tuple:
        return tuple(e.get(a) for a in self.q.key)

    def prec(self, e, f) -> bool:
        return (e["ts"], self.tie(e)) < (f["ts"], self.tie(f))

    def fits(self, var, e) -> bool:
        """The variable's type and its properties (the conditions on it alone)."""
        comp = self.comps[var]
        if comp.event_type is not None and e["type"] != comp.event_type:
            return False
        return all(_holds(c, {var: [e]}) for c in self.properties[var])

    def prefixes(self):
        """The variables a partial match may bind: the first sets and some of the next."""
        yield frozenset()
        done: list[str] = []
        for members in self.sets:
            for n in range(1, len(members) + 1):
                for some in combinations(members, n):
                    yield frozenset(done + list(some))
            done += members

    def next_vars(self, bound) -> list[str]:
        for members in self.sets:
            rest = [v for v in members if v not in bound]
            if rest:
                return rest
        return []

    def in_window(self, times) -> bool:
        if self.window is None:
            return True
        span = max(times) - min(times)
        return span <= self.window if self.inclusive else span < self.window

    def substitutions(self, bound):
        variables = [v for v in self.order if v in bound]
        options = {}
        for v in variables:
            pool = self.pool[v]
            if self.comps[v].kleene:
                options[v] = [
                    seq
                    for n in range(1, len(pool) + 1)
                    for seq in combinations(pool, n)
                    if all(self.prec(x, y) for x, y in pairwise(seq))
                ]
            else:
                options[v] = [(e,) for e in pool]

        def choose(i, binding, used):
            if i == len(variables):
                if self.is_partial_match(binding):
                    yield {v: tuple(e["id"] for e in seq) for v, seq in binding.items()}
                return
            for seq in options[variables[i]]:
                ids = {e["id"] for e in seq}
                if ids & used:
                    continue
                binding[variables[i]] = seq
                yield from choose(i + 1, binding, used | ids)
                del binding[variables[i]]

        yield from choose(0, {}, set())

    def is_partial_match(self, binding) -> bool:
        flat = [e for seq in binding.values() for e in seq]
        if not flat:
            return True
        if not self.in_window([e["ts"] for e in flat]):
            return False
        keys = {self.key(e) for e in flat}
        if len(keys) != 1 or any(x is None for x in next(iter(keys))):
            return False
        bound_sets = [[e for v in s if v in binding for e in binding[v]] for s in self.sets]
        for before, after in pairwise(bound_sets):
            if not all(self.prec(x, y) for x in before for y in after):
                return False
        lists = {v: list(seq) for v, seq in binding.items()}
        return all(_holds(c, lists) for c in self.q.positive_conjuncts if c.mentioned <= set(lists))

    def goes_on(self, binding: dict) -> bool:
        """Some partial match with one more variable extends it."""
        bound = frozenset(binding)
        for v in self.next_vars(bound):
            for other in self.found.get(bound | {v}, []):
                if all(other[u] == binding[u] for u in bound):
                    return True
        return False

    def deepest(self) -> int:
        return max(len(b) for b, found in self.found.items() if found)

    def conjunct(self, text: str):
        """The oracle's conjunct written `text` (as the reason shows it)."""
        for c in self.q.positive_conjuncts:
            if bare_text(ast.to_text(c.expr)) == text:
                return c
        raise AssertionError(f"no condition {text!r}")


# ---- reading a near miss --------------------------------------------------------------------

EVENT = r"(?P<type>\w+|event) (?P<id>\d+) at (?P<t>-?\d+)"


def bound_of(miss) -> dict:
    """var -> ids, from the `bound` text `{a=A 1 at 0, b=[B 2 at 1, B 3 at 4]}, {c=?}`."""
    out = {}
    for var, items in re.findall(r"(\w+)=(\[[^\]]*\]|[^,{}]+? at -?\d+)", miss.bound):
        out[var] = tuple(int(i) for i in re.findall(r" (\d+) at ", " " + items))
    return out


def check_reason(oracle: PartialMatches, binding: dict, var: str, reason: str) -> None:
    """The reason said for `var` is true of the events."""
    used = {i for ids in binding.values() for i in ids}
    events = [oracle.by_id[i] for i in used]
    key = {oracle.key(e) for e in events}
    pool = [e for e in oracle.pool[var] if e["id"] not in used and oracle.key(e) in key]
    s = next(n for n, members in enumerate(oracle.sets) if var in members)
    before = [oracle.by_id[i] for u in oracle.sets[s - 1] for i in binding[u]] if s else []
    after = [e for e in pool if all(oracle.prec(b, e) for b in before)]
    written = oracle.window
    if reason.startswith("no "):
        m = re.search(r" after " + EVENT, reason.split(";")[0])
        if m:  # none after the previous set's last event
            last = max(before, key=lambda e: (e["ts"], oracle.tie(e), e["id"]))
            assert int(m["id"]) == last["id"], reason
        assert not after, (reason, after)
        return
    times = [e["ts"] for e in events]
    if reason.startswith("the window"):  # every candidate out of the window
        assert not any(oracle.in_window([*times, e["ts"]]) for e in after), reason
    m = re.search(EVENT + r", (?:(?P<n>\d+) ticks? (?P<side>after|before)|at the window)", reason)
    if reason.startswith("the window closed"):
        e = oracle.by_id[int(m["id"])]
        assert e in after and e["ts"] == min(x["ts"] for x in after if x["ts"] >= min(times))
        assert e["ts"] - min(times) - written == int(m["n"] or 0), reason
        return
    if reason.startswith("the window:"):
        e = oracle.by_id[int(m["id"])]
        assert e in after and e["ts"] == max(x["ts"] for x in after if x["ts"] <= max(times))
        assert max(times) - written - e["ts"] == int(m["n"] or 0), reason
        return
    m = re.fullmatch(
        r"(?P<cond>.+) was false for (?:" + EVENT + r"|\w+ = \[[\d, ]+\])(?: with .*)?"
        r": (?P<left>\S+) (?P<op>\S+) (?P<right>\S+) \(the first (?P<kind>.+) of (?P<n>\d+) in "
        r"the window\)",
        reason,
    )
    assert m, reason
    inside = [e for e in after if oracle.in_window([*times, e["ts"]])]
    assert int(m["n"]) == len(inside) and inside, reason
    first = inside[0]
    if m["id"] is not None:
        assert int(m["id"]) == first["id"], reason
    lists = {u: [oracle.by_id[i] for i in ids] for u, ids in binding.items()}
    lists[var] = [first]
    assert not _holds(oracle.conjunct(m["cond"]), lists), reason  # (false, as said)
    left, right = (None if x == "null" else float(x) for x in (m["left"], m["right"]))
    if left is not None and right is not None and m["op"] in OPS:
        assert not OPS[m["op"]](left, right), reason


OPS = {
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "=": lambda a, b: a == b, "!=": lambda a, b: a != b,
}  # fmt: skip


@st.composite
def set_cases(draw, types: str = "ABCD"):
    """A random event set pattern (no RETURN: it changes nothing here), most with a
    condition between two variables (one of them aggregated, now and then), and a stream."""
    query = draw(ses_queries(max_vars=4)).split(" RETURN ")[0]
    seq_end = query.index(")") + 1
    variables = re.findall(r"(\w)\+?[,}]", query[:seq_end])
    plus = re.findall(r"(\w)\+[,}]", query[:seq_end])
    if len(variables) >= 2 and draw(st.integers(0, 2)) > 0:
        x, y = draw(st.permutations(variables))[:2]
        left = f"{x}.v"
        if x in plus and draw(st.booleans()):
            left = draw(st.sampled_from([f"sum({x}.v)", f"max({x}.v)", f"count({x})"]))
        cond = f"{left} {draw(st.sampled_from(['<', '<=', '=', '!=', '>']))} {y}.v"
        rest = query[seq_end:]
        if rest.startswith(" WHERE "):
            rest = f" WHERE {cond} AND " + rest.removeprefix(" WHERE ")
        else:
            rest = f" WHERE {cond}" + rest
        query = query[:seq_end] + rest
    return query, draw(streams(max_events=7, types=types))


def small_enough(query: str, events: list[dict]) -> bool:
    """The oracle enumerates every sequence of a `v+`: keep to few candidates."""
    plus = query.count("+")
    return len(events) <= (7 if plus <= 1 else 5)


@settings(max_examples=500, deadline=None)
@given(set_cases())
def test_near_misses_are_partial_matches_that_cannot_go_on(case):
    query, events = case
    if not events or not small_enough(query, events):
        return
    oracle = PartialMatches(query, events)
    misses = near_misses(events_frame(events), query, OPTIONS, near=1_000)
    every = oracle.found[frozenset(oracle.order)]
    key = [c for c in misses.columns if c not in COLUMNS]
    for miss in misses.itertuples():
        binding = bound_of(miss)
        bound = frozenset(binding)
        if not binding:  # nothing starts a partial match in its key
            value = tuple(getattr(miss, c) for c in key)
            firsts = [
                oracle.by_id[i]
                for found in oracle.found.values()
                for m in found
                for ids in m.values()
                for i in ids
            ]
            assert not any(oracle.key(e) == value for e in firsts), (query, miss.reason)
            continue
        assert miss.depth == len(binding) < len(oracle.order) == miss.of, (query, miss.bound)
        assert binding in oracle.found[bound], (query, miss.bound)  # a partial match
        assert not oracle.goes_on(binding), (query, miss.bound)  # that cannot go on
        wanted = oracle.next_vars(bound)
        assert miss.stopped_at.split(", ") == wanted, (query, miss.bound)
        said = miss.reason.split("; ") if len(wanted) > 1 else [miss.reason]
        said = [r for r in said if not r.startswith(("1 ", "2 ", "3 ", "4 ", "5 ", "6 ", "7 "))]
        for var, reason in zip(wanted, said, strict=True):  # (a note on ties set aside)
            reason = reason.removeprefix(f"{var}: ") if len(wanted) > 1 else reason
            check_reason(oracle, binding, var, reason)
            event(reason.split(" ")[0] if "was false" not in reason else "a condition")
    if not every:  # the deepest near miss reaches as deep as any partial match
        event(f"no match; deepest {oracle.deepest()} of {len(oracle.order)}")
        assert len(misses) and misses["depth"].iloc[0] == oracle.deepest(), (query, misses)
    summary = misses.attrs["summary"]
    said = f"({len(every):,} before" if "EARLIEST" in query else f", {len(every):,} matches"
    assert said in summary, (query, summary)
    selected = len(ses_oracle(query, events))  # (SELECT EARLIEST MAXIMAL: fewer)
    assert summary.split(", ")[1].startswith(f"{selected:,} matches"), (query, summary)


@settings(max_examples=150, deadline=None)
@given(set_cases(types="AB"))
def test_the_matches_explained_are_the_selected_ones(case):
    """`match=ID`: the matches explained are those the query gives that start with ID."""
    query, events = case
    if not events or not small_enough(query, events):
        return
    rows = ses_oracle(query, events)
    order = [v for s in PartialMatches(query, []).sets for v in s]
    starts = {_first(row, order, events, query) for row in rows}
    frame = events_frame(events)
    for start in sorted(starts)[:2]:
        explained = near_misses(frame, query, OPTIONS, match=start)
        got = {
            tuple(_binding(e) for e in m["event"])
            for _, m in explained[explained["var"] != ""].groupby("match")
        }
        want = {
            tuple(_as_ids(r[v]) for v in order)
            for r in rows
            if _first(r, order, events, query) == start
        }
        assert got == want, (query, start)
        event("a match explained" + (" (SELECT ALL)" if "EARLIEST" not in query else ""))
        if "EARLIEST" in query:
            continue
        # SELECT ALL: `others`, the other bindings of a variable that fit with the rest
        mine = [r for r in rows if _first(r, order, events, query) == start]
        for _, m in explained[explained["var"] != ""].groupby("match"):
            chosen = dict(zip(order, (_binding(e) for e in m["event"]), strict=True))
            for var, others in zip(order, m["others"], strict=True):
                fit = {
                    _as_ids(r[var])
                    for r in mine
                    if all(_as_ids(r[u]) == chosen[u] for u in order if u != var)
                }
                assert others == len(fit) - 1, (query, start, var)


def _binding(text: str) -> tuple:
    return tuple(int(i) for i in re.findall(r" (\d+) at ", " " + text))


def _as_ids(value) -> tuple:
    return tuple(value) if isinstance(value, list) else (value,)


def _ids(row, order):
    return [i for v in order for i in (row[v] if isinstance(row[v], list) else [row[v]])]


def _first(row, order, events, query) -> int:
    """The match's first event in processing order (time, tie-break, id)."""
    by_id = {e["id"]: e for e in events}
    tie = "ORDER BY ts, seq" in query
    return min(_ids(row, order), key=lambda i: (by_id[i]["ts"], by_id[i]["seq"] if tie else 0, i))


# ---- hand-made cases ------------------------------------------------------------------------

EVENTS = pd.DataFrame(
    {
        "id": [1, 2, 3, 4, 5, 6, 7],
        "type": ["C", "P", "P", "B", "P", "C", "B"],
        "ts": [0, 1, 2, 3, 20, 21, 40],
        "v": [5, 7, 4, 1, 9, 2, 8],
        "node": ["n1", "n1", "n1", "n1", "n2", "n2", "n2"],
    }
)


def test_a_condition_says_the_values_it_compared():
    query = "PATTERN SEQ({C c, P+ p}, {B b}) WHERE [node] AND b.v > c.v WITHIN 10 SELECT ALL"
    misses = near_misses(EVENTS, query, OPTIONS, key="n1")
    # (p=[P 2] and p=[P 3] stopped there for the same reason: within this one, not shown)
    assert list(misses["bound"]) == ["{c=C 1 at 0, p=[P 2 at 1, P 3 at 2]}, {b=?}"]
    assert list(misses["reason"]) == [
        "b.v > c.v was false for B 4 at 3: 1 > 5 (the first B of 1 in the window)"
    ]
    assert list(misses["depth"]) == [2] and list(misses["of"]) == [3]
    assert list(misses["ids"]) == [[1, 2, 3]] and list(misses["times"]) == [[0, 1, 2]]


def test_the_window_says_how_far_past_it_and_the_set_it_stopped_in():
    query = "PATTERN SEQ({C c, P+ p}, {B b}) WHERE [node] WITHIN 10 SELECT EARLIEST MAXIMAL"
    misses = near_misses(EVENTS, query, OPTIONS, key="n2")
    assert misses.loc[0, "bound"] == "{c=C 6 at 21, p=[P 5 at 20]}, {b=?}"
    assert misses.loc[0, "reason"] == (
        "the window closed: the first B after it, B 7 at 40, 10 ticks after the window's end"
    )
    assert misses.attrs["summary"].startswith(
        "3 events in 1 key, 0 matches (0 before SELECT EARLIEST MAXIMAL)"
    )
    inclusive = query.replace("WITHIN 10", "WITHIN 10 INCLUSIVE")
    assert (
        near_misses(EVENTS, inclusive, OPTIONS, key="n2")
        .loc[0, "reason"]
        .endswith("B 7 at 40, 10 ticks after the window's end")
    )  # (INCLUSIVE: its end is first + 10, in the window)


def test_a_set_half_bound_says_each_variable_it_wanted():
    query = "PATTERN SEQ({C c}, {B b, D d}) WHERE [node] WITHIN 50 SELECT ALL"
    misses = near_misses(EVENTS, query, OPTIONS, key="n1")
    assert misses.loc[0, "bound"] == "{c=C 1 at 0}, {b=B 4 at 3, d=?}"
    assert misses.loc[0, "stopped_at"] == "d"
    assert misses.loc[0, "reason"] == "no D after C 1 at 0"
    query = "PATTERN SEQ({C c}, {D d, E e}) WHERE [node] WITHIN 50 SELECT ALL"
    misses = near_misses(EVENTS, query, OPTIONS, key="n1")
    assert misses.loc[0, "bound"] == "{c=C 1 at 0}, {d=?, e=?}"
    assert misses.loc[0, "reason"] == "d: no D after C 1 at 0; e: no E after C 1 at 0"


def test_nothing_to_start_with_and_the_options_of_why():
    query = "PATTERN SEQ({X x, Y+ y}, {B b}) WHERE [node] WITHIN 10 SELECT ALL"
    misses = near_misses(EVENTS, query, OPTIONS, key="n1")
    assert misses.loc[0, "bound"] == "{x=?, y=?}"
    assert misses.loc[0, "reason"] == "x: no X for key ('n1',); y: no Y for key ('n1',)"
    assert list(misses.columns) == ["node", *COLUMNS] and misses.loc[0, "depth"] == 0
    query = query.replace("Y+ y", "P+ p")  # (p binds, x never does: in either order)
    misses = near_misses(EVENTS, query, OPTIONS, key="n1")
    assert misses.loc[0, "bound"] == "{x=?, p=[P 2 at 1, P 3 at 2]}"
    assert misses.loc[0, "reason"] == "no X for key ('n1',)"
    # --from / --to: the events of that time range only
    query = "PATTERN SEQ({C c, P+ p}, {B b}) WHERE [node] WITHIN 10 SELECT ALL"
    late = near_misses(EVENTS, query, OPTIONS, start=20, end=30)
    assert late.attrs["summary"].startswith("2 events in 1 key, 0 matches")
    assert list(late["bound"]) == ["{c=C 6 at 21, p=[P 5 at 20]}, {b=?}"]
    assert late.loc[0, "reason"] == "no B after C 6 at 21"
    with pytest.raises(SparkcepError, match="give one value for each"):
        near_misses(EVENTS, query, OPTIONS, key=("n1", "x"))


def test_an_aggregate_takes_as_many_events_as_it_needs():
    """p+ with sum(p.v) >= 10 binds two P's (7 + 4): {c} goes on; with 12 it cannot."""
    query = "PATTERN SEQ({C c}, {P+ p}) WHERE [node] AND sum(p.v) >= 10 WITHIN 10 SELECT ALL"
    misses = near_misses(EVENTS, query, OPTIONS, key="n1")
    assert misses.attrs["summary"].startswith("4 events in 1 key, 1 matches")
    assert not len(misses)
    misses = near_misses(EVENTS, query.replace(">= 10", ">= 12"), OPTIONS, key="n1")
    assert list(misses["bound"]) == ["{c=C 1 at 0}, {p=?}"]
    assert misses.loc[0, "reason"] == (
        "sum(p.v) >= 12 was false for p = [2]: 7 >= 12 (the first P of 2 in the window)"
    )


def test_equal_times_are_said_to_be_no_sequence():
    events = pd.DataFrame(
        {"id": [1, 2, 3], "type": ["C", "P", "B"], "ts": [0, 1, 1], "v": [0, 0, 0]}
    )
    query = "PATTERN SEQ({C c, P p}, {B b}) WITHIN 10"
    reason = near_misses(events, query, OPTIONS).loc[0, "reason"]
    assert reason.startswith("no B after P 2 at 1; 1 B event at the same time as P 2 at 1 does")


def test_why_a_match_bound_its_events():
    query = (
        "PATTERN SEQ({C c, P+ p}, {B b}) WHERE [node] AND prev(p.v) < p.v WITHIN 10 "
        "SELECT EARLIEST MAXIMAL"
    )
    events = EVENTS.assign(ts=[0, 1, 2, 3, 20, 21, 25])
    explained = near_misses(events, query, OPTIONS, match=5)
    assert explained.attrs["summary"] == "1 match starts with event 5"
    assert list(explained["var"]) == ["c", "p", "b", ""]
    assert list(explained["event"])[:3] == ["C 6 at 21", "[P 5 at 20]", "B 7 at 25"]
    assert explained["why"].iloc[1].startswith("the match's first event; earliest: ")
    assert (
        explained["why"].iloc[-1]
        == "the window: its last event came 5 ticks before the window's end"
    )


def test_the_command_line_and_a_picture(tmp_path):
    import subprocess

    EVENTS.to_csv(tmp_path / "events.csv", index=False)
    query = "PATTERN SEQ({C c, P+ p}, {B b}) WHERE [node] AND b.v > c.v WITHIN 10 SELECT ALL"
    done = subprocess.run(
        [sys.executable, "-m", "sparkcep.cli", "why", query, "--input", "events.csv",
         "--id", "id", "--near", "1", "--key", "n1", "--plot", "why.png"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[2:] == [
        "node=n1: 2 of 3 bound: {c=C 1 at 0, p=[P 2 at 1, P 3 at 2]}, {b=?}",
        "  b not bound: b.v > c.v was false for B 4 at 3: 1 > 5 (the first B of 1 in the window)",
    ]
    assert (tmp_path / "why.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- the hospital log -----------------------------------------------------------------------


def test_a_patient_whose_leukocyte_count_came_too_late(shared_data):
    """BPI Challenge 2011 (shared data): a radiotherapy consultation and sessions, then a
    hemoglobin and a leukocyte count, within 40 days (examples/radiotherapy_blood_counts).
    Patient 00001041's hemoglobin came in time, the leukocyte count five days late."""
    log = pd.read_csv(shared_data / "medical" / "hospital.csv.gz", dtype={"case_id": str})
    root = Path(__file__).resolve().parents[1]
    query = (root / "examples" / "radiotherapy_blood_counts" / "query.cep").read_text()
    query = query.split("RETURN")[0]
    options = Options(time_col="timestamp", type_col="activity")
    misses = near_misses(log, query, options, key="00001041", near=1)
    assert misses.attrs["summary"].startswith("321 events in 1 key, 0 matches")
    miss = misses.iloc[0]
    assert (miss["depth"], miss["of"], miss["stopped_at"]) == (3, 4, "l")
    assert miss["ids"] == [140236, 140299, 140304]
    assert miss["reason"] == (
        "the window closed: the first event with l.activity = 'leukocyten tellen elektronisch' "
        "after it, leukocyten tellen elektronisch 140332 at 2007-12-03T00:00:00, 4 days "
        "23:00:00 after the window's end"
    )
    # the events named are the log's rows: a hemoglobin count within 40 days, and the
    # leukocyte count 40 days + 4 days 23 hours after the consultation
    rows = log.loc[miss["ids"] + [140332]]
    assert list(rows["activity"])[2:] == [
        "hemoglobine foto-elektrisch", "leukocyten tellen elektronisch",
    ]  # fmt: skip
    start, end = pd.to_datetime(rows["timestamp"]).iloc[[0, 3]]
    assert end - start == pd.Timedelta(days=44, hours=23)


@pytest.mark.spark
def test_a_spark_dataframe_gives_the_pandas_near_misses_of_a_set_pattern(spark):
    import sparkcep

    query = "PATTERN SEQ({C c, P+ p}, {B b}) WHERE [node] AND b.v > c.v WITHIN 10 SELECT ALL"
    local = sparkcep.why(EVENTS, query, id_col="id")
    through_spark = sparkcep.why(spark.createDataFrame(EVENTS), query, id_col="id")
    assert through_spark.to_dict("records") == local.to_dict("records")
    assert len(local) and "b.v > c.v was false" in local.loc[0, "reason"]
    keyed = sparkcep.why(spark.createDataFrame(EVENTS), query, id_col="id", key="n2")
    assert keyed.to_dict("records") == sparkcep.why(EVENTS, query, id_col="id", key="n2").to_dict(
        "records"
    )
    assert set(keyed["node"]) == {"n2"}
