"""The two-step method (the A-Seq paper's baseline): enumerate every match with the
pattern matcher, then aggregate. The matches are added up as they come, as `combine`
reads them: by their end event and by their start event (one-sided bundles; float sums
exactly), and per (start, end) event for what needs both (MIN, MAX). What is held
follows the events, and the pairs for those, never the matches: the time two-step takes
still follows the matches, one by one."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sparkcep.budget import Budget
from sparkcep.engines.aseq.combine import (
    Contributions,
    ExactSums,
    Moments,
    channel,
    channels_of,
)
from sparkcep.engines.aseq.connect import Chain
from sparkcep.engines.aseq.counters import PlaceTotals
from sparkcep.engines.nfa.matcher import PatternMatcher
from sparkcep.plan import Plan
from sparkcep.prep.table import EventTable

BUNDLE_AT = 1_000_000  # (start, end) bundles held before they are merged again


def enumerate_contributions(
    plan: Plan, table: EventTable, budget: Budget, stats: dict | None = None, **kwargs
) -> Contributions:
    """The two-step method: every match from nfa, added up as it comes. Every match is
    needed for the aggregates: the budget bounds the partial matches, never a count."""
    matcher = PatternMatcher(plan, table, replace(budget, max_matches=None))
    channels = channels_of(plan)
    floats = {ch for ch in channels if table.columns[ch.attr].values.dtype.kind == "f"}
    items = plan.aggregate.items
    extremes = {channel(i) for i in items if i.func in ("min", "max")}
    summed = {channel(i) for i in items if i.func in ("sum", "avg")}
    by_end, by_start = PlaceTotals(len(table), channels), PlaceTotals(len(table), channels)
    exact = {  # float sums a SUM or an AVG reads, added up exactly
        ch: (ExactSums(len(table)), ExactSums(len(table))) for ch in floats & summed
    }
    pairs: list[Chain] = []
    held = matches = 0
    for chunk in matcher.chunks(**kwargs):
        ones = np.ones(len(chunk), dtype=np.int64)
        moments = {}
        for ch in channels:
            col = table.columns[ch.attr].take(chunk.positions[ch.var].astype(np.int64))
            moments[ch] = Moments.of_values(col.values, col.nulls())
        by_end.add_at(chunk.last, ones, moments, floats)
        by_start.add_at(chunk.first, ones, moments, floats)
        infinite = set()
        for ch, (ends, starts) in exact.items():
            sums = moments[ch].sums
            finite = np.isfinite(sums)
            ends.add_at(chunk.last[finite], sums[finite])
            starts.add_at(chunk.first[finite], sums[finite])
            if not finite.all():
                infinite.add(ch)
        matches += len(chunk)
        if infinite or extremes:  # infinite sums: combine counts them apart
            pairs.append(_paired(chunk.first, chunk.last, moments, infinite, extremes))
            held += len(chunk)
            if held > BUNDLE_AT:
                pairs = [Chain.concat(pairs).merged(len(table))]
                held = len(pairs[0])
    if stats is not None:
        stats["partial_matches"] = stats.get("partial_matches", 0) + matcher.partial_matches
        stats["peak_partial"] = max(stats.get("peak_partial", 0), matcher.peak_frontier)
        stats["matches"] = stats.get("matches", 0) + matches
    places = (table.segment, table.ts)
    one_sided = by_end.one_sided(
        by_start, places, places, {ch: (ch, ch in floats, exact.get(ch)) for ch in channels}
    )
    if not pairs:
        return one_sided
    merged = Chain.concat(pairs).merged(len(table))  # by (start event, end event)
    paired = Contributions(
        table.segment[merged.tag], table.ts[merged.tag], table.ts[merged.group],
        merged.count, merged.moments,
    )  # fmt: skip
    return Contributions.concat([one_sided, paired], keep_empty=True)


def _paired(first, last, moments: dict, floats: set, extremes: set) -> Chain:
    """Each match as a bundle of its start and end event (positions) with what needs
    both: minima and maxima (and the sums of `floats`, where some are infinite)."""
    n = len(first)
    zeros = np.zeros(n, dtype=np.int64)
    kept = {}
    for ch, m in moments.items():
        sums = np.where(np.isfinite(m.sums), 0.0, m.sums) if ch in floats else np.zeros_like(m.sums)
        mins, maxs = (
            (m.mins, m.maxs) if ch in extremes else (np.full(n, np.inf), np.full(n, -np.inf))
        )
        kept[ch] = Moments(sums, zeros, mins, maxs)
    return Chain(first, last, zeros, kept)
