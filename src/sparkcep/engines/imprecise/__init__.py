"""`imprecise`: pattern queries over events whose time is an interval
(imprecise-timestamps.md; docs/imprecise.md).

Each event happened at one integer point of its uncertainty interval [lower, upper],
with a probability per point (uniform by default). In every possible world — one point
per event — the pattern is matched as for point times, two events at the same point
never in sequence; the matches of all worlds are grouped by signature (the event of
each variable), each with the tightest time range that covers them and its confidence,
the probability of the worlds that give it.

Fig. 1: a1 = [1,5], c2 = [3,5], b3 = [3,5], c4 = [4,8], SEQ(A, B, C) WITHIN 4. The
paper states 15/225 for (a1, b3, c2); its own definitions give 25/225 under
skip-till-any and 24/225 under skip-till-next (docs/imprecise.md says why):

>>> import pandas as pd
>>> from sparkcep import match_local
>>> events = pd.DataFrame({"id": ["a1", "c2", "b3", "c4"], "type": list("ACBC"),
...                        "lo": [1, 3, 3, 4], "hi": [5, 5, 5, 8]})
>>> query = '''PATTERN SEQ(A a, B b, C c) TIME BETWEEN lo AND hi WIDTH AT MOST 4
...            STRATEGY {} WITHIN 4'''
>>> out = match_local(events, query.format("SKIP_TILL_ANY_MATCH"), time_col="lo", id_col="id")
>>> out.assign(c225=(out.confidence * 225).round(9))[["a", "b", "c", "range_start", "range_end", "c225"]]
    a   b   c  range_start  range_end  c225
0  a1  b3  c2            1          5  25.0
1  a1  b3  c4            1          7  27.0
>>> out = match_local(events, query.format("SKIP_TILL_NEXT_MATCH"), time_col="lo", id_col="id")
>>> out.assign(c225=(out.confidence * 225).round(9))[["a", "b", "c", "c225"]]
    a   b   c  c225
0  a1  b3  c2  24.0
1  a1  b3  c4  25.0
"""

from __future__ import annotations

from sparkcep.engines.base import Engine
from sparkcep.engines.imprecise.algorithm import Algorithm
from sparkcep.engines.imprecise.points import PointBased
from sparkcep.engines.imprecise.program import ImpreciseProgram, ImpreciseState
from sparkcep.engines.imprecise.queryorder import QueryOrder
from sparkcep.engines.imprecise.runs import AnyState, SelectivityOrder, SortedQueryOrder
from sparkcep.plan.intervals import IntervalSpec

__all__ = ["ImpreciseEngine", "ImpreciseProgram", "ImpreciseState"]


class ImpreciseEngine(Engine):
    crowded_example = "PATTERN SEQ(A a, B b) TIME BETWEEN ts - 1 AND ts + 1 WITHIN 1000"
    """Pattern queries over interval times, by one algorithm."""

    algorithm: type[Algorithm] = QueryOrder
    examples = ()

    def __init__(self, algorithm: type[Algorithm], summary: str, examples: tuple[str, ...]):
        self.algorithm = algorithm
        self.name = algorithm.name  # type: ignore[misc]
        self.summary = summary  # type: ignore[misc]
        self.examples = examples  # type: ignore[misc]

    def applies_to(self, plan) -> bool:
        return isinstance(plan.spec, IntervalSpec)

    def reason(self, plan) -> str | None:
        if not isinstance(plan.spec, IntervalSpec):
            return "it answers queries over interval times (TIME BETWEEN, --time-upper)"
        return None

    def compile(self, plans, names, options) -> ImpreciseProgram:
        return ImpreciseProgram(plans, names, options, self.algorithm)


EXAMPLES = (
    "PATTERN SEQ(A a, B b, C c) WHERE [k] AND a.v <= c.v TIME BETWEEN ts - 1 AND ts + 1 WITHIN 6",
    "PATTERN SEQ(A a, B b) STRATEGY SKIP_TILL_NEXT_MATCH TIME BETWEEN ts - 2 AND ts + 1 WITHIN 5",
    "PATTERN SEQ(ANY a, A b) WHERE [k] AND a.v < b.v STRATEGY SKIP_TILL_NEXT_MATCH "
    "TIME BETWEEN ts AND ts + 2 WITHIN 4 RETURN a.v + b.v AS s",
)

# One engine per algorithm (the registry lists them: the best first, chosen by default).
QUERY_ORDER = ImpreciseEngine(
    QueryOrder,
    "event-based, query-order evaluation with sorting, set at a time (the best)",
    EXAMPLES,
)
SORTED_QUERY_ORDER = ImpreciseEngine(
    SortedQueryOrder, "event-based, sorting for query order, one event at a time", EXAMPLES[:1]
)
ANY_STATE = ImpreciseEngine(
    AnyState, "event-based, any-state evaluation with run pruning", EXAMPLES[1:2]
)
SELECTIVITY_ORDER = ImpreciseEngine(
    SelectivityOrder, "event-based, any-state evaluation in selectivity order", EXAMPLES[2:]
)
POINT_BASED = ImpreciseEngine(
    PointBased, "point-based: stream expansion and point matches (baseline)", EXAMPLES[:1]
)
