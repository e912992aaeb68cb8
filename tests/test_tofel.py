"""ToFel (engines/episodes/tofel.py): the partial matches it holds after each instant are
those of the definition, recomputed by brute force, and its predictions are DirectMatch's
and the oracle's (tests/episode_oracle.py)."""

from __future__ import annotations

import itertools

import numpy as np
from episode_oracle import Event, OracleRule, min_latest
from episode_strategies import rule_files
from helpers import examples
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sparkcep.engines.episodes.matcher import Matcher
from sparkcep.engines.episodes.rules import RuleSet
from sparkcep.engines.episodes.window import Segment
from sparkcep.plan import Options, plan_queries


def latest_partial_matches(rule, events: list[Event], now: int) -> dict[tuple, tuple]:
    """From the definition: for each proper ideal of the rule's DAG (a non-empty vertex
    set holding the direct predecessors of its vertices), every mapping of its vertices
    to events of their symbols that puts each edge's tail at an earlier instant and whose
    first event is within the window of `now`; the vertex-wise latest of them (which must
    be one of them), as the positions of the ideal's vertices."""
    k = len(rule.symbols)
    preds = {v: {u for u, w in rule.edges if w == v} for v in range(k)}
    out = {}
    for size in range(1, k):
        for ideal in itertools.combinations(range(k), size):
            if any(not preds[v] <= set(ideal) for v in ideal):
                continue
            candidates = [[e for e in events if e.symbol == rule.symbols[v]] for v in ideal]
            alive = []
            for combo in itertools.product(*candidates):
                rank = dict(zip(ideal, (e.rank for e in combo)))
                if any(rank[u] >= rank[v] for u, v in rule.edges if v in rank):
                    continue
                if now - min(e.ts for e in combo) < rule.window:
                    alive.append(tuple(e.index for e in combo))
            if alive:
                latest = tuple(map(max, *alive)) if len(alive) > 1 else alive[0]
                assert latest in alive  # the latest of the matches is a match
                out[ideal] = latest
    return out


def stream_events(draws) -> list[Event]:
    """(type, gap) draws as events in processing order; a gap of 0 shares the instant.
    Only events of the rules' symbols are kept (the engine numbers only those)."""
    ts, rank, events = 0, -1, []
    for i, (kind, gap) in enumerate(draws):
        if i == 0 or gap:
            ts, rank = ts + gap, rank + 1
        if kind != "E":  # no rule has E
            events.append(Event(len(events), i, kind, ts, rank))
    return events


def run(matcher: Matcher, seg: Segment, codes: dict, instant: list[Event]) -> list[tuple]:
    """One instant's events through the matcher: the (rule, ids) of what it reports."""
    n = len(instant)
    new = np.zeros(n, dtype=bool)
    new[0] = True
    found = matcher.feed(
        seg,
        np.array([codes[e.symbol] for e in instant], dtype=np.int64),
        np.array([e.ts for e in instant], dtype=np.int64),
        new,
        np.array([e.ts for e in instant], dtype=np.int64),
        np.array([e.id for e in instant], dtype=np.int64),
    )
    return [(r, tuple(f.ids.tolist())) for f in found for r in f.rules]


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    draws=st.lists(
        st.tuples(st.sampled_from("ABCDABCE"), st.sampled_from([0, 0, 1, 1, 2])), max_size=16
    ),
    rule_file=rule_files(max_rules=3),
)
@example(  # A and B at one instant: no occurrence of a -> b
    draws=[("A", 0), ("B", 0), ("B", 1)],
    rule_file=(
        "RULE r0: EPISODE (A v0, B v1; v0 -> v1) WITHIN 2 PREDICT Z WITHIN 2;",
        [OracleRule("r0", ("A", "B"), ((0, 1),), 2, 2)],
        None,
        None,
    ),
)
def test_partial_matches_after_each_instant_and_predictions(draws, rule_file):
    text, oracle_rules, _, _ = rule_file
    text = text.replace(" WHERE [k]", "").replace(" ORDER BY ts, seq", "")
    plans, names = plan_queries(text, None, Options())
    rules = RuleSet(plans, names)
    for rule, oracle in zip(rules.rules, oracle_rules):
        assert [rules.symbols[s] for s in rule.symbols] == list(oracle.symbols)
        assert rule.window == oracle.window
    events = [e for e in stream_events(draws) if e.symbol in rules.codes]
    events = [Event(p, e.id, e.symbol, e.ts, e.rank) for p, e in enumerate(events)]
    tofel, direct = Matcher(rules, "tofel"), Matcher(rules, "directmatch")
    tofel_seg, direct_seg = Segment(), Segment()
    reported: dict[str, list] = {"tofel": [], "directmatch": []}
    for _, group in itertools.groupby(events, key=lambda e: e.rank):
        instant = list(group)
        reported["tofel"] += run(tofel, tofel_seg, rules.codes, instant)
        reported["directmatch"] += run(direct, direct_seg, rules.codes, instant)
        now, seen = instant[0].ts, events[: instant[-1].index + 1]
        for r, rule in enumerate(oracle_rules):
            low = tofel_seg.lower(now - rule.window)
            held = tofel.tofel.matches(tofel_seg, r, low)
            assert held == latest_partial_matches(rule, seen, now), (r, now)
    expected = sorted(
        (r, tuple(e.id for e in occurrence))
        for r, rule in enumerate(oracle_rules)
        for occurrence in min_latest(rule, events)
    )
    assert sorted(reported["tofel"]) == expected
    assert sorted(reported["directmatch"]) == expected
    assert getattr(tofel_seg, "_tree", None) is None  # no CBS-Tree behind ToFel
    horizon = events[-1].ts + 1 if events else 0
    if events and tofel.prune(tofel_seg, horizon):  # time moves on: what is left is alive
        for r, held in tofel_seg.kept.items():
            low = tofel_seg.lower(horizon - rules[r].window)
            assert sum(map(bool, held[:-1])) == len(tofel.tofel.matches(tofel_seg, r, low))
