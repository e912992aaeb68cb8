"""Clauses beyond SASE in the native language (docs/language.md): AFTER MATCH SKIP and
OUTPUT TIMEOUTS.

They add fields to the plan; the engines that read them say so in `reason`.
"""

from __future__ import annotations


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
