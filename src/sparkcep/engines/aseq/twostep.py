"""The two-step method (the A-Seq paper's baseline): enumerate every match with the
pattern matcher, then aggregate. Each match is one contribution for `combine`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sparkcep.budget import Budget
from sparkcep.engines.aseq.combine import Contributions, Moments, channels_of
from sparkcep.engines.nfa.matcher import PatternMatcher
from sparkcep.plan import Plan
from sparkcep.prep.table import EventTable


def enumerate_contributions(
    plan: Plan, table: EventTable, budget: Budget, stats: dict | None = None, **kwargs
) -> Contributions:
    """The two-step method: every match, from nfa, is one contribution. Every match is
    needed for the aggregates: the budget bounds what is held, never a match count."""
    matcher = PatternMatcher(plan, table, replace(budget, max_matches=None))
    matches = matcher.run(**kwargs)
    if stats is not None:
        stats["partial_matches"] = stats.get("partial_matches", 0) + matcher.partial_matches
        stats["peak_partial"] = max(stats.get("peak_partial", 0), matcher.peak_frontier)
        stats["matches"] = stats.get("matches", 0) + len(matches)
    ones = np.ones(len(matches), dtype=np.int64)
    out = Contributions(
        table.segment[matches.first] if len(matches) else np.zeros(0, np.int64),
        table.ts[matches.first],
        table.ts[matches.last],
        ones,
    )
    for ch in channels_of(plan):
        col = table.columns[ch.attr].take(matches.positions[ch.var].astype(np.int64))
        out.moments[ch] = Moments.of_values(col.values, col.nulls())
    return out
