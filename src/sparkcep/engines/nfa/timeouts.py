"""OUTPUT TIMEOUTS: the partial matches whose window closed before they completed.

A *partial match* of `SEQ(P1, ..., Pk)` binds the first i positive components
(1 <= i < k) as a match of `SEQ(P1, ..., Pi)` would: types, order, the window, the
strategy, the conditions among P1..Pi and the negations between them. It is *extended*
when a partial match of i + 1 components (or, for i = k - 1, a binding of all k) starts
with it, or, when Pi is a Kleene closure, when a partial match of i components has one
more element of Pi after its own. One that is never extended *times out* when time
reaches its first event's time plus the window (a batch input ends past every window):
it is reported with `timeout` true, `reached` the last variable it bound, the ids of its
events, and nulls for the variables it did not bind (an empty list for a Kleene one) and
for RETURN values. Complete
matches have `timeout` false and `reached` the last positive variable.

As FlinkCEP's timed-out partial matches: `SEQ(Cart c, Pay p) WITHIN 1 h OUTPUT TIMEOUTS`
reports each cart not paid within the hour, once the hour has passed.

>>> import pandas as pd
>>> from sparkcep import match_local
>>> events = pd.DataFrame({"type": ["Cart", "Pay", "Cart", "Tick"], "ts": [0, 5, 20, 90],
...                        "user": ["x", "x", "y", "z"]})
>>> match_local(events, "PATTERN SEQ(Cart c, Pay p) WHERE [user] WITHIN 60 OUTPUT TIMEOUTS")
   start  end user  c     p  timeout reached
0      0    5    x  0     1    False       p
1     20   20    y  2  <NA>     True       c
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from sparkcep.budget import Budget
from sparkcep.engines.nfa.matcher import Matches, PatternMatcher
from sparkcep.engines.nfa.rows import match_rows, plan_output
from sparkcep.plan import Plan
from sparkcep.prep.table import EventTable

TIMEOUT, REACHED = "timeout", "reached"


def prefix_plan(plan: Plan, i: int) -> Plan:
    """The pattern of the first `i` positive components, their conditions and the
    negations between them (nothing else: no RETURN, no negation at an end)."""
    positives = plan.positives[:i]
    keep = {c.var for c in positives}
    comps = [c for c in plan.components if c.var in keep or (c.negated and 0 < c.gap < i)]
    keep |= {c.var for c in comps}
    return replace(
        plan,
        components=tuple(comps),
        conditions=tuple(c for c in plan.conditions if c.variables <= keep),
        negations=tuple(n for n in plan.negations if 0 < n.gap < i),
        returns=(),
        timeouts=False,
    )


def _bindings(plan: Plan, matches: Matches) -> list[tuple]:
    """Each match as a tuple of its positives' positions (a tuple for a Kleene one)."""
    cols = []
    for comp in plan.positives:
        pos = matches.positions[comp.var]
        cols.append([tuple(p.tolist()) for p in pos] if comp.kleene else pos.tolist())
    return list(zip(*cols)) if cols else []


def timed_out(
    plan: Plan, table: EventTable, after: int | None, upto: int | None, budget: Budget
) -> list[tuple[Plan, Matches, np.ndarray]]:
    """Per number of bound components i, the partial matches never extended whose window
    closes in (after, upto] (None: unbounded), as (prefix plan, its matches, which)."""
    k = len(plan.positives)
    levels = [prefix_plan(plan, i) for i in range(1, k + 1)]
    every = replace(budget, max_matches=None)  # which are extended needs all of them
    found = [PatternMatcher(p, table, every).run() for p in levels]
    binds = [_bindings(p, m) for p, m in zip(levels, found)]
    out = []
    for i in range(k - 1):
        extended = {b[: i + 1] for b in binds[i + 1]}
        if plan.positives[i].kleene:
            extended |= {(*b[:i], b[i][:-1]) for b in binds[i] if len(b[i]) > 1}
        stuck = np.array([b not in extended for b in binds[i]], dtype=bool)
        deadline = table.ts[found[i].first] + plan.window
        if after is not None:
            stuck &= deadline > after
        if upto is not None:
            stuck &= deadline <= upto
        if stuck.any():
            out.append((levels[i], found[i], stuck))
    return out


def timeout_rows(
    plan: Plan, frame, table: EventTable, after, upto, id_col: str, budget: Budget
) -> pd.DataFrame:
    """The rows of the partial matches that timed out in (after, upto]."""
    names = [c.name for c in plan_output(plan, id_col)]
    parts = []
    for prefix, matches, stuck in timed_out(plan, table, after, upto, budget):
        picked = _take(matches, np.flatnonzero(stuck))
        rows = match_rows(prefix, frame, table, picked, id_col)
        rows[TIMEOUT] = True
        rows[REACHED] = prefix.positives[-1].var
        integer_ids = pd.api.types.is_integer_dtype(frame[id_col].dtype)
        for comp in plan.positives[len(prefix.positives) :]:  # not bound: null, or []
            if comp.kleene:
                rows[comp.var] = [[] for _ in range(len(rows))]
            else:
                null = [None] * len(rows)
                rows[comp.var] = pd.array(null, dtype="Int64") if integer_ids else null
        parts.append(rows.reindex(columns=names))
    if not parts:
        return pd.DataFrame(columns=names)
    out = pd.concat(parts, ignore_index=True)
    return out.astype({TIMEOUT: "boolean"})


def _take(matches: Matches, rows: np.ndarray) -> Matches:
    return Matches(
        matches.first[rows],
        matches.last[rows],
        matches.segment[rows],
        {v: p[rows] for v, p in matches.positions.items()},
        {k: [v[i] for i in rows] for k, v in matches.values.items()},
    )
