"""`aseq`: A-Seq online aggregation of sequence patterns (aseq-online-aggregation.md).

Aggregates over the matches of SEQ patterns without building a single match:

- **Dynamic prefix counting** (Lemma 1–2): for a pattern (E1..En) keep the number of
  matches of each prefix; an event of type Em adds count(E1..Em-1) to count(E1..Em).
- **Start event marking** (Lemma 3–4): one prefix counter per START event, so that
  matches leave the window exactly when their start does.
- **Negation** by the recounting rule (Lemma 5–6): an event of a negated type between
  Em and Em+1 resets the count of (E1..Em).
- **Hashed prefix counters**: equivalence predicates and GROUP BY partition the stream;
  each partition has its own counters.
- **SUM/AVG/MIN/MAX** (section 5), exact: next to each count, the sum (and minimum,
  maximum, non-null count) of the aggregated attribute over the prefix matches counted.
- **Prefix sharing** (section 4.1): queries' patterns form a prefix tree; a counter of
  the tree serves every query whose pattern goes through it.
- **Chop-connect** (section 4.2): a pattern whose tail is another tree's path is chopped
  there; each START of the tail takes a *snapshot* of the head's counts per head START,
  and the counts connect as Σ snapshot × tail count (Lemma 7), with several pieces
  connected in turn (multi-connect).

The counters of all START events move together, column-wise: events with the same time
form a *group* (they cannot follow each other in a sequence), and step j updates every
start's counters with the group j places after it, each node only where the group holds
its events. Equal starts in one group share a counter. What a query reads is added up as
the counters go: new matches by end group and by START row (`counters.EndTotals`), so
nothing grows with the number of matches; `combine` turns these totals into per-trigger
rows.

Example 3 of the paper (window 7 s), the stream a1 b1 c1 a2 c2 b2 d1 c3 a3 d2 at
1..10 s, pattern SEQ(A, B, C, D):

>>> import pandas as pd
>>> from sparkcep import aggregate_local
>>> stream = pd.DataFrame({"type": list("ABCACBDCAD"), "ts": range(1, 11)})
>>> aggregate_local(stream, "PATTERN SEQ(A a, B b, C c, D d) AGG COUNT WITHIN 7")
   ts  count
0   7      2
1  10      1
"""

from __future__ import annotations

from sparkcep.engines.aseq.program import AggregateProgram, AggregateState, counters_reason
from sparkcep.engines.base import Engine

__all__ = ["AggregateProgram", "AggregateState", "AseqEngine", "TwoStepEngine", "counters_reason"]


class _AggregateEngine(Engine):
    examples = (
        "PATTERN SEQ(A a, B b, C c) AGG COUNT, SUM(b.v) AS s WITHIN 6",
        "PATTERN SEQ(A a, !D x, B b) WHERE [k] GROUP BY k AGG COUNT, MIN(a.v) AS m WITHIN 5",
        "PATTERN SEQ(A a, B b) WHERE [k] AGG COUNT, AVG(a.v) AS av WITHIN 4",
        "PATTERN SEQ(A a, B b) WHERE a.v < b.v GROUP BY k AGG COUNT, MAX(b.v) AS m WITHIN 5",
    )
    # The counters hold no match; a query they cannot express enumerates its matches.
    crowded_example = "PATTERN SEQ(A a, B b) WHERE a.v <= b.v AGG COUNT WITHIN 1000"

    def applies_to(self, plan) -> bool:
        return plan.aggregate is not None

    def job_key(self, plan) -> tuple:
        return (plan.key, plan.tiebreak, plan.aggregate.group_by)

    def compile(self, plans, names, options) -> AggregateProgram:
        return AggregateProgram(plans, names, options, self.name)


class AseqEngine(_AggregateEngine):
    """AGG queries by prefix counters; a query the counters cannot express (Kleene,
    negation at an end, cross conditions) is enumerated inside the same program."""

    name = "aseq"
    summary = "A-Seq prefix counters, shared across queries"

    def reason(self, plan) -> str | None:
        if plan.aggregate is None:
            return "it answers AGG queries, and this one has none"
        return None


class TwoStepEngine(_AggregateEngine):
    """The paper's baseline: every match enumerated by the pattern matcher, then
    aggregated (selected with --algorithm twostep)."""

    name = "twostep"
    summary = "two-step: enumerate every match, then aggregate"

    def reason(self, plan) -> str | None:
        if plan.aggregate is None:
            return "it answers AGG queries, and this one has none"
        return None
