"""Brute-force answers for episode rules, straight from the definitions of
cbs-tree-episode-prediction.md §2 (as docs/episodes.md generalises them to streams with
several events per instant). It never imports the engine.

- An *instant* is a run of events with equal time (and tie-break value); events are in
  processing order (time, tie-break, id) and `rank` numbers the instants.
- An *occurrence* of a rule's episode maps every vertex to an event of its symbol (one
  event per vertex), each edge u -> v to an earlier instant for u than for v, and has
  t_e − t_s < ω (the window, in time) where t_s, t_e are its first and last times.
- O2 is *enclosed* by O1 when O1's interval contains O2's and is not equal to it
  (intervals in instants); a *minimal* occurrence encloses no occurrence.
- O is *latest* (Definition 2) when each sink's event is the latest instance of its
  symbol up to O's end, and each other vertex's event is the latest instance of its
  symbol before the earliest instant of its direct successors' events.
- The answer: every occurrence that is minimal and latest, with the predicted interval
  (t_e, t_s + ω_ρ).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class OracleRule:
    name: str
    symbols: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]
    window: int
    rule_window: int
    predict: str = "Z"

    def sinks(self) -> list[int]:
        return [v for v in range(len(self.symbols)) if not any(u == v for u, _ in self.edges)]

    def successors(self, v: int) -> list[int]:
        return [w for u, w in self.edges if u == v]


@dataclass(frozen=True)
class Event:
    index: int  # position in processing order
    id: object
    symbol: str | None
    ts: int
    rank: int  # instant


def events_in_order(rows: list[dict], symbol_of, tiebreak: str | None = None) -> list[Event]:
    """Rows (dicts with id and ts) in processing order, with their symbols and instants."""
    key = (
        (lambda r: (r["ts"], r[tiebreak], r["id"])) if tiebreak else (lambda r: (r["ts"], r["id"]))
    )
    ordered = sorted(rows, key=key)
    out: list[Event] = []
    rank, previous = -1, None
    for i, r in enumerate(ordered):
        instant = (r["ts"], r[tiebreak]) if tiebreak else r["ts"]
        if instant != previous:
            rank, previous = rank + 1, instant
        out.append(Event(i, r["id"], symbol_of(r), r["ts"], rank))
    return out


def occurrences(rule: OracleRule, events: list[Event]) -> list[tuple[Event, ...]]:
    """Every occurrence of the rule's episode (one event per vertex)."""
    candidates = [[e for e in events if e.symbol == s] for s in rule.symbols]
    out = []
    for combo in itertools.product(*candidates):
        if len({e.index for e in combo}) < len(combo):
            continue
        if any(combo[u].rank >= combo[v].rank for u, v in rule.edges):
            continue
        if max(e.ts for e in combo) - min(e.ts for e in combo) >= rule.window:
            continue
        out.append(combo)
    return out


def interval(occ) -> tuple[int, int]:
    return min(e.rank for e in occ), max(e.rank for e in occ)


def encloses(outer, inner) -> bool:
    (s1, e1), (s2, e2) = interval(outer), interval(inner)
    return s1 <= s2 and e2 <= e1 and (s1, e1) != (s2, e2)


def minimal(occs) -> list:
    return [o for o in occs if not any(encloses(o, other) for other in occs)]


def latest_instance(events: list[Event], symbol: str, before_rank: int, inclusive: bool):
    """The last event (processing order) of `symbol` at an instant up to (or before)
    `before_rank`, or None."""
    found = None
    for e in events:
        if e.symbol == symbol and (e.rank <= before_rank if inclusive else e.rank < before_rank):
            found = e
    return found


def is_latest(rule: OracleRule, occ, events: list[Event]) -> bool:
    end = max(e.rank for e in occ)
    for v, e in enumerate(occ):
        succ = rule.successors(v)
        if not succ:
            want = latest_instance(events, rule.symbols[v], end, inclusive=True)
        else:
            want = latest_instance(
                events, rule.symbols[v], min(occ[w].rank for w in succ), inclusive=False
            )
        if want is None or want.index != e.index:
            return False
    return True


def min_latest(rule: OracleRule, events: list[Event]) -> list[tuple[Event, ...]]:
    occs = occurrences(rule, events)
    return [o for o in minimal(occs) if is_latest(rule, o, events)]


def predictions(rules: list[OracleRule], events: list[Event]) -> list[dict]:
    """The rows: rule, ids in vertex order, t_s, t_e and the predicted interval."""
    rows = []
    for rule in rules:
        for occ in min_latest(rule, events):
            t_s, t_e = min(e.ts for e in occ), max(e.ts for e in occ)
            rows.append(
                {
                    "query": rule.name,
                    "ids": tuple(e.id for e in occ),
                    "t_s": t_s,
                    "t_e": t_e,
                    "predict": rule.predict,
                    "after": t_e,
                    "before": t_s + rule.rule_window,
                }
            )
    return rows


def predicted_union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of open intervals (a, b) over integer times, as merged (a, b) pairs of
    the integer points they cover (Lemma 1 compares these)."""
    points = sorted({t for a, b in intervals for t in range(a + 1, b)})
    merged: list[tuple[int, int]] = []
    for t in points:
        if merged and merged[-1][1] == t - 1:
            merged[-1] = (merged[-1][0], t)
        else:
            merged.append((t, t))
    return merged
