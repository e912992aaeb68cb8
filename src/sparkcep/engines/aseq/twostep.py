"""The two-step method (the A-Seq paper's baseline): enumerate every match with the
pattern matcher, then aggregate. Each match is one contribution for `combine`; the
contributions are bundled by (partition, start, end) as the matches come, so that what is
held follows the distinct (start, end) pairs, not the matches, and two-step finishes
wherever its time allows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sparkcep.budget import Budget
from sparkcep.engines.aseq.combine import Contributions, Moments, channels_of, sum_by
from sparkcep.engines.nfa.matcher import Matches, PatternMatcher
from sparkcep.plan import Plan
from sparkcep.prep.table import EventTable

BUNDLE_AT = 1_000_000  # contributions held before they are bundled again


def enumerate_contributions(
    plan: Plan, table: EventTable, budget: Budget, stats: dict | None = None, **kwargs
) -> Contributions:
    """The two-step method: every match, from nfa, is one contribution, bundled with the
    others of its (partition, start, end) as they come. Every match is needed for the
    aggregates: the budget bounds what is held, never a match count."""
    matcher = PatternMatcher(plan, table, replace(budget, max_matches=None))
    channels = channels_of(plan)
    parts: list[Contributions] = [Contributions.empty(channels)]
    held = matches = 0
    for chunk in matcher.chunks(**kwargs):
        parts.append(_contributions(plan, table, chunk))
        held += len(chunk)
        matches += len(chunk)
        if held > BUNDLE_AT:
            parts = [bundled(Contributions.concat(parts))]
            held = len(parts[0])
    if stats is not None:
        stats["partial_matches"] = stats.get("partial_matches", 0) + matcher.partial_matches
        stats["peak_partial"] = max(stats.get("peak_partial", 0), matcher.peak_frontier)
        stats["matches"] = stats.get("matches", 0) + matches
    return bundled(Contributions.concat(parts))


def _contributions(plan: Plan, table: EventTable, matches: Matches) -> Contributions:
    ones = np.ones(len(matches), dtype=np.int64)
    out = Contributions(
        table.segment[matches.first], table.ts[matches.first], table.ts[matches.last], ones
    )
    for ch in channels_of(plan):
        col = table.columns[ch.attr].take(matches.positions[ch.var].astype(np.int64))
        out.moments[ch] = Moments.of_values(col.values, col.nulls())
    return out


def bundled(c: Contributions) -> Contributions:
    """One contribution per (partition, start, end): counts and sums added, the least
    minimum and the greatest maximum."""
    if len(c) < 2:
        return c
    keys = np.stack([c.segment, c.start, c.end], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    if len(unique) == len(c):
        return c
    inverse = inverse.ravel()
    k = len(unique)
    moments = {ch: m.bundled(inverse, k) for ch, m in c.moments.items()}
    return Contributions(
        unique[:, 0], unique[:, 1], unique[:, 2], sum_by(inverse, c.count, k), moments
    )
