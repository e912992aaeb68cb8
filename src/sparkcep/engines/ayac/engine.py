"""The `ayac` engine (its own module: the query analysis imports the package's laws and
fitting without the engine)."""

from __future__ import annotations

from sparkcep.engines.ayac.program import AyacProgram
from sparkcep.engines.base import Engine, FitsModels
from sparkcep.plan.ayac import AyacSpec


class AyacEngine(Engine, FitsModels):
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
    crowded_example = "PATTERN SEQ(A a, B b) WITHIN 1000 MISSING RATE 0.01 THRESHOLD 0.5"

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

    @staticmethod
    def model_fitting():
        """The model-fitting kernel (`sparkcep.runners.jobs.fit` finds it here)."""
        from sparkcep.engines.ayac import fitting

        return fitting
