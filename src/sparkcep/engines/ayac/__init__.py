"""`ayac`: probabilistic detection over lossy streams (ayac-probabilistic-cep.md).

Readers miss events. AYAC reports a pattern's matches even when some of their events
were missed, with the probability that the complex event really happened: a positive
component may be *inferred missing* (it happened, unobserved), and a negated one may have
happened unobserved. The model (§3): component i follows the previous positive after a
delay with law f_i, and each event is missed with probability ε. The scoring functions
(`scoring`) give each run of missing components a probability; a path through the skip
automaton (`automaton`) scores their product; arrival queues with upper bounds
(`queues`) and backward generation with early pruning (`generate`) find every path whose
score reaches the threshold. docs/ayac.md has the details and the choices made.

The shoplifting example (§2.2): an item read at the shelf (A) and at the exit (C)
without a read at the checkout (B) in between. Tag 1 was read at the checkout; tag 2
was not — stolen, or its checkout read was missed:

>>> import pandas as pd
>>> from sparkcep import match_local
>>> reads = pd.DataFrame({
...     "reader": ["A", "A", "B", "C", "C"], "tag": [1, 2, 1, 1, 2],
...     "ts":     [0, 10, 30, 60, 70], "type": "read"})
>>> query = '''PATTERN SEQ(read x, !read y, read z)
...            WHERE x.reader = 'A' AND y.reader = 'B' AND z.reader = 'C' AND [tag]
...            WITHIN 100 MISSING RATE 0.1 DELAY y UNIFORM(0, 120) THRESHOLD 0.5'''
>>> match_local(reads, query)[["tag", "x", "z", "missing", "probability"]]
   tag  x  z missing  probability
0    2  1  4      []     0.909091

Tag 2's checkout read would have come within the 60 ticks between A and C with
probability F_y(60) = 0.5 and been missed with probability ε = 0.1, so the item was
stolen with probability S^N(60) = 0.5 / (0.1 · 0.5 + 0.5) = 10/11. (The path that also
infers x missing scores about 0.09, below the threshold.)
"""

from __future__ import annotations

from sparkcep.engines.ayac.automaton import SkipAutomaton
from sparkcep.engines.ayac.program import AyacProgram, AyacState
from sparkcep.engines.base import Engine, register
from sparkcep.plan.ayac import AyacSpec

__all__ = ["AyacEngine", "AyacProgram", "AyacSpec", "AyacState", "SkipAutomaton"]


class AyacEngine(Engine):
    """Pattern queries over lossy streams: MISSING RATE, DELAY, THRESHOLD, USING MODEL.
    A plain pattern query (no such clause) runs here too with --algorithm ayac: nothing
    is missed, every match has probability 1."""

    name = "ayac"
    summary = "AYAC: matches with missed events and their probability (PAQ/NAQ, §3 scores)"
    examples = (
        "PATTERN SEQ(A a, B b, C c) WHERE [k] AND a.v <= c.v WITHIN 6 "
        "MISSING RATE 0.2 THRESHOLD 0.05",
        "PATTERN SEQ(A a, !B x, C c) WITHIN 5 MISSING RATE 0.3 DELAY c EXPONENTIAL(2) "
        "THRESHOLD 0.1",
        "PATTERN SEQ(!D x, A a, B b) WHERE [k] WITHIN 4 MISSING RATE a 0.4, x 0.2 "
        "DELAY x UNIFORM(0, 3) THRESHOLD 0.15",
        "PATTERN SEQ(A a, B b, C c) WHERE c.v = coalesce(a.v, c.v) WITHIN 5 "
        "MISSING RATE a 0.5, b 0.5 THRESHOLD 0.2 RETURN a.v AS av",
        "PATTERN SEQ(A a, !C y, B b) WHERE [k] AND y.v = a.v WITHIN 4 ORDER BY ts, seq "
        "MISSING RATE 0.25 THRESHOLD 0.1",
    )

    def applies_to(self, plan) -> bool:
        return isinstance(plan.spec, AyacSpec)

    def reason(self, plan) -> str | None:
        if plan.spec is not None and not isinstance(plan.spec, AyacSpec):
            return "it answers pattern queries, and this one has AGG"
        if plan.window is None:
            return "it needs a WITHIN window"
        if any(c.kleene for c in plan.components):
            return "it has no Kleene closure"
        if plan.strategy != "SKIP_TILL_ANY_MATCH":
            return "it scores every combination (SKIP_TILL_ANY_MATCH only)"
        if plan.has_trailing_negation:
            return "its matches end with an observed positive (no negation at the end)"
        return None

    def compile(self, plans, names, options) -> AyacProgram:
        return AyacProgram(plans, names, options)


register(AyacEngine())
