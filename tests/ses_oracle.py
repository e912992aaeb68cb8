"""Brute-force oracle for sequenced event set patterns, written from match-windows.md
Definition 2 and §3 (with docs/ses.md for what the paper leaves open), not from the engine.

1. Every substitution: each plain variable one event, each `v+` a non-empty sequence of
   events in strictly increasing time (docs/semantics.md's ≺), no event twice.
2. The matches among them (Definition 2): every condition holds (I(Θγ), with
   docs/semantics.md's reading of each conjunct: every element, every combination,
   prev on consecutive elements), every event of set B_s precedes every event of B_{s+1}
   (2), all within the window (3: last - first < w, or <= w with INCLUSIVE), and all in
   one partition of the key.
3. SELECT EARLIEST MAXIMAL: among the matches with the same first event (processing
   order), the *earliest* are those whose first events no other match's first events
   precede variable by variable, and the *maximal* those no other match contains
   variable by variable; a match is selected when it is both.

Expression semantics come from the pattern oracle (tests/oracle.py), which is also
written from the specification alone.
"""

from __future__ import annotations

from itertools import combinations, pairwise
from typing import Any

from oracle import _Ctx, _eval, _holds, _Query

from sparkcep.language import ast


def _sets(components: tuple[ast.Component, ...]) -> list[list[ast.Component]]:
    sets: list[list[ast.Component]] = []
    last = object()
    for c in components:
        if c.in_set is None or c.in_set != last:
            sets.append([])
        sets[-1].append(c)
        last = c.in_set
    return sets


def ses_oracle(
    query_text: str,
    events: list[dict],
    *,
    type_col: str = "type",
    time_col: str = "ts",
    id_col: str = "id",
) -> list[dict]:
    q = _Query(query_text, time_col)
    query = q.query
    sets = _sets(query.components)
    variables = [c for s in sets for c in s]
    select = query.select or "all"
    amount = query.within.amount if query.within is not None else None  # bare numbers only

    def ts(e):
        return e[time_col]

    def tie(e):
        return tuple((0,) if e.get(c) is None else (1, e.get(c)) for c in q.tiebreak)

    order = sorted(events, key=lambda e: (ts(e), tie(e), e[id_col]))
    position = {e[id_col]: i for i, e in enumerate(order)}

    def P(e):
        return position[e[id_col]]

    def prec(e, f):
        return (ts(e), tie(e)) < (ts(f), tie(f))

    def partition(e):
        values = tuple(e.get(a) for a in q.key)
        return None if any(v is None for v in values) else values

    def in_window(first_ts, last_ts) -> bool:
        if amount is None:
            return True
        span = last_ts - first_ts
        return span <= amount if query.inclusive else span < amount

    # 1. the events each variable can bind, checked against the conjuncts on it alone
    options: dict[str, list[tuple]] = {}
    for comp in variables:
        pool = [e for e in order if comp.event_type is None or e.get(type_col) == comp.event_type]
        if comp.kleene:
            opts = [
                seq
                for n in range(1, len(pool) + 1)
                for seq in combinations(pool, n)
                if all(prec(x, y) for x, y in pairwise(seq))
            ]
        else:
            opts = [(e,) for e in pool]
        alone = [c for c in q.positive_conjuncts if c.mentioned <= {comp.var}]
        options[comp.var] = [o for o in opts if all(_holds(c, {comp.var: list(o)}) for c in alone)]

    # 2. the matches (Definition 2)
    matches: list[dict[str, tuple]] = []

    def is_match(binding: dict[str, tuple]) -> bool:
        flat = [e for seq in binding.values() for e in seq]
        if not in_window(min(ts(e) for e in flat), max(ts(e) for e in flat)):
            return False
        part = partition(flat[0])
        if part is None or any(partition(e) != part for e in flat):
            return False
        for s in range(len(sets) - 1):
            before = [e for c in sets[s] for e in binding[c.var]]
            after = [e for c in sets[s + 1] for e in binding[c.var]]
            if not all(prec(x, y) for x in before for y in after):
                return False
        lists = {v: list(seq) for v, seq in binding.items()}
        return all(_holds(c, lists) for c in q.positive_conjuncts)

    def choose(i: int, binding: dict[str, tuple], used: set, lo, hi) -> None:
        if i == len(variables):
            if is_match(binding):
                matches.append(dict(binding))
            return
        var = variables[i].var
        for seq in options[var]:
            ids = {e[id_col] for e in seq}
            if ids & used:
                continue
            new_lo = min([lo, *(ts(e) for e in seq)]) if lo is not None else min(map(ts, seq))
            new_hi = max([hi, *(ts(e) for e in seq)]) if hi is not None else max(map(ts, seq))
            if not in_window(new_lo, new_hi):
                continue
            binding[var] = seq
            choose(i + 1, binding, used | ids, new_lo, new_hi)
            del binding[var]

    choose(0, {}, set(), None, None)

    # 3. the selection
    def start(m) -> int:
        return min(P(e) for seq in m.values() for e in seq)

    if select == "earliest maximal":
        chosen = []
        for m in matches:
            group = [g for g in matches if start(g) == start(m) and g is not m]
            firsts = {v: P(seq[0]) for v, seq in m.items()}
            earlier = any(
                all(P(g[v][0]) <= firsts[v] for v in m) and any(P(g[v][0]) < firsts[v] for v in m)
                for g in group
            )
            contained = any(
                all({P(e) for e in m[v]} <= {P(e) for e in g[v]} for v in m) for g in group
            )
            if not earlier and not contained:
                chosen.append(m)
        matches = chosen

    rows = [_row(q, m, variables, ts, P, id_col) for m in matches]

    def sort_key(row):
        keys = tuple((0,) if row[a] is None else (1, row[a]) for a in q.key)
        ids = tuple(tuple(x) if isinstance(x, list) else x for x in (row[c.var] for c in variables))
        return (keys, row["end"], row["start"], ids)

    rows.sort(key=sort_key)
    return rows


def _row(q: _Query, m: dict[str, tuple], variables, ts, P, id_col) -> dict[str, Any]:
    flat = sorted((e for seq in m.values() for e in seq), key=P)
    row: dict[str, Any] = {"start": ts(flat[0]), "end": max(ts(e) for e in flat)}
    for attr in q.key:
        row[attr] = flat[0].get(attr)
    lists = {v: list(seq) for v, seq in m.items()}
    for comp in variables:
        seq = m[comp.var]
        row[comp.var] = [e[id_col] for e in seq] if comp.kleene else seq[0][id_col]
    for name, info in q.returns:
        cur = {v: lists[v][0] for v in info.mentioned if v not in info.elem_vars}
        if info.elem_vars:
            v = info.elem_vars[0]
            row[name] = [
                _eval(info.expr, _Ctx({**cur, v: element}, {}, lists)) for element in lists[v]
            ]
        else:
            row[name] = _eval(info.expr, _Ctx(cur, {}, lists))
    return row
