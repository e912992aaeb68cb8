"""Brute-force oracle for AGG queries, from the definition in docs/aggregation.md:

a row per trigger event e (an event that can bind the last positive component: its
type and the conditions on that variable alone hold, in a group), with each aggregate
over the matches m of e's group with m.end <= ts(e) and ts(e) - m.start < w; under EMIT
ON MATCH (the default) only for the triggers where a match of e's group has
m.end = ts(e), under EMIT EVERY TRIGGER for every trigger.

The matches come from the pattern oracle (tests/oracle.py), by enumeration; nothing here
uses the engines.
"""

from __future__ import annotations

import math

from oracle import oracle_matches

from sparkcep.language import ast
from sparkcep.language.parser import parse

INF = float("inf")


def _sum(values):
    """Exact for integers, correctly rounded for floats."""
    if any(isinstance(v, float) for v in values):
        return math.fsum(values)
    return sum(values)


def _pattern_text(q: ast.Query, extra_where: list[str], returns: list[str]) -> str:
    comps = []
    for c in q.components:
        text = ("!" if c.negated else "") + (c.event_type or "ANY") + ("+" if c.kleene else "")
        comps.append(f"{text} {c.var}" + ("[]" if c.kleene else ""))
    text = f"PATTERN SEQ({', '.join(comps)})"
    where = ([ast.to_text(q.where)] if q.where is not None else []) + extra_where
    if where:
        text += " WHERE " + " AND ".join(where)
    if q.strategy:
        text += f" STRATEGY {q.strategy}"
    if q.within is not None:
        text += f" WITHIN {q.within.amount}" + (f" {q.within.unit}" if q.within.unit else "")
    if q.order_by:
        text += " ORDER BY " + ", ".join(q.order_by)
    if returns:
        text += " RETURN " + ", ".join(returns)
    return text


def _agg_items(q: ast.Query):
    items = []
    for item in q.aggregates:
        e = item.expr
        if isinstance(e, ast.VarRef):
            func, var, attr = "count", None, None
        else:
            func = e.name
            arg = e.args[0]
            var, attr = (None, None) if func == "count" else (arg.var, arg.attr)
        items.append((item.alias or func, func, var, attr))
    return items


def oracle_aggregate(
    query_text: str, events: list[dict], *, time_col="ts", type_col="type", id_col="id"
):
    q = parse(query_text)
    positives = [c for c in q.components if not c.negated]
    last = positives[-1]
    groups = list(q.group_by)
    items = _agg_items(q)
    returns = [f"{var}.{attr} AS __{var}_{attr}" for _, _, var, attr in items if var is not None]
    returns = list(dict.fromkeys(returns))
    extra = [f"[{g}]" for g in groups]
    matches = oracle_matches(
        _pattern_text(q, extra, returns),
        events,
        type_col=type_col,
        time_col=time_col,
        id_col=id_col,
    )
    # Trigger events: can bind the last positive (its type and its own conditions), and
    # have a group (and key) value.
    local = []
    for conj in ast.conjuncts(q.where):
        names = {n.var for n in ast.walk(conj) if isinstance(n, ast.AttrRef | ast.VarRef)}
        calls = [n for n in ast.walk(conj) if isinstance(n, ast.Call) and n.name != "abs"]
        if names == {last.var} and not calls and not isinstance(conj, ast.Equivalence):
            local.append(ast.to_text(conj))
    key_attrs = set(groups)
    for conj in ast.conjuncts(q.where):
        if isinstance(conj, ast.Equivalence):
            key_attrs.add(conj.attr)
    local += [f"{last.var}.{g} = {last.var}.{g}" for g in sorted(key_attrs)]
    trig_query = f"PATTERN SEQ({last.event_type or 'ANY'} {last.var})"
    if local:
        trig_query += " WHERE " + " AND ".join(local)
    trig_ids = {
        m[last.var]
        for m in oracle_matches(
            trig_query, events, type_col=type_col, time_col=time_col, id_col=id_col
        )
    }
    w = INF
    if q.within is not None:
        w = q.within.amount  # tests use bare numbers
    by_id = {e[id_col]: e for e in events}
    rows = []
    for e in sorted(events, key=lambda e: (e[time_col], e[id_col])):
        if e[id_col] not in trig_ids:
            continue
        t = e[time_col]
        chosen = [
            m for m in matches
            if m["end"] <= t and t - m["start"] < w and all(m.get(g) == e.get(g) for g in groups)
        ]  # fmt: skip
        if q.emit != "every trigger" and not any(m["end"] == t for m in chosen):
            continue  # EMIT ON MATCH: no match of the group ends at this instant
        row = {"ts": t, **{g: e.get(g) for g in groups}, "__id": e[id_col]}
        for name, func, var, attr in items:
            if func == "count":
                row[name] = len(chosen)
                continue
            values = [m[f"__{var}_{attr}"] for m in chosen if m[f"__{var}_{attr}"] is not None]
            if not values:
                row[name] = None
            elif func == "sum":
                row[name] = _sum(values)
            elif func == "avg":
                row[name] = _sum(values) / len(values)
            elif func == "min":
                row[name] = min(values)
            else:
                row[name] = max(values)
        rows.append(row)
    del by_id
    rows.sort(key=lambda r: (*[(r[g] is None, r[g]) for g in groups], r["ts"], r["__id"]))
    return rows
