"""`nfa`: the SASE pattern engine (imprecise-timestamps.md §2.1; semantics in docs/semantics.md).

SEQ with negation anywhere, Kleene closure, cross conditions, a window and the three
selection strategies; the matcher is `matcher.PatternMatcher`, the program over batches
`program.NfaProgram`. The paper's Query 1 under both strategies:

>>> import pandas as pd
>>> from sparkcep import match_local
>>> stream = pd.DataFrame({"type": list("ABBCD"), "ts": [1, 2, 3, 4, 5],
...                        "node": [1, 1, 1, 1, 1], "task": [7, 0, 0, 7, 0],
...                        "value": [0, 99, 98, 0, 50]})
>>> query = '''PATTERN SEQ(A a, B b, C c, D d)
...            WHERE a.task = c.task AND b.node = a.node AND d.node = a.node
...              AND b.value > 95 AND d.value <= 70
...            STRATEGY {} WITHIN 15'''
>>> match_local(stream, query.format("SKIP_TILL_ANY_MATCH"))[["a", "b", "c", "d"]]
   a  b  c  d
0  0  1  3  4
1  0  2  3  4
>>> match_local(stream, query.format("SKIP_TILL_NEXT_MATCH"))[["a", "b", "c", "d"]]
   a  b  c  d
0  0  1  3  4
"""

from __future__ import annotations

from sparkcep.engines.base import Engine
from sparkcep.engines.nfa.matcher import Matches, PatternMatcher, TooManyMatches, find_matches
from sparkcep.engines.nfa.program import NfaProgram, NfaState

__all__ = [
    "Matches",
    "NfaEngine",
    "NfaProgram",
    "NfaState",
    "PatternMatcher",
    "TooManyMatches",
    "find_matches",
]


class NfaEngine(Engine):
    """Every match of a pattern query (no AGG), under any selection strategy."""

    name = "nfa"
    summary = "SASE automaton, all runs at once over numpy columns"
    examples = (
        "PATTERN SEQ(A a, B b, C c) WHERE [k] AND a.v < c.v WITHIN 6",
        "PATTERN SEQ(A a, !B x, C c) WITHIN 5",
        "PATTERN SEQ(A a, C c, !D x) WHERE [k] WITHIN 4",
        "PATTERN SEQ(!D x, A a, B+ b[]) WHERE prev(b.v) <= b.v WITHIN 5 RETURN sum(b.v) AS s",
        "PATTERN SEQ(A a, B b) STRATEGY SKIP_TILL_NEXT_MATCH WITHIN 4",
        "PATTERN SEQ(A a, B b) WHERE [k] STRATEGY STRICT_CONTIGUITY WITHIN 4 ORDER BY ts, seq",
    )
    crowded_example = "PATTERN SEQ(A a, B b) WITHIN 1000"

    def applies_to(self, plan) -> bool:
        return plan.spec is None

    def reason(self, plan) -> str | None:
        if plan.spec is not None:
            what = getattr(plan.spec, "what", "AGG")
            return f"it answers pattern queries (one row per match), and this one has {what}"
        return None

    def compile(self, plans, names, options) -> NfaProgram:
        return NfaProgram(plans, names, options)
