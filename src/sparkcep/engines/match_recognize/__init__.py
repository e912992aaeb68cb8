"""`match_recognize`: SQL:2016 row pattern recognition (MATCH_RECOGNIZE), as Trino runs it.

A query's PATTERN is compiled into a program for a Pike virtual machine
(`pattern.RowPatternProgram`); `matcher.RowPatternMatcher` finds, from a row, the match
the standard prefers (greedy and reluctant quantifiers, alternation order, PERMUTE's
lexicographic order, anchors, exclusions); `program.MrProgram` scans each partition with
AFTER MATCH SKIP and builds the rows of ONE ROW or ALL ROWS PER MATCH (docs/match_recognize.md).

The V-shape example of Trino's documentation: prices fall (B), rise back no higher than
the start (C), then rise above it (D).

>>> import pandas as pd
>>> from sparkcep import match_recognize_local
>>> orders = pd.DataFrame({"custkey": 1, "orderdate": range(1, 9),
...                        "totalprice": [90, 80, 70, 80, 90, 100, 110, 90]})
>>> match_recognize_local(orders, '''SELECT * FROM orders MATCH_RECOGNIZE (
...   PARTITION BY custkey ORDER BY orderdate
...   MEASURES A.totalprice AS starting_price, LAST(B.totalprice) AS bottom_price,
...            LAST(U.totalprice) AS top_price
...   ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
...   PATTERN (A B+ C+ D+) SUBSET U = (C, D)
...   DEFINE B AS totalprice < PREV(totalprice),
...          C AS totalprice > PREV(totalprice) AND totalprice <= A.totalprice,
...          D AS totalprice > PREV(totalprice))''')
   custkey  starting_price  bottom_price  top_price
0        1              90            70        110
"""

from __future__ import annotations

from sparkcep.engines.base import Engine
from sparkcep.engines.match_recognize.compiled import CompiledQuery, Segment, compile_query
from sparkcep.engines.match_recognize.matcher import RowPatternMatcher
from sparkcep.engines.match_recognize.pattern import RowPatternProgram
from sparkcep.engines.match_recognize.program import MrProgram, MrState
from sparkcep.plan.match_recognize import MatchRecognizeSpec

__all__ = [
    "CompiledQuery",
    "MatchRecognizeEngine",
    "MrProgram",
    "MrState",
    "RowPatternMatcher",
    "RowPatternProgram",
    "Segment",
    "compile_query",
]


class MatchRecognizeEngine(Engine):
    """SELECT ... MATCH_RECOGNIZE queries, one program each."""

    name = "match_recognize"
    summary = "row pattern recognition (SQL:2016): a Pike VM with preferment per partition"
    examples = (
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
        "MEASURES FIRST(A.v) AS a, LAST(B.v) AS b, COUNT(*) AS n, MATCH_NUMBER() AS m "
        "PATTERN (A B+ C?) DEFINE A AS type = 'A', B AS B.v > PREV(B.v), C AS type = 'C')",
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts, seq "
        "MEASURES CLASSIFIER() AS c, RUNNING SUM(v) AS s, FINAL LAST(v) AS f "
        "ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW "
        "PATTERN (A {- X* -} B) DEFINE A AS type = 'A', X AS type IN ('C', 'D'), "
        "B AS type = 'B' AND B.v >= A.v) WITHIN 5",
        "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts "
        "MEASURES FIRST(A.id) AS first_id, COUNT(B.*) AS nb AFTER MATCH SKIP TO NEXT ROW "
        "PATTERN (A B+?) DEFINE A AS type = 'A', B AS type IN ('B', 'C') AND v >= 1) WITHIN 4",
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
        "MEASURES MATCH_NUMBER() AS m, CLASSIFIER(U) AS u "
        "ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP TO LAST U "
        "PATTERN (PERMUTE(A, B) C*) SUBSET U = (A, B) "
        "DEFINE A AS type = 'A', B AS type = 'B', C AS type = 'C')",
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts "
        "MEASURES COUNT(*) AS n, MATCH_NUMBER() AS m ALL ROWS PER MATCH "
        "PATTERN (A* | ^ B $) DEFINE A AS v > 2)",
    )
    crowded_example = (
        "SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n "
        "ALL ROWS PER MATCH AFTER MATCH SKIP TO NEXT ROW PATTERN (A X*) "
        "DEFINE A AS type = 'A') WITHIN 1000"
    )

    def applies_to(self, plan) -> bool:
        return isinstance(plan.spec, MatchRecognizeSpec)

    def reason(self, plan) -> str | None:
        if not isinstance(plan.spec, MatchRecognizeSpec):
            return "it answers MATCH_RECOGNIZE queries (SELECT ... MATCH_RECOGNIZE)"
        return None

    def job_key(self, plan) -> tuple:
        return ("query", id(plan))  # one program per query

    def compile(self, plans, names, options) -> MrProgram:
        return MrProgram(plans, names, options)
