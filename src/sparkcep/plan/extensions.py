"""Clauses beyond SASE in the native language (docs/language.md): AFTER MATCH SKIP,
OUTPUT TIMEOUTS and FUNNEL.

The first two add fields to the plan, which the nfa engine reads; FUNNEL puts a
`FunnelSpec` on `plan.spec`, which the funnel engine answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcep.language import ast


@dataclass(frozen=True)
class FunnelSpec:
    """FUNNEL SEQ(s1, ..., sk): per key, the steps reached within the window."""

    steps: tuple[str, ...]  # the variables, in order


class NativeExtensions:
    """Checks and plan fields of the extension clauses (mixed into the analyzer, which
    provides `query` and `error`)."""

    def _extension_fields(self) -> dict:
        q = self.query
        if q.skip is not None and q.aggregates:
            raise self.error(
                "AFTER MATCH SKIP keeps some of the matches, and AGG aggregates over every "
                "match: use one or the other",
                q.skip_span,
            )
        if q.timeouts:
            self._check_timeouts()
        return {"skip": q.skip, "timeouts": q.timeouts}

    def _funnel_spec(self) -> FunnelSpec | None:
        q = self.query
        if not q.funnel:
            return None
        clauses = (
            (q.aggregates, "AGG", q.aggregates and q.aggregates[0].span),
            (q.returns, "RETURN", q.returns and q.returns[0].span),
            (q.group_by, "GROUP BY", q.group_span),
            (q.skip, "AFTER MATCH SKIP", q.skip_span),
            (q.timeouts, "OUTPUT TIMEOUTS", q.timeouts_span),
        )
        for given, name, span in clauses:
            if given:
                raise self.error(f"a FUNNEL reports the steps reached; it takes no {name}", span)
        for c in q.components:
            if c.negated or c.kleene:
                raise self.error(
                    "a FUNNEL step is one event: no negation or Kleene closure", c.span
                )
        if q.within is None:
            raise self.error("a FUNNEL needs a WITHIN window (steps count within it)", q.span)
        if q.strategy is not None and q.strategy.upper() != "SKIP_TILL_ANY_MATCH":
            raise self.error(
                "a FUNNEL's steps may be any later events (SKIP_TILL_ANY_MATCH)", q.strategy_span
            )
        for expr in ast.conjuncts(q.where):
            names = {n.var for n in ast.walk(expr) if isinstance(n, ast.AttrRef | ast.VarRef)}
            if len(names) > 1 and not _same_attribute(expr):
                raise self.error(
                    "a FUNNEL condition is about one step (and [attr] or x.attr = y.attr tie "
                    "the steps to one key)",
                    expr.span,
                )
        return FunnelSpec(tuple(c.var for c in q.components))

    def _check_timeouts(self):
        q = self.query
        why = None
        if q.within is None:
            why = "needs a WITHIN window (a partial match times out when its window closes)"
        elif q.aggregates:
            why = "reports partial matches, and AGG aggregates complete ones: use one or the other"
        elif q.skip is not None:
            why = "and AFTER MATCH SKIP cannot be used together"
        elif sum(not c.negated for c in q.components) < 2:
            why = "needs two positive components at least (a partial match binds some of them)"
        if why is not None:
            raise self.error(f"OUTPUT TIMEOUTS {why}", q.timeouts_span)


def _same_attribute(expr) -> bool:
    return (
        isinstance(expr, ast.BinOp)
        and expr.op == "="
        and isinstance(expr.left, ast.AttrRef)
        and isinstance(expr.right, ast.AttrRef)
        and expr.left.attr == expr.right.attr
    )
